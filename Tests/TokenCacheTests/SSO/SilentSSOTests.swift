import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization
import Testing
@testable import EncryptedFileStore
@testable import SecretServiceStore
@testable import TokenCache
@testable import TokenCacheCore
@testable import TokenCachePlatform
import TokenCacheTestSupport
import TokenCacheTestIdentityProvider

@Suite("Silent SSO through the token endpoint", .harness)
struct SilentSSOTests {
    let idp: FakeIdentityProvider
    let store = AccountStore(backend: InMemoryBackend())

    init() throws { idp = try FakeIdentityProvider() }

    /// The default bound is generous: in a full parallel run on two loaded cores, other suites'
    /// blocking work can keep an awaiting test off the cooperative pool for seconds.
    func app(_ clientID: String, timeout: TimeInterval = 60) -> PublicClientApplication {
        var options = PublicClientApplication.Options()
        options.requestTimeout = timeout
        return PublicClientApplication(clientID: clientID, authority: idp.authority(), store: store, options: options)
    }

    /// Alice signed in to `clientID`; the provider knows her refresh token.
    @discardableResult
    func signIn(_ clientID: String, foci: String?, expiresIn: Int = 3600, refreshIn: Int? = nil,
                now: Date = Date()) async throws -> CachedAccount {
        var response = Fixtures.response(for: Fixtures.alice, scope: "User.Read", foci: foci, tag: clientID,
                                         expiresIn: expiresIn, refreshIn: refreshIn)
        response["refresh_token"] = "rt-initial-\(clientID)"
        try store.save(Fixtures.tokenResponse(response), clientID: clientID, authority: idp.authority(), scopes: [], now: now)
        try await idp.seed(refreshToken: "rt-initial-\(clientID)", user: Fixtures.alice, clientID: clientID, family: foci)
        return try #require(try store.account(Fixtures.alice.username))
    }

    @Test("A usable cached access token is returned without any request")
    func cacheHitNoRequest() async throws {
        let account = try await signIn(Fixtures.appOne, foci: nil)
        let result = try await app(Fixtures.appOne).acquireTokenSilent(scopes: ["User.Read"], account: account)
        #expect(result.accessToken.hasPrefix("at-"))
        #expect(try await idp.stats().token_requests == 0)
    }

    @Test("An expired access token is refreshed with the app's own refresh token, and the rotated one is saved")
    func refreshWithOwnToken() async throws {
        let account = try await signIn(Fixtures.appOne, foci: nil, expiresIn: 60)
        let result = try await app(Fixtures.appOne).acquireTokenSilent(scopes: ["User.Read"], account: account)
        #expect(result.accessToken == "at-issued-1")
        let stats = try await idp.stats()
        #expect(stats.grants.map(\.outcome) == ["ok"])
        #expect(stats.grants.first?.redeemed == "rt-initial-\(Fixtures.appOne)")
        let secrets = try store.refreshTokens(clientID: try ClientID(Fixtures.appOne), account: account).map(\.secret)
        #expect(secrets == ["rt-rotated-1"])
        // The new token is now served from the cache.
        _ = try await app(Fixtures.appOne).acquireTokenSilent(scopes: ["User.Read"], account: account)
        #expect(try await idp.stats().token_requests == 1)
    }

    @Test("forceRefresh redeems the refresh token even when the cached token was saved in the same second")
    func forceRefreshRightAfterSave() async throws {
        let account = try await signIn(Fixtures.appOne, foci: nil)
        let result = try await app(Fixtures.appOne).acquireTokenSilent(scopes: ["User.Read"], account: account, forceRefresh: true)
        #expect(result.accessToken == "at-issued-1")
        #expect(try await idp.stats().grants.map(\.redeemed) == ["rt-initial-\(Fixtures.appOne)"])
    }

