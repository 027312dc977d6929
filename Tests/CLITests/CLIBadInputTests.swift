import Foundation
import Testing
@testable import EncryptedFileStore
@testable import SecretServiceStore
@testable import TokenCache
@testable import TokenCacheCore
@testable import TokenCachePlatform
import TokenCacheTestSupport

@Suite("tokencache CLI: bad arguments and files", .harness)
struct CLIBadInputTests {
    /// A bad invocation: its arguments (the test's --backend/--group are added unless the case
    /// sets them), stdin, and the exit status it must end with.
    struct Case: CustomTestStringConvertible, Sendable {
        var name: String
        var arguments: [String]
        var input: String? = nil
        var status: Int32
        var setsStore = false
        var testDescription: String { name }
    }

    static let authority = "https://login.microsoftonline.com/\(Fixtures.tenantA)"
    static let response = String(decoding: Fixtures.json(Fixtures.response(for: Fixtures.bob)), as: UTF8.self)
    static let cases: [Case] = [
        Case(name: "unknown backend", arguments: ["list", "--backend", "bogus", "--group", "org.swift-tokencache.x"], status: 64, setsStore: true),
        Case(name: "group that is not reverse-DNS", arguments: ["list", "--backend", "file", "--group", "nodots"], status: 64, setsStore: true),
        Case(name: "group with a space", arguments: ["remove", "--all", "--yes", "--backend", "file", "--group", "com.exa mple"], status: 64, setsStore: true),
        Case(name: "unknown subcommand", arguments: ["frobnicate"], status: 64, setsStore: true),
        Case(name: "unknown option", arguments: ["list", "--frobnicate"], status: 64),
        Case(name: "missing --scopes value", arguments: ["token", "--client", Fixtures.appOne, "--scopes"], status: 64),
        Case(name: "only reserved scopes", arguments: ["token", "--client", Fixtures.appOne, "--scopes", "openid profile"], status: 64),
        Case(name: "empty scopes, requested and granted", arguments: ["save", "--client", Fixtures.appOne, "--authority", authority, "--scopes", ""],
             input: String(decoding: Fixtures.json(Fixtures.response(for: Fixtures.bob, scope: "")), as: UTF8.self), status: 1),
        Case(name: "http authority", arguments: ["save", "--client", Fixtures.appOne, "--authority", "http://login.example/x", "--scopes", "User.Read"],
             input: response, status: 64),
        Case(name: "authority that is not a URL", arguments: ["token", "--client", Fixtures.appOne, "--scopes", "User.Read", "--authority", "notaurl"],
             status: 64),
        Case(name: "client ID with a space", arguments: ["save", "--client", "has space", "--authority", authority, "--scopes", "User.Read"],
             input: response, status: 64),
        Case(name: "response that is not JSON", arguments: ["save", "--client", Fixtures.appOne, "--authority", authority, "--scopes", "User.Read"],
             input: "<html>", status: 1),
        Case(name: "import of a missing file", arguments: ["import", "/nonexistent/cache.json"], status: 64),
        Case(name: "import of a directory", arguments: ["import", "/"], status: 64),
        Case(name: "import of a file that is not a cache", arguments: ["import", "/etc/hostname"], status: 1),
        Case(name: "export into a missing directory", arguments: ["export", "--output", "/nonexistent/dir/cache.json"], status: 64),
        Case(name: "remove of an unknown account", arguments: ["remove", "--account", "nobody@contoso.com", "--yes"], status: 2),
    ]

    @Test("Each bad invocation exits with its status and an error on the first line of stderr, and the store is exactly as it was",
          arguments: cases)
    func badInvocation(_ sample: Case) throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        _ = try cli.save(Fixtures.alice, client: Fixtures.appOne)
        let file = cli.dataHome.appendingPathComponent("tokencache/\(cli.group).tkc")
        let before = try Data(contentsOf: file)
        let listBefore = try cli.run(["list", "--json"]).stdout

        let arguments = sample.setsStore || sample.arguments.first == "frobnicate" ? sample.arguments
            : Array(sample.arguments.prefix(1)) + ["--backend", "file", "--group", cli.group] + sample.arguments.dropFirst()
        let output = try cli.run(arguments, input: sample.input.map { Data($0.utf8) }, withGroup: false)
        #expect(output.status == sample.status, "\(sample.name): \(output.status) \(output.stderr)")
        let first = output.stderr.split(separator: "\n").first.map(String.init) ?? ""
        #expect(first.lowercased().hasPrefix("error:") && first.count > 12, "\(sample.name): \(output.stderr)")
        #expect(output.stdout.isEmpty, "\(sample.name): printed \(output.stdout)")
        #expect(!output.stderr.contains("rt-") && !output.stderr.contains("at-\(Fixtures.bob.uid)"), "\(sample.name)")

        #expect(try Data(contentsOf: file) == before, "\(sample.name) rewrote the cache file")
        #expect(try cli.run(["list", "--json"]).stdout == listBefore, "\(sample.name) changed the store")
    }

    @Test("A FIFO named by --passphrase-file or --password-file is refused as not a regular file, without waiting for a writer",
          .timeLimit(.minutes(1)))
    func fifoInputsDoNotHang() async throws {
        let directory = try TestEnvironment.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let fifo = directory.appendingPathComponent("fifo").path
        #expect(mkfifo(fifo, 0o600) == 0)
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        let passphrase = try await offThePool { try cli.run(["list", "--passphrase-file", fifo]) }
        #expect(passphrase.status != 0)
        #expect(passphrase.stderr.contains("\(fifo)") && passphrase.stderr.contains("is not a regular file"), "\(passphrase.stderr)")
        let password = try await offThePool {
            try cli.run(["login", "--native", "--username", "alice@contoso.com", "--password-file", fifo, "--client", Fixtures.appOne, "--scopes", "User.Read",
                         "--authority", "https://contoso.ciamlogin.com/contoso.onmicrosoft.com"])
        }
        #expect(password.status != 0)
        #expect(password.stderr.contains("password file \(fifo)") && password.stderr.contains("is not a regular file"), "\(password.stderr)")
    }
}
