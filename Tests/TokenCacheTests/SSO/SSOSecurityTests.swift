import Foundation
import Testing
@testable import EncryptedFileStore
@testable import SecretServiceStore
@testable import TokenCache
@_spi(Backend) @testable import TokenCacheCore
@testable import TokenCachePlatform
import TokenCacheTestSupport
import TokenCacheTestIdentityProvider

/// Security issue #23: a refresh token goes only to the host that issued it, a response cannot
/// rewrite another account, and proof-of-possession tokens are never served as bearer tokens.
///
/// Two local providers stand in for the hosts: the issuer on 127.0.0.1 and a foreign host on
/// 127.0.0.2, which would accept the same refresh tokens (so a leak would succeed, not fail).
@Suite("SSO security: refresh tokens stay with their issuer, responses cannot switch accounts", .harness)
struct SSOSecurityTests {
    let issuer: FakeIdentityProvider
    let foreign: FakeIdentityProvider
    let store = AccountStore(backend: InMemoryBackend())

    init() throws {
        issuer = try FakeIdentityProvider()
        foreign = try FakeIdentityProvider(host: "127.0.0.2")
    }

    func app(_ clientID: String, _ authority: Authority) -> PublicClientApplication {
        var options = PublicClientApplication.Options()
        options.requestTimeout = 60
        return PublicClientApplication(clientID: clientID, authority: authority, store: store, options: options)
    }

    /// Alice signed in to app one at the issuer, in family 1; both providers know the token.
    @discardableResult
    func signInAlice() async throws -> CachedAccount {
        var response = Fixtures.response(for: Fixtures.alice, scope: "User.Read", foci: "1", tag: "one", expiresIn: 60)
        response["refresh_token"] = "rt-initial-family"
        try store.save(Fixtures.tokenResponse(response), clientID: Fixtures.appOne, authority: issuer.authority(), scopes: [])
        for provider in [issuer, foreign] {
            try await provider.seed(refreshToken: "rt-initial-family", user: Fixtures.alice, clientID: Fixtures.appOne, family: "1")
        }
        return try #require(try store.account(Fixtures.alice.username))
    }

    enum ForeignCaller: String, CaseIterable, CustomTestStringConvertible {
        case sameApp, familyApp, unrelatedOIDCApp, b2cApp
        var testDescription: String { rawValue }
    }

