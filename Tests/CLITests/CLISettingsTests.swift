import Foundation
import Testing
@testable import TokenCache
import TokenCacheTestSupport

/// Settings from the environment and the config file, the fallback notice, and passphrase-protected
/// encrypted files (#27 items 1 and 2). All on the encrypted file: nothing here needs a keyring.
@Suite("tokencache CLI: settings, config file and passphrase files", .harness)
struct CLISettingsTests {
    static let passphrase = "correct horse battery staple"  // scripts/check-no-secrets.sh looks for it

    /// A CLI on the encrypted file, its config file's path, and a group that is not the test's own.
    func cli() throws -> (cli: CLI, configFile: URL) {
        let cli = try CLI(backend: "file")
        let folder = cli.dataHome.appendingPathComponent("config/tokencache")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return (cli, folder.appendingPathComponent("config.json"))
    }

    /// A passphrase file in the test's folder with `mode`.
    func passphraseFile(_ cli: CLI, _ text: String = Self.passphrase + "\n", mode: Int = 0o600, name: String = "passphrase") throws -> String {
        let url = cli.dataHome.appendingPathComponent(name)
        try Data(text.utf8).write(to: url)
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: url.path)
        return url.path
    }

    func save(_ cli: CLI, _ extra: [String], withGroup: Bool = true) throws -> ProcessOutput {
        let response = Fixtures.json(Fixtures.response(for: Fixtures.alice, scope: "User.Read", foci: "1", tag: "settings"))
        return try cli.run(["save", "--client", Fixtures.appOne, "--authority", Fixtures.authority().url.absoluteString,
                            "--scopes", "User.Read"] + extra, input: response, withGroup: withGroup)
    }

    func doctorSettings(_ cli: CLI, _ arguments: [String] = []) throws -> [String: [String: String]] {
        let output = try cli.run(["doctor", "--json"] + arguments, withGroup: false)
        #expect(output.status == 0, "\(output.stderr)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [String: Any], "\(output.stdout)")
        return try #require(json["settings"] as? [String: [String: String]], "\(output.stdout)")
    }

    // MARK: Item 1: settings

    @Test("Backend, group and collection: an option beats TOKENCACHE_*, which beats the config file, which beats the default; doctor says where each came from")
    func precedence() throws {
        var (cli, configFile) = try cli()
        defer { cli.cleanUp() }
        let configured = "org.swift-tokencache.from-file", fromEnvironment = "org.swift-tokencache.from-env"

        // Nothing set: defaults (the backend from the environment, so no keyring is touched).
        cli.environmentOverrides = ["TOKENCACHE_BACKEND": "file"]
        var settings = try doctorSettings(cli)
        #expect(settings["backend"] == ["value": "file", "source": "TOKENCACHE_BACKEND"])
        #expect(settings["group"] == ["value": CacheGroup.universalStorage.name, "source": "default"])
        #expect(settings["collection"] == ["value": "default", "source": "default"])

        // The file.
        cli.environmentOverrides = [:]
        try Data(#"{"backend": "file", "group": "\#(configured)", "collection": "session"}"#.utf8).write(to: configFile)
        settings = try doctorSettings(cli)
        #expect(settings["backend"] == ["value": "file", "source": configFile.path])
        #expect(settings["group"] == ["value": configured, "source": configFile.path])
        #expect(settings["collection"] == ["value": "session", "source": configFile.path])

        // The environment over the file.
        cli.environmentOverrides = ["TOKENCACHE_GROUP": fromEnvironment, "TOKENCACHE_COLLECTION": "Work"]
        settings = try doctorSettings(cli)
        #expect(settings["group"] == ["value": fromEnvironment, "source": "TOKENCACHE_GROUP"])
        #expect(settings["collection"] == ["value": "Work", "source": "TOKENCACHE_COLLECTION"])
        #expect(settings["backend"]?["source"] == configFile.path)

        // The option over both.
        settings = try doctorSettings(cli, ["--group", cli.group, "--collection", "default"])
        #expect(settings["group"] == ["value": cli.group, "source": "--group"])
        #expect(settings["collection"] == ["value": "default", "source": "--collection"])

        // The text report says the same, and the settings are what commands use.
        let text = try cli.run(["doctor"], withGroup: false)
        #expect(text.status == 0, "\(text.stderr)")
        #expect(text.stdout.contains("TOKENCACHE_GROUP") && text.stdout.contains("config file \(configFile.path)"), "\(text.stdout)")
        let saved = try save(cli, [], withGroup: false)
        #expect(saved.status == 0, "\(saved.stderr)")
        let file = cli.dataHome.appendingPathComponent("tokencache/\(fromEnvironment).tkc")
        #expect(FileManager.default.fileExists(atPath: file.path), "save did not use TOKENCACHE_GROUP's group")
        let listed = try cli.run(["list", "--group", fromEnvironment], withGroup: false)
        #expect(listed.status == 0 && listed.stdout.contains(Fixtures.alice.username), "\(listed.stderr)")
    }

    @Test("An unknown key or a bad value in the config file, or a bad TOKENCACHE_BACKEND, exits 64 naming the file or variable, the key and what is allowed")
    func badSettings() throws {
        var (cli, configFile) = try cli()
        defer { cli.cleanUp() }
        try Data(#"{"backend": "file", "colour": "blue"}"#.utf8).write(to: configFile)
        let unknown = try cli.run(["list"])
        #expect(unknown.status == 64)
        #expect(unknown.stderr.hasPrefix("error: The config file \(configFile.path) has an unknown key \"colour\"."), "\(unknown.stderr)")
        #expect(unknown.stderr.contains("allowed keys: backend, group, collection"))

        try Data(#"{"backend": "keyring"}"#.utf8).write(to: configFile)
        let badValue = try cli.run(["list"])
        #expect(badValue.status == 64)
        #expect(badValue.stderr.contains(configFile.path) && badValue.stderr.contains("\"backend\"") && badValue.stderr.contains("'keyring'"),
                "\(badValue.stderr)")
        #expect(badValue.stderr.contains("auto, secret-service, file"))

        try Data(#"{"group": "nodots"}"#.utf8).write(to: configFile)
        let badGroup = try cli.run(["doctor"], withGroup: false)
        #expect(badGroup.status == 64 && badGroup.stderr.contains("\"group\"") && badGroup.stderr.contains("reverse-DNS"), "\(badGroup.stderr)")

        try Data("backend = \"file\"".utf8).write(to: configFile)
        let notJSON = try cli.run(["list"])
        #expect(notJSON.status == 64 && notJSON.stderr.contains("is not valid JSON") && notJSON.stderr.contains("at line 1, column 1"), "\(notJSON.stderr)")

        try FileManager.default.removeItem(at: configFile)
        cli.environmentOverrides = ["TOKENCACHE_BACKEND": "keyring"]
        let badVariable = try cli.run(["list"], withGroup: false)
        #expect(badVariable.status == 64)
        #expect(badVariable.stderr.hasPrefix("error: TOKENCACHE_BACKEND is 'keyring'"), "\(badVariable.stderr)")
        #expect(badVariable.stderr.contains("auto, secret-service, file"))
    }

    @Test("When auto falls back to the encrypted file, commands stay quiet; --verbose says so in one plain line, and doctor explains")
    func fallbackNotice() throws {
        var cli = try CLI(backend: "auto")
        defer { cli.cleanUp() }
        // No libgcrypt: auto falls back whatever the session offers.
        cli.environmentOverrides = ["TOKENCACHE_LIBGCRYPT_PATH": "/nonexistent/libgcrypt.so.20"]
        // The default group: an empty one is "No accounts.", not an unknown group (exit 2).
        let quiet = try cli.run(["list"], withGroup: false)
        #expect(quiet.status == 0, "\(quiet.stderr)")
        // No file yet: said as not created, not read (#59 item 11).
        #expect(quiet.stdout.contains("encrypted file"))
        #expect(quiet.stderr.isEmpty, "\(quiet.stderr)")

        let verbose = try cli.run(["list", "--verbose"], withGroup: false)
        #expect(verbose.status == 0, "\(verbose.stderr)")
        let notices = verbose.stderr.split(separator: "\n").filter { $0.contains("falls back to the encrypted file") }
        #expect(notices.count == 1, "\(verbose.stderr)")
        #expect(notices.first?.hasPrefix("tokencache falls back to the encrypted file ") == true, "a log record, not a sentence: \(verbose.stderr)")
        #expect(notices.first?.contains("libgcrypt, which encrypts secrets on their way from the Secret Service, could not be loaded") == true)

        let doctor = try cli.run(["doctor"])
        #expect(doctor.status == 0, "\(doctor.stderr)")
        #expect(doctor.stdout.contains("using the encrypted file"), "\(doctor.stdout)")
    }

    // MARK: Item 2: passphrase-protected files

    @Test("--passphrase-file creates a passphrase-protected file (no key file) that lists back with it or TOKENCACHE_PASSPHRASE_FILE")
    func passphraseRoundTrip() throws {
        var (cli, _) = try cli()
        defer { cli.cleanUp() }
        let passphrase = try passphraseFile(cli, Self.passphrase + "\r\n" + "second line ignored\n")
        let saved = try save(cli, ["--passphrase-file", passphrase])
        #expect(saved.status == 0, "\(saved.stderr)")
        let folder = cli.dataHome.appendingPathComponent("tokencache")
        #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent("cache.key").path), "a key file was created")
        #expect(try EncryptedFileBackend(directory: folder).storedKeyKind(of: CacheGroup(cli.group)) == .passphrase)

        let listed = try cli.run(["list", "--passphrase-file", passphrase])
        #expect(listed.status == 0, "\(listed.stderr)")
        #expect(listed.stdout.contains(Fixtures.alice.username))
        cli.environmentOverrides = ["TOKENCACHE_PASSPHRASE_FILE": passphrase]
        let fromEnvironment = try cli.run(["list", "--json"])
        #expect(fromEnvironment.status == 0 && fromEnvironment.stdout.contains(Fixtures.alice.username), "\(fromEnvironment.stderr)")
        // Only the first line, without its line ending, is the passphrase: the library agrees.
        let store = AccountStore(backend: EncryptedFileBackend(directory: folder, keySource: .passphrase(Self.passphrase)), group: try CacheGroup(cli.group))
        #expect(try store.account(Fixtures.alice.username)?.username == Fixtures.alice.username)
        for output in [saved, listed, fromEnvironment] {
            #expect(!output.stdout.contains(Self.passphrase) && !output.stderr.contains(Self.passphrase))
        }
    }

    @Test("A passphrase-protected file read without a passphrase off a terminal: exit 64 saying how to give it, never to restore a key file; the file is unchanged")
    func passphraseNotGiven() throws {
        let (cli, _) = try cli()
        defer { cli.cleanUp() }
        #expect(try save(cli, ["--passphrase-file", try passphraseFile(cli)]).status == 0)
        let file = cli.dataHome.appendingPathComponent("tokencache/\(cli.group).tkc")
        let before = try Data(contentsOf: file)
        for command in [["list"], ["remove", "--all", "--yes"]] {
            let output = try cli.run(command)
            #expect(output.status == 64, "\(command): \(output.stderr)")
            #expect(output.stderr.hasPrefix("error: \(file.path) was created with a passphrase, and none was given."), "\(output.stderr)")
            #expect(output.stderr.contains("--passphrase-file") && output.stderr.contains("TOKENCACHE_PASSPHRASE_FILE"))
            #expect(!output.stderr.contains("key file") && !output.stderr.lowercased().contains("move"), "\(output.stderr)")
        }
        #expect(try Data(contentsOf: file) == before)
    }

    @Test("On a terminal, a passphrase-protected file asks for the passphrase without echoing it, once",
          .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/python3"), "needs python3 for a pseudo-terminal"))
    func passphrasePrompt() throws {
        let (cli, _) = try cli()
        defer { cli.cleanUp() }
        #expect(try save(cli, ["--passphrase-file", try passphraseFile(cli)]).status == 0)
        let (status, output) = try cli.onTerminal(["list", "--backend", "file", "--group", cli.group], answering: [("Passphrase for ", Self.passphrase)])
        #expect(status == 0, "\(output)")
        #expect(output.components(separatedBy: "Passphrase for ").count == 2, "asked other than once: \(output)")
        #expect(output.contains(Fixtures.alice.username), "\(output)")
        #expect(!output.contains(Self.passphrase), "the passphrase was echoed")
    }

    @Test("A wrong passphrase is refused with exit 1 and a clear message, for reading and writing; the file is unchanged")
    func wrongPassphrase() throws {
        let (cli, _) = try cli()
        defer { cli.cleanUp() }
        #expect(try save(cli, ["--passphrase-file", try passphraseFile(cli)]).status == 0)
        let file = cli.dataHome.appendingPathComponent("tokencache/\(cli.group).tkc")
        let before = try Data(contentsOf: file)
        let wrong = try passphraseFile(cli, "wrong horse\n", name: "wrong")
        let listed = try cli.run(["list", "--passphrase-file", wrong])
        #expect(listed.status == 1)
        #expect(listed.stderr.hasPrefix("error: The passphrase given is not the one \(file.path) was created with."), "\(listed.stderr)")
        #expect(listed.stderr.contains("the file was not changed"))
        let saved = try save(cli, ["--passphrase-file", wrong])
        #expect(saved.status == 1, "\(saved.stderr)")
        #expect(try Data(contentsOf: file) == before)
    }

    @Test("A config file another user wrote, or that group or others may write, or in such a directory, is refused with exit 64 and the fix (#57 item 7)")
    func configFileOfAnotherUserOrWritableIsRefused() throws {
        let (cli, configFile) = try cli()
        defer { cli.cleanUp() }
        let folder = configFile.deletingLastPathComponent()
        // uid 65534 plays the other user: it may pass through the test's folders to the config directory.
        for path in [cli.dataHome.path, folder.deletingLastPathComponent().path] {
            try FileManager.default.setAttributes([.posixPermissions: 0o711], ofItemAtPath: path)
        }
        let config = #"{"backend": "file", "graph_endpoint": "http://127.0.0.1:9"}"#
        func asOtherUser(_ script: String) throws {
            let output = try runProcess("/usr/bin/setpriv", ["--reuid", "65534", "--regid", "65534", "--clear-groups", "/bin/sh", "-c", script, "-", configFile.path])
            #expect(output.status == 0, "\(output.stderr)")
        }
        func refused(_ expected: String, hint: String) throws {
            let output = try cli.run(["doctor"], withGroup: false)
            #expect(output.status == 64, "\(output.stdout)\n\(output.stderr)")
            #expect(output.stderr.hasPrefix("error: \(expected)"), "\(output.stderr)")
            #expect(output.stderr.contains(hint), "\(output.stderr)")
        }
        // Written by the other user into a directory anyone may write to.
        try FileManager.default.setAttributes([.posixPermissions: 0o777], ofItemAtPath: folder.path)
        try asOtherUser("printf '%s' '\(config)' > \"$1\"")
        try refused("The config file \(configFile.path) is owned by another user (uid 65534); it was not used", hint: "chown")
        try FileManager.default.removeItem(at: configFile)
        // The user's own file in that directory: another user could replace it.
        try Data(config.utf8).write(to: configFile)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: configFile.path)
        try refused("The config file's directory \(folder.path) is writable by group or others (mode 777)", hint: "chmod go-w \(folder.path)")
        // The user's own directory, and a file anyone may write, which the other user then rewrites.
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: folder.path)
        try FileManager.default.setAttributes([.posixPermissions: 0o666], ofItemAtPath: configFile.path)
        try asOtherUser("printf '%s' '\(config)' > \"$1\"")
        try refused("The config file \(configFile.path) is writable by group or others (mode 666)", hint: "chmod go-w \(configFile.path)")
        // Once the user's and not writable by others, it is read (mode 0644 is fine: it holds no secret).
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: configFile.path)
        let settings = try doctorSettings(cli)
        #expect(settings["backend"]?["source"]?.contains(configFile.path) == true, "\(settings)")
    }

    @Test("A passphrase file readable by group or others, or empty, is refused with exit 64 and the fix; nothing is written")
    func unsafePassphraseFile() throws {
        let (cli, _) = try cli()
        defer { cli.cleanUp() }
        let file = cli.dataHome.appendingPathComponent("tokencache/\(cli.group).tkc")
        let readable = try passphraseFile(cli, mode: 0o640)
        let refused = try save(cli, ["--passphrase-file", readable])
        #expect(refused.status == 64)
        #expect(refused.stderr.hasPrefix("error: The passphrase file \(readable) (from --passphrase-file) is readable or writable by group or others (mode 640)."),
                "\(refused.stderr)")
        #expect(refused.stderr.contains("chmod 600 \(readable)"))
        #expect(!refused.stderr.contains(Self.passphrase))
        #expect(!FileManager.default.fileExists(atPath: file.path))

        let empty = try save(cli, ["--passphrase-file", try passphraseFile(cli, "\n", name: "empty")])
        #expect(empty.status == 64 && empty.stderr.contains("has an empty first line"), "\(empty.stderr)")
        let missing = try save(cli, ["--passphrase-file", cli.dataHome.appendingPathComponent("absent").path])
        #expect(missing.status == 64 && missing.stderr.contains("cannot be opened"), "\(missing.stderr)")
        #expect(!FileManager.default.fileExists(atPath: file.path))
    }

    @Test("doctor on an existing passphrase-protected file reports its key source and never 'created on first save'; without the passphrase it says how to give it")
    func doctorOnPassphraseFile() throws {
        let (cli, _) = try cli()
        defer { cli.cleanUp() }
        let passphrase = try passphraseFile(cli)
        #expect(try save(cli, ["--passphrase-file", passphrase]).status == 0)
        // The key file of the default key source does not exist: that must not be reported as to come.
        let given = try cli.run(["doctor", "--json", "--passphrase-file", passphrase])
        #expect(given.status == 0, "\(given.stderr)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(given.stdout.utf8)) as? [String: Any])
        let checks = try #require(json["checks"] as? [[String: String]])
        let keySource = try #require(checks.first { $0["name"] == "key source" })
        #expect(keySource["status"] == "ok" && keySource["detail"]?.hasPrefix("passphrase") == true, "\(keySource)")
        #expect(checks.first { $0["name"] == "decryption" }?["status"] == "ok")
        #expect(!given.stdout.contains("created on first save"), "\(given.stdout)")

        let notGiven = try cli.run(["doctor"])
        #expect(notGiven.status == 1)
        #expect(notGiven.stdout.contains("passphrase (scrypt)"), "\(notGiven.stdout)")
        #expect(!notGiven.stdout.contains("created on first save"), "\(notGiven.stdout)")
        #expect(notGiven.stderr.contains("--passphrase-file") && !notGiven.stderr.contains("Restore"), "\(notGiven.stderr)")
    }

    @Test("A key-file cache whose key file is gone keeps the advice to restore it, and doctor calls the key file missing")
    func missingKeyFile() throws {
        let (cli, _) = try cli()
        defer { cli.cleanUp() }
        #expect(try save(cli, []).status == 0)
        try FileManager.default.removeItem(at: cli.dataHome.appendingPathComponent("tokencache/cache.key"))
        let listed = try cli.run(["list"])
        #expect(listed.status == 1)
        #expect(listed.stderr.contains("is missing") && listed.stderr.contains("Restore the key file"), "\(listed.stderr)")
        let doctor = try cli.run(["doctor"])
        #expect(doctor.status == 1)
        #expect(doctor.stdout.contains("cache.key is missing") && !doctor.stdout.contains("created on first save"), "\(doctor.stdout)")
    }
}
