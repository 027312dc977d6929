import Foundation
import Testing
@testable import TokenCache
@testable import TokenCacheCore
import TokenCacheTestSupport
import TokenCacheTestIdentityProvider

/// A `tokencache agent` running as a subprocess for one test, on the desktop's store.
final class RunningAgent: @unchecked Sendable {
    // @unchecked: set once in init, only read afterwards.
    let process: Process
    /// The variables it printed (TOKENCACHE_AGENT_SOCK, IDENTITY_ENDPOINT, …).
    let variables: [String: String]
    /// Its standard error (the request log lines).
    let logFile: URL

    var socket: String { variables["TOKENCACHE_AGENT_SOCK"] ?? "" }

    /// Starts `tokencache agent ARGUMENTS` with the desktop CLI's store and environment, and
    /// waits for its shell lines.
    init(desktop: CLI, _ arguments: [String]) throws {
        logFile = desktop.dataHome.appendingPathComponent("agent-\(UUID().uuidString.prefix(6)).log")
        FileManager.default.createFile(atPath: logFile.path, contents: nil, attributes: [.posixPermissions: 0o600])
        process = Process()
        process.executableURL = TestEnvironment.binDirectory.appendingPathComponent("tokencache")
        process.arguments = ["agent", "--backend", desktop.backend, "--group", desktop.group] + arguments
        process.environment = desktop.environment
        let output = Pipe()
        process.standardOutput = output
        process.standardError = try FileHandle(forWritingTo: logFile)
        process.standardInput = FileHandle.nullDevice
        try process.run()
        var text = ""
        while !text.contains("echo Agent pid"), let byte = try output.fileHandleForReading.read(upToCount: 1), !byte.isEmpty {
            text += String(decoding: byte, as: UTF8.self)
        }
        var variables: [String: String] = [:]
        for line in text.split(separator: "\n") {
            // NAME='value'; export NAME;
            guard let equals = line.firstIndex(of: "="), let end = line.range(of: "'; export") else { continue }
            let value = line[line.index(equals, offsetBy: 2)..<end.lowerBound]
            variables[String(line[..<equals])] = value.replacingOccurrences(of: "'\\''", with: "'")
        }
        self.variables = variables
        guard variables["TOKENCACHE_AGENT_SOCK"] != nil else {
            process.terminate()
            throw TokenCacheError(.agentUnavailable, "The agent did not start: \((try? String(contentsOf: logFile, encoding: .utf8)) ?? "")")
        }
    }

    var log: String { (try? String(contentsOf: logFile, encoding: .utf8)) ?? "" }

    func stop() {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
    }

    deinit { stop() }
}

/// The agent tests' two homes: a desktop whose group holds a family refresh token issued by
/// the local identity provider (app one signed in; app two never did), and a container.
struct AgentScenario {
    let idp: FakeIdentityProvider
    let desktop: CLI
    /// A fresh home with no cache, no key, no keyring.
    let containerHome: URL
    /// A private directory for sockets (paths must stay under 108 bytes).
    let socketDirectory: URL

    static let refreshToken = "rt-initial-family"

    init() async throws {
        idp = try FakeIdentityProvider()
        desktop = try CLI(backend: "file")
        var response = Fixtures.response(for: Fixtures.alice, scope: "User.Read", foci: "1", tag: "mail")
        response["refresh_token"] = Self.refreshToken
        let saved = try desktop.run(["save", "--client", Fixtures.appOne, "--authority", idp.authority().url.absoluteString,
                                     "--scopes", "User.Read"], input: Fixtures.json(response))
        #expect(saved.status == 0, "\(saved.stderr)")
        try await idp.seed(refreshToken: Self.refreshToken, user: Fixtures.alice, clientID: Fixtures.appOne, family: "1")
        containerHome = try TestEnvironment.temporaryDirectory()
        socketDirectory = URL(fileURLWithPath: "/tmp/tc-agent-\(UUID().uuidString.prefix(8))")
    }

    var authority: String { idp.authority().url.absoluteString }

    func startAgent(_ arguments: [String] = []) throws -> RunningAgent {
        try RunningAgent(desktop: desktop, ["--socket", socketDirectory.appendingPathComponent("agent.sock").path] + arguments)
    }

    /// The container's environment: its own HOME and XDG directories, no D-Bus, no tokencache
    /// setting but the agent's socket.
    func containerEnvironment(socket: String) -> [String: String] {
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("TOKENCACHE_") || $0.key == "TOKENCACHE_LOG_FILE" }
        environment["DBUS_SESSION_BUS_ADDRESS"] = nil
        environment["HOME"] = containerHome.path
        environment["XDG_DATA_HOME"] = containerHome.appendingPathComponent(".local/share").path
        environment["XDG_CONFIG_HOME"] = containerHome.appendingPathComponent(".config").path
        environment["XDG_RUNTIME_DIR"] = containerHome.appendingPathComponent("run").path
        environment["NO_COLOR"] = "1"
        environment["TOKENCACHE_AGENT_SOCK"] = socket
        return environment
    }

    /// `tokencache ARGUMENTS` in the container.
    func inContainer(_ arguments: [String], socket: String) throws -> ProcessOutput {
        try runProcess(TestEnvironment.binDirectory.appendingPathComponent("tokencache").path, arguments,
                       environment: containerEnvironment(socket: socket))
    }

    /// Every file under the container's home, with its contents.
    func containerFiles() -> [String: String] {
        var files: [String: String] = [:]
        let walker = FileManager.default.enumerator(atPath: containerHome.path)
        while let name = walker?.nextObject() as? String {
            let path = containerHome.appendingPathComponent(name).path
            if let data = FileManager.default.contents(atPath: path) { files[name] = String(decoding: data, as: UTF8.self) }
        }
        return files
    }

    func cleanUp() {
        desktop.cleanUp()
        try? FileManager.default.removeItem(at: containerHome)
        try? FileManager.default.removeItem(at: socketDirectory)
    }
}

/// Runs Fixtures/agent_client.py (an independent client of the protocol) with the system Python.
func agentClientScript(_ arguments: [String], as attacker: [String] = []) throws -> ProcessOutput {
    let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../Fixtures/agent_client.py").standardizedFileURL.path
    // On standard input: a user without access to the checkout can run it too.
    let source = try Data(contentsOf: URL(fileURLWithPath: script))
    if attacker.isEmpty { return try runProcess("/usr/bin/python3", ["-"] + arguments, input: source) }
    return try runProcess("/usr/bin/setpriv", attacker + ["/usr/bin/python3", "-"] + arguments, input: source)
}

/// `setpriv` arguments that make a process uid/gid 65534 (nobody) with no groups.
let asNobody = ["--reuid", "65534", "--regid", "65534", "--clear-groups"]