    @Test("No refresh token reaches a host other than its issuer, whoever asks; the error says so and nothing changes",
          arguments: ForeignCaller.allCases)
    func foreignHostGetsNothing(caller: ForeignCaller) async throws {
        let account = try await signInAlice()
        let before = try store.entries()
        let (client, authority): (String, Authority) = switch caller {
        case .sameApp: (Fixtures.appOne, foreign.authority())
        case .familyApp: (Fixtures.appTwo, foreign.authority())
        case .unrelatedOIDCApp: (Fixtures.appThree, foreign.authority(kind: .oidc))
        case .b2cApp: (Fixtures.appThree, foreign.authority(kind: .b2c))
        }
        let error = await #expect(throws: TokenCacheError.self) {
            try await app(client, authority).acquireTokenSilent(scopes: ["User.Read"], account: account, forceRefresh: true)
        }
        #expect(error?.code == .interactionRequired)
        #expect(error?.message.contains("issued by 127.0.0.1, not by 127.0.0.2") == true, "\(String(describing: error))")
        #expect(try await foreign.stats().token_requests == 0)
        #expect(try await issuer.stats().token_requests == 0)
        #expect(Set(try store.entries()) == Set(before))
    }

    @Test("A family app still gets single sign-on at the issuing host")
    func familyRefreshAtIssuerWorks() async throws {
        let account = try await signInAlice()
        let result = try await app(Fixtures.appTwo, issuer.authority()).acquireTokenSilent(scopes: ["User.Read"], account: account)
        #expect(result.accessToken == "at-issued-1")
        #expect(try await issuer.stats().grants.map(\.redeemed) == ["rt-initial-family"])
        #expect(try await foreign.stats().token_requests == 0)
    }

    @Test("A generic OIDC app on the issuing host redeems only its own refresh token, never the Microsoft family's")
    func oidcAppNeverUsesFamilyTokens() async throws {
        let account = try await signInAlice()
        let oidc = issuer.authority(kind: .oidc)
        #expect(try store.refreshTokens(clientID: try ClientID(Fixtures.appThree), account: account, redeemableAt: oidc).isEmpty)
        #expect(try store.refreshTokens(clientID: try ClientID(Fixtures.appThree), account: account, redeemableAt: issuer.authority()).count == 1)
        await #expect(throws: TokenCacheError.self) {
            try await app(Fixtures.appThree, oidc).acquireTokenSilent(scopes: ["User.Read"], account: account, forceRefresh: true)
        }
        #expect(try await issuer.stats().token_requests == 0)
    }

    @Test("Microsoft Entra authorities accept the hosts of their own cloud; every other kind only its own host")
    func aliasRule() throws {
        let publicCloud = try Authority("https://login.microsoftonline.com/organizations")
        for host in ["login.microsoftonline.com", "LOGIN.windows.net", "login.microsoft.com", "sts.windows.net"] {
            #expect(Environment.authority(publicCloud, accepts: host), "\(host)")
        }
        for host in ["login.microsoftonline.us", "login.chinacloudapi.cn", "other.example", "login.microsoftonline.com.evil.example"] {
            #expect(!Environment.authority(publicCloud, accepts: host), "\(host)")
        }
        let china = try Authority("https://login.chinacloudapi.cn/common")
        #expect(Environment.authority(china, accepts: "login.partner.microsoftonline.cn"))
        #expect(!Environment.authority(china, accepts: "login.microsoftonline.com"))
        let b2c = try Authority("https://contoso.b2clogin.com/tfp/contoso.onmicrosoft.com/B2C_1_signin")
        #expect(b2c.kind == .b2c)
        #expect(Environment.authority(b2c, accepts: "contoso.b2clogin.com"))
        #expect(!Environment.authority(b2c, accepts: "login.microsoftonline.com"))
        let oidcOnAlias = try Authority("https://login.windows.net/common", kind: .oidc)
        #expect(!Environment.authority(oidcOnAlias, accepts: "login.microsoftonline.com"))
    }

    @Test("A refresh token issued at login.windows.net is redeemed for a login.microsoftonline.com authority, not for another cloud")
    func aliasLookup() throws {
        var response = Fixtures.response(for: Fixtures.alice, foci: "1")
        response["refresh_token"] = "rt-windows-net"
        try store.save(Fixtures.tokenResponse(response), clientID: Fixtures.appOne,
                       authority: try Authority("https://login.windows.net/\(Fixtures.tenantA)"), scopes: [])
        let account = try #require(try store.account(Fixtures.alice.username))
        let found = try store.refreshTokens(clientID: try ClientID(Fixtures.appTwo), account: account,
                                            redeemableAt: try Authority("https://login.microsoftonline.com/organizations"))
        #expect(found.map(\.secret) == ["rt-windows-net"])
        #expect(try store.refreshTokens(clientID: try ClientID(Fixtures.appTwo), account: account,
                                        redeemableAt: try Authority("https://login.microsoftonline.us/organizations")).isEmpty)
    }

    @Test("A refresh for Alice answered with Bob's identity is refused as userMismatch and saves nothing")
    func spoofedIdentityRefused() async throws {
        let account = try await signInAlice()
        try await issuer.seed(refreshToken: "rt-initial-family", user: Fixtures.alice, clientID: Fixtures.appOne,
                              family: "1", respondingAs: Fixtures.bob)
        let before = try store.entries()
        let error = await #expect(throws: TokenCacheError.self) {
            try await app(Fixtures.appOne, issuer.authority()).acquireTokenSilent(scopes: ["User.Read"], account: account, forceRefresh: true)
        }
        #expect(error?.code == .userMismatch)
        #expect(try await issuer.stats().grants.map(\.outcome) == ["ok"], "the server was asked once")
        #expect(Set(try store.entries()) == Set(before))
        #expect(try store.account(Fixtures.bob.username) == nil)
        #expect(try store.allAccounts().map(\.homeAccountID) == [Fixtures.alice.homeAccountID])
    }

    @Test("Identity check: client_info decides; without it the ID token's sub, or oid and tid; a response without identity belongs to the account")
    func identityRule() throws {
        let alice = Fixtures.alice.homeAccountID
        try ResponseEntities.checkIdentity(derived: alice.uppercased(), fromClientInfo: true, claims: nil, known: alice)
        try ResponseEntities.checkIdentity(derived: nil, fromClientInfo: false, claims: nil, known: alice)
        let aliceClaims = try IDTokenClaims(jwt: Fixtures.idToken(["sub": "sub-x", "oid": Fixtures.alice.uid, "tid": Fixtures.tenantA]))
        try ResponseEntities.checkIdentity(derived: "sub-x", fromClientInfo: false, claims: aliceClaims, known: alice)
        #expect(throws: TokenCacheError.self) {
            try ResponseEntities.checkIdentity(derived: Fixtures.bob.homeAccountID, fromClientInfo: true, claims: aliceClaims, known: alice)
        }
        let bobClaims = try IDTokenClaims(jwt: Fixtures.idToken(["sub": "sub-b", "oid": Fixtures.bob.uid, "tid": Fixtures.tenantA]))
        #expect(throws: TokenCacheError.self) {
            try ResponseEntities.checkIdentity(derived: "sub-b", fromClientInfo: false, claims: bobClaims, known: alice)
        }
    }

    @Test("Rotation replaces the redeemed secret only in the same account's entries of the same cloud")
    func rotationStaysInItsCloud() async throws {
        let account = try await signInAlice()
        // The same secret planted under another host for Alice (what a hostile server or a
        // confused SDK could leave): not the issuer's to replace.
        let planted = CacheEntry(kind: .refreshToken, fields: [
            "credential_type": "RefreshToken", "secret": "rt-initial-family", "home_account_id": .string(account.homeAccountID),
            "environment": "other.example", "client_id": .string(Fixtures.appTwo), "last_modification_time": "1"])
        _ = try store.backend.apply([.upsert(planted)], to: store.group, expected: nil)
        _ = try await app(Fixtures.appOne, issuer.authority()).acquireTokenSilent(scopes: ["User.Read"], account: account, forceRefresh: true)
        let secrets = Dictionary(uniqueKeysWithValues: try store.entries().filter { $0.kind == .refreshToken }
            .map { ($0["environment"] ?? "", $0["secret"] ?? "") })
        #expect(secrets == ["127.0.0.1": "rt-rotated-1", "other.example": "rt-initial-family"])
    }

    @Test("An account is described the same way whatever order its records are read in")
    func primaryRecordIsDeterministic() throws {
        let home = Fixtures.bob.homeAccountID
        func record(_ environment: String, _ username: String, _ local: String) -> CacheEntry {
            CacheEntry(kind: .account, fields: [
                "home_account_id": .string(home), "environment": .string(environment), "realm": .string(Fixtures.tenantA),
                "local_account_id": .string(local), "username": .string(username), "authority_type": "MSSTS"])
        }
        let records = [record("login.microsoftonline.com", "bob@contoso.com", Fixtures.bob.uid),
                       record("login.windows.net", "mallory@evil.example", "planted"),
                       record("login.microsoft.com", "", "empty")]
        var described: Set<String> = []
        for order in [records, records.reversed(), [records[1], records[0], records[2]], [records[2], records[1], records[0]]] {
            let account = try #require(store.account(homeAccountID: home, cloud: "login.microsoftonline.com", clientID: nil, in: CacheIndex(order)))
            described.insert("\(account.environment) \(account.username) \(account.localAccountID)")
        }
        #expect(described.count == 1, "\(described)")
    }

    @Test("Proof-of-possession and other non-bearer access tokens are never returned for a plain request")
    func popTokensNeverServed() throws {
        var response = Fixtures.response(for: Fixtures.alice, scope: "User.Read", foci: nil, tag: "bearer", expiresIn: 3600)
        response["access_token"] = "at-bearer"
        try store.save(Fixtures.tokenResponse(response), clientID: Fixtures.appOne, authority: Fixtures.authority(), scopes: [])
        let account = try #require(try store.account(Fixtures.alice.username))
        let later = String(Int(Date().timeIntervalSince1970) + 7200)
        func at(_ secret: String, _ extra: JSONObject) -> CacheEntry {
            var fields: JSONObject = [
                "credential_type": "AccessToken", "secret": .string(secret), "home_account_id": .string(account.homeAccountID),
                "environment": "login.microsoftonline.com", "client_id": .string(Fixtures.appOne), "realm": .string(Fixtures.tenantA),
                "target": .string("User.Read \(secret)"), "cached_at": "1", "expires_on": .string(later)]
            fields.merge(extra) { $1 }
            return CacheEntry(kind: .accessToken, fields: fields)
        }
        // Each lasts longer than the bearer token, so it would be preferred if it were eligible.
        let pop = [at("pop-scheme", ["credential_type": "AccessToken_With_AuthScheme", "token_type": "pop"]),
                   at("pop-scheme-bearer-type", ["credential_type": "AccessToken_With_AuthScheme"]),
                   at("pop-type", ["token_type": "PoP"]),
                   at("pop-node", ["tokenType": "pop"]),
                   at("ssh-cert", ["token_type": "ssh-cert"])]
        _ = try store.backend.apply(pop.map(CacheChange.upsert), to: store.group, expected: nil)
        #expect(try store.accessToken(clientID: Fixtures.appOne, account: account, scopes: ["User.Read"])?.accessToken == "at-bearer")
        for entry in pop {
            let scope = try #require(entry["secret"])
            #expect(try store.accessToken(clientID: Fixtures.appOne, account: account, scopes: [scope]) == nil, "\(scope)")
        }
        #expect(AccessToken(entry: at("bearer-upper", ["token_type": "BEARER"])).isPlainBearer)
    }

    @Test("CLI: token --refresh with a foreign authority sends nothing, exits 2 and says why; a spoofed response changes nothing in any later process")
    func cliForeignAndSpoofed() async throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        var response = Fixtures.response(for: Fixtures.alice, scope: "User.Read", foci: "1", tag: "mail", expiresIn: 60)
        response["refresh_token"] = "rt-initial-family"
        let saved = try cli.run(["save", "--client", Fixtures.appOne, "--authority", issuer.authority().url.absoluteString,
                                 "--scopes", "User.Read"], input: Fixtures.json(response))
        #expect(saved.status == 0, "\(saved.stderr)")
        for provider in [issuer, foreign] {
            try await provider.seed(refreshToken: "rt-initial-family", user: Fixtures.alice, clientID: Fixtures.appOne,
                                    family: "1", respondingAs: Fixtures.bob)
        }
        let before = try cli.run(["export", "--format", "msal-json"]).stdout

        let leaked = try cli.run(["token", "--client", Fixtures.appTwo, "--scopes", "User.Read", "--refresh",
                                  "--authority", foreign.authority().url.absoluteString])
        #expect(leaked.status == 2, "\(leaked.stderr)")
        #expect(leaked.stderr.contains("redeemed only at the host that issued it"), "\(leaked.stderr)")
        #expect(try await foreign.stats().token_requests == 0)

        let spoofed = try cli.run(["token", "--client", Fixtures.appTwo, "--scopes", "User.Read", "--refresh",
                                   "--authority", issuer.authority().url.absoluteString])
        #expect(spoofed.status == 1, "\(spoofed.stderr)")
        #expect(spoofed.stderr.contains("user_mismatch"), "\(spoofed.stderr)")
        #expect(try cli.run(["export", "--format", "msal-json"]).stdout == before)
        // Each process hashes with its own seed: a planted entry chosen in hash order would show
        // up in some of them.
        for _ in 0..<12 {
            let bob = try cli.run(["token", "--client", Fixtures.appTwo, "--scopes", "User.Read", "--account", Fixtures.bob.username])
            #expect(bob.status == 2 && bob.stdout.isEmpty)
            let list = try cli.run(["list", "--json"])
            #expect(!list.stdout.contains(Fixtures.bob.username))
        }
    }
}
