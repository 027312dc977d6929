import Foundation
import Testing
@testable import TokenCache
@testable import TokenCacheCore
import TokenCacheTestSupport
import TokenCacheTestIdentityProvider

/// The account photo through the CLI, C and Python (each a process of its own) on one encrypted
/// file, with Graph at the loopback stand-in named by `TOKENCACHE_GRAPH_ENDPOINT` (or the CLI's
/// config file): the same bytes, the same "none", the same typed reasons.
@Suite("The account photo from every front end", .harness)
struct PhotoFrontEndTests {
    let idp: FakeIdentityProvider
    let cli: CLI
    let library = TestEnvironment.binDirectory.appendingPathComponent("libTokenCacheC.so").path
    let image = Data([0xFF, 0xD8, 0xFF, 0xE0] + Array(repeating: 42, count: 500))

    init() throws {
        idp = try FakeIdentityProvider()
        cli = try CLI(backend: "file")
    }

    var environment: [String: String] {
        var environment = cli.environment
        environment["TOKENCACHE_GRAPH_ENDPOINT"] = idp.graphEndpoint.absoluteString
        environment["PYTHONPATH"] = Self.repositoryRoot.appendingPathComponent("python").path
        environment["TOKENCACHE_LIBRARY"] = library
        return environment
    }
    var authority: String { idp.authority().url.absoluteString }
    static let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// Alice signed in to app one in the default group (Files.Read only: Graph's User.Read token comes from the provider).
    func signIn() async throws {
        var response = Fixtures.response(for: Fixtures.alice, scope: "Files.Read", foci: nil, tag: "photo")
        response["refresh_token"] = "rt-photo"
        try await idp.seed(refreshToken: "rt-photo", user: Fixtures.alice, clientID: Fixtures.appOne, family: nil)
        let output = try cli.run(["save", "--backend", "file", "--client", Fixtures.appOne, "--authority", authority, "--scopes", "Files.Read"],
                                 input: Fixtures.json(response), withGroup: false)
        try #require(output.status == 0, "\(output.stderr)")
    }

    enum Answer: Equatable { case photo(Data, String), none, error(String) }

    func viaCLI(_ file: URL, refresh: Bool, environment: [String: String]? = nil) throws -> Answer {
        let output = try runProcess(TestEnvironment.binDirectory.appendingPathComponent("tokencache").path,
                                    ["photo", "--backend", "file", "--client", Fixtures.appOne, "--authority", authority,
                                     "--account", Fixtures.alice.username, "--output", file.path] + (refresh ? ["--refresh"] : []),
                                    environment: environment ?? self.environment)
        if output.status == 2 && output.stderr.contains("no photo") { return .none }
        guard output.status == 0 else { return .error(output.stderr) }
        let type = try #require(output.stdout.split(separator: "(").last?.split(separator: ",").first)
        return .photo(try Data(contentsOf: file), String(type))
    }

    func viaC(_ file: URL, refresh: Bool) throws -> Answer {
        let program = try CTestPrograms.testCAPI()
        let output = try runProcess(program, ["photo", Fixtures.appOne, authority, Fixtures.alice.username, file.path, refresh ? "1" : "0"],
                                    environment: environment)
        guard output.status == 0 else { return .error(String(output.stderr.split(separator: " ").dropFirst().prefix(2).joined(separator: " "))) }
        if output.stdout.hasPrefix("none") { return .none }
        return .photo(try Data(contentsOf: file), String(output.stdout.split(separator: " ")[0]))
    }

