import Foundation
import Testing
@testable import TokenCache
@testable import TokenCacheCore
import TokenCacheTestSupport

/// The agent's App Service managed-identity endpoint (`--managed-identity`), against the real
/// azure-identity from PyPI (.venv-azure-identity, made by scripts/install-deps.sh).
@Suite("AgentManagedIdentity", .harness, .serialized)
struct AgentManagedIdentityTests {
    static var azureIdentityPython: String? {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent(".venv-azure-identity/bin/python").path
        return FileManager.default.isExecutableFile(atPath: path) ? path : nil
    }

    func startAgent(_ scenario: AgentScenario) throws -> RunningAgent {
        try scenario.startAgent(["--authority", scenario.authority, "--managed-identity", "--client", Fixtures.appTwo,
                                 "--account", Fixtures.alice.username])
    }

    /// `curl -i` of the endpoint with these headers, as `setpriv` arguments' user when given.
    func get(_ url: String, headers: [String], as user: [String] = []) throws -> ProcessOutput {
        let curl = ["/usr/bin/curl", "-sS", "-i", "--max-time", "20"] + headers.flatMap { ["-H", $0] } + [url]
        return user.isEmpty ? try runProcess(curl[0], Array(curl.dropFirst())) : try runProcess("/usr/bin/setpriv", user + curl)
    }

    /// A started agent's endpoint: the URL of a token for management.azure.com, the header's value, the port.
    func endpoint(of agent: RunningAgent) throws -> (url: String, header: String, port: Int) {
        let endpoint = try #require(agent.variables["IDENTITY_ENDPOINT"]), header = try #require(agent.variables["IDENTITY_HEADER"])
        return (endpoint + "?api-version=2019-08-01&resource=https://management.azure.com", header, try #require(URL(string: endpoint)?.port))
    }

    /// `python3 -c SOURCE PORT` as uid 65534, started; its standard input and output are pipes.
    func attacker(_ source: String, port: Int) throws -> (process: Process, input: Pipe, output: Pipe) {
        let attacker = Process()
        attacker.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        attacker.arguments = asNobody + ["/usr/bin/python3", "-c", source, "\(port)"]
        let (input, output) = (Pipe(), Pipe())
        (attacker.standardInput, attacker.standardOutput) = (input, output)
        try attacker.run()
        return (attacker, input, output)
    }

    @Test("requests without the identity header, with a wrong one, or another user's forged ones get 401 and an empty body, a malformed head 400; nothing is redeemed")
    func forgedRequestsGet401() async throws {
        let scenario = try await AgentScenario()
        defer { scenario.cleanUp() }
        let agent = try startAgent(scenario)
        defer { agent.stop() }
        let endpoint = try #require(agent.variables["IDENTITY_ENDPOINT"]), header = try #require(agent.variables["IDENTITY_HEADER"])
        #expect(endpoint.hasPrefix("http://127.0.0.1:") && header.count == 64)
        let url = endpoint + "?api-version=2019-08-01&resource=https://management.azure.com"
        let wrong = String(header.reversed())
        let forged: [([String], [String])] = [
            ([], []), (["X-IDENTITY-HEADER: \(wrong)"], []), (["X-IDENTITY-HEADER: \(header.prefix(63))"], []),
            (["X-IDENTITY-HEADER:"], []), (["X-IDENTITY-HEADER: \(wrong)", "X-IDENTITY-HEADER: \(header)"], []),
            (["Metadata: true"], asNobody), (["X-IDENTITY-HEADER: \(wrong)"], asNobody),
        ]
        for (headers, user) in forged {
            let answer = try get(url, headers: headers, as: user)
            #expect(answer.stdout.hasPrefix("HTTP/1.1 401 Unauthorized\r\n"), "\(headers): \(answer.stdout) \(answer.stderr)")
            #expect(answer.stdout.contains("Content-Length: 0\r\n") && answer.stdout.hasSuffix("\r\n\r\n"), "\(answer.stdout)")
        }
        // Even a malformed request is not told more than 401.
        let malformed = try get(endpoint + "?resource=x", headers: ["X-IDENTITY-HEADER: nope"])
        #expect(malformed.stdout.hasPrefix("HTTP/1.1 401 "))
        // A head that is not HTTP/1.1 (here a folded header line) gets 400 and nothing more, even with the right header.
        let port = try #require(URL(string: endpoint)?.port)
        let folded = try rawRequest(port: port, "GET /msi/token?api-version=2019-08-01&resource=x HTTP/1.1\r\nX-IDENTITY-HEADER: \(header)\r\n folded\r\n\r\n")
        #expect(folded.hasPrefix("HTTP/1.1 400 Bad Request\r\n") && folded.contains("Content-Length: 0\r\n"), "\(folded)")
        #expect(try await scenario.idp.stats().token_requests == 0)

        let good = try get(url, headers: ["X-IDENTITY-HEADER: \(header)"])
        #expect(good.stdout.hasPrefix("HTTP/1.1 200 OK\r\n"), "\(good.stdout)")
        let body = try #require(good.stdout.components(separatedBy: "\r\n\r\n").last)
        let object = try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any]
        #expect(object?["access_token"] as? String == "at-issued-1")
        #expect(object?["resource"] as? String == "https://management.azure.com" && object?["token_type"] as? String == "Bearer")
        #expect(Int(object?["expires_on"] as? String ?? "") ?? 0 > Int(Date().timeIntervalSince1970))
        #expect(!body.contains("rt-") && !body.contains("eyJ"))
        #expect(agent.log.contains("managed-identity: token (client \(Fixtures.appTwo), scopes https://management.azure.com/.default"), "\(agent.log)")
    }

