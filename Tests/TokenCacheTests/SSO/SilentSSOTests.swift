import Foundation
import Testing
@testable import TokenCache

@Suite("Silent SSO through the token endpoint", .capturesLogs)
struct SilentSSOTests {
    let idp: FakeIdentityProvider
    let store = AccountStore(backend: InMemoryBackend())

    init() throws { idp = try FakeIdentityProvider() }

    func app(_ clientID: String, timeout: TimeInterval = 10) -> PublicClientApplication {
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
        let secrets = try store.refreshTokens(clientID: Fixtures.appOne, account: account).map(\.secret)
        #expect(secrets == ["rt-rotated-1"])
        // The new token is now served from the cache.
        _ = try await app(Fixtures.appOne).acquireTokenSilent(scopes: ["User.Read"], account: account)
        #expect(try await idp.stats().token_requests == 1)
    }

    @Test("An app that never signed in gets SSO by redeeming another app's family refresh token")
    func ssoThroughFamilyToken() async throws {
        try await signIn(Fixtures.appOne, foci: "1")
        let second = app(Fixtures.appTwo)
        let account = try #require(try second.accounts().first)
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
        let account = try #require(try second.accounts().first)
        let error = await #expect(throws: TokenCacheError.self) {
            try await second.acquireTokenSilent(scopes: ["Notes.Read"], account: account)
        }
        #expect(error?.code == .interactionRequired)
        #expect(error?.server?.suberror == "client_mismatch")
        #expect(try store.appMetadata(clientID: Fixtures.appTwo).first?.familyID == nil)
        #expect(try store.refreshToken(clientID: Fixtures.appTwo, account: account) == nil)
        // Once app two has its own token, it uses it.
        try await signIn(Fixtures.appTwo, foci: nil, expiresIn: 60)
        let result = try await second.acquireTokenSilent(scopes: ["User.Read"], account: account)
        #expect(result.accessToken.hasPrefix("at-issued-"))
        #expect(try await idp.stats().grants.last?.client_id == Fixtures.appTwo)
    }

    @Test("A slow server gives a network error within the request bound, and the cache is unchanged")
    func slowServer() async throws {
        let account = try await signIn(Fixtures.appOne, foci: nil, expiresIn: 60)
        try await idp.control(["mode": "slow", "delay": 6])
        let before = try store.exportMSALJSON()
        let started = Date()
        let error = await #expect(throws: TokenCacheError.self) {
            try await app(Fixtures.appOne, timeout: 1).acquireTokenSilent(scopes: ["User.Read"], account: account)
        }
        #expect(error?.code == .network)
        #expect(Date().timeIntervalSince(started) < 5)
        #expect(try store.exportMSALJSON() == before)
    }

    @Test("A failing server gives serverError with Retry-After; a token past refresh_on is served instead")
    func failingServer() async throws {
        try await idp.control(["mode": "fail"])
        let account = try await signIn(Fixtures.appOne, foci: nil, expiresIn: 60)
        let error = await #expect(throws: TokenCacheError.self) {
            try await app(Fixtures.appOne).acquireTokenSilent(scopes: ["User.Read"], account: account)
        }
        #expect(error?.code == .serverError)
        #expect(error?.server?.retryAfter == 7)

        try await signIn(Fixtures.appTwo, foci: nil, expiresIn: 3600, refreshIn: 1, now: Date().addingTimeInterval(-10))
        let fallback = try await app(Fixtures.appTwo).acquireTokenSilent(scopes: ["User.Read"], account: account)
        #expect(fallback.accessToken == "at-\(Fixtures.alice.uid)-\(Fixtures.tenantA)-\(Fixtures.appTwo)")
    }
}
