import Foundation
import Testing
@testable import SecretServiceStore
@testable import TokenCache
@_spi(Backend) @testable import TokenCacheCore
import TokenCacheTestSupport
import TokenCacheTestIdentityProvider

/// The C interface against the Swift library in one keyring: Tests/CTests/test_capi.c, compiled
/// with the system C compiler against the built libTokenCacheC.so, saves and finds tokens that
/// this process finds and saves through AccountStore. (The full C suite, under LeakSanitizer
/// too, runs against the release libtokencache.so.0 in scripts/test-c-api.sh.)
@Suite("C interface interop", .enabled(if: TestEnvironment.runsSecretServiceTests), .harness)
struct CAPIInteropTests {
    /// The client, account and scopes test_capi's `save` mode uses.
    static let cClient = "aaaaaaaa-0000-0000-0000-00000000c0a1"
    static let cUsername = "carol@contoso.com"

    let group = "org.swift-tokencache.capi-\(UUID().uuidString.prefix(8).lowercased())"

    /// The test group on the keyring with alice signed in to app one at `idp` (refresh token `rt-initial-TAG`, known there).
    func signedIn(at idp: FakeIdentityProvider, tag: String) async throws -> AccountStore {
        let store = AccountStore(backend: try SecretServiceBackend(), group: try CacheGroup(group))
        var response = Fixtures.response(for: Fixtures.alice, scope: "User.Read", tag: tag)
        response["refresh_token"] = "rt-initial-\(tag)"
        try store.save(Fixtures.tokenResponse(response), clientID: Fixtures.appOne, authority: idp.authority(), scopes: [])
        try await idp.seed(refreshToken: "rt-initial-\(tag)", user: Fixtures.alice, clientID: Fixtures.appOne, family: nil)
        return store
    }

    @Test("a token saved through C is found by the Swift library")
    func savedThroughCFoundFromSwift() async throws {
        let directory = try TestEnvironment.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let program = try CTestPrograms.testCAPI()
        let saved = try await offThePool { [group] in try runProcess(program, ["save", group, "fromc"]) }
        #expect(saved.status == 0, "test_capi save: \(saved.stderr)")

        let store = AccountStore(backend: try SecretServiceBackend(), group: try CacheGroup(group))
        defer { _ = try? store.backend.removeAll(in: store.group) }
        let account = try #require(try store.account(Self.cUsername, clientID: Self.cClient))
        let token = try store.accessToken(clientID: Self.cClient, account: account, scopes: ["User.Read"])
        #expect(token?.accessToken == "at-capi-fromc")
        #expect(try store.accounts(clientID: Fixtures.appTwo).map(\.username) == [Self.cUsername], "family SSO for another app")
    }

    @Test("a token saved by the Swift library is found through C")
    func savedFromSwiftFoundThroughC() async throws {
        let directory = try TestEnvironment.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let program = try CTestPrograms.testCAPI()
        let store = AccountStore(backend: try SecretServiceBackend(), group: try CacheGroup(group))
        defer { _ = try? store.backend.removeAll(in: store.group) }
        try store.save(Fixtures.tokenResponse(Fixtures.response(for: Fixtures.alice, tag: "swift")),
                       clientID: Fixtures.appOne, authority: Fixtures.authority(), scopes: [])

        let found = try await offThePool { [group] in
            try runProcess(program, ["find", group, Fixtures.appOne, Fixtures.alice.username, "User.Read Mail.Read"])
        }
        #expect(found.status == 0, "test_capi find: \(found.stderr)")
        #expect(found.stdout == "at-\(Fixtures.alice.uid)-\(Fixtures.alice.tenant)-swift\n")
        let missing = try await offThePool { [group] in
            try runProcess(program, ["find", group, Fixtures.appOne, Fixtures.alice.username, "Files.Read"])
        }
        #expect(missing.status == 3, "no token for other scopes: exit \(missing.status)")
    }

    @Test("A warm store handle's second silent refresh makes no discovery request: the handle keeps its app per client and authority")
    func warmHandleSkipsDiscovery() async throws {
        let directory = try TestEnvironment.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let program = try CTestPrograms.testCAPI()
        let idp = try FakeIdentityProvider()
        let store = try await signedIn(at: idp, tag: "warm")
        defer { _ = try? store.backend.removeAll(in: store.group) }

        let refreshed = try await offThePool { [group] in
            try runProcess(program, ["refresh", group, Fixtures.appOne, String(idp.port), Fixtures.alice.username, "3"])
        }
        #expect(refreshed.status == 0, "test_capi refresh: \(refreshed.stderr)")
        #expect(refreshed.stdout == "at-issued-1\nat-issued-2\nat-issued-3\n")
        let stats = try await idp.stats()
        #expect(stats.token_requests == 3)
        #expect(stats.discovery_requests == 1, "one discovery for three refreshes on one handle")
        #expect(stats.grants.map(\.redeemed) == ["rt-initial-warm", "rt-rotated-1", "rt-rotated-2"])
    }

