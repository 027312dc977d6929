import Foundation
import Testing
import TokenCacheTestSupport
@_spi(Backend) import TokenCacheCore

// What an app sees of the cache (#35): no refresh-token secret, by any public route. Which
// symbols are public is checked on the symbol graph (scripts/count-public-api.sh --check); these
// tests cover the routes a symbol list cannot show: descriptions and reflection.
@Suite("Public API: what apps see of the cache", .harness)
struct PublicSurfaceTests {
    /// A store holding Alice's tokens, and the refresh token's secret.
    func aliceStore() throws -> (AccountStore, secret: String) {
        let store = AccountStore(backend: InMemoryBackend())
        let response = Fixtures.response(for: Fixtures.alice)
        try store.save(Fixtures.tokenResponse(response), clientID: Fixtures.appOne,
                       authority: Fixtures.authority(), scopes: ["User.Read"], now: Fixtures.now)
        return (store, try #require(response["refresh_token"] as? String))
    }

    @Test("print, string interpolation, debug descriptions and dump of entries and their views show no token")
    func descriptionsShowNoToken() throws {
        let (store, secret) = try aliceStore()
        // Through the backend, as an app holding the store could read the group.
        let entries = try store.backend.load(store.group).entries
        let refreshEntry = try #require(entries.first { $0.kind == .refreshToken })
        let accessEntry = try #require(entries.first { $0.kind == .accessToken })
        let accessSecret = AccessToken(entry: accessEntry).secret
        #expect(!accessSecret.isEmpty)
        var texts = entries.flatMap { ["\($0)", String(reflecting: $0)] }
        for value in [refreshEntry, RefreshToken(entry: refreshEntry), AccessToken(entry: accessEntry), entries] as [Any] {
            var dumped = ""
            dump(value, to: &dumped)
            texts += [dumped, String(describing: value), String(reflecting: value)]
            texts += Mirror(reflecting: value).children.map { String(reflecting: $0.value) }
        }
        // Counted, not shown: a failure must not print the tokens either.
        #expect(texts.count(where: { $0.contains(secret) }) == 0, "texts showing the refresh token")
        #expect(texts.count(where: { $0.contains(accessSecret) }) == 0, "texts showing the access token")
        // Still says what the entry is.
        #expect("\(refreshEntry)" == "CacheEntry(RefreshToken, key: \(refreshEntry.key))")
    }

    @Test("ID token claims are read by name: strings, string arrays, and the list of names")
    func idTokenClaimsByName() throws {
        let claims = try IDTokenClaims(jwt: Fixtures.idToken([
            "name": "Alice Example", "roles": ["Reader", "Writer"], "exp": 1_800_000_000, "mixed": ["a", 1],
        ]))
        #expect(claims["name"] == "Alice Example")
        #expect(claims.name == "Alice Example")
        #expect(claims["exp"] == nil)  // a number, not a string
        #expect(claims["missing"] == nil)
        #expect(claims.strings("roles") == ["Reader", "Writer"])
        #expect(claims.strings("mixed") == nil)
        #expect(claims.strings("name") == nil)
        #expect(claims.claimNames == ["exp", "mixed", "name", "roles"])
    }
}
