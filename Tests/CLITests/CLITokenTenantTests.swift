import Foundation
import Testing
@testable import TokenCache
@testable import TokenCacheCore
import TokenCacheTestSupport

/// `tokencache token` without `--authority`, as MSAL finds tokens: the home tenant's first; else
/// the only tenant holding one; with several, it asks which.
@Suite("token without --authority across tenants", .harness)
struct CLITokenTenantTests {
    let tenantC = "33333333-3333-3333-3333-333333333333"

    func save(_ cli: CLI, realm: String, tag: String) throws {
        let response = Fixtures.response(for: Fixtures.alice, realm: realm, scope: "Files.Read", foci: "1", tag: tag)
        let output = try cli.run(["save", "--client", Fixtures.appOne, "--authority", Fixtures.authority(realm).url.absoluteString,
                                  "--scopes", "Files.Read"], input: Fixtures.json(response))
        #expect(output.status == 0, "\(output.stderr)")
    }

    @Test("A named account's cached access token is returned though no refresh token is cached, as MSAL Python returns it")
    func accessTokenWithoutRefreshToken() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        var response = Fixtures.response(for: Fixtures.alice, scope: "Files.Read", foci: nil, tag: "no-rt")
        response["refresh_token"] = nil
        let saved = try cli.run(["save", "--client", Fixtures.appOne, "--authority", Fixtures.authority().url.absoluteString,
                                 "--scopes", "Files.Read"], input: Fixtures.json(response))
        #expect(saved.status == 0, "\(saved.stderr)")
        let token = try cli.run(["token", "--client", Fixtures.appOne, "--scopes", "Files.Read", "--account", Fixtures.alice.username])
        #expect(token.status == 0, "\(token.stderr)")
        #expect(token.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "at-\(Fixtures.alice.uid)-\(Fixtures.tenantA)-no-rt")
    }

    @Test("A token from the only tenant that has one is returned, and the tenant is named; with two tenants the command asks for --authority and lists them")
    func anyTenant() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        try save(cli, realm: Fixtures.tenantB, tag: "b")
        let one = try cli.run(["token", "--client", Fixtures.appOne, "--scopes", "Files.Read"])
        #expect(one.status == 0, "\(one.stderr)")
        #expect(one.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "at-\(Fixtures.alice.uid)-\(Fixtures.tenantB)-b")
        // Nothing but the token unless asked: the tenant is named with --verbose.
        #expect(one.stderr.isEmpty, "\(one.stderr)")
        let verbose = try cli.run(["token", "--client", Fixtures.appOne, "--scopes", "Files.Read", "--verbose"])
        #expect(verbose.status == 0 && verbose.stderr.contains("tenant \(Fixtures.tenantB)"), "\(verbose.stderr)")

        try save(cli, realm: tenantC, tag: "c")
        let two = try cli.run(["token", "--client", Fixtures.appOne, "--scopes", "Files.Read"])
        #expect(two.status == 64 && two.stdout.isEmpty, "\(two.stderr)")
        #expect(two.stderr.contains("2 tenants: \(Fixtures.tenantB), \(tenantC)"), "\(two.stderr)")
        #expect(two.stderr.contains("--authority"))
        let chosen = try cli.run(["token", "--client", Fixtures.appOne, "--scopes", "Files.Read",
                                  "--authority", Fixtures.authority(tenantC).url.absoluteString])
        #expect(chosen.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "at-\(Fixtures.alice.uid)-\(tenantC)-c")
    }
}

/// `tokencache save` of a response that names no account (#27 item 5).
@Suite("save of a response without an account", .harness)
struct CLISaveOrphanTests {
    @Test("A response with neither client_info nor id_token is refused (64, naming the fix) unless --home-account-id names an account of the group")
    func orphanRefused() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        _ = try cli.save(Fixtures.alice, client: Fixtures.appOne)
        var refresh = Fixtures.response(for: Fixtures.alice, scope: "Files.Read", foci: nil, tag: "refresh")
        refresh["client_info"] = nil
        refresh["id_token"] = nil
        let arguments = ["save", "--client", Fixtures.appOne, "--authority", Fixtures.authority().url.absoluteString, "--scopes", "Files.Read"]
        let before = try cli.run(["export", "--format", "msal-json"]).stdout
        let refused = try cli.run(arguments, input: Fixtures.json(refresh))
        #expect(refused.status == 64, "\(refused.stderr)")
        #expect(refused.stderr.contains("--home-account-id") && refused.stderr.contains("openid"), "\(refused.stderr)")
        let unknown = try cli.run(arguments + ["--home-account-id", Fixtures.bob.homeAccountID], input: Fixtures.json(refresh))
        #expect(unknown.status == 64, "\(unknown.stderr)")
        #expect(try cli.run(["export", "--format", "msal-json"]).stdout == before)

        let saved = try cli.run(arguments + ["--home-account-id", Fixtures.alice.homeAccountID], input: Fixtures.json(refresh))
        #expect(saved.status == 0, "\(saved.stderr)")
        #expect(saved.stdout.contains(Fixtures.alice.username), "\(saved.stdout)")
        let token = try cli.run(["token", "--client", Fixtures.appOne, "--scopes", "Files.Read"])
        #expect(token.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "at-\(Fixtures.alice.uid)-\(Fixtures.tenantA)-refresh")
    }
}
