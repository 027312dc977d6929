import Foundation
import Testing
@testable import TokenCache
@_spi(Backend) @testable import TokenCacheCore
import TokenCacheTestSupport
import TokenCacheTestIdentityProvider

/// A tenant named by its domain (`/contoso.onmicrosoft.com`), in process: the engine resolves it
/// to the tenant ID by the stand-in's discovery (as Entra's answers), once per app; the records an
/// earlier version saved under the domain move to the tenant ID; a request that may send nothing
/// discovers nothing. The front ends' side is `FrontEndParityTests`.
@Suite("A tenant named by domain", .harness)
struct DomainTenantTests {
    static let domain = "contoso.onmicrosoft.com"
    let idp: FakeIdentityProvider
    let store = AccountStore(backend: InMemoryBackend())

    init() async throws {
        idp = try FakeIdentityProvider()
        try await idp.control(["tenant_domains": [Self.domain: Fixtures.tenantA]])
    }

    /// Alice's tokens saved as issued at `authority` (an earlier version saved a domain's under the domain).
    func save(at authority: Authority, tag: String, now: Date = Date()) throws {
        var response = Fixtures.response(for: Fixtures.alice, scope: "User.Read", foci: nil, tag: tag)
        response["refresh_token"] = "rt-\(tag)"
        try store.save(Fixtures.tokenResponse(response), clientID: Fixtures.appOne, authority: authority, scopes: [], now: now)
    }

    func realms(_ kind: EntityKind) throws -> [String] {
        try store.entries().filter { $0.kind == kind }.compactMap { $0["realm"] }.sorted()
    }

    @Test("Records an earlier version saved under the domain move to the tenant ID on the next request at the domain: one account, the newer token kept, no token request")
    func domainRecordsMove() async throws {
        try save(at: idp.authority(), tag: "tenant", now: Date().addingTimeInterval(-60))
        try save(at: idp.authority(Self.domain), tag: "domain")
        #expect(try realms(.account) == [Fixtures.tenantA, Self.domain])
        let request = TokenRequest(clientID: try ClientID(Fixtures.appOne), scopes: ["User.Read"], account: Fixtures.alice.username,
                                   authority: idp.authority(Self.domain))
        let engine = TokenEngine(store: store)
        // A thread of its own, as C's: the blocking entry sends discovery on the calling thread.
        let token = try await offThePool { try engine.blockingToken(request) }
        #expect(token.accessToken == "at-\(Fixtures.alice.uid)-\(Fixtures.tenantA)-domain" && token.isFromCache)
        #expect(try realms(.account) == [Fixtures.tenantA])
        #expect(try realms(.idToken) == [Fixtures.tenantA])
        #expect(try realms(.accessToken) == [Fixtures.tenantA])
        _ = try await offThePool { try engine.blockingToken(request) }
        let stats = try await idp.stats()
        #expect(stats.token_requests == 0)
        #expect(stats.discovery_requests == 1, "discovered once per app")
    }

    @Test("A Swift app at the domain finds its account's token at the tenant ID (acquireTokenSilent with an account), discovering once")
    func appAtDomain() async throws {
        try save(at: idp.authority(), tag: "tenant")
        let app = PublicClientApplication(clientID: Fixtures.appOne, authority: idp.authority(Self.domain), store: store)
        let account = try #require(try await app.accounts().first)
        for _ in 0..<2 {
            let token = try await app.acquireTokenSilent(scopes: ["User.Read"], account: account)
            #expect(token.accessToken == "at-\(Fixtures.alice.uid)-\(Fixtures.tenantA)-tenant" && token.isFromCache)
        }
        let stats = try await idp.stats()
        #expect(stats.token_requests == 0)
        #expect(stats.discovery_requests == 1)
    }

    @Test("A request that may send nothing (C's tokencache_store_find_access_token) discovers nothing: the domain is looked at as named")
    func lookupSendsNothing() async throws {
        try save(at: idp.authority(), tag: "tenant")
        var request = TokenRequest(clientID: try ClientID(Fixtures.appOne), scopes: ["User.Read"], account: Fixtures.alice.username,
                                   authority: idp.authority(Self.domain))
        request.redeemsRefreshTokens = false
        let error = #expect(throws: TokenCacheError.self) { try TokenEngine(store: store).blockingToken(request) }
        #expect(error?.code == .notFound)
        #expect(try await idp.stats().discovery_requests == 0)
    }

    @Test("The rule: only an Entra authority whose tenant is a domain (not a GUID, common/organizations/consumers or a name without a dot) is resolved")
    func whichAuthorities() throws {
        #expect(TokenEngine.namesTenantByDomain(try Authority("https://login.microsoftonline.com/contoso.onmicrosoft.com")))
        #expect(TokenEngine.namesTenantByDomain(try Authority("https://contoso.ciamlogin.com/contoso.onmicrosoft.com")))
        for kept in ["https://login.microsoftonline.com/\(Fixtures.tenantA)", "https://login.microsoftonline.com/organizations",
                     "https://login.microsoftonline.com/Common", "https://contoso.b2clogin.com/tfp/contoso.onmicrosoft.com/B2C_1_signin",
                     "https://adfs.contoso.com/adfs", "https://login.windows.net/contoso", "https://login.microsoftonline.com/microsoft"] {
            #expect(!TokenEngine.namesTenantByDomain(try Authority(kept)), "\(kept)")
        }
        let domain = try Authority("https://login.microsoftonline.com/contoso.onmicrosoft.com")
        let resolved = TokenEngine.tenantAuthority(of: domain, tokenEndpoint: URL(string: "https://login.microsoftonline.com/\(Fixtures.tenantA)/oauth2/v2.0/token")!)
        #expect(resolved.url.absoluteString == "https://login.microsoftonline.com/\(Fixtures.tenantA)")
    }
}
