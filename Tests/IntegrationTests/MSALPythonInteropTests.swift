import Foundation
import Testing
@testable import EncryptedFileStore
@testable import SecretServiceStore
@testable import TokenCache
@testable import TokenCacheCore
@testable import TokenCachePlatform
import TokenCacheTestSupport

/// Interop with the real MSAL Python 1.39 (installed by scripts/install-deps.sh into .venv).
/// In CI these tests fail, never skip, when MSAL Python is missing.
@Suite("Interop with MSAL Python", .enabled(if: TestEnvironment.runsInteropTests), .harness)
struct MSALPythonInteropTests {
    struct Sample {
        var response: [String: Any]
        var clientID: String
        var authority: String
        var requested: [String]
    }

    /// FOCI, two tenants, three clients, two users, and an ADFS account.
    static var samples: [Sample] {
        let aad = "https://login.microsoftonline.com/"
        var adfs = Fixtures.response(for: Fixtures.bob, scope: "openid User.Read", foci: nil, tag: "adfs")
        adfs["client_info"] = nil
        adfs["id_token"] = Fixtures.idToken(["sub": "adfs-sub-bob", "upn": "bob@adfs.contoso.com"])
        return [
            Sample(response: Fixtures.response(for: Fixtures.alice, scope: "User.Read Mail.Read", foci: "1", tag: "one"),
                   clientID: Fixtures.appOne, authority: aad + Fixtures.tenantA, requested: ["User.Read"]),
            Sample(response: Fixtures.response(for: Fixtures.alice, realm: Fixtures.tenantB, scope: "Files.Read", foci: "1", tag: "oneB"),
                   clientID: Fixtures.appOne, authority: aad + Fixtures.tenantB, requested: ["Files.Read"]),
            Sample(response: Fixtures.response(for: Fixtures.alice, scope: nil, foci: nil, tag: "two", refreshIn: 1800),
                   clientID: Fixtures.appTwo, authority: aad + Fixtures.tenantA, requested: ["Notes.Read", "offline_access"]),
            Sample(response: Fixtures.response(for: Fixtures.bob, scope: "User.Read", foci: "1", tag: "three"),
                   clientID: Fixtures.appThree, authority: aad + Fixtures.tenantA, requested: ["User.Read"]),
            Sample(response: adfs, clientID: Fixtures.appTwo, authority: "https://adfs.contoso.com/adfs", requested: ["User.Read"]),
        ]
    }

    static func python(_ request: [String: Any]) throws -> [String: Any] {
        try MSALPython.answer(runProcess(try MSALPython.interpreter(), [MSALPython.script],
                                         input: try JSONSerialization.data(withJSONObject: request)))
    }

    /// The cache MSAL Python's TokenCache.add builds from the samples.
    static func pythonCache() throws -> [String: Any] {
        let events: [[String: Any]] = try samples.map { sample in
            let authority = try Authority(sample.authority)
            let scope = (sample.response["scope"] as? String).map { $0.split(separator: " ").map(String.init) }
                ?? sample.requested.filter { !["openid", "profile", "offline_access"].contains($0) }
            let endpoint = authority.kind == .adfs ? "\(sample.authority)/oauth2/token" : "\(sample.authority)/oauth2/v2.0/token"
            return ["client_id": sample.clientID, "scope": scope, "token_endpoint": endpoint,
                    "response": sample.response, "now": Int(Fixtures.now.timeIntervalSince1970)]
        }
        let answer = try python(["op": "add", "events": events])
        #expect(answer["version"] as? String == "1.39.0")
        return try #require(answer["cache"] as? [String: Any])
    }

    static func swiftStore() throws -> AccountStore {
        let store = AccountStore(backend: InMemoryBackend())
        for sample in samples {
            try store.save(Fixtures.tokenResponse(sample.response), clientID: sample.clientID,
                           authority: try Authority(sample.authority), scopes: sample.requested, now: Fixtures.now)
        }
        return store
    }

    static func canonical(_ value: Any) throws -> String {
        String(decoding: try JSONSerialization.data(withJSONObject: value, options: [.sortedKeys]), as: UTF8.self)
    }