    @Test("CAE through C: capabilities set on the store go merged into claims (cp1 only, claims only, both); a resource's insufficient_claims header is decoded and answered with a refresh whose token the resource accepts; a refusal's claims come back in required_claims")
    func claimsChallengeThroughC() async throws {
        let directory = try TestEnvironment.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let program = try CTestPrograms.testCAPI()
        let idp = try FakeIdentityProvider()
        let store = try await signedIn(at: idp, tag: "cae")
        defer { _ = try? store.backend.removeAll(in: store.group) }
        let challenge = #"{"access_token":{"nbf":{"essential":true,"value":"1604106651"}}}"#
        let header = #"Bearer realm="", error="insufficient_claims", claims="\#(Data(challenge.utf8).base64EncodedString())""#
        func run(_ capabilities: String, _ header: String) async throws -> ProcessOutput {
            try await offThePool { [group] in try runProcess(program, ["claims", group, Fixtures.appOne, String(idp.port), capabilities, header]) }
        }
        func sent() async throws -> NSDictionary? {
            let claims = try #require(try await idp.stats().grants.last?.claims)
            return try JSONSerialization.jsonObject(with: Data(claims.utf8)) as? NSDictionary
        }
        func object(_ json: String) throws -> NSDictionary? { try JSONSerialization.jsonObject(with: Data(json.utf8)) as? NSDictionary }

        let capabilitiesOnly = try await run("cp1", "-")
        #expect(capabilitiesOnly.status == 0 && capabilitiesOnly.stdout == "at-issued-1\n", "\(capabilitiesOnly.stderr)")
        #expect(try await sent() == object(#"{"access_token":{"xms_cc":{"values":["cp1"]}}}"#))
        #expect(try await idp.resource(accessToken: "at-issued-1").status == 200)
        let claimsOnly = try await run("-", header)
        #expect(claimsOnly.status == 0, "\(claimsOnly.stderr)")
        #expect(try await idp.stats().grants.last?.claims == challenge, "sent as given without capabilities")

        try await idp.challengeAtResource(challenge)
        let refused = try await idp.resource(accessToken: "at-issued-1")
        #expect(refused.status == 401)
        let both = try await run("cp1", try #require(refused.wwwAuthenticate))
        #expect(both.status == 0 && both.stdout == "at-issued-3\n", "\(both.stderr)")
        #expect(try await sent() == object(#"{"access_token":{"nbf":{"essential":true,"value":"1604106651"},"xms_cc":{"values":["cp1"]}}}"#))
        #expect(try await idp.resource(accessToken: "at-issued-3").status == 200)

        let mfa = #"{"access_token":{"capolids":{"essential":true,"values":["c0ffee00-0000-0000-0000-000000000000"]}}}"#
        try await idp.control(["refresh_interaction_claims": mfa])
        let mfaRefused = try await run("cp1", header)
        #expect(mfaRefused.status == 1 && mfaRefused.stderr.contains("TOKENCACHE_E_INTERACTION_REQUIRED"), "\(mfaRefused.stderr)")
        #expect(mfaRefused.stdout == "required_claims \(mfa)\n")
        let noChallenge = try await run("cp1", #"Bearer error="invalid_token""#)
        #expect(noChallenge.status == 1 && noChallenge.stderr.contains("TOKENCACHE_E_NOT_FOUND"), "\(noChallenge.stderr)")
        let badCapability = try await run("cp 1;", "-")
        #expect(badCapability.status == 1 && badCapability.stderr.contains("TOKENCACHE_E_INVALID_ARGUMENT"), "\(badCapability.stderr)")
    }

    @Test("find_access_token with a NULL authority refuses an account at hosts of two clouds (TOKENCACHE_E_AMBIGUOUS_ACCOUNT naming both), never the planted token; with an authority each gets its own")
    func ambiguousAccountThroughC() async throws {
        let directory = try TestEnvironment.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let program = try CTestPrograms.testCAPI()
        let store = AccountStore(backend: try SecretServiceBackend(), group: try CacheGroup(group))
        defer { _ = try? store.backend.removeAll(in: store.group) }
        try store.save(Fixtures.tokenResponse(Fixtures.response(for: Fixtures.alice, scope: "User.Read", tag: "alice")),
                       clientID: Fixtures.appOne, authority: Fixtures.authority(), scopes: [])
        // Another host's response claiming alice's uid.utid (not a secret).
        let planted = "http://127.0.0.2:8400/\(Fixtures.tenantA)"
        try store.save(Fixtures.tokenResponse(Fixtures.response(for: Fixtures.alice, scope: "User.Read", tag: "planted")),
                       clientID: Fixtures.appOne, authority: try Authority(planted), scopes: [])
        for _ in 0..<5 {
            let found = try await offThePool { [group] in
                try runProcess(program, ["find", group, Fixtures.appOne, Fixtures.alice.username, "User.Read"])
            }
            #expect(found.status == 1 && found.stdout.isEmpty, "exit \(found.status): \(found.stdout)")
            #expect(found.stderr.contains("TOKENCACHE_E_AMBIGUOUS_ACCOUNT") && found.stderr.contains("login.microsoftonline.com")
                    && found.stderr.contains("127.0.0.2"), "\(found.stderr)")
        }
        for (authority, tag) in [(Fixtures.authority().url.absoluteString, "alice"), (planted, "planted")] {
            let found = try await offThePool { [group] in
                try runProcess(program, ["find", group, Fixtures.appOne, Fixtures.alice.username, "User.Read", authority])
            }
            #expect(found.stdout == "at-\(Fixtures.alice.uid)-\(Fixtures.tenantA)-\(tag)\n", "\(found.stderr)")
        }
    }
}
