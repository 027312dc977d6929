import Foundation
import Testing
@testable import TokenCacheCLI
import TokenCacheTestSupport

/// The build-tool plugin's generator (`tokencache-config-gen`), run as the plugin runs it.
/// (The plugin itself is exercised by building Examples/TokenCacheExample in scripts/test.sh.)
@Suite("Configuration build plugin", .harness)
struct ConfigGeneratorTests {
    let directory: URL
    init() throws { directory = try TestEnvironment.temporaryDirectory() }

    func generate(_ json: String) throws -> (output: ProcessOutput, input: String, source: String?) {
        let input = directory.appendingPathComponent("tokencache.json")
        let output = directory.appendingPathComponent("TokenCacheConfiguration.swift")
        try? FileManager.default.removeItem(at: output)
        try Data(json.utf8).write(to: input)
        let generator = TestEnvironment.binDirectory.appendingPathComponent("tokencache-config-gen").path
        let result = try runProcess(generator, [input.path, output.path])
        return (result, input.path, try? String(contentsOf: output, encoding: .utf8))
    }

    @Test("A valid tokencache.json becomes AppConfiguration.current with every field")
    func validFile() throws {
        let (result, _, source) = try generate("""
            {"clientId": "04b07795-8ddb-461a-bbee-02f9e1bf7b46",
             "authority": "https://login.microsoftonline.com/organizations",
             "redirectUri": "http://localhost", "scopes": ["User.Read", "Mail.Read"],
             "group": "com.example.notes", "backend": "secret-service", "clientCapabilities": ["cp1"]}
            """)
        #expect(result.status == 0, "\(result.stderr)")
        let generated = try #require(source)
        #expect(generated.contains("static let current: AppConfiguration = {"))
        #expect(generated.contains(#"configuration.clientCapabilities = ["cp1"]"#))
        #expect(generated.contains(#"clientID: "04b07795-8ddb-461a-bbee-02f9e1bf7b46""#))
        #expect(generated.contains(#"authority: "https://login.microsoftonline.com/organizations""#))
        #expect(generated.contains(#"redirectURI: "http://localhost""#))
        #expect(generated.contains(#"scopes: ["User.Read", "Mail.Read"]"#))
        #expect(generated.contains(#"group: "com.example.notes""#))
        #expect(generated.contains("backend: .secretService"))
    }

    @Test("Defaults: universal-storage group, automatic backend, no redirect URI")
    func defaults() throws {
        let (result, _, source) = try generate("""
            {"clientId": "04b07795-8ddb-461a-bbee-02f9e1bf7b46", "authority": "https://login.microsoftonline.com/common"}
            """)
        #expect(result.status == 0, "\(result.stderr)")
        let generated = try #require(source)
        #expect(generated.contains(#"group: "com.microsoft.identity.universalstorage""#))
        #expect(generated.contains("backend: .automatic"))
        #expect(generated.contains("redirectURI: nil"))
    }