    @Test("A refresh token another SDK rotated while ours was on the way is redeemed after the invalid_grant")
    func rotatedMeanwhileByAnotherSDK() async throws {
        let account = try await signIn(Fixtures.appOne, foci: nil, expiresIn: 60)
        // Another SDK (which does not take this project's lock) redeems the same token just before
        // our request reaches the provider, and saves the rotated one under the same key.
        let authority = idp.authority(), port = idp.port, store = store
        var options = PublicClientApplication.Options()
        options.requestTimeout = 60  // as app(_:): a loaded machine must not fail the test
        options.transport = HookedTransport {
            var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)/\(Fixtures.tenantA)/oauth2/v2.0/token")!)
            request.httpMethod = "POST"
            request.httpBody = Data(TokenEndpointClient.formEncode([
                "grant_type": "refresh_token", "client_id": Fixtures.appOne, "scope": "User.Read offline_access",
                "refresh_token": "rt-initial-\(Fixtures.appOne)"]).utf8)
            let (body, _) = try await URLSession.shared.data(for: request)
            try store.save(responseJSON: body, clientID: Fixtures.appOne, authority: authority, scopes: ["User.Read"])
        }
        let app = PublicClientApplication(clientID: Fixtures.appOne, authority: authority, store: store, options: options)
        let result = try await app.acquireTokenSilent(scopes: ["User.Read"], account: account, forceRefresh: true)
        #expect(result.accessToken == "at-issued-2")
        let grants = try await idp.stats().grants
        #expect(grants.map(\.outcome) == ["ok", "invalid_grant", "ok"])
        #expect(grants.map(\.redeemed) == ["rt-initial-\(Fixtures.appOne)", "rt-initial-\(Fixtures.appOne)", "rt-rotated-1"])
        #expect(try store.refreshTokens(clientID: try ClientID(Fixtures.appOne), account: account).map(\.secret) == ["rt-rotated-2"])
    }

    @Test("An app that never signed in gets SSO by redeeming another app's family refresh token")
    func ssoThroughFamilyToken() async throws {
        try await signIn(Fixtures.appOne, foci: "1")
        let second = app(Fixtures.appTwo)
        let account = try #require(try await second.accounts().first)
        let result = try await second.acquireTokenSilent(scopes: ["Notes.Read"], account: account)
        #expect(result.accessToken == "at-issued-1")
        #expect(result.scopes == ["Notes.Read"])
        #expect(try await idp.stats().grants.map(\.client_id) == [Fixtures.appTwo])
        #expect(try store.appMetadata(clientID: Fixtures.appTwo).first?.familyID == "1")
        #expect(try store.accounts(clientID: Fixtures.appTwo).count == 1)
    }

    @Test("invalid_grant gives interactionRequired with the server's codes and claims, and removes nothing")
    func invalidGrant() async throws {
        let account = try await signIn(Fixtures.appOne, foci: nil, expiresIn: 60)
        try await idp.control(["seed": ["refresh_token": "unused", "uid": "x", "utid": "y", "client_id": "z"]])
        // The provider forgets the token: redeem it once elsewhere.
        try await idp.control(["mode": "normal"])
        let before = try store.exportMSALJSON()
        let otherStore = AccountStore(backend: InMemoryBackend())
        try otherStore.importMSALJSON(before)
        _ = try await PublicClientApplication(clientID: Fixtures.appOne, authority: idp.authority(), store: otherStore)
            .acquireTokenSilent(scopes: ["User.Read"], account: account)
        let error = await #expect(throws: TokenCacheError.self) {
            try await app(Fixtures.appOne).acquireTokenSilent(scopes: ["User.Read"], account: account)
        }
        #expect(error?.code == .interactionRequired)
        #expect(error?.server?.error == "invalid_grant")
        #expect(error?.server?.errorCodes == [70000])
        #expect(error?.server?.claims != nil)
        #expect(try store.exportMSALJSON() == before)
    }

    @Test("client_mismatch makes the app leave the family and fall back to its own refresh token")
    func clientMismatch() async throws {
        try await signIn(Fixtures.appOne, foci: "1")
        try await idp.control(["non_family_clients": [Fixtures.appTwo]])
        let second = app(Fixtures.appTwo)
        let account = try #require(try await second.accounts().first)
        let error = await #expect(throws: TokenCacheError.self) {
            try await second.acquireTokenSilent(scopes: ["Notes.Read"], account: account)
        }
        #expect(error?.code == .interactionRequired)
        #expect(error?.server?.suberror == "client_mismatch")
        #expect(try store.appMetadata(clientID: Fixtures.appTwo).first?.familyID == nil)
        #expect(try store.refreshToken(clientID: try ClientID(Fixtures.appTwo), account: account) == nil)
        // Once app two has its own token, it uses it.
        try await signIn(Fixtures.appTwo, foci: nil, expiresIn: 60)
        let result = try await second.acquireTokenSilent(scopes: ["User.Read"], account: account)
        #expect(result.accessToken.hasPrefix("at-issued-"))
        #expect(try await idp.stats().grants.last?.client_id == Fixtures.appTwo)
    }

    @Test("A slow server gives a network error within the request bound, and the cache is unchanged")
    func slowServer() async throws {
        let account = try await signIn(Fixtures.appOne, foci: nil, expiresIn: 60)
        // libcurl's own timer (a real second) ends the request: were the bound not kept, the
        // server would answer after 300 s and the call would succeed, so the outcome shows it.
        try await idp.control(["mode": "slow", "delay": 300])
        let before = try store.exportMSALJSON()
        let error = await #expect(throws: TokenCacheError.self) {
            try await app(Fixtures.appOne, timeout: 1).acquireTokenSilent(scopes: ["User.Read"], account: account)
        }
        #expect(error?.code == .network)
        #expect(try await idp.stats().token_requests == 1)
        #expect(try store.exportMSALJSON() == before)
    }

    @Test("An https authority with an untrusted certificate gives a network error naming TLS, and the cache is unchanged")
    func untrustedCertificate() async throws {
        let tls = try FakeIdentityProvider(https: true)
        let account = try await signIn(Fixtures.appOne, foci: nil, expiresIn: 60)
        let before = try store.exportMSALJSON()
        var options = PublicClientApplication.Options()
        options.requestTimeout = 60  // the failure is immediate; the bound only has to outlast a loaded machine
        let app = PublicClientApplication(clientID: Fixtures.appOne, authority: try Authority(tls.httpsAuthority()),
                                          store: store, options: options)
        let error = await #expect(throws: TokenCacheError.self) {
            try await app.acquireTokenSilent(scopes: ["User.Read"], account: account)
        }
        #expect(error?.code == .network)
        #expect(error?.message.contains("TLS failed") == true, "\(String(describing: error))")
        #expect(try await tls.stats().token_requests == 0)
        #expect(try store.exportMSALJSON() == before)
    }

    @Test("An https authority whose CA is given as CurlTransport's caBundle is trusted: the token is refreshed over TLS")
    func trustedCertificateBundle() async throws {
        let tls = try FakeIdentityProvider(https: true)
        let account = try await signIn(Fixtures.appOne, foci: nil, expiresIn: 60)
        try await tls.seed(refreshToken: "rt-initial-\(Fixtures.appOne)", user: Fixtures.alice, clientID: Fixtures.appOne, family: nil)
        var options = PublicClientApplication.Options()
        options.requestTimeout = 60
        guard let certificate = tls.certificate else { Issue.record("the https identity provider has no certificate"); return }
        options.transport = CurlTransport(caBundle: certificate)
        let app = PublicClientApplication(clientID: Fixtures.appOne, authority: try Authority(tls.httpsAuthority()),
                                          store: store, options: options)
        let result = try await app.acquireTokenSilent(scopes: ["User.Read"], account: account)
        #expect(result.accessToken.hasPrefix("at-issued-"))
        #expect(try await tls.stats().token_requests == 1)
    }

    @Test("A response larger than the transport accepts is a network error, and the cache is unchanged")
    func oversizedResponse() async throws {
        let account = try await signIn(Fixtures.appOne, foci: nil, expiresIn: 60)
        let before = try store.exportMSALJSON()
        var transport = CurlTransport()
        transport.maxResponseBytes = 64  // the discovery document alone is larger
        var options = PublicClientApplication.Options()
        options.requestTimeout = 60
        options.transport = transport
        let app = PublicClientApplication(clientID: Fixtures.appOne, authority: idp.authority(), store: store, options: options)
        let error = await #expect(throws: TokenCacheError.self) {
            try await app.acquireTokenSilent(scopes: ["User.Read"], account: account)
        }
        #expect(error?.code == .network)
        #expect(error?.message.contains("response too large") == true, "\(String(describing: error))")
        #expect(try await idp.stats().token_requests == 0)
        #expect(try store.exportMSALJSON() == before)
    }

    @Test("A failing server gives serverError with Retry-After; a token past refresh_on is served instead")
    func failingServer() async throws {
        try await idp.control(["mode": "fail"])
        let account = try await signIn(Fixtures.appOne, foci: nil, expiresIn: 60)
        let before = try store.exportMSALJSON()
        let error = await #expect(throws: TokenCacheError.self) {
            try await app(Fixtures.appOne).acquireTokenSilent(scopes: ["User.Read"], account: account)
        }
        #expect(error?.code == .serverError)
        #expect(error?.server?.retryAfter == 7)
        #expect(error?.server?.httpStatus == 503 && error?.server?.error == "temporarily_unavailable")
        #expect(try store.exportMSALJSON() == before)

        try await signIn(Fixtures.appTwo, foci: nil, expiresIn: 3600, refreshIn: 1, now: Date().addingTimeInterval(-10))
        let fallback = try await app(Fixtures.appTwo).acquireTokenSilent(scopes: ["User.Read"], account: account)
        #expect(fallback.accessToken == "at-\(Fixtures.alice.uid)-\(Fixtures.tenantA)-\(Fixtures.appTwo)")
    }
}

/// The default transport, running `hook` once before the first token request.
private final class HookedTransport: HTTPTransport {
    let inner = CurlTransport()
    let pending: Mutex<(@Sendable () async throws -> Void)?>

    init(_ hook: @escaping @Sendable () async throws -> Void) { pending = Mutex(hook) }

    func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        if request.method == "POST", let hook = pending.withLock({ hook in defer { hook = nil }; return hook }) {
            try await hook()
        }
        return try await inner.send(request)
    }
}

extension SilentSSOTests {
    @Test("an app created with a client ID ClientID refuses gets ClientID's invalidArgument from a token request, where it builds the request, not 'no account'")
    func uncheckedClientIDRefusedAtRequest() async throws {
        let app = PublicClientApplication(clientID: "not a client id", authority: Fixtures.authority(), store: AccountStore(backend: InMemoryBackend()))
        let refused = await #expect(throws: TokenCacheError.self) { try await app.acquireTokenSilent(scopes: ["User.Read"], accountNamed: nil) }
        #expect(refused?.code == .invalidArgument && refused?.field == "client ID", "\(String(describing: refused))")
        let checked = #expect(throws: TokenCacheError.self) { try ClientID("not a client id") }
        #expect(refused?.message == checked?.message)
    }
}