    @Test("another user's 40 slow connections (a byte every 5 s) cannot stall the endpoint: they are refused and logged with their uid, and this user's request is answered")
    func slowForeignConnectionsCannotStall() async throws {
        let scenario = try await AgentScenario()
        defer { scenario.cleanUp() }
        let agent = try startAgent(scenario)
        defer { agent.stop() }
        let (url, header, port) = try endpoint(of: agent)
        let source = """
            import socket, sys, time
            connections = []
            for _ in range(40):
                s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
                s.sendall(b"G")
                connections.append(s)
            print("connected", flush=True)
            for _ in range(12):
                time.sleep(5)
                for s in connections:
                    try:
                        s.sendall(b"E")
                    except OSError:
                        pass
            """
        let (attacker, _, output) = try attacker(source, port: port)
        defer { kill(attacker.processIdentifier, SIGKILL); attacker.waitUntilExit() }
        #expect(try output.fileHandleForReading.read(upToCount: 9) == Data("connected".utf8))
        // curl gives up after 20 s: a stalled endpoint fails here, an answered one passes at once.
        let good = try await offThePool { try get(url, headers: ["X-IDENTITY-HEADER: \(header)"]) }
        #expect(good.stdout.hasPrefix("HTTP/1.1 200 OK\r\n"), "\(good.stdout) \(good.stderr)")
        #expect(agent.log.contains("refused: connection from uid 65534"), "\(agent.log)")
    }