    func viaPython(_ file: URL, refresh: Bool) throws -> Answer {
        let source = """
            import sys, tokencache
            client, authority, account, path, refresh = sys.argv[1:]
            store = tokencache.Store.open(backend=tokencache.Backend.FILE)
            try:
                photo = store.account_photo(client, authority, account, refresh=refresh == "1")
            except tokencache.TokenCacheError as error:
                print(error.name, error.reason, file=sys.stderr)
                sys.exit(1)
            if photo is None:
                print("none")
            else:
                open(path, "wb").write(photo.data)
                print(photo.content_type)
            """
        let output = try runProcess("/usr/bin/python3", ["-c", source, Fixtures.appOne, authority, Fixtures.alice.username, file.path,
                                                         refresh ? "1" : "0"], environment: environment)
        guard output.status == 0 else { return .error(output.stderr.trimmingCharacters(in: .whitespacesAndNewlines)) }
        if output.stdout.hasPrefix("none") { return .none }
        return .photo(try Data(contentsOf: file), output.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    func answers(refresh: Bool) throws -> [String: Answer] {
        let directory = cli.dataHome
        return ["cli": try viaCLI(directory.appendingPathComponent("cli.img"), refresh: refresh),
                "c": try viaC(directory.appendingPathComponent("c.img"), refresh: refresh),
                "python": try viaPython(directory.appendingPathComponent("python.img"), refresh: refresh)]
    }

    func hasPhoto() throws -> Bool? {
        let output = try cli.run(["list", "--backend", "file", "--json"], withGroup: false)
        let document = try JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [String: Any]
        return ((document?["accounts"] as? [[String: Any]])?.first)?["has_photo"] as? Bool
    }

    @Test("CLI, C and Python get the same photo; Graph is asked once (the others read the cache); list --json says it is cached")
    func samePhoto() async throws {
        defer { cli.cleanUp() }
        try await signIn()
        try await idp.setPhoto(of: Fixtures.alice, contentType: "image/jpeg", data: image)
        #expect(try hasPhoto() == false)
        for (frontEnd, answer) in try answers(refresh: false) {
            #expect(answer == .photo(image, "image/jpeg"), "\(frontEnd)")
        }
        #expect(try await idp.graphRequests().filter { $0.path == "/v1.0/me/photo/$value" }.count == 1)
        #expect(try hasPhoto() == true)
    }

    @Test("No photo (Graph's 404): CLI exit 2 writing nothing, C success with NULL, Python None")
    func noPhoto() async throws {
        defer { cli.cleanUp() }
        try await signIn()
        for (frontEnd, answer) in try answers(refresh: true) {
            #expect(answer == .none, "\(frontEnd)")
        }
        #expect(!FileManager.default.fileExists(atPath: cli.dataHome.appendingPathComponent("cli.img").path))
    }

    @Test("Not an image, too large: the typed reasons photoNotAnImage and photoTooLarge in C and Python; the CLI says so")
    func typedErrors() async throws {
        defer { cli.cleanUp() }
        try await signIn()
        try await idp.setPhoto(of: Fixtures.alice, contentType: "text/plain", data: Data("hello".utf8))
        var answers = try answers(refresh: true)
        #expect(answers["c"] == .error("TOKENCACHE_E_SERVER_ERROR TOKENCACHE_REASON_PHOTO_NOT_AN_IMAGE:"))
        #expect(answers["python"] == .error("TOKENCACHE_E_SERVER_ERROR photo_not_an_image"))
        #expect(answers["cli"].map { if case .error(let text) = $0 { text.contains("not an image") } else { false } } == true)
        try await idp.setPhoto(of: Fixtures.alice, size: AccountPhoto.maximumBytes + 1)
        answers = try self.answers(refresh: true)
        #expect(answers["c"] == .error("TOKENCACHE_E_SERVER_ERROR TOKENCACHE_REASON_PHOTO_TOO_LARGE:"))
        #expect(answers["python"] == .error("TOKENCACHE_E_SERVER_ERROR photo_too_large"))
        #expect(try hasPhoto() == false)
    }

    @Test("The CLI takes Graph from the config file's graph_endpoint when the variable is unset; a plain-http endpoint off loopback is refused (exit 64)")
    func configFile() async throws {
        defer { cli.cleanUp() }
        try await signIn()
        try await idp.setPhoto(of: Fixtures.alice, data: image)
        let config = cli.dataHome.appendingPathComponent("config/tokencache")
        try FileManager.default.createDirectory(at: config, withIntermediateDirectories: true)
        try Data(#"{"graph_endpoint": "\#(idp.graphEndpoint.absoluteString)"}"#.utf8).write(to: config.appendingPathComponent("config.json"))
        var environment = self.environment
        environment["TOKENCACHE_GRAPH_ENDPOINT"] = nil
        #expect(try viaCLI(cli.dataHome.appendingPathComponent("a.img"), refresh: false, environment: environment) == .photo(image, "image/png"))
        environment["TOKENCACHE_GRAPH_ENDPOINT"] = "http://graph.example.com"
        let output = try runProcess(TestEnvironment.binDirectory.appendingPathComponent("tokencache").path,
                                    ["photo", "--backend", "file", "--client", Fixtures.appOne, "--authority", authority,
                                     "--output", cli.dataHome.appendingPathComponent("b.img").path], environment: environment)
        #expect(output.status == 64 && output.stderr.contains("TOKENCACHE_GRAPH_ENDPOINT"), "\(output.stderr)")
    }
}
