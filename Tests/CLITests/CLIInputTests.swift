import Foundation
import Testing
@testable import TokenCacheCLI
@testable import TokenCacheCore
import TokenCacheTestSupport

/// Issue #46 items 4 and 8: input taken exactly or refused, one exit code for path problems, and
/// help that a newcomer can use (own options first, copyable examples, "did you mean").
@Suite("tokencache CLI: input taken exactly, help and completions", .harness)
struct CLIInputTests {
    static var binary: String { TestEnvironment.binDirectory.appendingPathComponent("tokencache").path }
    static let authority = "https://login.microsoftonline.com/\(Fixtures.tenantA)"

    /// The group's file and listing, to show that nothing was written.
    private func snapshot(_ cli: CLI) throws -> (Data, String) {
        (try Data(contentsOf: cli.dataHome.appendingPathComponent("tokencache/\(cli.group).tkc")), try cli.run(["list", "--json"]).stdout)
    }

    @Test("An authority with a space, a query and fragment, or a user is refused with exit 64 by save, login and token, and nothing is saved",
          arguments: ["https://exa mple.com/x", "https://login.microsoftonline.com/\(Fixtures.tenantA)?x=1#y", "https://u@login.microsoftonline.com/x"])
    func authorityNotAURL(_ authority: String) throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        _ = try cli.save(Fixtures.alice, client: Fixtures.appOne)
        let before = try snapshot(cli)
        let response = Fixtures.json(Fixtures.response(for: Fixtures.bob))
        for command in [["save", "--client", Fixtures.appOne, "--authority", authority, "--scopes", "User.Read"],
                        ["login", "--device-code", "--client", Fixtures.appOne, "--authority", authority, "--scopes", "User.Read"],
                        ["token", "--client", Fixtures.appOne, "--scopes", "User.Read", "--authority", authority]] {
            let output = try cli.run(command, input: response)
            #expect(output.status == 64, "\(command): \(output.status) \(output.stderr)")
            #expect(output.stderr.hasPrefix("error: Invalid authority:"), "\(command): \(output.stderr)")
        }
        let after = try snapshot(cli)
        #expect(after.0 == before.0 && after.1 == before.1, "something was saved")
        #expect(throws: TokenCacheError.self) { try Authority(authority) }
    }

    @Test("export --output with a name that is not UTF-8 is refused with exit 64 and no file is written under any name")
    func pathNotUTF8() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        _ = try cli.save(Fixtures.alice, client: Fixtures.appOne)
        let directory = try TestEnvironment.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        // The shell passes the byte 0xE9 as it is; Foundation's Process could not (its arguments are Strings).
        let script = #"cd "$2" && exec "$0" export --backend file --group "$1" --output "$(printf 'e\351.json')""#
        let output = try runProcess("/bin/sh", ["-c", script, Self.binary, cli.group, directory.path], environment: cli.environment)
        #expect(output.status == 64, "\(output.status): \(output.stderr)")
        #expect(output.stderr.contains(#"'e\xE9.json' is not valid UTF-8"#), "\(output.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).isEmpty)
    }

    @Test("import - reads standard input, as save does and export writes standard output")
    func importFromStandardInput() throws {
        let source = try CLI(backend: "file")
        defer { source.cleanUp() }
        _ = try source.save(Fixtures.alice, client: Fixtures.appOne)
        let exported = try source.run(["export"])
        #expect(exported.status == 0, "\(exported.stderr)")
        let target = try CLI(backend: "file")
        defer { target.cleanUp() }
        let imported = try target.run(["import", "-"], input: Data(exported.stdout.utf8))
        #expect(imported.status == 0, "\(imported.stderr)")
        #expect(try target.run(["list"]).stdout.contains(Fixtures.alice.username))
    }

    @Test("import refuses a credential section that is not an object (exit 1, the section named) and stores nothing, so export never emits it",
          arguments: [#"{"AccessToken":[1,2]}"#, #"{"RefreshToken":"x","Account":{}}"#, #"{"IdToken":null}"#])
    func importRefusesMalformedSections(_ document: String) throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        _ = try cli.save(Fixtures.alice, client: Fixtures.appOne)
        let before = try snapshot(cli)
        let output = try cli.run(["import", "-"], input: Data(document.utf8))
        #expect(output.status == 1, "\(output.stderr)")
        #expect(output.stderr.contains("section is") && output.stderr.contains("nothing was imported"), "\(output.stderr)")
        let after = try snapshot(cli)
        #expect(after.0 == before.0 && after.1 == before.1)
        let exported = try cli.exported()
        #expect(exported["AccessToken"] is NSDictionary && exported["RefreshToken"] is NSDictionary && exported["IdToken"] is NSDictionary)
    }

    @Test("save --response DIR says it is a directory (exit 64), not that the response is empty")
    func saveResponseDirectory() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        let output = try cli.run(["save", "--client", Fixtures.appOne, "--authority", Self.authority, "--scopes", "User.Read",
                                  "--response", cli.dataHome.path])
        #expect(output.status == 64, "\(output.stderr)")
        #expect(output.stderr.contains("\(cli.dataHome.path): it is a directory; nothing was saved"), "\(output.stderr)")
    }

    @Test("A path that cannot be used as given is exit 64 in every command: a missing passphrase file, import file, response file; a directory; an existing --output")
    func pathProblemsShareOneExitCode() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        _ = try cli.save(Fixtures.alice, client: Fixtures.appOne)
        let before = try snapshot(cli)
        let missing = cli.dataHome.appendingPathComponent("missing").path
        let existing = cli.dataHome.appendingPathComponent("existing.json").path
        FileManager.default.createFile(atPath: existing, contents: Data())
        let commands: [[String]] = [
            ["list", "--passphrase-file", missing],
            ["import", missing],
            ["import", cli.dataHome.path],
            ["save", "--client", Fixtures.appOne, "--authority", Self.authority, "--scopes", "User.Read", "--response", missing],
            ["export", "--output", existing],
            ["export", "--output", missing + "/cache.json"],
        ]
        for command in commands {
            let output = try cli.run(command)
            #expect(output.status == 64, "\(command): \(output.status) \(output.stderr)")
            #expect(output.stderr.hasPrefix("error: "), "\(command): \(output.stderr)")
        }
        let after = try snapshot(cli)
        #expect(after.0 == before.0 && after.1 == before.1)
    }

    @Test("A mistyped subcommand is exit 64 with the one meant; a word near none gets ArgumentParser's own error")
    func didYouMean() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        for (typed, meant) in [("lsit", "list"), ("tokn", "token"), ("logot", "logout"), ("doctr", "doctor"), ("improt", "import")] {
            let output = try cli.run([typed], withGroup: false)
            #expect(output.status == 64, "\(typed): \(output.stderr)")
            #expect(output.stderr.contains("Did you mean `tokencache \(meant)`?"), "\(typed): \(output.stderr)")
        }
        let far = try cli.run(["frobnicate"], withGroup: false)
        #expect(far.status == 64 && !far.stderr.contains("Did you mean"), "\(far.stderr)")
        #expect(TokenCacheCommand.subcommand(meantBy: "list") == nil)
    }

    @Test("Subcommand help lists the command's own options before the shared cache options, and no example line is cut mid-command")
    func helpOwnOptionsFirst() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        for (command, own) in [("list", "--client"), ("remove", "--account"), ("logout", "--client"), ("export", "--output"), ("save", "--response")] {
            let help = try cli.run(["help", command], withGroup: false).stdout
            let options = try #require(help.range(of: "OPTIONS:"), "\(command)")
            let tail = help[options.upperBound...]
            let ownAt = try #require(tail.range(of: "  \(own) "), "\(command): \(help)")
            let sharedAt = try #require(tail.range(of: "  --backend "), "\(command): \(help)")
            #expect(ownAt.lowerBound < sharedAt.lowerBound, "\(command): own options after shared ones")
        }
        // Every example line fits 80 columns; longer commands go on with a backslash.
        let root = try cli.run(["--help"], withGroup: false).stdout
        for command in ["login", "save", "token", "migrate", "agent", "remove"] {
            let help = try cli.run(["help", command], withGroup: false).stdout + root
            for line in help.split(separator: "\n") where line.hasPrefix("  tokencache ") || line.hasPrefix("    --") || line.hasPrefix("    | ") {
                #expect(line.count <= 80, "\(command): \(line)")
            }
        }
        #expect(try cli.run(["help", "login"], withGroup: false).stdout.contains("--client 04b07795-8ddb-461a-bbee-02f9e1bf7b46 \\\n"))
    }

    @Test("Bash, zsh and fish complete files for --response, --output, --passphrase-file and import's file, and values for --from, --to, --backend and --store")
    func completions() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        let bash = try cli.run(["--generate-completion-script", "bash"], withGroup: false).stdout
        for option in ["--response", "--output", "--passphrase-file"] {
            #expect(bash.contains("'\(option)')\n        __tokencache_add_completions -f"), "bash: \(option)")
        }
        #expect(bash.contains("'--from')\n        __tokencache_add_completions -W 'secret-service'$'\\n''file'"), "bash: --from")
        #expect(bash.contains("'--to')\n        __tokencache_add_completions -W 'secret-service'$'\\n''file'$'\\n''sandbox'"), "bash: --to")
        #expect(bash.contains("---completion list -- --store"), "bash: --store")
        let importStart = try #require(bash.range(of: "_tokencache_import() {"))
        let importEnd = try #require(bash[importStart.upperBound...].range(of: "\n}\n"))
        #expect(bash[importStart.upperBound..<importEnd.lowerBound].contains("1)\n        __tokencache_add_completions -f"), "bash: import's file")
        let fish = try cli.run(["--generate-completion-script", "fish"], withGroup: false).stdout
        #expect(fish.contains("-l 'from'") && fish.contains("-rfka 'secret-service file'"), "fish: --from")
        #expect(fish.contains("---completion remove -- --store"), "fish: --store")
        let zsh = try cli.run(["--generate-completion-script", "zsh"], withGroup: false).stdout
        #expect(zsh.contains("--response[") && zsh.contains(":file:_files"), "zsh: files")
        #expect(zsh.contains("___to=('secret-service' 'file' 'sandbox')"), "zsh: --to")
        // The store names the completion offers: the ones `tokencache stores` shows.
        let offered = try cli.run(["---completion", "list", "--", "--store", "0", "0"], withGroup: false)
        #expect(offered.stdout.split(separator: "\n").contains("azure-cli"), "\(offered.stdout) \(offered.stderr)")
    }

    @Test("doctor's checks say what is wrong in words, never an internal code name such as noSessionBus:")
    func doctorInWords() throws {
        var cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        cli.environmentOverrides["DBUS_SESSION_BUS_ADDRESS"] = "unix:path=/nonexistent/bus"
        let doctor = try cli.run(["doctor", "--backend", "auto", "--group", cli.group], withGroup: false)
        let text = doctor.stdout + doctor.stderr
        #expect(text.contains("Secret Service"), "\(text)")
        for code in ["noSessionBus", "noSecretService", "secretServiceFailure", "libsecretMissing"] {
            #expect(!text.contains("\(code):"), "\(code) in \(text)")
        }
    }
}