    @Test("An invalid file fails with a diagnostic naming the file and the field, and writes nothing",
          arguments: [
              (#"{"authority": "https://login.microsoftonline.com/common"}"#, "clientId"),
              (#"{"clientId": "a b", "authority": "https://login.microsoftonline.com/common"}"#, "clientId"),
              (#"{"clientId": "abc", "authority": "ftp://example.com/x"}"#, "authority"),
              (#"{"clientId": "abc", "authority": "https://login.microsoftonline.com/common", "group": "not a group"}"#, "group"),
              (#"{"clientId": "abc", "authority": "https://login.microsoftonline.com/common", "backend": "plaintext"}"#, "backend"),
              (#"{"clientId": "abc", "authority": "https://login.microsoftonline.com/common", "scopes": "User.Read"}"#, "scopes"),
              (#"{"clientId": "abc", "authority": "https://login.microsoftonline.com/common", "scopes": ["User Read"]}"#, "scopes"),
              (#"{"clientId": "abc", "authority": "https://login.microsoftonline.com/common", "redirectUri": "::"}"#, "redirectUri"),
              (#"{"clientId": "abc", "#, "(file)"),
          ])
    func invalidFile(json: String, field: String) throws {
        let (result, input, source) = try generate(json)
        #expect(result.status == 1)
        #expect(result.stderr.hasPrefix("\(input):1:1: error: "), "\(result.stderr)")
        #expect(result.stderr.contains("field '\(field)'"), "\(result.stderr)")
        #expect(source == nil)
    }
}

@Suite("CLI reference", .harness)
struct CLIReferenceTests {
    @Test("docs/CLI.md matches what the built tokencache --help prints")
    func referenceIsCurrent() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../..").standardizedFileURL
        let binary = TestEnvironment.binDirectory.appendingPathComponent("tokencache").path
        let generated = try runProcess("/bin/bash", [root.appendingPathComponent("scripts/cli-reference.sh").path, binary, "-"])
        #expect(generated.status == 0, "\(generated.stderr)")
        let committed = try String(contentsOf: root.appendingPathComponent("docs/CLI.md"), encoding: .utf8)
        #expect(generated.stdout == committed, "docs/CLI.md is stale: run scripts/cli-reference.sh")
    }

    @Test("agent and broker --help say --scopes refuses requests for other scopes, not that it limits what a token grants (#57)")
    func scopesHelpSaysWhatItDoes() throws {
        let binary = TestEnvironment.binDirectory.appendingPathComponent("tokencache").path
        for command in ["agent", "broker"] {
            let help = try runProcess(binary, ["help", command], environment: ["COLUMNS": "1000"])
            let line = try #require(help.stdout.split(separator: "\n").first { $0.contains("--scopes <scopes>") }, "\(help.stdout)")
            #expect(line.contains("Refuse a request that asks for a scope not among these"), "\(line)")
            #expect(line.contains("not what a token grants"), "\(line)")
            #expect(!line.contains("Serve only"), "\(line)")
        }
    }
}

@Suite("Man page and completions", .harness)
struct CLIManPageAndCompletionTests {
    @Test("scripts/install.sh with DESTDIR installs the binary, a man page naming every subcommand with ENVIRONMENT, FILES and EXIT STATUS, and bash, zsh and fish completions")
    func installed() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../..").standardizedFileURL
        let destination = try TestEnvironment.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: destination) }
        let generator = TestEnvironment.binDirectory.appendingPathComponent("generate-manual").path
        try #require(FileManager.default.isExecutableFile(atPath: generator),
                     "no \(generator): scripts/test.sh builds it (swift build --product generate-manual)")
        var environment = ProcessInfo.processInfo.environment
        environment["TOKENCACHE_BINARY"] = TestEnvironment.binDirectory.appendingPathComponent("tokencache").path
        environment["GENERATE_MANUAL"] = generator
        environment["DESTDIR"] = destination.path
        environment["PREFIX"] = "/usr"
        let install = try runProcess("/bin/bash", [root.appendingPathComponent("scripts/install.sh").path], environment: environment)
        #expect(install.status == 0, "\(install.stderr)")
        let prefix = destination.appendingPathComponent("usr")
        #expect(FileManager.default.isExecutableFile(atPath: prefix.appendingPathComponent("bin/tokencache").path))
        let manual = try String(contentsOf: prefix.appendingPathComponent("share/man/man1/tokencache.1"), encoding: .utf8)
        #expect(manual.contains(".Dt TOKENCACHE 1"), "\(manual.prefix(200))")
        let subcommands = TokenCacheCommand.configuration.subcommands.map { $0._commandName }
        #expect(Set(subcommands).isSuperset(of: ["list", "remove", "token", "save", "import", "export", "doctor", "migrate",
                                                 "groups", "unlock", "login", "logout"]), "\(subcommands)")
        for subcommand in subcommands {
            #expect(manual.contains(".It Em \(subcommand)\n"), "the man page has no section for \(subcommand)")
        }
        // ENVIRONMENT, FILES and EXIT STATUS written out, in mdoc's order, before AUTHORS.
        let sections = manual.split(separator: "\n").filter { $0.hasPrefix(".Sh ") }.map(String.init)
        #expect(sections.suffix(4) == [".Sh ENVIRONMENT", ".Sh FILES", ".Sh EXIT STATUS", ".Sh AUTHORS"], "\(sections)")
        #expect(!manual.contains(".Ex -std"))
        for status in ["0", "1", "2", "64"] { #expect(manual.contains(".It \(status)\n"), "EXIT STATUS leaves out \(status)") }
        for name in ["TOKENCACHE_BACKEND", "TOKENCACHE_PASSPHRASE_FILE", "TOKENCACHE_AGENT_SOCK", "XDG_CONFIG_HOME"] {
            #expect(manual.contains(".It Ev \(name)"), "ENVIRONMENT leaves out \(name)")
        }
        let completions = [("share/bash-completion/completions/tokencache", "complete -o filenames -F _tokencache tokencache"),
                           ("share/zsh/site-functions/_tokencache", "#compdef tokencache"),
                           ("share/fish/vendor_completions.d/tokencache.fish", "complete -c 'tokencache'")]
        for (path, marker) in completions {
            let script = try String(contentsOf: prefix.appendingPathComponent(path), encoding: .utf8)
            #expect(script.contains(marker), "\(path)")
            #expect(subcommands.allSatisfy { script.contains($0) }, "\(path) leaves out a subcommand")
        }
    }
}
