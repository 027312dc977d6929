import Foundation
import Testing
@testable import EncryptedFileStore
@testable import SecretServiceStore
@testable import TokenCache
@testable import TokenCacheCore
@testable import TokenCachePlatform
import TokenCacheTestSupport
import TokenCacheTestIdentityProvider

/// MSAL Python 1.39 and this project redeem each other's refresh tokens at one local authority:
/// the fake provider serves one state over TLS (for MSAL Python, which accepts only https
/// authorities; it trusts the provider's throw-away certificate) and over plain http on loopback
/// (for this project, as in the other SSO tests; CurlTransport's caBundle is tested there). Both
/// addresses have the host 127.0.0.1, so both SDKs file tokens under the same environment.
@Suite("MSAL Python against the same local authority", .harness, .enabled(if: TestEnvironment.runsInteropTests))
struct MSALPythonAuthorityTests {
    let idp: FakeIdentityProvider
    let scopes = ["User.Read"]

    init() throws { idp = try FakeIdentityProvider(https: true) }

    func app(_ store: AccountStore) -> PublicClientApplication {
        PublicClientApplication(clientID: Fixtures.appOne, authority: idp.authority(), store: store)
    }

    /// MSAL Python's acquire_token_silent(force_refresh=True) for Alice on an exported cache.
    func pythonSilent(_ store: AccountStore) async throws -> (accounts: [String], result: [String: Any], cache: [String: Any]) {
        let cache = try #require(try JSONSerialization.jsonObject(with: try store.exportMSALJSON()) as? [String: Any])
        let answer = try await MSALPython.run([
            "op": "silent", "cache": cache, "authority": idp.httpsAuthority(), "ca_bundle": try #require(idp.certificate).path,
            "client_id": Fixtures.appOne, "username": Fixtures.alice.username, "scopes": scopes])
        return (answer["accounts"] as? [String] ?? [], try #require(answer["result"] as? [String: Any]),
                try #require(answer["cache"] as? [String: Any]))
    }

    static func secrets(_ cache: [String: Any], _ section: String) -> [String] {
        ((cache[section] as? [String: Any]) ?? [:]).values.compactMap { ($0 as? [String: Any])?["secret"] as? String }.sorted()
    }

    func secrets(_ store: AccountStore, _ kind: EntityKind) throws -> [String] {
        try store.entries().filter { $0.kind == kind }.compactMap { $0["secret"] }.sorted()
    }

    @Test("MSAL Python redeems a refresh token this project saved")
    func msalPythonRedeemsOurToken() async throws {
        // Alice signed in an hour ago through this project; it refreshes, saving the rotated token.
        let store = AccountStore(backend: InMemoryBackend())
        var response = Fixtures.response(for: Fixtures.alice, scope: "User.Read", foci: nil, tag: "swift", expiresIn: 60)
        response["refresh_token"] = "rt-initial"
        try store.save(Fixtures.tokenResponse(response), clientID: Fixtures.appOne, authority: idp.authority(), scopes: [],
                       now: Date().addingTimeInterval(-3600))
        try await idp.seed(refreshToken: "rt-initial", user: Fixtures.alice, clientID: Fixtures.appOne, family: nil)
        let account = try #require(try store.account(Fixtures.alice.username))
        #expect(try await app(store).acquireTokenSilent(scopes: scopes, account: account).accessToken == "at-issued-1")
        #expect(try secrets(store, .refreshToken) == ["rt-rotated-1"])

        let python = try await pythonSilent(store)
        #expect(python.accounts == [Fixtures.alice.username])
        #expect(python.result["access_token"] as? String == "at-issued-2", "\(python.result)")
        let grants = try await idp.stats().grants
        #expect(grants.map(\.outcome) == ["ok", "ok"])
        #expect(grants.map(\.sdk) == ["-", "MSAL.Python"])
        #expect(grants.map(\.client_id) == [Fixtures.appOne, Fixtures.appOne])
        #expect(grants.last?.redeemed == "rt-rotated-1", "MSAL Python redeemed the token this project saved")
        // MSAL Python replaced the token it redeemed, in the entry this project wrote.
        #expect(Self.secrets(python.cache, "RefreshToken") == ["rt-rotated-2"])
        #expect(Self.secrets(python.cache, "AccessToken") == ["at-issued-2"])
    }

    @Test("This project redeems a refresh token MSAL Python saved, and MSAL Python the one it saved next")
    func weRedeemMSALPythonToken() async throws {
        try await idp.seed(refreshToken: "rt-python", user: Fixtures.alice, clientID: Fixtures.appOne, family: nil)
        let answer = try await MSALPython.run([
            "op": "redeem", "authority": idp.httpsAuthority(), "ca_bundle": try #require(idp.certificate).path,
            "client_id": Fixtures.appOne, "refresh_token": "rt-python", "scopes": scopes])
        let pythonCache = try #require(answer["cache"] as? [String: Any])
        #expect((answer["result"] as? [String: Any])?["access_token"] as? String == "at-issued-1", "\(answer)")
        #expect(Self.secrets(pythonCache, "RefreshToken") == ["rt-rotated-1"])

        let store = AccountStore(backend: InMemoryBackend())
        let report = try store.importMSALJSON(try JSONSerialization.data(withJSONObject: pythonCache))
        #expect(report.skipped.isEmpty)
        let account = try #require(try store.account(Fixtures.alice.username, clientID: Fixtures.appOne))
        #expect(try store.accessToken(clientID: Fixtures.appOne, account: account, scopes: scopes, authority: idp.authority())?
            .accessToken == "at-issued-1", "MSAL Python's access token is found for the http address of the same authority")
        let result = try await app(store).acquireTokenSilent(scopes: scopes, account: account, forceRefresh: true)
        #expect(result.accessToken == "at-issued-2")

        var grants = try await idp.stats().grants
        #expect(grants.map(\.outcome) == ["ok", "ok"])
        #expect(grants.map(\.sdk) == ["MSAL.Python", "-"])
        #expect(grants.last?.redeemed == "rt-rotated-1", "this project redeemed the token MSAL Python saved")
        #expect(grants.last?.client_id == Fixtures.appOne)
        // The rotated token replaced MSAL Python's entry: one refresh token, one access token.
        #expect(try secrets(store, .refreshToken) == ["rt-rotated-2"])
        #expect(try secrets(store, .accessToken) == ["at-issued-2"])
        #expect(try store.entries().filter { $0.kind == .refreshToken }.map(\.key)
                == ((pythonCache["RefreshToken"] as? [String: Any]) ?? [:]).keys.sorted())

