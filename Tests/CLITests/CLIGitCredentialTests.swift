import Foundation
import Testing
@testable import TokenCacheCore
import TokenCacheTestSupport
import TokenCacheTestIdentityProvider

/// `tokencache git-credential` (#61) driven by the real git (/usr/bin/git): clones, fetches and
/// pushes over smart HTTP from a loopback server (`git http-backend` behind
/// Fixtures/git_server.py) that takes only an active access token the test identity provider
/// issued for Azure DevOps' scope, as Azure Repos does.
@Suite("git credential helper", .harness)
struct CLIGitCredentialTests {
    static let scope = "499b84ac-1321-427f-aa17-267ca6975798/.default"
    let idp: FakeIdentityProvider
    let cli: CLI
    let server: GitServer

    init() throws {
        idp = try FakeIdentityProvider()
        cli = try CLI(backend: "file")
        server = try GitServer(idp: idp)
    }

    /// The stand-in server takes Azure DevOps tokens, as Azure Repos does; any other host must name its scope.
    static let azureDevOps = "499b84ac-1321-427f-aa17-267ca6975798/.default"

    /// The helper's arguments for the stand-in: its host known, app one at the local provider,
    /// the test's store.
    var helperArguments: [String] {
        ["--host", server.host, "--scopes", Self.azureDevOps, "--client", Fixtures.appOne, "--authority", idp.authority().url.absoluteString,
         "--backend", cli.backend, "--group", cli.group]
    }

    /// git as a developer runs it with `credential.helper = !tokencache git-credential ...`
    /// (only this helper: no system or global config), with no terminal to prompt on.
    func git(_ arguments: [String], helper: String? = nil, in directory: URL? = nil, path: String? = nil,
             environment base: [String: String]? = nil) throws -> ProcessOutput {
        let helper = helper ?? Self.helper(helperArguments)
        var environment = base ?? cli.environment
        if base == nil { environment["HOME"] = cli.dataHome.path }
        environment["GIT_CONFIG_NOSYSTEM"] = "1"
        environment["GIT_CONFIG_GLOBAL"] = "/dev/null"
        environment["GIT_TERMINAL_PROMPT"] = "0"
        environment["GIT_ASKPASS"] = nil
        environment["SSH_ASKPASS"] = nil
        if let path { environment["PATH"] = path }
        let git = ["/usr/bin/git"] + (directory.map { ["-C", $0.path] } ?? [])
            + ["-c", "credential.helper=", "-c", "credential.helper=\(helper)", "-c", "user.name=Alice", "-c", "user.email=alice@contoso.com"]
        // setsid: a session of its own, so no /dev/tty either (stdin is a pipe).
        return try runProcess("/usr/bin/setsid", ["-w"] + git + arguments, environment: environment)
    }

    /// `credential.helper` running the built tokencache with these arguments.
    static func helper(_ arguments: [String]) -> String {
        "!'\(TestEnvironment.binDirectory.appendingPathComponent("tokencache").path)' git-credential " + arguments.map { "'\($0)'" }.joined(separator: " ")
    }

    /// Alice signed in to app one, her access token expired, her refresh token known at the provider.
    func signInExpired() async throws {
        try await CLITokenRefreshTests.signInExpired(cli: cli, idp: idp)
    }

    @Test("A clone with only an expired token cached refreshes silently (one grant) and git gets the token for Azure DevOps' scope; fetch and push then use the cached token")
    func cloneRefreshesSilently() async throws {
        defer { cli.cleanUp() }
        try await signInExpired()
        let clone = cli.dataHome.appendingPathComponent("clone")
        let cloned = try git(["clone", server.url, clone.path])
        #expect(cloned.status == 0, "\(cloned.stderr)")
        #expect(FileManager.default.fileExists(atPath: clone.appendingPathComponent("README").path))
        let grants = try await idp.stats().grants
        #expect(grants.count == 1 && grants.allSatisfy { $0.outcome == "ok" }, "\(grants)")
        try Data("more\n".utf8).write(to: clone.appendingPathComponent("more.txt"))
        #expect(try git(["add", "more.txt"], in: clone).status == 0)
        #expect(try git(["commit", "-q", "-m", "more"], in: clone).status == 0)
        let pushed = try git(["push", "-q", "origin", "HEAD"], in: clone)
        #expect(pushed.status == 0, "\(pushed.stderr)")
        let fetched = try git(["fetch", "-q"], in: clone)
        #expect(fetched.status == 0, "\(fetched.stderr)")
        let stats = try server.stats()
        #expect(Set(stats.accepted).count == 1 && stats.accepted.allSatisfy { $0.hasPrefix("at-issued-") } && stats.refused == 0, "\(stats)")
        #expect(try await idp.stats().grants.count == 1, "the token was cached: no second grant")
    }

