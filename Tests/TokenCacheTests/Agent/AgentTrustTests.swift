import Foundation
import Testing
@testable import TokenCache
@testable import TokenCacheCore
import TokenCacheTestSupport

/// The agent's client against a fake agent another local user runs (#44 item 1): uid 65534
/// listens at the path the user is told to use, answers a token of its choosing, and notes
/// every byte it receives. The CLI and the C library (and so Python, tested in
/// python/tests) refuse it with reason agentUntrusted and send nothing.
@Suite("Agent trust", .harness, .serialized)
struct AgentTrustTests {
    /// The fake agent: Python run as nobody, replying `reply` to any connection and logging
    /// "connection N bytes" for each.
    final class FakeAgent: @unchecked Sendable {
        // @unchecked: set in init, only read afterwards.
        let process: Process
        let socket: String
        let log: String

        init(directory: String, reply: [UInt8]) throws {
            socket = directory + "/agent.sock"
            log = directory + "/fake-agent.log"
            let source = """
                import base64, socket, sys
                path, log, reply = sys.argv[1], sys.argv[2], base64.b64decode(sys.argv[3])
                s = socket.socket(socket.AF_UNIX)
                s.bind(path)
                s.listen(8)
                open(log, "a").close()
                print("listening", flush=True)
                while True:
                    c, _ = s.accept()
                    c.settimeout(5)
                    got = b""
                    try:
                        while len(got) < 4 or len(got) < 4 + int.from_bytes(got[:4], "big"):
                            chunk = c.recv(65536)
                            if not chunk:
                                break
                            got += chunk
                    except OSError:
                        pass
                    with open(log, "a") as f:
                        f.write("connection %d bytes\\n" % len(got))
                    try:
                        c.sendall(reply)
                    except OSError:
                        pass
                    c.close()
                """
            process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            process.arguments = asNobody + ["/usr/bin/python3", "-c", source, socket, log, Data(reply).base64EncodedString()]
            let output = Pipe()
            process.standardOutput = output
            try process.run()
            _ = try output.fileHandleForReading.read(upToCount: 10)  // "listening"
        }

        /// What it received: one line per connection.
        var connections: [String] {
            ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
        }

        /// SIGKILL: Foundation starts children with every signal blocked, so SIGTERM would wait.
        func stop() {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    /// A token answer in the protocol's framing (a 4-byte length, then JSON).
    static let forgedToken: [UInt8] = {
        let body = try! JSONSerialization.data(withJSONObject: [
            "version": AgentProtocol.version, "ok": true,
            "token": ["access_token": "forged-token", "token_type": "Bearer", "expires_on": 4_102_444_800,
                      "scopes": ["User.Read"], "username": "alice@contoso.com"]])
        let length = UInt32(body.count)
        return [UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)] + Array(body)
    }()

    /// A world-writable directory with the sticky bit, as /tmp is, for the fake agent's socket.
    func sharedDirectory() throws -> String {
        let path = "/tmp/tc-shared-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o1777])
        chmod(path, 0o1777)  // past the umask
        return path
    }

    func container() throws -> (home: URL, environment: @Sendable (String) -> [String: String]) {
        let home = try TestEnvironment.temporaryDirectory()
        return (home, { socket in
            var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("TOKENCACHE_") || $0.key == "TOKENCACHE_LOG_FILE" }
            environment["DBUS_SESSION_BUS_ADDRESS"] = nil
            environment["HOME"] = home.path
            environment["XDG_DATA_HOME"] = home.appendingPathComponent(".local/share").path
            environment["XDG_CONFIG_HOME"] = home.appendingPathComponent(".config").path
            environment["XDG_RUNTIME_DIR"] = home.appendingPathComponent("run").path
            environment["TOKENCACHE_AGENT_SOCK"] = socket
            return environment
        })
    }

    func tokenThroughCLI(_ environment: [String: String]) throws -> ProcessOutput {
        try runProcess(TestEnvironment.binDirectory.appendingPathComponent("tokencache").path,
                       ["token", "--client", Fixtures.appOne, "--scopes", "User.Read", "--account", "alice@contoso.com"],
                       environment: environment)
    }

