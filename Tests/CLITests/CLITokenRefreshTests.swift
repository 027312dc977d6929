import Foundation
import Testing
@testable import TokenCache
@testable import TokenCacheCore
import TokenCacheTestSupport
import TokenCacheTestIdentityProvider

/// `tokencache token` as scripts use it (#46 item 1): it refreshes by default, so a script written
/// from the CLI guide keeps working after the access token expires; client, account and authority
/// may come from the environment or the config file; stdout has the token and stderr nothing.
@Suite("token refreshes by default", .harness)
struct CLITokenRefreshTests {
    let idp: FakeIdentityProvider
    let cli: CLI

    init() throws {
        idp = try FakeIdentityProvider()
        cli = try CLI(backend: "file")
    }

    /// Alice signed in to app one at the local provider with an access token that has expired,
    /// and a refresh token the provider knows.
    func signInExpired() async throws {
        try await Self.signInExpired(cli: cli, idp: idp)
    }

    /// `cli` as the guide's script runs it: client and authority exported once.
    static func script(_ cli: CLI, _ idp: FakeIdentityProvider) -> CLI {
        var script = cli
        script.environmentOverrides["TOKENCACHE_CLIENT_ID"] = Fixtures.appOne
        script.environmentOverrides["TOKENCACHE_AUTHORITY"] = idp.authority().url.absoluteString
        return script
    }

    /// Alice signed in to app one through `cli` at `idp`, her access token expired, her refresh token known there.
    static func signInExpired(cli: CLI, idp: FakeIdentityProvider, refreshToken: String = "rt-script") async throws {
        var response = Fixtures.response(for: Fixtures.alice, scope: "User.Read", foci: nil, tag: "expired", expiresIn: 0)
        response["refresh_token"] = refreshToken
        let saved = try cli.run(["save", "--client", Fixtures.appOne, "--authority", idp.authority().url.absoluteString, "--scopes", "User.Read"],
                                input: Fixtures.json(response))
        try #require(saved.status == 0, "\(saved.stderr)")
        try await idp.seed(refreshToken: refreshToken, user: Fixtures.alice, clientID: Fixtures.appOne, family: nil)
    }

    @Test("The guide's script (client and authority exported once, `token --scopes`) gets a refreshed token after expiry: stdout the token, stderr empty; --no-refresh keeps to the cache (exit 2, naming the way)")
    func scriptKeepsWorking() async throws {
        defer { cli.cleanUp() }
        try await signInExpired()
        let script = Self.script(cli, idp)
        let cached = try script.run(["token", "--scopes", "User.Read", "--no-refresh"])
        #expect(cached.status == 2 && cached.stdout.isEmpty, "\(cached.stderr)")
        #expect(cached.stderr.contains("--no-refresh"), "\(cached.stderr)")
        let token = try script.run(["token", "--scopes", "User.Read"])
        #expect(token.status == 0, "\(token.stderr)")
        #expect(token.stdout.hasPrefix("at-issued-") && token.stderr.isEmpty, "\(token.stdout) \(token.stderr)")
        #expect(try await idp.stats().grants.count == 1)
        // Cached now: the next run redeems nothing.
        let again = try script.run(["token", "--scopes", "User.Read", "--quiet"])
        #expect(again.stdout == token.stdout && again.stderr.isEmpty)
        #expect(try await idp.stats().grants.count == 1)
    }

    @Test("Client, account and authority from the config file; an option wins over the variable, the variable over the file; a bad value names where it is (64)")
    func settingsChain() async throws {
        defer { cli.cleanUp() }
        try await signInExpired()
        let config = cli.dataHome.appendingPathComponent("config/tokencache")
        try FileManager.default.createDirectory(at: config, withIntermediateDirectories: true)
        let file = #"{"client": "\#(Fixtures.appOne)", "account": "\#(Fixtures.alice.username)", "authority": "\#(idp.authority().url.absoluteString)"}"#
        try Data(file.utf8).write(to: config.appendingPathComponent("config.json"))
        let token = try cli.run(["token", "--scopes", "User.Read", "--json"])
        #expect(token.status == 0, "\(token.stderr)")
        let object = try JSONSerialization.jsonObject(with: Data(token.stdout.utf8)) as? [String: Any]
        #expect((object?["access_token"] as? String)?.hasPrefix("at-issued-") == true)
        // The token's tenant, not the authority's path segment.
        #expect(object?["tenant_id"] as? String == Fixtures.tenantA, "\(token.stdout)")
        var bad = cli
        bad.environmentOverrides["TOKENCACHE_AUTHORITY"] = "http://example.com/x"
        let refused = try bad.run(["token", "--scopes", "User.Read"])
        #expect(refused.status == 64 && refused.stderr.contains("TOKENCACHE_AUTHORITY"), "\(refused.stderr)")
        let unknown = try bad.run(["token", "--scopes", "User.Read", "--authority", idp.authority().url.absoluteString, "--client", Fixtures.appTwo])
        #expect(unknown.status == 2, "an option wins: app two has no account here: \(unknown.stderr)")
    }