    @Test("Saving responses produces exactly the entities and keys MSAL Python's TokenCache.add produces")
    func sameEntitiesAsMSALPython() throws {
        let expected = try Self.pythonCache()
        let exported = try Self.swiftStore().exportMSALJSON()
        var ours = try #require(try JSONSerialization.jsonObject(with: exported) as? [String: Any])
        #expect(ours.removeValue(forKey: "AccountMetadata") != nil)
        for section in ["AccessToken", "RefreshToken", "IdToken", "Account", "AppMetadata"] {
            let theirs = try #require(expected[section] as? [String: Any], "MSAL Python has no \(section)")
            let mine = try #require(ours[section] as? [String: Any], "we have no \(section)")
            #expect(Set(mine.keys) == Set(theirs.keys), "keys differ in \(section)")
            for (key, entity) in theirs {
                #expect(try Self.canonical(mine[key] ?? [:]) == Self.canonical(entity), "\(section) \(key) differs")
            }
        }
        #expect(Set(ours.keys) == Set(expected.keys))
    }

    @Test("A cache MSAL Python wrote is read and its tokens are found")
    func readsMSALPythonCache() throws {
        let cache = try Self.pythonCache()
        let store = AccountStore(backend: InMemoryBackend())
        let report = try store.importMSALJSON(try JSONSerialization.data(withJSONObject: cache))
        #expect(report.skipped.isEmpty)
        #expect(report.importedCount == (cache.values.compactMap { ($0 as? [String: Any])?.count }.reduce(0, +)))

        let alice = try #require(try store.account(Fixtures.alice.username))
        #expect(alice.tenants == [Fixtures.tenantA, Fixtures.tenantB].sorted())
        let mail = try store.accessToken(clientID: Fixtures.appOne, account: alice, scopes: ["Mail.Read"], now: Fixtures.now)
        #expect(mail?.accessToken == "at-\(Fixtures.alice.uid)-\(Fixtures.tenantA)-one")
        let files = try store.accessToken(clientID: Fixtures.appOne, account: alice, scopes: ["Files.Read"],
                                          authority: Fixtures.authority(Fixtures.tenantB), now: Fixtures.now)
        #expect(files?.accessToken == "at-\(Fixtures.alice.uid)-\(Fixtures.tenantB)-oneB")
        let notes = try store.accessToken(clientID: Fixtures.appTwo, account: alice, scopes: ["Notes.Read"], now: Fixtures.now)
        #expect(notes?.accessToken == "at-\(Fixtures.alice.uid)-\(Fixtures.tenantA)-two")
        // Family SSO: app three (family member) can use app one's family refresh token for Alice.
        let family = try #require(try store.refreshToken(clientID: try ClientID(Fixtures.appThree), account: alice))
        #expect(family.familyID == "1" && family.clientID == Fixtures.appOne)
        // ADFS account.
        let adfs = try #require(try store.account("adfs-sub-bob"))
        #expect(adfs.authorityType == "ADFS")
        #expect(try store.accessToken(clientID: Fixtures.appTwo, account: adfs, scopes: ["User.Read"],
                                      authority: Authority("https://adfs.contoso.com/adfs"), now: Fixtures.now) != nil)
    }

    @Test("A cache this project wrote loads in MSAL Python and its search returns the same tokens")
    func msalPythonReadsOurCache() throws {
        let store = try Self.swiftStore()
        let exported = try #require(try JSONSerialization.jsonObject(with: try store.exportMSALJSON()) as? [String: Any])
        let now = Int(Fixtures.now.timeIntervalSince1970)
        var queries: [[String: Any]] = []
        var expected: [[String]] = []
        for sample in Self.samples {
            let authority = try Authority(sample.authority)
            let result = try store.save(Fixtures.tokenResponse(sample.response), clientID: sample.clientID,
                                        authority: authority, scopes: sample.requested, now: Fixtures.now)
            let home = try #require(result.account?.homeAccountID)
            queries.append(["credential_type": "AccessToken", "target": result.scopes, "now": now,
                            "query": ["client_id": sample.clientID, "environment": authority.environment,
                                      "realm": authority.realm, "home_account_id": home]])
            expected.append([result.accessToken])
            queries.append(["credential_type": "RefreshToken", "now": now,
                            "query": ["client_id": sample.clientID, "home_account_id": home]])
            expected.append(try store.refreshTokens(clientID: try ClientID(sample.clientID), account: try #require(result.account))
                .filter { $0.clientID == sample.clientID }.map(\.secret))
        }
        let answer = try Self.python(["op": "search", "cache": exported, "queries": queries])
        let results = try #require(answer["results"] as? [[[String: Any]]])
        #expect(results.map { $0.compactMap { $0["secret"] as? String }.sorted() } == expected.map { $0.sorted() })
    }
}