    @Test("A socket in a directory other users can write (a /tmp path for ssh -R) is refused before connecting: the CLI fails naming it, the fake agent gets no connection, the forged token is never printed")
    func sharedDirectoryRefused() async throws {
        let directory = try sharedDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let fake = try FakeAgent(directory: directory, reply: Self.forgedToken)
        defer { fake.stop() }
        let (home, environment) = try container()
        defer { try? FileManager.default.removeItem(at: home) }
        let cli = try await offThePool { try tokenThroughCLI(environment(fake.socket)) }
        #expect(cli.status != 0)
        #expect(cli.stderr.contains("not trusted") && cli.stderr.contains("other users"), "\(cli.stderr)")
        #expect(!cli.stdout.contains("forged-token") && !cli.stderr.contains("forged-token"))
        #expect(fake.connections.isEmpty, "\(fake.connections)")

        // In-process: the typed reason, and the same refusal.
        let error = #expect(throws: TokenCacheError.self) {
            _ = try AgentClient(path: fake.socket).token(clientID: try ClientID(Fixtures.appOne), scopes: ["User.Read"])
        }
        #expect(error?.code == .agentUnavailable)
        #expect(error?.reason == .agentUntrusted(path: fake.socket, uid: 0))
        #expect(fake.connections.isEmpty)
    }

    @Test("A socket in the user's own directory whose listener runs as uid 65534 is refused by SO_PEERCRED before anything is sent: CLI and C fail with agentUntrusted, the fake agent receives 0 bytes")
    func foreignListenerRefused() async throws {
        let shared = try sharedDirectory()
        defer { try? FileManager.default.removeItem(atPath: shared) }
        let fake = try FakeAgent(directory: shared, reply: Self.forgedToken)
        defer { fake.stop() }
        // The socket moved into a directory of this user's, and made this user's file: only
        // the listener's credentials tell it apart.
        let own = "/tmp/tc-own-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: own, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(atPath: own) }
        let socket = own + "/agent.sock"
        #expect(rename(fake.socket, socket) == 0)
        #expect(chown(socket, getuid(), getgid()) == 0)
        let (home, environment) = try container()
        defer { try? FileManager.default.removeItem(at: home) }

        let cli = try await offThePool { try tokenThroughCLI(environment(socket)) }
        #expect(cli.status != 0)
        #expect(cli.stderr.contains("not trusted") && cli.stderr.contains("uid 65534"), "\(cli.stderr)")
        #expect(!cli.stdout.contains("forged-token"))

        let build = try TestEnvironment.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: build) }
        let program = try CTestPrograms.testCAPI()
        let c = try await offThePool {
            try runProcess(program, ["silent", "auto", Fixtures.appOne, "https://login.microsoftonline.com/common", "alice@contoso.com", "User.Read"],
                           environment: environment(socket))
        }
        #expect(c.status == 1)
        #expect(c.stderr.contains("TOKENCACHE_E_BACKEND_UNAVAILABLE TOKENCACHE_REASON_AGENT_UNTRUSTED"), "\(c.stderr)")
        #expect(!c.stdout.contains("forged-token"))
        // No client sent a byte. How many lines the fake has logged by now is not the point: it
        // logs a connection after the client has closed it, so the last may not be there yet.
        #expect(!fake.connections.isEmpty && fake.connections.allSatisfy { $0 == "connection 0 bytes" }, "\(fake.connections)")
    }

    @Test("TOKENCACHE_AGENT_UID trusts the agent's uid when a container's user differs from the host's; the agent's error is then shown as its words, and its hint without links")
    func namedUIDIsTrusted() async throws {
        let shared = try sharedDirectory()
        defer { try? FileManager.default.removeItem(atPath: shared) }
        let own = "/tmp/tc-own-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: own, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o755])
        defer { try? FileManager.default.removeItem(atPath: own) }
        let phishing = AgentProtocol.encode(AgentProtocol.Response(TokenCacheError(
            .interactionRequired, "Sign in again.", hint: "Visit https://evil.example/device or evil.example/login with code ABCD")))
        for (reply, expectToken) in [(Self.forgedToken, true), (phishing, false)] {
            let fake = try FakeAgent(directory: shared, reply: reply)
            defer { fake.stop() }
            let socket = own + "/agent-\(expectToken).sock"
            #expect(rename(fake.socket, socket) == 0)
            #expect(chown(socket, 65534, 65534) == 0)
            let (home, environment) = try container()
            defer { try? FileManager.default.removeItem(at: home) }
            var trusted = environment(socket)
            trusted["TOKENCACHE_AGENT_UID"] = "65534"
            let variables = trusted
            let cli = try await offThePool { try tokenThroughCLI(variables) }
            if expectToken {
                #expect(cli.status == 0 && cli.stdout == "forged-token\n", "\(cli.stderr)")
            } else {
                #expect(cli.status != 0)
                #expect(cli.stderr.contains("The token agent at \(socket) answered: Sign in again."), "\(cli.stderr)")
                #expect(cli.stderr.contains("The agent suggests: Visit [link removed] or [link removed] with code ABCD"), "\(cli.stderr)")
                #expect(!cli.stderr.contains("evil.example"), "\(cli.stderr)")
            }
        }
    }
}