    @Test("A refused refresh shows the provider's AADSTS code and description (and --json carries them), and the hint is the login command with the client, authority and scopes filled in")
    func serverErrorShown() async throws {
        defer { cli.cleanUp() }
        var response = Fixtures.response(for: Fixtures.alice, scope: "User.Read", foci: nil, tag: "expired", expiresIn: 0)
        response["refresh_token"] = "rt-the-provider-does-not-know"
        let authority = idp.authority().url.absoluteString
        #expect(try cli.run(["save", "--client", Fixtures.appOne, "--authority", authority, "--scopes", "User.Read"],
                            input: Fixtures.json(response)).status == 0)
        let output = try cli.run(["token", "--client", Fixtures.appOne, "--scopes", "User.Read", "--authority", authority])
        #expect(output.status == 2, "\(output.stderr)")
        #expect(output.stderr.contains("AADSTS70000: token was already used or is unknown"), "\(output.stderr)")
        #expect(output.stderr.contains("tokencache login --client \(Fixtures.appOne) --authority \(authority) --scopes \"User.Read\""), "\(output.stderr)")
        let json = try cli.run(["token", "--client", Fixtures.appOne, "--scopes", "User.Read", "--authority", authority, "--json"])
        let line = try #require(json.stderr.split(separator: "\n").first { $0.hasPrefix("{") })
        let error = try #require((try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["error"] as? [String: Any])
        let server = error["server"] as? [String: Any]
        #expect(error["reason"] as? String == "refreshTokenRejected")
        #expect(server?["error"] as? String == "invalid_grant" && server?["error_codes"] as? [Int] == [70000], "\(line)")
        #expect((server?["error_description"] as? String)?.hasPrefix("AADSTS70000") == true)
        #expect(!json.stderr.contains("rt-the-provider-does-not-know"))
    }

    @Test("Without any authority the refresh goes to the account's own host and tenant, where its refresh token was issued")
    func refreshAtHomeAuthority() async throws {
        // The account lives at login.microsoftonline.com; a transport maps that host onto the
        // local provider (the only remote service replaced), so where the request went is seen.
        let directory = try TestEnvironment.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory); cli.cleanUp() }
        let store = AccountStore(backend: EncryptedFileBackend(directory: directory), group: .universalStorage)
        var response = Fixtures.response(for: Fixtures.alice, scope: "User.Read", foci: nil, tag: "expired", expiresIn: 0)
        response["refresh_token"] = "rt-home"
        try store.save(Fixtures.tokenResponse(response), clientID: Fixtures.appOne, authority: Fixtures.authority(), scopes: [])
        try await idp.seed(refreshToken: "rt-home", user: Fixtures.alice, clientID: Fixtures.appOne, family: nil)
        var options = PublicClientApplication.Options()
        options.transport = HostMappingTransport(host: "https://login.microsoftonline.com", to: "http://\(idp.host):\(idp.port)")
        let engine = TokenEngine(store: store, options: options)
        let result = try await engine.token(TokenRequest(clientID: try ClientID(Fixtures.appOne), scopes: ["User.Read"]))
        #expect(result.accessToken.hasPrefix("at-issued-"))
        let grants = try await idp.stats().grants
        #expect(grants.count == 1 && grants.allSatisfy { $0.outcome == "ok" })
        #expect(result.tenantID == Fixtures.tenantA)
    }
}

/// libcurl, with one https origin served by a loopback one: requests go there, and the loopback
/// origin in its answers (the discovery document's endpoints) reads as the https one again.
struct HostMappingTransport: HTTPTransport {
    let host: String, to: String
    let curl = CurlTransport()
    func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        var mapped = request
        let text = request.url.absoluteString
        if text.hasPrefix(host), let url = URL(string: to + text.dropFirst(host.count)) { mapped.url = url }
        let response = try await curl.send(mapped)
        let body = String(decoding: response.body, as: UTF8.self).replacingOccurrences(of: to, with: host)
        return HTTPResponse(status: response.status, headers: response.headers, body: Data(body.utf8))
    }
}
