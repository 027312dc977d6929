import Foundation
import Testing
@testable import TokenCache
@testable import TokenCacheCore
import TokenCacheTestSupport
import TokenCacheTestIdentityProvider

/// Issue #59 ("The CLI, round 3"): errors a script can parse, one settings chain for every
/// command, and the smaller items, each through the built CLI.
@Suite("tokencache CLI: round 3 (#59)", .harness)
struct CLIRoundThreeTests {
    static var binary: String { TestEnvironment.binDirectory.appendingPathComponent("tokencache").path }

    /// Writes the config file `cli` reads.
    static func writeConfig(_ cli: CLI, _ text: String) throws {
        let directory = cli.dataHome.appendingPathComponent("config/tokencache")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try Data(text.utf8).write(to: directory.appendingPathComponent("config.json"))
    }

    /// Stderr as `--json` promises it on a failure: exactly one line, a JSON object with an error
    /// that has a code, a reason and a message, and no `error:`/`hint:` lines.
    static func expectOneJSONLine(_ output: ProcessOutput, _ what: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> [String: Any] {
        #expect(output.status != 0, "\(what): succeeded", sourceLocation: sourceLocation)
        #expect(output.stderr.hasSuffix("\n") && output.stderr.dropLast().split(separator: "\n", omittingEmptySubsequences: false).count == 1,
                "\(what): stderr is not one line: \(output.stderr)", sourceLocation: sourceLocation)
        let object = try JSONSerialization.jsonObject(with: Data(output.stderr.utf8)) as? [String: Any]
        let error = try #require(object?["error"] as? [String: Any], "\(what): \(output.stderr)", sourceLocation: sourceLocation)
        #expect(error["code"] is String && error["reason"] is String && (error["message"] as? String)?.isEmpty == false,
                "\(what): \(output.stderr)", sourceLocation: sourceLocation)
        #expect(error["exit_code"] as? Int == Int(output.status), "\(what): \(output.stderr)", sourceLocation: sourceLocation)
        return error
    }

    // MARK: Item 2: with --json, a failure is one JSON line on stderr

    @Test("With --json every command that takes it fails with exactly one JSON line on stderr (no error:/hint: lines), with or without --quiet")
    func jsonFailuresAreOneLine() throws {
        var cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        let failures: [(String, [String], Int32)] = [
            ("token, no account", ["token", "--client", Fixtures.appOne, "--scopes", "User.Read", "--json"], 2),
            ("token --quiet, no account", ["token", "--client", Fixtures.appOne, "--scopes", "User.Read", "--json", "--quiet"], 2),
            ("token, no client", ["token", "--scopes", "User.Read", "--json", "--quiet"], 64),
            ("token, bad arguments", ["token", "--client", Fixtures.appOne, "--scopes", "", "--json"], 64),
            ("token, unknown option", ["token", "--client", Fixtures.appOne, "--scopes", "User.Read", "--json", "--frobnicate"], 64),
            ("list, no match", ["list", "--account", "nobody@example.com", "--json"], 2),
            ("login, bad authority", ["login", "--client", Fixtures.appOne, "--authority", "not a url", "--scopes", "User.Read", "--json"], 64),
            ("signup, bad authority", ["signup", "--client", Fixtures.appOne, "--authority", "not a url", "--scopes", "User.Read",
                                       "--username", "new@example.com", "--json"], 64),
            ("reset-password, bad authority", ["reset-password", "--client", Fixtures.appOne, "--authority", "not a url", "--scopes", "User.Read",
                                               "--username", "new@example.com", "--new-password-file", "/nonexistent", "--json"], 64),
            ("groups, bad group", ["groups", "--group", "not a group", "--json"], 64),
            ("agent --list-requests, no agent", ["agent", "--list-requests", "--json"], 64),
            ("broker --list-requests, no broker", ["broker", "--list-requests", "--json"], 1),
        ]
        cli.environmentOverrides["TOKENCACHE_AGENT_SOCK"] = ""
        for (what, arguments, status) in failures {
            let output = try cli.run(arguments, withGroup: !["groups", "agent", "broker"].contains(arguments[0]))
            _ = try Self.expectOneJSONLine(output, what)
            #expect(output.status == status, "\(what): \(output.status) \(output.stderr)")
            #expect(output.stdout.isEmpty, "\(what): \(output.stdout)")
        }
        // A config file that cannot be read fails every command the same way; stores and doctor too.
        try Self.writeConfig(cli, "{")
        for arguments in [["stores", "--json"], ["doctor", "--json"], ["list", "--json"],
                          ["token", "--client", Fixtures.appOne, "--scopes", "User.Read", "--json", "--quiet"]] {
            let output = try cli.run(arguments, withGroup: false)
            let error = try Self.expectOneJSONLine(output, arguments.joined(separator: " "))
            #expect(output.status == 64 && error["code"] as? String == "invalidArgument", "\(arguments): \(output.stderr)")
        }
        // Without --json the same failure is said for people.
        let people = try cli.run(["list"], withGroup: false)
        #expect(people.status == 64 && people.stderr.hasPrefix("error: ") && people.stderr.contains("\nhint: "), "\(people.stderr)")
    }

    @Test("doctor --json for a backend that cannot work: the report on stdout, one JSON error line on stderr (exit 1)")
    func doctorJSONFailure() throws {
        var cli = try CLI(backend: "secret-service")
        defer { cli.cleanUp() }
        cli.environmentOverrides["DBUS_SESSION_BUS_ADDRESS"] = "unix:path=/nonexistent/bus"
        let output = try cli.run(["doctor", "--json"])
        let error = try Self.expectOneJSONLine(output, "doctor")
        #expect(output.status == 1 && (error["message"] as? String)?.contains("cannot work here") == true, "\(output.stderr)")
        #expect((try? JSONSerialization.jsonObject(with: Data(output.stdout.utf8))) is [String: Any], "\(output.stdout)")
    }

    // MARK: Item 3: one settings chain for every command

    @Test("login, logout, photo, save, signup and reset-password take client, account and authority from TOKENCACHE_* and the config file, as token does; the option wins")
    func settingsChainEveryCommand() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        let authority = Fixtures.authority().url.absoluteString
        var chained = cli
        chained.environmentOverrides["TOKENCACHE_CLIENT_ID"] = Fixtures.appOne
        chained.environmentOverrides["TOKENCACHE_AUTHORITY"] = authority
        // save: client and authority from the variables.
        let response = Fixtures.response(for: Fixtures.alice, scope: "User.Read", foci: nil, tag: Fixtures.appOne)
        let saved = try chained.run(["save", "--scopes", "User.Read"], input: Fixtures.json(response))
        #expect(saved.status == 0, "\(saved.stderr)")
        // logout: the client from the variable, the account from the config file.
        try Self.writeConfig(cli, #"{"account": "\#(Fixtures.alice.username)"}"#)
        let logout = try chained.run(["logout", "--dry-run"])
        #expect(logout.status == 0 && logout.stdout.contains("Would sign client \(Fixtures.appOne) out of \(Fixtures.alice.username)"), "\(logout.stdout) \(logout.stderr)")
        // The option wins over the variable: no such client is signed in (exit 2).
        let other = try chained.run(["logout", "--dry-run", "--client", Fixtures.appTwo])
        #expect(other.status == 2, "\(other.stdout) \(other.stderr)")
        // photo: client, authority and account from the config file; an account that is not there is not found (2).
        try Self.writeConfig(cli, #"{"client": "\#(Fixtures.appOne)", "authority": "\#(authority)", "account": "nobody@example.com"}"#)
        let photo = try cli.run(["photo", "--output", cli.dataHome.appendingPathComponent("photo.jpg").path])
        #expect(photo.status == 2 && photo.stderr.contains("No account of client \(Fixtures.appOne) matches 'nobody@example.com'"), "\(photo.stderr)")
        // login, signup and reset-password read the variables too: a bad one is named (64), not a missing option.
        var bad = cli
        bad.environmentOverrides["TOKENCACHE_AUTHORITY"] = "http://example.com/x"
        let login = try bad.run(["login", "--scopes", "User.Read", "--device-code"])
        #expect(login.status == 64 && login.stderr.contains("TOKENCACHE_AUTHORITY"), "\(login.stderr)")
        try Self.writeConfig(cli, "{}")
        for arguments in [["login", "--scopes", "User.Read"], ["photo", "--output", "/dev/null"], ["logout"], ["save", "--scopes", "User.Read"],
                          ["signup", "--scopes", "User.Read", "--username", "new@example.com"]] {
            let missing = try cli.run(arguments, input: Data())
            #expect(missing.status == 64 && missing.stderr.contains("hint: Pass --client ID, or set TOKENCACHE_CLIENT_ID or \"client\" in the config file"),
                    "\(arguments[0]): \(missing.stderr)")
        }
        var clientOnly = cli
        clientOnly.environmentOverrides["TOKENCACHE_CLIENT_ID"] = Fixtures.appOne
        let noAuthority = try clientOnly.run(["reset-password", "--scopes", "User.Read", "--username", "u@example.com", "--new-password-file", "/nonexistent"])
        #expect(noAuthority.status == 64 && noAuthority.stderr.contains("TOKENCACHE_AUTHORITY"), "\(noAuthority.stderr)")
    }

    // MARK: Item 11: the smaller ones

    @Test("tokencache with no arguments prints a short usage naming every command on stderr, exit 64")
    func noArguments() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        let output = try runProcess(Self.binary, [], environment: cli.environment)
        #expect(output.status == 64 && output.stdout.isEmpty, "\(output.status) \(output.stdout)")
        #expect(output.stderr.hasPrefix("usage: tokencache <command>"), "\(output.stderr)")
        #expect(output.stderr.split(separator: "\n").count < 20, "not short: \(output.stderr)")
        for name in ["login", "token", "list", "remove", "logout", "photo", "save", "import", "export", "migrate", "agent", "broker",
                     "doctor", "unlock", "lock", "groups", "stores", "signup", "reset-password"] {
            #expect(output.stderr.contains(name), "\(name) missing: \(output.stderr)")
        }
    }

    @Test("--scopes A --scopes B asks for both (save stores both; token needs both)")
    func scopesAccumulate() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        var response = Fixtures.response(for: Fixtures.alice, scope: "User.Read", foci: nil, tag: Fixtures.appOne)
        response["scope"] = nil
        let saved = try cli.run(["save", "--client", Fixtures.appOne, "--authority", Fixtures.authority().url.absoluteString,
                                 "--scopes", "User.Read", "--scopes", "Mail.Read"], input: Fixtures.json(response))
        #expect(saved.status == 0 && saved.stdout.contains("scopes Mail.Read User.Read"), "\(saved.stdout) \(saved.stderr)")
        let token = try cli.run(["token", "--client", Fixtures.appOne, "--scopes", "Mail.Read", "--scopes", "User.Read", "--no-refresh"])
        #expect(token.status == 0, "\(token.stderr)")
    }

    @Test("ArgumentParser's errors start with error:, as the CLI's own do (one prefix)")
    func oneErrorPrefix() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        for arguments in [["remove"], ["list", "--frobnicate"], ["token", "--scopes", ""]] {
            let output = try cli.run(arguments)
            #expect(output.status == 64 && output.stderr.hasPrefix("error: ") && !output.stderr.contains("Error:"), "\(arguments): \(output.stderr)")
        }
    }

    /// Runs the CLI on a pseudo-terminal, typing `answer` once `prompt` shows; the whole output
    /// and the exit status. Waits on the program's own output, never on time.
    @Test("Answering n to a removal prompt (on a terminal) says Nothing removed. and exits 1, without error:; nothing is removed")
    func answerNo() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        _ = try cli.save(Fixtures.alice, client: Fixtures.appOne)
        let (status, output) = try cli.onTerminal(["remove", "--account", Fixtures.alice.username, "--backend", "file", "--group", cli.group],
                                                  answering: [("[y/N]", "n")])
        #expect(status == 1, "\(output)")
        #expect(output.contains("Nothing removed.") && !output.contains("error:"), "\(output)")
        #expect(try cli.run(["list"]).stdout.contains(Fixtures.alice.username))
    }

    @Test("list of a group whose encrypted file does not exist does not say it was read from it")
    func listWithoutFile() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        let output = try cli.run(["list", "--backend", "file"], withGroup: false)
        #expect(output.status == 0, "\(output.stderr)")
        #expect(!output.stdout.contains("Read from") && output.stdout.contains("No file yet: encrypted file"), "\(output.stdout)")
        _ = try cli.run(["save", "--client", Fixtures.appOne, "--authority", Fixtures.authority().url.absoluteString, "--scopes", "User.Read",
                         "--backend", "file"], input: Fixtures.json(Fixtures.response(for: Fixtures.alice, tag: "x")), withGroup: false)
        let after = try cli.run(["list", "--backend", "file"], withGroup: false)
        #expect(after.stdout.contains("Read from encrypted file"), "\(after.stdout)")
        _ = try cli.run(["remove", "--all", "--yes", "--backend", "file"], withGroup: false)
    }

    @Test("A refresh without --authority goes to the loopback provider's own port and scheme, where the account was saved from (not https on 443); list shows the host as MSAL keys it")
    func refreshKeepsPort() async throws {
        let idp = try FakeIdentityProvider()
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        try await CLITokenRefreshTests.signInExpired(cli: cli, idp: idp, refreshToken: "rt-port")
        let token = try cli.run(["token", "--client", Fixtures.appOne, "--scopes", "User.Read"])
        #expect(token.status == 0 && token.stdout.hasPrefix("at-issued-"), "\(token.stdout) \(token.stderr)")
        #expect(try await idp.stats().grants.count == 1)
        let list = try cli.run(["list", "--json"])
        #expect(list.stdout.contains(idp.host) && !list.stdout.contains("\(idp.host):\(idp.port)"), "\(list.stdout)")
    }

    @Test("photo of an account at a host of no Microsoft cloud names the account's host, not the --authority's")
    func photoNamesAccountHost() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        let saved = try cli.run(["save", "--client", Fixtures.appOne, "--authority", "https://login.example.org/\(Fixtures.tenantA)", "--scopes", "User.Read"],
                                input: Fixtures.json(Fixtures.response(for: Fixtures.alice, tag: "photo")))
        try #require(saved.status == 0, "\(saved.stderr)")
        let photo = try cli.run(["photo", "--client", Fixtures.appOne, "--authority", "https://login.microsoftonline.com/organizations",
                                 "--output", cli.dataHome.appendingPathComponent("p.jpg").path])
        #expect(photo.status != 0 && photo.stderr.contains("Accounts of login.example.org") && !photo.stderr.contains("Accounts of login.microsoftonline.com"),
                "\(photo.stderr)")
    }

    @Test("doctor on a headless machine (no session bus), where the encrypted file is the normal backend, warns of neither the bus nor the Secret Service; the selection says why")
    func doctorHeadless() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        var environment = cli.environment
        environment["DBUS_SESSION_BUS_ADDRESS"] = nil
        for backend in [["--backend", "file"], []] {
            let output = try runProcess(Self.binary, ["doctor", "--json", "--group", cli.group] + backend, environment: environment)
            #expect(output.status == 0, "\(backend): \(output.stderr)")
            let report = try #require(try JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [String: Any])
            let checks = try #require(report["checks"] as? [[String: Any]], "\(output.stdout)")
            let named = checks.filter { ["session bus", "Secret Service", "libgcrypt"].contains($0["name"] as? String ?? "") }
            #expect(named.contains { $0["name"] as? String == "session bus" }, "\(output.stdout)")
            #expect(named.allSatisfy { $0["status"] as? String == "info" }, "\(backend): \(named)")
            #expect((report["selected"] as? String)?.contains("encrypted file") == true || (report["selected"] as? String)?.contains(".tkc") == true,
                    "\(output.stdout)")
        }
    }

    // MARK: Item 8: --help

    @Test("--help is short and by task; each command's help has its own options, then the storage options once and short; examples are never wrapped mid-command at 80 columns; usage says options are optional; --quiet's help does not promise --verbose")
    func helpShape() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        var environment = cli.environment
        environment["COLUMNS"] = "80"
        let root = try runProcess(Self.binary, ["--help"], environment: environment).stdout
        let rootLines = root.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(rootLines.count < 100, "\(rootLines.count) lines")
        let firstGroup = try #require(rootLines.firstIndex { $0.hasSuffix("SUBCOMMANDS:") }, "\(root)")
        #expect(firstGroup < 25 && rootLines[firstGroup] == "SIGN-IN AND TOKEN SUBCOMMANDS:", "\(root)")
        #expect(!root.contains("Every subcommand"), "\(root)")
        let commands = rootLines.drop { !$0.hasSuffix("SUBCOMMANDS:") }.filter { $0.hasPrefix("  ") && !$0.hasPrefix("   ") }
            .map { String($0.split(separator: " ").first ?? "") }.filter { $0 != "help" }
        #expect(commands.prefix(4) == ["login", "token", "logout", "photo"] && commands.count >= 20, "\(commands)")
        for command in commands {
            let help = try runProcess(Self.binary, ["help", command], environment: environment).stdout
            let lines = help.split(separator: "\n", omittingEmptySubsequences: false)
            let usage = lines.first { $0.hasPrefix("USAGE: ") } ?? ""
            #expect(!usage.hasSuffix(" <options>"), "\(command): \(usage)")
            if let storage = lines.firstIndex(of: "STORAGE OPTIONS:") {
                #expect(lines.filter { $0 == "STORAGE OPTIONS:" }.count == 1, "\(command)")
                let own = lines.firstIndex(of: "OPTIONS:")
                #expect(own.map { $0 < storage } ?? true, "\(command): storage options before its own")
                let block = lines[(storage + 1)...].prefix { !$0.isEmpty }
                #expect(block.count <= 30, "\(command): \(block.count) lines of storage options")
            }
            if let examples = lines.firstIndex(where: { $0 == "Examples:" }) {
                for line in lines[(examples + 1)...].prefix(while: { !$0.isEmpty }) {
                    #expect(line.hasPrefix("  "), "\(command): an example wrapped at 80 columns: \(line)")
                }
            }
        }
        let photo = try runProcess(Self.binary, ["photo", "--help"], environment: environment).stdout
        let output = try #require(photo.range(of: "--output"), "\(photo)")
        let backend = try #require(photo.range(of: "--backend"), "\(photo)")
        #expect(output.lowerBound < backend.lowerBound, "\(photo)")
        #expect(try runProcess(Self.binary, ["list", "--help"], environment: environment).stdout.contains("USAGE: tokencache list [<options>]"))
        let token = try runProcess(Self.binary, ["token", "--help"], environment: environment).stdout
        #expect(!token.contains("even with --verbose"), "\(token)")
    }

    // MARK: Item 4: migrate --to-key-source and --dry-run

    @Test("migrate --to-key-source: the source in use is nothing to do; to a passphrase off a terminal it asks for the new one by TOKENCACHE_PASSPHRASE_FILE (migrate has no --passphrase-file); --dry-run changes nothing")
    func migrateKeySource() throws {
        var cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        _ = try cli.save(Fixtures.alice, client: Fixtures.appOne)
        let file = cli.dataHome.appendingPathComponent("tokencache/\(cli.group).tkc")
        let before = try Data(contentsOf: file)
        let same = try cli.run(["migrate", "--to-key-source", "key-file", "--group", cli.group])
        #expect(same.status == 0 && same.stdout.hasPrefix("Nothing to do: ") && !same.stdout.contains("Re-encrypted 0"), "\(same.stdout) \(same.stderr)")
        let noPassphrase = try cli.run(["migrate", "--to-key-source", "passphrase", "--group", cli.group])
        #expect(noPassphrase.status == 64, "\(noPassphrase.stderr)")
        #expect(noPassphrase.stderr.contains("new passphrase") && !noPassphrase.stderr.contains("was created with a passphrase"), "\(noPassphrase.stderr)")
        #expect(noPassphrase.stderr.contains("TOKENCACHE_PASSPHRASE_FILE") && !noPassphrase.stderr.contains("--passphrase-file"), "\(noPassphrase.stderr)")
        let dry = try cli.run(["migrate", "--to-key-source", "passphrase", "--group", cli.group, "--dry-run"])
        #expect(dry.status == 0 && dry.stdout.hasPrefix("Would re-encrypt") && dry.stdout.contains("nothing was changed"), "\(dry.stdout) \(dry.stderr)")
        #expect(try Data(contentsOf: file) == before)
        cli.environmentOverrides["DBUS_SESSION_BUS_ADDRESS"] = nil
        if TestEnvironment.runsSecretServiceTests {
            let move = try cli.run(["migrate", "--from", "file", "--to", "secret-service", "--group", cli.group, "--dry-run"])
            #expect(move.status == 0 && move.stdout.hasPrefix("Would move ") && move.stdout.contains("nothing was changed"), "\(move.stdout) \(move.stderr)")
            #expect(try Data(contentsOf: file) == before)
            #expect(try CLI(cli, backend: "secret-service").run(["list", "--json"]).stdout.contains(Fixtures.alice.username) == false)
        }
    }

    // MARK: Item 5: hints that lead somewhere

    @Test("photo with two accounts says to pick one with --account (not --authority); token's suggested login keeps --group")
    func hintsLeadOut() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        _ = try cli.save(Fixtures.alice, client: Fixtures.appOne)
        _ = try cli.save(Fixtures.bob, client: Fixtures.appOne)
        let photo = try cli.run(["photo", "--client", Fixtures.appOne, "--authority", Fixtures.authority().url.absoluteString,
                                 "--output", cli.dataHome.appendingPathComponent("p.jpg").path])
        #expect(photo.status == 64 && photo.stderr.contains("hint: Pick one with --account"), "\(photo.stderr)")
        #expect(!photo.stderr.contains("Add --authority"), "\(photo.stderr)")
        let empty = try CLI(backend: "file")
        defer { empty.cleanUp() }
        let token = try empty.run(["token", "--client", Fixtures.appTwo, "--scopes", "User.Read"])
        #expect(token.status == 2 && token.stderr.contains("tokencache login --client \(Fixtures.appTwo)")
                && token.stderr.contains("--group \(empty.group)`"), "\(token.stderr)")
    }

    // MARK: Item 9: the config file

    @Test("Config keys are snake_case; the other spelling is read with one note, both at once is refused; an unknown key gets the key meant")
    func configKeySpelling() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        let tcti = "swtpm:host=127.0.0.1,port=2321"
        try Self.writeConfig(cli, #"{"tpm-tcti": "\#(tcti)", "key_source": "key-file"}"#)
        let doctor = try cli.run(["doctor", "--json"], withGroup: false)
        #expect(doctor.status == 0, "\(doctor.stderr)")
        let settings = try #require((try JSONSerialization.jsonObject(with: Data(doctor.stdout.utf8)) as? [String: Any])?["settings"] as? [String: [String: String]])
        #expect(settings["tpm_tcti"]?["value"] == tcti && settings["key_source"]?["value"] == "key-file", "\(settings)")
        let notes = doctor.stderr.components(separatedBy: "\n").filter { $0.contains("spells \"tpm-tcti\"") }
        #expect(notes.count == 1 && notes[0].contains("read as \"tpm_tcti\""), "\(doctor.stderr)")

        try Self.writeConfig(cli, #"{"tpm-tcti": "\#(tcti)", "tpm_tcti": "device:/dev/tpmrm0"}"#)
        let both = try cli.run(["list"])
        #expect(both.status == 64 && both.stderr.contains("sets both \"tpm-tcti\" and \"tpm_tcti\"")
                && both.stderr.contains("Keep \"tpm_tcti\""), "\(both.stderr)")

        try Self.writeConfig(cli, #"{"grpah_endpoint": "https://graph.microsoft.com"}"#)
        let unknown = try cli.run(["list"])
        #expect(unknown.status == 64 && unknown.stderr.contains("unknown key \"grpah_endpoint\"")
                && unknown.stderr.contains("Did you mean \"graph_endpoint\"?"), "\(unknown.stderr)")
    }

    @Test("A config file with a trailing comma is refused naming it and its line and column; other bad JSON gives line and column")
    func configSyntaxPosition() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        try Self.writeConfig(cli, "{\n  \"backend\": \"file\",\n  \"group\": \"com.example.app\",\n}\n")
        let comma = try cli.run(["list"])
        #expect(comma.status == 64 && comma.stderr.contains("trailing comma at line 3, column 29") && comma.stderr.contains("hint: Remove that comma"),
                "\(comma.stderr)")
        try Self.writeConfig(cli, "{\n  \"backend\": file\n}\n")
        let bare = try cli.run(["list"])
        #expect(bare.status == 64 && bare.stderr.contains("is not valid JSON") && bare.stderr.contains("at line 2, column 14"), "\(bare.stderr)")
        try Self.writeConfig(cli, "[]")
        let array = try cli.run(["list"])
        #expect(array.status == 64 && array.stderr.contains("not an object"), "\(array.stderr)")
    }

    @Test("The man page names every config key and TOKENCACHE_GRAPH_ENDPOINT and TOKENCACHE_AGENT_UID")
    func manPageNamesSettings() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardizedFileURL
        let sections = try String(contentsOf: root.appendingPathComponent("docs/man/tokencache.1.sections"), encoding: .utf8)
        let settings = try String(contentsOf: root.appendingPathComponent("Sources/TokenCacheCLI/Settings.swift"), encoding: .utf8)
        let keysLine = try #require(settings.components(separatedBy: "static let keys = [").dropFirst().first?.components(separatedBy: "]").first)
        let keys = keysLine.components(separatedBy: "\"").enumerated().filter { $0.offset % 2 == 1 }.map(\.element)
        #expect(keys.count >= 12, "\(keys)")
        for key in keys { #expect(sections.contains(".Qq \(key)"), "the man page's FILES does not name \"\(key)\"") }
        for variable in ["TOKENCACHE_GRAPH_ENDPOINT", "TOKENCACHE_AGENT_UID"] { #expect(sections.contains(variable)) }
    }

    // MARK: Item 7: passphrases

    @Test("A new passphrase is asked twice on a terminal: a weak one and a mismatch are refused with the reason, three tries in all; the file is created with the one accepted")
    func newPassphraseTypedTwice() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        let strong = "correct horse battery staple"
        let response = cli.dataHome.appendingPathComponent("response.json")
        try Fixtures.json(Fixtures.response(for: Fixtures.alice, tag: Fixtures.appOne)).write(to: response)
        let save = ["save", "--client", Fixtures.appOne, "--authority", Fixtures.authority().url.absoluteString, "--scopes", "User.Read",
                    "--response", response.path, "--backend", "file", "--group", cli.group, "--key-source", "passphrase"]
        let (status, output) = try cli.onTerminal(save, answering: [
            ("New passphrase", "abc"), ("New passphrase", strong), ("Type it again", strong + "!"),
            ("New passphrase", strong), ("Type it again", strong)])
        #expect(status == 0, "\(output)")
        #expect(output.contains("too weak: it has 3 characters, and at least 12 are needed") && output.contains("the two did not match"), "\(output)")
        #expect(!output.contains(strong), "the passphrase was echoed")
        let folder = cli.dataHome.appendingPathComponent("tokencache")
        #expect(try EncryptedFileBackend(directory: folder).storedKeyKind(of: CacheGroup(cli.group)) == .passphrase)
        let passphraseFile = cli.dataHome.appendingPathComponent("passphrase")
        try Data((strong + "\n").utf8).write(to: passphraseFile)
        chmod(passphraseFile.path, 0o600)
        let listed = try cli.run(["list", "--passphrase-file", passphraseFile.path])
        #expect(listed.status == 0 && listed.stdout.contains(Fixtures.alice.username), "\(listed.stdout)\(listed.stderr)")

        // Three weak tries: nothing is created.
        let other = try CLI(backend: "file")
        defer { other.cleanUp() }
        let refused = try other.onTerminal(save.map { $0 == cli.group ? other.group : $0 },
                                           answering: [("New passphrase", "abc"), ("New passphrase", "abcabcabcabc"), ("New passphrase", "short")])
        #expect(refused.status == 64 && refused.output.contains("No new passphrase was set after 3 tries"), "\(refused.output)")
        #expect(!FileManager.default.fileExists(atPath: other.dataHome.appendingPathComponent("tokencache/\(other.group).tkc").path))
    }

    @Test("A weak passphrase in --passphrase-file creates no file (exit 64, the reason and nothing written); a strong one does, and reading a file that does not exist is not refused")
    func weakPassphraseFileCreatesNothing() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        let passphraseFile = cli.dataHome.appendingPathComponent("passphrase")
        func write(_ passphrase: String) throws {
            try Data((passphrase + "\n").utf8).write(to: passphraseFile)
            chmod(passphraseFile.path, 0o600)
        }
        let response = Fixtures.json(Fixtures.response(for: Fixtures.alice, tag: Fixtures.appOne))
        let save = ["save", "--client", Fixtures.appOne, "--authority", Fixtures.authority().url.absoluteString, "--scopes", "User.Read",
                    "--passphrase-file", passphraseFile.path]
        let cacheFile = cli.dataHome.appendingPathComponent("tokencache/\(cli.group).tkc")
        try write("abc")
        let listed = try cli.run(["list", "--passphrase-file", passphraseFile.path])
        #expect(!listed.stderr.contains("too weak"), "a read creates nothing, so nothing is refused: \(listed.stderr)")
        let weak = try cli.run(save, input: response)
        #expect(weak.status == 64 && weak.stderr.contains("too weak to create") && weak.stderr.contains("at least 12 are needed"), "\(weak.stderr)")
        #expect(!FileManager.default.fileExists(atPath: cacheFile.path))
        try write("correct horse battery staple")
        let strong = try cli.run(save, input: response)
        #expect(strong.status == 0 && FileManager.default.fileExists(atPath: cacheFile.path), "\(strong.stderr)")
    }

    @Test("A mistyped passphrase for an existing file can be typed again on a terminal, three tries in all; then exit 1, the file unchanged")
    func passphraseRetries() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        let strong = "correct horse battery staple"
        let passphraseFile = cli.dataHome.appendingPathComponent("passphrase")
        try Data((strong + "\n").utf8).write(to: passphraseFile)
        chmod(passphraseFile.path, 0o600)
        let response = Fixtures.json(Fixtures.response(for: Fixtures.alice, tag: Fixtures.appOne))
        let saved = try cli.run(["save", "--client", Fixtures.appOne, "--authority", Fixtures.authority().url.absoluteString, "--scopes", "User.Read",
                                 "--passphrase-file", passphraseFile.path], input: response)
        #expect(saved.status == 0, "\(saved.stderr)")
        let list = ["list", "--backend", "file", "--group", cli.group]
        let second = try cli.onTerminal(list, answering: [("Passphrase for ", "wrong one"), ("Passphrase for ", strong)])
        #expect(second.status == 0 && second.output.contains(Fixtures.alice.username), "\(second.output)")
        #expect(second.output.contains("try again") && !second.output.contains(strong), "\(second.output)")
        let file = cli.dataHome.appendingPathComponent("tokencache/\(cli.group).tkc")
        let before = try Data(contentsOf: file)
        let failed = try cli.onTerminal(list, answering: [("Passphrase for ", "one"), ("Passphrase for ", "two"), ("Passphrase for ", "three")])
        #expect(failed.status == 1 && failed.output.contains("None of the 3 passphrases typed"), "\(failed.output)")
        #expect(failed.output.components(separatedBy: "Passphrase for ").count == 4, "\(failed.output)")
        #expect(try Data(contentsOf: file) == before)
    }
}