        // Back to MSAL Python: it redeems what this project saved.
        let python = try await pythonSilent(store)
        #expect(python.result["access_token"] as? String == "at-issued-3", "\(python.result)")
        grants = try await idp.stats().grants
        #expect(grants.count == 3 && grants.last?.sdk == "MSAL.Python" && grants.last?.redeemed == "rt-rotated-2")
    }

    @Test("A cached account photo does not disturb MSAL Python: it lists and refreshes the account, and writes the AccountPhoto section back unchanged, which imports back as it was")
    func photoSectionKeptByMSALPython() async throws {
        let store = AccountStore(backend: InMemoryBackend())
        var response = Fixtures.response(for: Fixtures.alice, scope: "Files.Read", foci: nil, tag: "swift")
        response["refresh_token"] = "rt-photo"
        try store.save(Fixtures.tokenResponse(response), clientID: Fixtures.appOne, authority: idp.authority(), scopes: [])
        try await idp.seed(refreshToken: "rt-photo", user: Fixtures.alice, clientID: Fixtures.appOne, family: nil)
        try await idp.setPhoto(of: Fixtures.alice, data: Data([0x89, 0x50, 0x4E, 0x47] + Array(repeating: 1, count: 40)))
        var options = PublicClientApplication.Options()
        options.graphEndpoint = idp.graphEndpoint
        let account = try #require(try store.account(Fixtures.alice.username))
        let photo = try #require(try await PublicClientApplication(clientID: Fixtures.appOne, authority: idp.authority(), store: store,
                                                                   options: options).photo(for: account))
        let exported = try #require(try JSONSerialization.jsonObject(with: try store.exportMSALJSON()) as? [String: Any])

        let python = try await pythonSilent(store)
        #expect(python.accounts == [Fixtures.alice.username])
        #expect((python.result["access_token"] as? String)?.hasPrefix("at-issued-") == true, "\(python.result)")
        let kept = try #require(python.cache["AccountPhoto"] as? NSDictionary)
        #expect(kept == exported["AccountPhoto"] as? NSDictionary)
        let back = AccountStore(backend: InMemoryBackend())
        _ = try back.importMSALJSON(try JSONSerialization.data(withJSONObject: python.cache))
        #expect(try back.photoRecord(of: account)?.photo == photo)
    }
}
