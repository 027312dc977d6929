import Foundation
import Testing
@testable import TokenCache
@testable import TokenCacheCore
import TokenCacheTestSupport

/// What a new user found trying the CLI (#27): the same argument gets the same answer in every
/// command, and each hint is the action that works where the user is.
@Suite("tokencache CLI: one answer per mistake", .harness)
struct CLIConsistencyTests {
    static let authority = Fixtures.authority().url.absoluteString

    @Test("A client ID the cache refuses is exit 64 in every command that takes --client")
    func clientIDEverywhere() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        _ = try cli.save(Fixtures.alice, client: Fixtures.appOne)
        let commands: [[String]] = [
            ["token", "--client", "bad client", "--scopes", "User.Read"],
            ["list", "--client", "bad client"],
            ["remove", "--account", Fixtures.alice.username, "--client", "bad client", "--yes"],
            ["logout", "--client", "bad client"],
            ["save", "--client", "bad client", "--authority", Self.authority, "--scopes", "User.Read", "--response", "/dev/null"],
        ]
        for command in commands {
            let output = try cli.run(command)
            #expect(output.status == 64, "\(command): \(output.status) \(output.stderr)")
            #expect(output.stderr.contains("--client"), "\(command): \(output.stderr)")
        }
    }

    @Test("logout and remove --client agree: a family app that never signed in, or one signed out already, is exit 2 and nothing is written")
    func signOutOnlyWhatSignedIn() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        _ = try cli.save(Fixtures.alice, client: Fixtures.appOne)  // a family refresh token app two could use
        let before = try cli.run(["list", "--json"]).stdout
        for command in [["logout", "--client", Fixtures.appTwo],
                        ["logout", "--client", Fixtures.appTwo, "--account", Fixtures.alice.username],
                        ["remove", "--account", Fixtures.alice.username, "--client", Fixtures.appTwo, "--yes"]] {
            let output = try cli.run(command)
            #expect(output.status == 2, "\(command): \(output.stderr)")
            #expect(output.stderr.contains(Fixtures.appOne), "names the client signed in: \(output.stderr)")
        }
        #expect(try cli.run(["list", "--json"]).stdout == before, "a phantom signed-out row was written")

        #expect(try cli.run(["logout", "--client", Fixtures.appOne]).status == 0)
        for command in [["logout", "--client", Fixtures.appOne, "--account", Fixtures.alice.username],
                        ["remove", "--account", Fixtures.alice.username, "--client", Fixtures.appOne, "--yes"]] {
            let output = try cli.run(command)
            #expect(output.status == 2 && output.stderr.contains("already"), "\(command): \(output.status) \(output.stderr)")
        }
    }

    @Test("logout and remove --client follow one rule: neither asks nor needs --yes, both take --yes and --dry-run, and both say the same line")
    func signOutOneRule() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        _ = try cli.save(Fixtures.alice, client: Fixtures.appOne)
        let before = try cli.run(["list", "--json"]).stdout
        let logoutDry = try cli.run(["logout", "--client", Fixtures.appOne, "--dry-run", "--yes"])
        let removeDry = try cli.run(["remove", "--account", Fixtures.alice.username, "--client", Fixtures.appOne, "--dry-run"])
        #expect(logoutDry.status == 0 && removeDry.status == 0, "\(logoutDry.stderr) \(removeDry.stderr)")
        #expect(logoutDry.stdout.hasPrefix("Would sign client \(Fixtures.appOne) out of \(Fixtures.alice.username)"), "\(logoutDry.stdout)")
        #expect(logoutDry.stdout == removeDry.stdout, "\(logoutDry.stdout) vs \(removeDry.stdout)")
        #expect(try cli.run(["list", "--json"]).stdout == before, "a dry run changed the group")

        // No terminal and no --yes: signing out still goes ahead, with the same line as logout's.
        let removed = try cli.run(["remove", "--account", Fixtures.alice.username, "--client", Fixtures.appOne])
        #expect(removed.status == 0, "\(removed.stderr)")
        #expect(removed.stdout == logoutDry.stdout.replacing("Would sign", with: "Signed"), "\(removed.stdout)")
        _ = try cli.save(Fixtures.alice, client: Fixtures.appOne)
        let loggedOut = try cli.run(["logout", "--client", Fixtures.appOne, "--yes"])
        #expect(loggedOut.status == 0 && loggedOut.stdout == removed.stdout, "\(loggedOut.stdout) \(loggedOut.stderr)")
    }

    @Test("logout --account picks the client's own account when two accounts share the username")
    func signOutSharedUsername() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        // Alice's second account: same username, another home account (a work and a personal one).
        let twin = Fixtures.User(uid: "00000000-0000-0000-0000-00000000a11c", tenant: Fixtures.alice.tenant,
                                 username: Fixtures.alice.username, name: "Alice at work")
        _ = try cli.save(Fixtures.alice, client: Fixtures.appOne, foci: nil)
        _ = try cli.save(twin, client: Fixtures.appTwo, foci: nil)
        let output = try cli.run(["logout", "--client", Fixtures.appTwo, "--account", Fixtures.alice.username])
        #expect(output.status == 0, "\(output.stderr)")
        let list = try cli.run(["list", "--client", Fixtures.appTwo, "--json"]).stdout
        #expect(list.contains("signed_out") && list.contains(twin.homeAccountID), "\(list)")
        #expect(try cli.run(["logout", "--client", Fixtures.appOne, "--account", Fixtures.alice.username]).status == 0)
    }

    @Test("token with two accounts and no --account is exit 64, as logout is, offering home account IDs")
    func ambiguousAccount() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        _ = try cli.save(Fixtures.alice, client: Fixtures.appOne)
        _ = try cli.save(Fixtures.bob, client: Fixtures.appOne)
        for command in [["token", "--client", Fixtures.appOne, "--scopes", "User.Read"], ["logout", "--client", Fixtures.appOne]] {
            let output = try cli.run(command)
            #expect(output.status == 64, "\(command): \(output.stderr)")
            #expect(output.stderr.contains(Fixtures.bob.homeAccountID), "\(command): \(output.stderr)")
        }
    }

    @Test("token --no-refresh with no usable access token but a refresh token points to refreshing, not to a new sign-in")
    func tokenHintsRefresh() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        let response = Fixtures.response(for: Fixtures.alice, scope: "User.Read", foci: "1", tag: "expired", expiresIn: 0)
        #expect(try cli.run(["save", "--client", Fixtures.appOne, "--authority", Self.authority, "--scopes", "User.Read"],
                            input: Fixtures.json(response)).status == 0)
        let output = try cli.run(["token", "--client", Fixtures.appOne, "--scopes", "User.Read", "--no-refresh"])
        #expect(output.status == 2)
        #expect(output.stderr.contains("Drop --no-refresh") && !output.stderr.contains("tokencache login --client"), "\(output.stderr)")
    }

    @Test("A filter of list that matches nothing is exit 2 naming the filter, not 'No accounts.'")
    func listFilterMatchesNothing() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        _ = try cli.save(Fixtures.alice, client: Fixtures.appOne)
        let output = try cli.run(["list", "--account", "nobody@example.com"])
        #expect(output.status == 2 && output.stderr.contains("nobody@example.com"), "\(output.stderr)")
        #expect(!output.stdout.contains("No accounts."))
        #expect(try cli.run(["list", "--account", Fixtures.alice.username]).status == 0)
    }

    @Test("save of empty input is exit 64 naming --response, and saves nothing")
    func saveEmptyInput() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        let output = try cli.run(["save", "--client", Fixtures.appOne, "--authority", Self.authority, "--scopes", "User.Read"], input: Data(" \n".utf8))
        #expect(output.status == 64, "\(output.stderr)")
        #expect(output.stderr.contains("empty") && output.stderr.contains("--response"), "\(output.stderr)")
    }

    @Test("A bad passphrase file is exit 64 before the cache file exists; doctor names the file as the key source")
    func passphraseFileCheckedAtOnce() throws {
        var cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        let missing = cli.dataHome.appendingPathComponent("no-such-passphrase").path
        for command in [["list"], ["doctor"]] {
            let output = try cli.run(command + ["--passphrase-file", missing])
            #expect(output.status == 64, "\(command): \(output.status) \(output.stderr)")
            #expect(output.stderr.contains(missing), "\(command): \(output.stderr)")
        }
        let open = cli.dataHome.appendingPathComponent("open-passphrase")
        try Data("correct horse\n".utf8).write(to: open)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: open.path)
        cli.environmentOverrides["TOKENCACHE_PASSPHRASE_FILE"] = open.path
        let readable = try cli.run(["list"])
        #expect(readable.status == 64 && readable.stderr.contains("chmod 600"), "\(readable.stderr)")
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: open.path)
        let doctor = try cli.run(["doctor", "--json"])
        #expect(doctor.stdout.contains("passphrase from \(open.path)"), "\(doctor.stdout)")
    }

    @Test("migrate refuses --to auto at parse time, and its help offers only secret-service, file (and sandbox for --to)")
    func migrateConcreteBackends() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        let output = try cli.run(["migrate", "--from", "file", "--to", "auto"], withGroup: false)
        #expect(output.status == 64 && output.stderr.contains("secret-service or file"), "\(output.stderr)")
        let help = try cli.run(["migrate", "--help"], withGroup: false)
        #expect(!help.stdout.contains("values: auto"), "\(help.stdout)")
        #expect(help.stdout.contains("The backend to move to: secret-service, file, or"), "\(help.stdout)")
        #expect(!help.stdout.contains("never changed or deleted"), "\(help.stdout)")
    }

    /// The group exported as MSAL JSON, parsed.
    static func exported(_ cli: CLI) throws -> [String: Any] {
        try #require(try cli.exported() as? [String: Any])
    }

    static func importing(_ document: [String: Any], into cli: CLI) throws -> ProcessOutput {
        let file = cli.dataHome.appendingPathComponent("import-\(UUID().uuidString).json")
        try JSONSerialization.data(withJSONObject: document).write(to: file)
        return try cli.run(["import", file.path])
    }

    @Test("An access token whose expires_on is past any integer (an imported cache) is listed, never a crash")
    func hugeExpiry() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        _ = try cli.save(Fixtures.alice, client: Fixtures.appOne)
        var document = try Self.exported(cli)
        var tokens = try #require(document["AccessToken"] as? [String: [String: Any]])
        for key in tokens.keys {
            tokens[key]?["expires_on"] = "9223372036854775807"
            tokens[key]?["extended_expires_on"] = "1e400"
        }
        document["AccessToken"] = tokens
        #expect(try cli.run(["remove", "--all", "--yes"]).status == 0)
        #expect(try Self.importing(document, into: cli).status == 0)
        for command in [["list"], ["list", "--json"], ["token", "--client", Fixtures.appOne, "--scopes", "User.Read"]] {
            let output = try cli.run(command)
            #expect(output.status == 0, "\(command): \(output.status) \(output.stderr)")
        }
    }

    @Test("import of an older copy keeps the group's newer refresh token and says so")
    func importKeepsNewer() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        _ = try cli.save(Fixtures.alice, client: Fixtures.appOne)
        var old = try Self.exported(cli)
        // The copy as it was a minute before the token rotated.
        var refreshTokens = try #require(old["RefreshToken"] as? [String: [String: Any]])
        for key in refreshTokens.keys {
            let written = Int(refreshTokens[key]?["last_modification_time"] as? String ?? "0") ?? 0
            refreshTokens[key]?["last_modification_time"] = String(written - 60)
            refreshTokens[key]?["secret"] = "rt-redeemed-long-ago"
        }
        old["RefreshToken"] = refreshTokens
        let current = try #require((try Self.exported(cli))["RefreshToken"] as? [String: [String: Any]]).values.compactMap { $0["secret"] as? String }
        let imported = try Self.importing(old, into: cli)
        #expect(imported.status == 0, "\(imported.stderr)")
        #expect(imported.stdout.contains("Kept 1 newer entry"), "\(imported.stdout)")
        let after = try #require((try Self.exported(cli))["RefreshToken"] as? [String: [String: Any]]).values.compactMap { $0["secret"] as? String }
        #expect(after == current, "the rotated-away refresh token came back: \(after)")
    }

    @Test("remove --all of a group that does not exist is exit 2 naming the groups present; nothing is created")
    func missingGroup() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        _ = try cli.save(Fixtures.alice, client: Fixtures.appOne)
        let typo = cli.group + "-typo"
        let result = try cli.run(["remove", "--all", "--yes", "--backend", "file", "--group", typo], withGroup: false)
        #expect(result.status == 2 && result.stderr.contains(cli.group), "\(result.status) \(result.stderr)")
        let lock = cli.dataHome.appendingPathComponent("tokencache/\(typo).lock").path
        #expect(!FileManager.default.fileExists(atPath: lock), "a lock file was created for the mistyped group")
    }

    @Test("list describes a client with app metadata in two environments the same way in every run")
    func listIsDeterministic() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        let cache = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../IntegrationTests/Fixtures/SDKCaches/dotnet-CacheFromTheFuture.json").standardizedFileURL
        #expect(try cli.run(["import", cache.path]).status == 0)
        let outputs = try (0..<6).map { _ in try cli.run(["list", "--json"]).stdout }
        #expect(Set(outputs).count == 1, "\(Set(outputs).count) different listings")
    }

    @Test("doctor's fix for an unsafe cache directory is the command to run, and the symlink hint keeps the data")
    func doctorFixesAreActions() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        _ = try cli.save(Fixtures.alice, client: Fixtures.appOne)
        let directory = cli.dataHome.appendingPathComponent("tokencache").path
        try FileManager.default.setAttributes([.posixPermissions: 0o777], ofItemAtPath: directory)
        defer { try? FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: directory) }
        let doctor = try cli.run(["doctor"])
        #expect(doctor.status == 1)
        #expect(doctor.stderr.contains("chmod 700 \(directory)"), "\(doctor.stderr)")
        try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: directory)

        // A cache file that is a link to the real one: the advice must not be to delete the link.
        let file = cli.dataHome.appendingPathComponent("tokencache/\(cli.group).tkc").path
        let moved = cli.dataHome.appendingPathComponent("moved.tkc").path
        try FileManager.default.moveItem(atPath: file, toPath: moved)
        try FileManager.default.createSymbolicLink(atPath: file, withDestinationPath: moved)
        let list = try cli.run(["list"])
        #expect(list.status == 1 && list.stderr.contains("in its place") && !list.stderr.contains("Remove the link"), "\(list.stderr)")
    }
}
