import Foundation
import Testing
@testable import TokenCache
@testable import TokenCacheCore
import TokenCacheTestSupport
import TokenCacheTestIdentityProvider

/// An app on the `TokenCacheEncryptedFile` product alone (`Examples/file-only`, which links no
/// GLib/GIO nor libcurl: `SecretServiceLibraryLoadingTests` reads its NEEDED entries) gets a token
/// that refreshes: `AccountStore.acquireTokenSilent`, the token pipeline's, against the local
/// stand-in identity provider, saved to the encrypted file the CLI reads.
@Suite("An app on the encrypted file only refreshes", .harness)
struct FileOnlyAppRefreshTests {
    let idp: FakeIdentityProvider
    let cli: CLI

    init() throws {
        idp = try FakeIdentityProvider()
        cli = try CLI(backend: "file")
    }

    /// Runs the file-only app's `token` command for app one in the CLI's group.
    func fileOnlyToken(authority: Authority) throws -> ProcessOutput {
        try runProcess(TestEnvironment.binDirectory.appendingPathComponent("tokencache-file-example").path,
                       ["token", Fixtures.appOne, authority.url.absoluteString, "User.Read", cli.group], environment: cli.environment)
    }

    /// Alice's tokens for app one as a sign-in at `authority` saves them, her access token
    /// expired (`expiresIn` 0), the refresh token known to the provider.
    func saveExpired(at authority: Authority, refreshToken: String) async throws {
        var response = Fixtures.response(for: Fixtures.alice, scope: "User.Read", foci: nil, tag: "stale", expiresIn: 0)
        response["refresh_token"] = refreshToken
        let saved = try cli.run(["save", "--client", Fixtures.appOne, "--authority", authority.url.absoluteString, "--scopes", "User.Read"],
                                input: Fixtures.json(response))
        try #require(saved.status == 0, "\(saved.stderr)")
        try await idp.seed(refreshToken: refreshToken, user: Fixtures.alice, clientID: Fixtures.appOne, family: nil)
    }

    @Test("A stale token is refreshed at the provider and saved: the next call and the CLI read the saved token, and nothing more is redeemed")
    func refreshesAndSaves() async throws {
        defer { cli.cleanUp() }
        try await saveExpired(at: idp.authority(), refreshToken: "rt-file-only")
        let first = try fileOnlyToken(authority: idp.authority())
        #expect(first.status == 0, "\(first.stderr)")
        let token = first.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(token.hasPrefix("at-issued-"), "\(first.stdout) \(first.stderr)")
        let grants = try await idp.stats().grants
        #expect(grants.count == 1 && grants.first?.outcome == "ok" && grants.first?.redeemed == "rt-file-only", "\(grants.map(\.outcome))")
        // Saved in the encrypted file: the app's next call and the CLI, told not to refresh, read it.
        let second = try fileOnlyToken(authority: idp.authority())
        #expect(second.status == 0 && second.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == token, "\(second.stderr)")
        let cached = try cli.run(["token", "--client", Fixtures.appOne, "--scopes", "User.Read", "--authority",
                                  idp.authority().url.absoluteString, "--no-refresh", "--quiet"])
        #expect(cached.status == 0 && cached.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == token, "\(cached.stderr)")
        #expect(try await idp.stats().grants.count == 1)
    }

    @Test("A tenant named by its domain refreshes and saves at the tenant ID discovery names: one account record")
    func domainTenantSavesAtTenantID() async throws {
        defer { cli.cleanUp() }
        let domain = "contoso.onmicrosoft.com"
        try await idp.control(["tenant_domains": [domain: Fixtures.tenantA]])
        try await saveExpired(at: idp.authority(), refreshToken: "rt-file-only-domain")
        let output = try fileOnlyToken(authority: idp.authority(domain))
        #expect(output.status == 0 && output.stdout.hasPrefix("at-issued-"), "\(output.stdout) \(output.stderr)")
        #expect(try await idp.stats().grants.map(\.outcome) == ["ok"])
        let cache = try cli.exported()
        for section in ["Account", "AccessToken", "IdToken"] {
            let realms = ((cache[section] as? [String: Any]) ?? [:]).values.compactMap { ($0 as? [String: Any])?["realm"] as? String }
            #expect(realms == [Fixtures.tenantA], "\(section): \(realms)")
        }
    }

    @Test("Without libcurl a stale token is not refreshed: exit 1 naming libcurl, and the cache keeps its tokens")
    func withoutLibcurl() async throws {
        defer { cli.cleanUp() }
        try await saveExpired(at: idp.authority(), refreshToken: "rt-file-only-no-curl")
        var environment = cli.environment
        environment["TOKENCACHE_LIBCURL_PATH"] = "/nonexistent/libcurl.so.4"
        let output = try runProcess(TestEnvironment.binDirectory.appendingPathComponent("tokencache-file-example").path,
                                    ["token", Fixtures.appOne, idp.authority().url.absoluteString, "User.Read", cli.group],
                                    environment: environment)
        #expect(output.status == 1 && output.stdout.isEmpty, "\(output.stdout)")
        #expect(output.stderr.contains("libcurl"), "\(output.stderr)")
        #expect(try await idp.stats().token_requests == 0)
        let listed = try cli.run(["list"])
        #expect(listed.status == 0 && listed.stdout.contains(Fixtures.alice.username), "\(listed.stderr)")
    }
}