    @Test("A token the server refuses (revoked) makes git call erase, which replaces it: the next git command succeeds with a new token, and the account and its refresh token stay")
    func refusedTokenIsErased() async throws {
        defer { cli.cleanUp() }
        try await signInExpired()
        #expect(try git(["ls-remote", server.url]).status == 0)
        let first = try #require(try server.stats().accepted.last)
        try server.revokeLastToken()
        let refused = try git(["ls-remote", server.url])
        #expect(refused.status != 0 && refused.stderr.contains("Authentication failed"), "\(refused.stderr)")
        #expect(try server.stats().refused == 1)
        let retried = try git(["ls-remote", server.url])
        #expect(retried.status == 0, "\(retried.stderr)")
        #expect(retried.stdout.contains("refs/heads/main"))
        let second = try #require(try server.stats().accepted.last)
        #expect(second != first && second.hasPrefix("at-issued-"))
        #expect(try await idp.stats().grants.count == 2)
        let list = try cli.run(["list"])
        #expect(list.status == 0 && list.stdout.contains(Fixtures.alice.username), "\(list.stdout)")
    }

    @Test("Through the agent, from a container-like home (only TOKENCACHE_AGENT_SOCK set, nothing cached there): the clone refreshes at the agent, a refused token is replaced through the agent, and the home holds no cache afterwards")
    func throughTheAgent() async throws {
        defer { cli.cleanUp() }
        try await signInExpired()
        let socket = cli.dataHome.appendingPathComponent("agent.sock").path
        let started = try cli.run(["agent", "--daemon", "--socket", socket, "--authority", idp.authority().url.absoluteString])
        #expect(started.status == 0, "\(started.stderr)")
        // TOKENCACHE_AGENT_PID=N (or 'N'); killed however the test ends.
        let pid = started.stdout.split(separator: "\n").first { $0.hasPrefix("TOKENCACHE_AGENT_PID=") }
            .flatMap { Int32($0.dropFirst("TOKENCACHE_AGENT_PID=".count).drop { !$0.isNumber }.prefix(while: \.isNumber)) }
        defer { if let pid { kill(pid, SIGKILL) } }
        try #require(pid != nil, "\(started.stdout)")
        let home = try TestEnvironment.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: home) }
        var container = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("TOKENCACHE_") || $0.key == "TOKENCACHE_LOG_FILE" }
        container["DBUS_SESSION_BUS_ADDRESS"] = nil
        container["HOME"] = home.path
        container["XDG_DATA_HOME"] = home.appendingPathComponent(".local/share").path
        container["XDG_CONFIG_HOME"] = home.appendingPathComponent(".config").path
        container["TOKENCACHE_AGENT_SOCK"] = socket
        let helper = Self.helper(["--host", server.host, "--scopes", Self.azureDevOps, "--client", Fixtures.appOne])
        let clone = home.appendingPathComponent("clone")
        let cloned = try git(["clone", server.url, clone.path], helper: helper, environment: container)
        #expect(cloned.status == 0, "\(cloned.stderr)")
        #expect(try await idp.stats().grants.count == 1)
        try server.revokeLastToken()
        #expect(try git(["fetch", "-q"], helper: helper, in: clone, environment: container).status != 0)
        let fetched = try git(["fetch", "-q"], helper: helper, in: clone, environment: container)
        #expect(fetched.status == 0, "\(fetched.stderr)")
        #expect(try await idp.stats().grants.count == 2)
        // Nothing was cached in the container: no data directory was even made.
        #expect(!FileManager.default.fileExists(atPath: home.appendingPathComponent(".local/share").path))
    }

    @Test("No account and no terminal: git fails at once, showing the helper's one-line reason, and the server saw no credential")
    func noAccountNoTerminal() async throws {
        defer { cli.cleanUp() }
        let cloned = try git(["clone", server.url, cli.dataHome.appendingPathComponent("clone").path])
        #expect(cloned.status != 0)
        let line = try #require(cloned.stderr.split(separator: "\n").first { $0.hasPrefix("tokencache:") }, "\(cloned.stderr)")
        #expect(line.contains("No account signed in for git") && line.contains("tokencache login"), "\(line)")
        #expect(try server.stats().refused == 0)
        #expect(try await idp.stats().grants.isEmpty)
    }

    @Test("git's installed name: `credential.helper = tokencache ...` runs git-credential-tokencache from PATH, which runs `tokencache git-credential`")
    func installedName() async throws {
        defer { cli.cleanUp() }
        try await signInExpired()
        let bin = cli.dataHome.appendingPathComponent("bin")
        try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../scripts/git-credential-tokencache").standardizedFileURL
        try FileManager.default.copyItem(at: script, to: bin.appendingPathComponent("git-credential-tokencache"))
        let path = [bin.path, TestEnvironment.binDirectory.path, "/usr/bin", "/bin"].joined(separator: ":")
        let listed = try git(["ls-remote", server.url], helper: "tokencache " + helperArguments.joined(separator: " "), path: path)
        #expect(listed.status == 0 && listed.stdout.contains("refs/heads/main"), "\(listed.stderr)")
    }

    @Test("A host the helper does not know: it answers nothing and git asks the next helper, whose credential is used")
    func unknownHostFallsThrough() async throws {
        defer { cli.cleanUp() }
        try await signInExpired()
        // A valid token for the next helper to hand out, as a store would.
        let token = try cli.run(["token", "--client", Fixtures.appOne, "--authority", idp.authority().url.absoluteString, "--scopes", Self.scope])
        try #require(token.status == 0, "\(token.stderr)")
        let store = cli.dataHome.appendingPathComponent("next-helper.sh")
        let asked = cli.dataHome.appendingPathComponent("next-helper-asked")
        try Data("#!/bin/sh\ncat >/dev/null\necho \"$1\" >> '\(asked.path)'\n[ \"$1\" = get ] && printf 'username=next\\npassword=%s\\n' '\(token.stdout.filter { !$0.isNewline })'\nexit 0\n".utf8).write(to: store)
        chmod(store.path, 0o700)
        // Not --host: for tokencache, 127.0.0.1 is not a git host it serves.
        let unknown = Self.helper(["--client", Fixtures.appOne, "--backend", cli.backend, "--group", cli.group])
        let listed = try git(["-c", "credential.helper=\(store.path)", "ls-remote", server.url], helper: unknown)
        #expect(listed.status == 0 && listed.stdout.contains("refs/heads/main"), "\(listed.stderr)")
        // git asks the next helper only when the one before gave no credential.
        #expect(try String(contentsOf: asked, encoding: .utf8).hasPrefix("get\n"))  // (then store, on success)
        #expect(try await idp.stats().grants.count == 1, "the helper asked for no token for a host it does not serve")
    }

    @Test("Unknown hosts and plain http to a host not named get nothing (git asks its next helper); store is a no-op; with capability[]=authtype the answer is a Bearer credential")
    func protocolDetails() async throws {
        defer { cli.cleanUp() }
        try await signInExpired()
        for input in ["protocol=https\nhost=github.com\n\n", "protocol=http\nhost=dev.azure.com\n\n", "protocol=https\nhost=evil-dev.azure.com.example\n\n"] {
            let answer = try cli.run(["git-credential", "get"] + helperArguments, input: Data(input.utf8), withGroup: false)
            #expect(answer.status == 0 && answer.stdout.isEmpty && answer.stderr.isEmpty, "\(input): \(answer.stdout) \(answer.stderr)")
        }
        // A host named with --host gets a token over https, and over plain http only on loopback.
        let named = ["git-credential", "get", "--host", "git.example.com", "--scopes", Self.azureDevOps] + Array(helperArguments.dropFirst(4))
        let plain = try cli.run(named, input: Data("protocol=http\nhost=git.example.com\n\n".utf8), withGroup: false)
        #expect(plain.status == 0 && plain.stdout.isEmpty, "a token went over plain http: \(plain.stdout)")
        let noScope = try cli.run(["git-credential", "get", "--host", "git.example.com"], input: Data("protocol=https\nhost=git.example.com\n\n".utf8), withGroup: false)
        #expect(noScope.status == 64 && noScope.stdout.isEmpty && noScope.stderr.contains("--host needs --scopes"), "\(noScope.stdout)\(noScope.stderr)")
        let stored = try cli.run(["git-credential", "store"] + helperArguments,
                                 input: Data("protocol=http\nhost=\(server.host)\nusername=u\npassword=p\n\n".utf8), withGroup: false)
        #expect(stored.status == 0 && stored.stdout.isEmpty)
        let basic = try cli.run(["git-credential", "get"] + helperArguments, input: Data("protocol=http\nhost=\(server.host)\n\n".utf8), withGroup: false)
        #expect(basic.status == 0, "\(basic.stderr)")
        #expect(basic.stdout.contains("username=\(Fixtures.alice.username)\n") && basic.stdout.contains("password=at-issued-"), "\(basic.stdout)")
        let bearer = try cli.run(["git-credential", "get"] + helperArguments,
                                 input: Data("capability[]=authtype\nprotocol=http\nhost=\(server.host)\n\n".utf8), withGroup: false)
        #expect(bearer.status == 0, "\(bearer.stderr)")
        #expect(bearer.stdout.contains("authtype=Bearer\n") && bearer.stdout.contains("credential=at-issued-") && !bearer.stdout.contains("password="),
                "\(bearer.stdout)")
        #expect(try await idp.stats().grants.count == 1, "the second get used the cached token")
    }

    @Test("--configure writes the Azure Repos helper settings (and each --host's) to the global git config and prints them")
    func configure() throws {
        defer { cli.cleanUp() }
        let config = cli.dataHome.appendingPathComponent("gitconfig")
        var configuring = cli
        configuring.environmentOverrides["GIT_CONFIG_GLOBAL"] = config.path
        let withoutScopes = try configuring.run(["git-credential", "--configure", "--host", "git.example.com"], withGroup: false)
        #expect(withoutScopes.status == 64 && withoutScopes.stderr.contains("--host needs --scopes"), "\(withoutScopes.stderr)")
        let written = try configuring.run(["git-credential", "--configure", "--host", "git.example.com", "--scopes", "api://git/.default"], withGroup: false)
        #expect(written.status == 0, "\(written.stderr)")
        #expect(written.stdout.contains("credential.https://dev.azure.com.helper \"\"\ngit config --global --add credential.https://dev.azure.com.helper \"tokencache\""),
                "\(written.stdout)")
        func get(_ key: String) throws -> String {
            try runProcess("/usr/bin/git", ["config", "--file", config.path, "--get", key]).stdout.trimmingCharacters(in: .newlines)
        }
        #expect(try get("credential.https://dev.azure.com.helper") == "tokencache")  // --get: the last value
        #expect(try get("credential.https://dev.azure.com.usehttppath") == "true")
        #expect(try get("credential.https://*.visualstudio.com.helper") == "tokencache")
        #expect(try get("credential.https://git.example.com.helper") == "tokencache --host 'git.example.com' --scopes 'api://git/.default'")
        // Idempotent: a second run replaces the values rather than adding helpers.
        #expect(try configuring.run(["git-credential", "--configure"], withGroup: false).status == 0)
        let all = try runProcess("/usr/bin/git", ["config", "--file", config.path, "--get-all", "credential.https://dev.azure.com.helper"])
        #expect(all.stdout == "\ntokencache\n")
    }

    @Test("With `credential.helper = store` for every host set before --configure, git neither asks store for Azure Repos nor hands it the token to keep: ~/.git-credentials is never written, and tokencache is the only helper git runs there")
    func configureKeepsTokensFromOtherHelpers() throws {
        defer { cli.cleanUp() }
        let home = cli.dataHome, config = home.appendingPathComponent("gitconfig"), stored = home.appendingPathComponent(".git-credentials")
        let bin = home.appendingPathComponent("bin")
        try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
        // Records each operation git hands to the `tokencache` helper: git runs git-credential-tokencache from PATH.
        let asked = home.appendingPathComponent("tokencache-asked")
        try Data("#!/bin/sh\ncat >/dev/null\necho \"$1\" >> '\(asked.path)'\n".utf8).write(to: bin.appendingPathComponent("git-credential-tokencache"))
        chmod(bin.appendingPathComponent("git-credential-tokencache").path, 0o700)
        try Data("[credential]\n\thelper = store --file '\(stored.path)'\n".utf8).write(to: config)
        var configuring = cli
        configuring.environmentOverrides["GIT_CONFIG_GLOBAL"] = config.path
        let written = try configuring.run(["git-credential", "--configure"], withGroup: false)
        try #require(written.status == 0, "\(written.stderr)")

        var environment = cli.environment
        environment["HOME"] = home.path
        environment["GIT_CONFIG_GLOBAL"] = config.path
        environment["GIT_CONFIG_NOSYSTEM"] = "1"
        environment["PATH"] = [bin.path, "/usr/bin", "/bin"].joined(separator: ":")
        // What git does after a fetch the server accepted: `store` to every helper in the URL's list.
        let approved = try runProcess("/usr/bin/git", ["credential", "approve"],
                                      input: Data("protocol=https\nhost=dev.azure.com\npath=org/_git/repo\nusername=alice\npassword=token-from-tokencache\n\n".utf8),
                                      environment: environment)
        #expect(approved.status == 0, "\(approved.stderr)")
        #expect(!FileManager.default.fileExists(atPath: stored.path), "git gave the token to `store`: \((try? String(contentsOf: stored, encoding: .utf8)) ?? "")")
        #expect(try String(contentsOf: asked, encoding: .utf8) == "store\n")
        // A host tokencache is not configured for keeps the user's own helper.
        let elsewhere = try runProcess("/usr/bin/git", ["credential", "approve"],
                                       input: Data("protocol=https\nhost=github.com\nusername=bob\npassword=elsewhere\n\n".utf8),
                                       environment: environment)
        #expect(elsewhere.status == 0, "\(elsewhere.stderr)")
        #expect(try String(contentsOf: stored, encoding: .utf8).contains("github.com"))
    }
}

