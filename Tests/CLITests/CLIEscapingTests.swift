import Foundation
import Testing
@testable import EncryptedFileStore
@testable import SecretServiceStore
@testable import TokenCache
@testable import TokenCacheCore
@testable import TokenCachePlatform
@testable import TokenCacheCLI
import TokenCacheTestSupport
import TokenCacheTestIdentityProvider

/// Cache contents and server answers are untrusted: the CLI prints their control characters
/// (C0 but the newlines between lines, DEL, C1, bidirectional overrides) as visible escapes,
/// never raw to a terminal; JSON output carries them as \u escapes.
@Suite("tokencache CLI escapes untrusted text", .harness)
struct CLIEscapingTests {
    static let hostileUsername = "eve\u{1B}[2J\u{07}\u{9B}31m@contoso.com"
    static let hostileName = "Eve \u{202E}lave\u{202C}\nNext\tline\u{7F}"

    /// Raw characters a terminal could act on, other than the newlines separating lines.
    static func raw(_ text: String) -> [String] {
        text.unicodeScalars.filter { scalar in
            scalar != "\n" && (scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)
                || (0x202A...0x202E).contains(scalar.value) || (0x2066...0x2069).contains(scalar.value))
        }.map { String(format: "U+%04X", $0.value) }
    }

    static func save(_ cli: CLI, uid: String, username: String, name: String, client: String, authority: String) throws {
        let user = Fixtures.User(uid: uid, tenant: Fixtures.tenantA, username: username, name: name)
        var response = Fixtures.response(for: user, scope: "User.Read", foci: "1", tag: client)
        response["refresh_token"] = "rt-initial-\(uid)"
        let saved = try cli.run(["save", "--client", client, "--authority", authority, "--scopes", "User.Read"],
                                input: Fixtures.json(response))
        #expect(saved.status == 0, "\(saved.stderr)")
        #expect(raw(saved.stdout + saved.stderr).isEmpty, "save: \(raw(saved.stdout + saved.stderr))")
    }

    @Test("An ID token's username and name with ESC [2J, BEL, C1 CSI, DEL, newline, tab and RLO: list, remove and errors show them escaped; --json round-trips them \\u-escaped")
    func hostileCacheContents() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        let authority = Fixtures.authority().url.absoluteString
        try Self.save(cli, uid: "e0e00000-0000-0000-0000-000000000000", username: Self.hostileUsername, name: Self.hostileName,
                      client: Fixtures.appOne, authority: authority)
        try Self.save(cli, uid: "b0b00000-0000-0000-0000-000000000000", username: "bob@contoso.com", name: "Bob",
                      client: Fixtures.appOne, authority: authority)

        let list = try cli.run(["list"])
        #expect(list.status == 0, "\(list.stderr)")
        #expect(Self.raw(list.stdout + list.stderr).isEmpty, "list: \(Self.raw(list.stdout + list.stderr))")
        #expect(list.stdout.contains(#"eve\u{1B}[2J\u{7}\u{9B}31m@contoso.com"#), "\(list.stdout)")
        #expect(list.stdout.contains(#"Eve \u{202E}lave\u{202C}\u{A}Next\u{9}line\u{7F}"#), "\(list.stdout)")

        let json = try cli.run(["list", "--json"])
        #expect(json.status == 0, "\(json.stderr)")
        #expect(Self.raw(json.stdout).isEmpty, "list --json: \(Self.raw(json.stdout))")
        #expect(json.stdout.contains(#"\u001b[2J\u0007\u009b31m@contoso.com"#) || json.stdout.contains(#"\u001B[2J\u0007\u009B31m@contoso.com"#),
                "\(json.stdout)")
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        let usernames = (parsed["accounts"] as? [[String: Any]] ?? []).compactMap { $0["username"] as? String }
        #expect(usernames.contains(Self.hostileUsername), "the JSON decodes to the exact username: \(usernames)")

        // Errors quote cache contents: two accounts, so token asks to pick one, naming both.
        let ambiguous = try cli.run(["token", "--client", Fixtures.appOne, "--scopes", "User.Read"])
        #expect(ambiguous.status == 64)
        #expect(ambiguous.stderr.contains(#"eve\u{1B}[2J"#), "\(ambiguous.stderr)")
        #expect(Self.raw(ambiguous.stdout + ambiguous.stderr).isEmpty, "token: \(Self.raw(ambiguous.stderr))")

        let remove = try cli.run(["remove", "--account", Self.hostileUsername, "--dry-run"])
        #expect(remove.status == 0, "\(remove.stderr)")
        #expect(remove.stdout.hasPrefix(#"Would remove eve\u{1B}[2J"#), "\(remove.stdout)")
        #expect(Self.raw(remove.stdout + remove.stderr).isEmpty, "remove: \(Self.raw(remove.stdout + remove.stderr))")

        let export = try cli.run(["export", "--format", "msal-json"])
        #expect(export.status == 0 && Self.raw(export.stdout).isEmpty, "export: \(Self.raw(export.stdout))")
    }

    @Test("On a terminal (a pty from script(1)), colour is on and the only escape sequences are the CLI's own SGR codes",
          .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/script")))
    func colourOnTerminal() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        try Self.save(cli, uid: "e0e00000-0000-0000-0000-000000000000", username: Self.hostileUsername, name: Self.hostileName,
                      client: Fixtures.appOne, authority: Fixtures.authority().url.absoluteString)
        var environment = cli.environment
        environment["NO_COLOR"] = nil
        environment["TERM"] = "xterm"
        let binary = TestEnvironment.binDirectory.appendingPathComponent("tokencache").path
        let command = [binary, "list", "--backend", "file", "--group", cli.group].map { "'\($0)'" }.joined(separator: " ")
        let output = try runProcess("/usr/bin/script", ["-q", "-e", "-c", command, "/dev/null"], environment: environment)
        #expect(output.status == 0, "\(output.stdout)")
        let ownCodes = ["\u{1B}[0m", "\u{1B}[1m", "\u{1B}[2m", "\u{1B}[31m", "\u{1B}[32m"]
        #expect(output.stdout.contains("\u{1B}[1m"), "colour is on: \(output.stdout)")
        let withoutOwnCodes = ownCodes.reduce(output.stdout.replacingOccurrences(of: "\r\n", with: "\n")) {
            $0.replacingOccurrences(of: $1, with: "")
        }
        #expect(Self.raw(withoutOwnCodes).isEmpty, "beyond its own colour codes: \(Self.raw(withoutOwnCodes))")
        #expect(withoutOwnCodes.contains(#"eve\u{1B}[2J\u{7}\u{9B}31m@contoso.com"#), "\(withoutOwnCodes)")
    }

    @Test("A token endpoint error whose error and suberror hold OSC, BEL, C1 CSI and RLO is reported escaped, in the error and in --verbose log records")
    func hostileServerError() async throws {
        let idp = try FakeIdentityProvider()
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        try Self.save(cli, uid: Fixtures.alice.uid, username: Fixtures.alice.username, name: "Alice",
                      client: Fixtures.appOne, authority: idp.authority().url.absoluteString)
        try await idp.control(["error_body": ["error": "invalid_grant\u{1B}]0;pwned\u{07}", "suberror": "x\u{9B}2J\u{202E}",
                                              "error_description": "AADSTS\u{1B}[31m bad"]])
        let refreshed = try cli.run(["token", "--client", Fixtures.appTwo, "--scopes", "User.Read", "--refresh",
                                     "--account", Fixtures.alice.username, "--authority", idp.authority().url.absoluteString])
        #expect(refreshed.status == 1, "\(refreshed.stderr)")
        #expect(refreshed.stderr.contains(#"invalid_grant\u{1B}]0;pwned\u{7}, x\u{9B}2J\u{202E}"#), "\(refreshed.stderr)")
        #expect(Self.raw(refreshed.stdout + refreshed.stderr).isEmpty, "token --refresh: \(Self.raw(refreshed.stderr))")
        // --verbose: the library's debug records quote the server's error code on stderr too.
        let verbose = try cli.run(["token", "--client", Fixtures.appTwo, "--scopes", "User.Read", "--refresh", "--verbose",
                                   "--account", Fixtures.alice.username, "--authority", idp.authority().url.absoluteString])
        #expect(verbose.status == 1)
        #expect(verbose.stderr.contains("Token endpoint refused the request") && verbose.stderr.contains(#"pwned\u{7}"#), "\(verbose.stderr)")
        #expect(Self.raw(verbose.stdout + verbose.stderr).isEmpty, "token --refresh --verbose: \(Self.raw(verbose.stderr))")
    }

    @Test("escape makes C0, DEL, C1 and bidi controls visible and leaves other text alone; the JSON filter keeps the same JSON")
    func escapeFunctions() throws {
        #expect(Terminal.escape("plain é… 日本 \\ text") == "plain é… 日本 \\ text")
        #expect(Terminal.escape("a\u{1B}[2J\u{07}\u{7F}\u{9B}\u{202E}\u{2069}\n\t\u{0}") == #"a\u{1B}[2J\u{7}\u{7F}\u{9B}\u{202E}\u{2069}\u{A}\u{9}\u{0}"#)
        let interpolated: TerminalText = "user \(Self.hostileUsername)"
        #expect(interpolated.description == #"user eve\u{1B}[2J\u{7}\u{9B}31m@contoso.com"#)
        let original = #"{"a":"x\#u{7F}\#u{85}\#u{2066}é…\u001b"}"#
        let filtered = String(decoding: JSONOutput.terminalSafe(Data(original.utf8)), as: UTF8.self)
        #expect(filtered == #"{"a":"x\u007f\u0085\u2066é…\u001b"}"#)
        let decoded = try JSONSerialization.jsonObject(with: Data(filtered.utf8)) as? [String: String]
        #expect(decoded?["a"] == "x\u{7F}\u{85}\u{2066}é…\u{1B}")
        // Long documents are looked at sixteen bytes at a time first: a character to escape is
        // seen at every offset, and a document without one comes back unchanged.
        for (character, escaped) in [("\u{7F}", #"\u007f"#), ("\u{9B}", #"\u009b"#), ("\u{202E}", #"\u202e"#)] {
            for offset in 0..<40 {
                let text = #"{"a":""# + String(repeating: "x", count: offset) + character + String(repeating: "y", count: 40 - offset) + #""}"#
                let safe = String(decoding: JSONOutput.terminalSafe(Data(text.utf8)), as: UTF8.self)
                #expect(safe == text.replacingOccurrences(of: character, with: escaped), "\(escaped) at \(offset)")
            }
        }
        let plain = Data((#"{"a":""# + String(repeating: "é日x", count: 30) + #""}"#).utf8)
        #expect(JSONOutput.terminalSafe(plain) == plain)
    }
}
