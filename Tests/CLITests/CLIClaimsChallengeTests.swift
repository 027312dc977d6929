import Foundation
import Testing
@testable import TokenCache
@testable import TokenCacheCore
import TokenCacheTestSupport
import TokenCacheTestIdentityProvider

/// Continuous access evaluation through `tokencache token` (#47 item 3): client capabilities from
/// the environment or the config file, `--challenge` (a resource's WWW-Authenticate value) and
/// `--claims`, and a refusal's claims in `--json`'s error line.
@Suite("token: client capabilities and claims challenges", .harness)
struct CLIClaimsChallengeTests {
    static let challenge = #"{"access_token":{"nbf":{"essential":true,"value":"1604106651"}}}"#
    let idp: FakeIdentityProvider
    let cli: CLI

    init() throws {
        (idp, cli) = (try FakeIdentityProvider(), try CLI(backend: "file"))
    }

    func signIn() async throws {
        try await CLITokenRefreshTests.signInExpired(cli: cli, idp: idp, refreshToken: "rt-cae")
    }

    static func object(_ json: String?) throws -> NSDictionary {
        let text = try #require(json)
        return try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? NSDictionary)
    }

    @Test("TOKENCACHE_CLIENT_CAPABILITIES=cp1 goes on the refresh; --challenge with the resource's header refreshes with its claims and cp1, and the resource accepts the new token; the config file's client_capabilities too")
    func challengeThroughCLI() async throws {
        defer { cli.cleanUp() }
        try await signIn()
        var script = CLITokenRefreshTests.script(cli, idp)
        script.environmentOverrides["TOKENCACHE_CLIENT_CAPABILITIES"] = "cp1"
        let first = try script.run(["token", "--scopes", "User.Read"])
        #expect(first.status == 0 && first.stderr.isEmpty, "\(first.stderr)")
        let firstToken = first.stdout.trimmingCharacters(in: .newlines)
        #expect(try await idp.resource(accessToken: firstToken).status == 200)

        try await idp.challengeAtResource(Self.challenge)
        let refused = try await idp.resource(accessToken: firstToken)
        let header = try #require(refused.wwwAuthenticate)
        #expect(refused.status == 401)
        let second = try script.run(["token", "--scopes", "User.Read", "--challenge", header])
        #expect(second.status == 0 && second.stderr.isEmpty, "\(second.stderr)")
        let secondToken = second.stdout.trimmingCharacters(in: .newlines)
        #expect(secondToken != firstToken)
        #expect(try await idp.resource(accessToken: secondToken).status == 200)
        let grants = try await idp.stats().grants
        #expect(grants.count == 2)
        #expect(try Self.object(grants.first?.claims) == Self.object(#"{"access_token":{"xms_cc":{"values":["cp1"]}}}"#))
        #expect(try Self.object(grants.last?.claims) == Self.object(
            #"{"access_token":{"nbf":{"essential":true,"value":"1604106651"},"xms_cc":{"values":["cp1"]}}}"#))

        // The config file's "client_capabilities", and --claims with the decoded JSON.
        let config = cli.dataHome.appendingPathComponent("config/tokencache")
        try FileManager.default.createDirectory(at: config, withIntermediateDirectories: true)
        try Data(#"{"client_capabilities": ["cp1"]}"#.utf8).write(to: config.appendingPathComponent("config.json"))
        script.environmentOverrides["TOKENCACHE_CLIENT_CAPABILITIES"] = nil
        let third = try script.run(["token", "--scopes", "User.Read", "--claims", Self.challenge])
        #expect(third.status == 0, "\(third.stderr)")
        #expect(try Self.object(try await idp.stats().grants.last?.claims) == Self.object(
            #"{"access_token":{"nbf":{"essential":true,"value":"1604106651"},"xms_cc":{"values":["cp1"]}}}"#))
    }

    @Test("Bad input: --challenge without a challenge, --claims with --no-refresh, a malformed capability (64); nothing is redeemed")
    func badInput() async throws {
        defer { cli.cleanUp() }
        try await signIn()
        let base = ["token", "--client", Fixtures.appOne, "--scopes", "User.Read", "--authority", idp.authority().url.absoluteString]
        let noChallenge = try cli.run(base + ["--challenge", #"Bearer realm="", error="invalid_token""#])
        #expect(noChallenge.status == 64 && noChallenge.stderr.contains("insufficient_claims"), "\(noChallenge.stderr)")
        let noRefresh = try cli.run(base + ["--claims", Self.challenge, "--no-refresh"])
        #expect(noRefresh.status == 64, "\(noRefresh.stderr)")
        var bad = cli
        bad.environmentOverrides["TOKENCACHE_CLIENT_CAPABILITIES"] = "cp 1;"
        let capability = try bad.run(base)
        #expect(capability.status == 64 && capability.stderr.contains("TOKENCACHE_CLIENT_CAPABILITIES"), "\(capability.stderr)")
        #expect(try await idp.stats().grants.isEmpty)
    }

    @Test("A refresh refused for multi-factor authentication exits 2; --json's error line has the claims to sign in with under server.claims")
    func refusalClaimsInJSON() async throws {
        defer { cli.cleanUp() }
        try await signIn()
        let mfa = #"{"access_token":{"capolids":{"essential":true,"values":["c0ffee00-0000-0000-0000-000000000000"]}}}"#
        try await idp.control(["refresh_interaction_claims": mfa])
        let refused = try cli.run(["token", "--client", Fixtures.appOne, "--scopes", "User.Read", "--authority", idp.authority().url.absoluteString,
                                   "--claims", Self.challenge, "--json"])
        #expect(refused.status == 2, "\(refused.stderr)")
        let line = try #require(refused.stderr.split(separator: "\n").first { $0.hasPrefix("{") })
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        let server = try #require((object["error"] as? [String: Any])?["server"] as? [String: Any])
        #expect(server["claims"] as? String == mfa)
        #expect(server["error_codes"] as? [Int] == [50076])
    }
}