    @Test("another user's flood (1,200 connections held open, half with forged requests) is counted, not logged: this user's requests are answered during it and their log entries kept")
    func connectionFloodIsCountedNotLogged() async throws {
        let scenario = try await AgentScenario()
        defer { scenario.cleanUp() }
        let agent = try startAgent(scenario)
        defer { agent.stop() }
        let (url, header, port) = try endpoint(of: agent)
        let before = try get(url, headers: ["X-IDENTITY-HEADER: \(header)"])
        #expect(before.stdout.hasPrefix("HTTP/1.1 200 OK\r\n"), "\(before.stdout) \(before.stderr)")

        // uid 65534 opens 1,200 connections and holds them; every other one sends a request with a
        // forged header. Once told (a line on its standard input), it waits for the endpoint to close
        // each (so each was accepted and counted) and prints how many of its requests got 401.
        let source = """
            import resource, socket, sys
            hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            forged = b"GET /msi/token?api-version=2019-08-01&resource=https://management.azure.com HTTP/1.1\\r\\nHost: x\\r\\nX-IDENTITY-HEADER: " + b"0" * 64 + b"\\r\\n\\r\\n"
            connections = []
            for index in range(1200):
                s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
                if index % 2:
                    try:
                        s.sendall(forged)
                    except OSError:
                        pass
                connections.append(s)
            print("connected", flush=True)
            sys.stdin.readline()
            unauthorized = 0
            for s in connections:
                s.settimeout(300)
                answer = b""
                try:
                    while True:
                        chunk = s.recv(4096)
                        if not chunk:
                            break
                        answer += chunk
                except OSError:
                    pass
                unauthorized += answer.startswith(b"HTTP/1.1 401 ")
                s.close()
            print("closed", unauthorized, flush=True)
            """
        let (attacker, input, output) = try attacker(source, port: port)
        defer { kill(attacker.processIdentifier, SIGKILL); attacker.waitUntilExit() }
        var line = ""
        while !line.hasSuffix("\n"), let byte = try output.fileHandleForReading.read(upToCount: 1), !byte.isEmpty {
            line += String(decoding: byte, as: UTF8.self)
        }
        #expect(line == "connected\n")

        // This user's request while the other user's connections are open.
        let during = try await offThePool { try get(url, headers: ["X-IDENTITY-HEADER: \(header)"]) }
        #expect(during.stdout.hasPrefix("HTTP/1.1 200 OK\r\n"), "\(during.stdout) \(during.stderr)")
        try input.fileHandleForWriting.write(contentsOf: Data("go\n".utf8))
        let closed = String(decoding: try output.fileHandleForReading.readToEnd() ?? Data(), as: UTF8.self)
        let unauthorized = Int(closed.split(separator: " ").last?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "") ?? -1
        #expect(closed.hasPrefix("closed ") && unauthorized >= 0, "\(closed)")

        // Both of this user's requests are in the log, ahead of one line that counts the 1,200 refusals.
        let requests = try scenario.inContainer(["agent", "--list-requests", "--json"], socket: agent.socket)
        let logged = try JSONSerialization.jsonObject(with: Data(requests.stdout.utf8)) as? [[String: Any]] ?? []
        let granted = logged.filter { $0["channel"] as? String == "managed-identity" && $0["outcome"] as? String == "granted" }
        #expect(granted.count == 2, "\(requests.stdout.prefix(2000))")
        let counted = logged.filter { $0["op"] as? String == "connect" }
        #expect(counted.count == 1 && counted.first?["uid"] as? Int == 65534, "\(counted)")
        #expect((counted.first?["outcome"] as? String)?.hasPrefix("refused: 1200 connections from other users") == true, "\(counted)")
        // The agent's standard error names the other user once, not once per connection.
        #expect(agent.log.components(separatedBy: "refused: connection from uid 65534").count == 2, "\(agent.log.suffix(2000))")
    }

    @Test("the real azure-identity's ManagedIdentityCredential and DefaultAzureCredential get the signed-in user's token from the endpoint with no code change")
    func azureIdentityGetsToken() async throws {
        let python = Self.azureIdentityPython
        if python == nil && TestEnvironment.isCI { Issue.record(".venv-azure-identity is missing: run scripts/install-deps.sh") }
        guard let python else { return }
        let scenario = try await AgentScenario()
        defer { scenario.cleanUp() }
        let agent = try startAgent(scenario)
        defer { agent.stop() }
        var environment = scenario.containerEnvironment(socket: agent.socket)
        environment["IDENTITY_ENDPOINT"] = agent.variables["IDENTITY_ENDPOINT"]
        environment["IDENTITY_HEADER"] = agent.variables["IDENTITY_HEADER"]
        environment["AZURE_IDENTITY_DISABLE_MULTITENANTAUTH"] = nil
        let script = """
            import sys
            from azure.identity import ManagedIdentityCredential, DefaultAzureCredential
            credential = ManagedIdentityCredential() if sys.argv[1] == "managed" else DefaultAzureCredential()
            token = credential.get_token(sys.argv[2])
            print(token.token, token.expires_on)
            """
        let managed = try runProcess(python, ["-c", script, "managed", "https://management.azure.com/.default"], environment: environment)
        #expect(managed.status == 0, "\(managed.stderr)")
        #expect(managed.stdout.hasPrefix("at-issued-1 "), "\(managed.stdout)")
        let expiresOn = Int(managed.stdout.split(separator: " ").last?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "") ?? 0
        #expect(expiresOn > Int(Date().timeIntervalSince1970))
        let viaDefault = try runProcess(python, ["-c", script, "default", "https://vault.azure.net/.default"], environment: environment)
        #expect(viaDefault.status == 0, "\(viaDefault.stderr)")
        #expect(viaDefault.stdout.hasPrefix("at-issued-2 "), "\(viaDefault.stdout)")
        let clients = Set(try await scenario.idp.stats().grants.map(\.client_id))
        #expect(clients == [Fixtures.appTwo])
        #expect(agent.log.contains("scopes https://vault.azure.net/.default, account \(Fixtures.alice.username)) -> granted"), "\(agent.log)")
        #expect(!scenario.containerFiles().values.contains { $0.contains("rt-") })
    }
}