/// Fixtures/git_server.py on a loopback port, serving one bare repository (`repo.git`, a commit on
/// main) for one test.
final class GitServer: @unchecked Sendable {
    // @unchecked: set once in init and only read afterwards.
    let root: URL
    private let server: StandInServer

    var port: Int { server.port }
    var host: String { "127.0.0.1:\(port)" }
    var url: String { "http://\(host)/repo.git" }

    init(idp: FakeIdentityProvider) throws {
        root = try TestEnvironment.temporaryDirectory()
        let repository = root.appendingPathComponent("repo.git").path, source = root.appendingPathComponent("source").path
        let setUp: [[String]] = [
            ["init", "-q", "--bare", "-b", "main", repository],
            ["-C", repository, "config", "http.receivepack", "true"],
            ["init", "-q", "-b", "main", source],
            ["-C", source, "commit", "-q", "--allow-empty", "-m", "first"],
        ]
        for arguments in setUp { try Self.git(arguments) }
        try Data("hello\n".utf8).write(to: URL(fileURLWithPath: source).appendingPathComponent("README"))
        for arguments in [["add", "README"], ["commit", "-q", "-m", "readme"], ["push", "-q", repository, "main"]] {
            try Self.git(["-C", source] + arguments)
        }
        server = try StandInServer(script: "git_server.py", arguments: [
            "--root", root.path, "--idp", "http://\(idp.host):\(idp.port)", "--scope", CLIGitCredentialTests.scope])
    }

    deinit {
        try? FileManager.default.removeItem(at: root)
    }

    private static func git(_ arguments: [String]) throws {
        let output = try runProcess("/usr/bin/git", ["-c", "user.name=Test", "-c", "user.email=test@example.com"] + arguments)
        guard output.status == 0 else { throw TokenCacheError(.fileSystem, "git \(arguments) failed: \(output.stderr)") }
    }

    func stats() throws -> StandInServer.Stats { try server.stats(at: "http://\(host)/_stats") }

    /// The server stops honouring the last token it let through (revoked at the provider).
    func revokeLastToken() throws {
        let output = try runProcess("/usr/bin/curl", ["-sf", "-X", "POST", "http://\(host)/_revoke"])
        guard output.status == 0 else { throw TokenCacheError(.network, "revoke failed: \(output.stderr)") }
    }
}
