import Foundation
import Testing
@testable import TokenCache
@testable import TokenCacheCore
import TokenCacheTestSupport

/// `tokencache agent` (#38): a desktop's group served to a container through the socket.
@Suite("Agent", .harness, .serialized)
struct AgentTests {
    @Test("token in a fresh container home gets the desktop's token through the socket; the agent refreshed at the identity provider; no refresh token reaches the container's files")
    func tokenThroughSocket() async throws {
        let scenario = try await AgentScenario()
        defer { scenario.cleanUp() }
        let agent = try scenario.startAgent(["--authority", scenario.authority])
        defer { agent.stop() }
        // Created 0600 in a 0700 directory.
        let socketMode = try FileManager.default.attributesOfItem(atPath: agent.socket)[.posixPermissions] as? Int
        let directoryMode = try FileManager.default.attributesOfItem(atPath: scenario.socketDirectory.path)[.posixPermissions] as? Int
        #expect(socketMode == 0o600 && directoryMode == 0o700)

        let token = try scenario.inContainer(["token", "--client", Fixtures.appTwo, "--scopes", "User.Read"], socket: agent.socket)
        #expect(token.status == 0, "\(token.stderr)")
        #expect(token.stdout == "at-issued-1\n")
        let grants = try await scenario.idp.stats().grants
        #expect(grants.count == 1 && grants.first?.client_id == Fixtures.appTwo && grants.first?.redeemed == AgentScenario.refreshToken)
        // The agent saved it on its side: the desktop finds it without a request.
        #expect(try scenario.desktop.run(["token", "--client", Fixtures.appTwo, "--scopes", "User.Read"]).stdout == "at-issued-1\n")

        let json = try scenario.inContainer(["token", "--client", Fixtures.appTwo, "--scopes", "User.Read", "--json"], socket: agent.socket)
        let object = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
        #expect(object?["access_token"] as? String == "at-issued-1" && object?["username"] as? String == Fixtures.alice.username)
        #expect(try await scenario.idp.stats().token_requests == 1)

        let list = try scenario.inContainer(["list", "--json"], socket: agent.socket)
        #expect(list.status == 0, "\(list.stderr)")
        #expect(list.stdout.contains(Fixtures.alice.username) && list.stdout.contains("token agent at \(agent.socket)"))
        #expect(!list.stdout.contains("rt-"))

        // The container holds nothing of the cache: no refresh token, no key.
        let files = scenario.containerFiles()
        #expect(!files.values.contains { $0.contains("rt-") || $0.contains("at-issued") }, "\(files.keys)")
        // Every request logged, with who asked; no secret in the log.
        let requests = try scenario.inContainer(["agent", "--list-requests", "--json"], socket: agent.socket)
        #expect(requests.stdout.contains("\"outcome\" : \"granted\"") && requests.stdout.contains("\"command\" : \"tokencache\""), "\(requests.stdout)")
        // Times in ISO 8601, as every other JSON output (the socket carries seconds since 1970).
        let logged = try JSONSerialization.jsonObject(with: Data(requests.stdout.utf8)) as? [[String: Any]] ?? []
        #expect(!logged.isEmpty && logged.allSatisfy { ($0["time"] as? String)?.wholeMatch(of: /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ/) != nil },
                "\(requests.stdout)")
        #expect(!agent.log.contains("rt-") && !agent.log.contains("at-issued"))
        #expect(agent.log.contains("token (client \(Fixtures.appTwo), scopes User.Read) -> granted"), "\(agent.log)")
    }

    @Test("claims and client capabilities pass through the agent: token --challenge in the container makes the agent refresh (not serve its cached token) with the claims and cp1")
    func claimsThroughAgent() async throws {
        let scenario = try await AgentScenario()
        defer { scenario.cleanUp() }
        let agent = try scenario.startAgent(["--authority", scenario.authority])
        defer { agent.stop() }
        let arguments = ["token", "--client", Fixtures.appTwo, "--scopes", "User.Read"]
        let first = try scenario.inContainer(arguments, socket: agent.socket)
        #expect(first.stdout == "at-issued-1\n", "\(first.stderr)")
        // The agent serves its cached token to a request without a challenge.
        #expect(try scenario.inContainer(arguments, socket: agent.socket).stdout == "at-issued-1\n")
        let claims = #"{"access_token":{"nbf":{"essential":true,"value":"1604106651"}}}"#
        let header = #"Bearer realm="", error="insufficient_claims", claims="\#(Data(claims.utf8).base64EncodedString())""#
        var environment = scenario.containerEnvironment(socket: agent.socket)
        environment["TOKENCACHE_CLIENT_CAPABILITIES"] = "cp1"
        let answered = try runProcess(TestEnvironment.binDirectory.appendingPathComponent("tokencache").path,
                                      arguments + ["--challenge", header], environment: environment)
        #expect(answered.status == 0 && answered.stdout == "at-issued-2\n", "\(answered.stderr)")
        let grants = try await scenario.idp.stats().grants
        #expect(grants.count == 2)
        let sent = try #require(grants.last?.claims)
        #expect(try JSONSerialization.jsonObject(with: Data(sent.utf8)) as? NSDictionary == JSONSerialization.jsonObject(with: Data(
            #"{"access_token":{"nbf":{"essential":true,"value":"1604106651"},"xms_cc":{"values":["cp1"]}}}"#.utf8)) as? NSDictionary)
    }

    @Test("what the socket sends holds the access token and never a refresh token or ID token (captured bytes)")
    func socketBytesHoldNoRefreshToken() async throws {
        let scenario = try await AgentScenario()
        defer { scenario.cleanUp() }
        let agent = try scenario.startAgent(["--authority", scenario.authority])
        defer { agent.stop() }
        let request = #"{"version":1,"op":"token","client_id":"\#(Fixtures.appTwo)","scopes":["User.Read"],"force_refresh":true}"#
        let bytes = try agentClientScript(["raw", agent.socket, request]).stdout
        #expect(bytes.contains("\"access_token\":\"at-issued-1\""), "\(bytes)")
        let list = try agentClientScript(["raw", agent.socket, #"{"version":1,"op":"list"}"#]).stdout
        for captured in [bytes, list] {
            #expect(!captured.contains("rt-"))  // the seeded token and every rotated one
            #expect(!captured.contains("eyJ"))  // no ID token (a JWT)
            #expect(!captured.contains("refresh_token\":\""))
        }
        // The refresh happened (and rotated) on the agent's side.
        #expect(try await scenario.idp.stats().grants.first?.issued?.hasPrefix("rt-rotated") == true)
    }

    @Test("a token request with no client_id is invalidArgument naming client_id as missing (not an empty client ID matched against the policy), and the agent keeps serving")
    func missingClientIDIsInvalidArgument() async throws {
        let scenario = try await AgentScenario()
        defer { scenario.cleanUp() }
        let agent = try scenario.startAgent(["--authority", scenario.authority, "--client", Fixtures.appTwo])
        defer { agent.stop() }
        let missing = try agentClientScript(["raw", agent.socket, #"{"version":1,"op":"token","scopes":["User.Read"]}"#]).stdout
        #expect(missing.contains("\"ok\":false") && missing.contains("invalidArgument")
                && missing.contains("client_id") && missing.contains("is missing"), "\(missing)")
        let served = try agentClientScript(["raw", agent.socket, #"{"version":1,"op":"token","client_id":"\#(Fixtures.appTwo)","scopes":["User.Read"]}"#]).stdout
        #expect(served.contains("\"access_token\":\""), "\(served)")
    }

    @Test("another uid cannot use the socket: refused by its mode, and, past the mode (CAP_DAC_OVERRIDE), by the SO_PEERCRED check; both logged, no token sent")
    func otherUserRefused() async throws {
        let scenario = try await AgentScenario()
        defer { scenario.cleanUp() }
        let agent = try scenario.startAgent(["--authority", scenario.authority])
        defer { agent.stop() }
        let request = #"{"version":1,"op":"token","client_id":"\#(Fixtures.appTwo)","scopes":["User.Read"]}"#
        let blocked = try agentClientScript(["raw", agent.socket, request], as: asNobody)
        #expect(blocked.status != 0 && blocked.stderr.contains("PermissionError"), "\(blocked.stderr)")

        let pastTheMode = asNobody + ["--inh-caps", "+dac_override", "--ambient-caps", "+dac_override"]
        let refused = try agentClientScript(["raw", agent.socket, request], as: pastTheMode)
        #expect(refused.status == 0, "\(refused.stderr)")
        #expect(refused.stdout.contains("\"ok\":false") && refused.stdout.contains("accessDenied"), "\(refused.stdout)")
        #expect(!refused.stdout.contains("at-") && !refused.stdout.contains("rt-"))
        #expect(try await scenario.idp.stats().token_requests == 0)
        #expect(agent.log.contains("uid 65534") && agent.log.contains("refused"), "\(agent.log)")
        // Counted, not put in the request log (#57 item 6): --list-requests ends with the count.
        let second = try agentClientScript(["raw", agent.socket, request], as: pastTheMode)
        #expect(second.stdout.contains("accessDenied"), "\(second.stdout)")
        let requests = try AgentClient(path: agent.socket).requests()
        #expect(requests.count == 1 && requests[0].operation == "connect" && requests[0].channel == "socket" && requests[0].uid == 65534, "\(requests)")
        #expect(requests.first?.outcome.hasPrefix("refused: 2 connections from other users") == true, "\(requests)")
    }

    @Test("policy: a client, scope or authority outside --client/--scopes/--authority is refused with the option to change; nothing is redeemed")
    func policyLimits() async throws {
        let scenario = try await AgentScenario()
        defer { scenario.cleanUp() }
        let agent = try scenario.startAgent(["--authority", scenario.authority, "--client", Fixtures.appTwo, "--scopes", "User.Read"])
        defer { agent.stop() }
        let otherClient = try scenario.inContainer(["token", "--client", Fixtures.appThree, "--scopes", "User.Read"], socket: agent.socket)
        #expect(otherClient.status == 1 && otherClient.stderr.contains("--client"), "\(otherClient.stderr)")
        let otherScope = try scenario.inContainer(["token", "--client", Fixtures.appTwo, "--scopes", "Mail.Read"], socket: agent.socket)
        #expect(otherScope.status == 1 && otherScope.stderr.contains("scope Mail.Read is not one the agent serves"), "\(otherScope.stderr)")
        let otherAuthority = try scenario.inContainer(["token", "--client", Fixtures.appTwo, "--scopes", "User.Read",
                                                       "--authority", "https://login.microsoftonline.com/common"], socket: agent.socket)
        #expect(otherAuthority.status == 1 && otherAuthority.stderr.contains("--authority"), "\(otherAuthority.stderr)")
        #expect(try await scenario.idp.stats().token_requests == 0)
        let allowed = try scenario.inContainer(["token", "--client", Fixtures.appTwo, "--scopes", "User.Read"], socket: agent.socket)
        #expect(allowed.stdout == "at-issued-1\n", "\(allowed.stderr)")
        let list = try scenario.inContainer(["list", "--json"], socket: agent.socket)
        #expect(!list.stdout.contains(Fixtures.appOne) && list.stdout.contains(Fixtures.appTwo), "\(list.stdout)")
    }

    @Test("a client ID ClientID refuses, sent to the socket past the CLI's own check, gets the agent's invalidArgument for the client ID; nothing is redeemed")
    func invalidClientIDRefusedByAgent() async throws {
        let scenario = try await AgentScenario()
        defer { scenario.cleanUp() }
        let agent = try scenario.startAgent(["--authority", scenario.authority, "--client", Fixtures.appTwo, "--scopes", "User.Read"])
        defer { agent.stop() }
        let refused = #expect(throws: TokenCacheError.self) {
            try AgentClient(path: agent.socket).send(AgentProtocol.Request(operation: .token, clientID: "not a client id", scopes: ["User.Read"]))
        }
        #expect(refused?.code == .invalidArgument && refused?.message.contains("client ID") == true, "\(String(describing: refused))")
        #expect(try await scenario.idp.stats().token_requests == 0)
    }

    @Test("a list request whose client ID ClientID refuses, sent past the CLI's own check, gets the agent's invalidArgument for the client ID, as a token request does")
    func invalidClientIDListRefusedByAgent() async throws {
        let scenario = try await AgentScenario()
        defer { scenario.cleanUp() }
        let agent = try scenario.startAgent(["--authority", scenario.authority, "--client", Fixtures.appTwo, "--scopes", "User.Read"])
        defer { agent.stop() }
        let refused = #expect(throws: TokenCacheError.self) {
            try AgentClient(path: agent.socket).send(AgentProtocol.Request(operation: .list, clientID: "not a client id"))
        }
        #expect(refused?.code == .invalidArgument && refused?.message.contains("client ID") == true, "\(String(describing: refused))")
    }

    @Test("#59 item 5: a token the agent cannot refresh (started without --authority) says to restart the agent with --authority, not to add --authority to the request (which it refuses)")
    func noAuthorityHintLeadsOut() async throws {
        let scenario = try await AgentScenario()
        defer { scenario.cleanUp() }
        let agent = try scenario.startAgent()
        defer { agent.stop() }
        let missing = try scenario.inContainer(["token", "--client", Fixtures.appOne, "--scopes", "Mail.Send"], socket: agent.socket)
        #expect(missing.status == 2, "\(missing.stderr)")
        #expect(missing.stderr.contains("restart it with `tokencache agent --authority URL`"), "\(missing.stderr)")
        #expect(!missing.stderr.contains("Add --authority") && !missing.stderr.contains("pass --authority with the request"), "\(missing.stderr)")
        #expect(try await scenario.idp.stats().token_requests == 0)
    }

    @Test("an agent started without --authority refreshes nowhere: a named authority other than the cached token's is refused, the cached token's own serves it from the cache, nothing is redeemed")
    func noAuthorityPolicyServesCacheOnly() async throws {
        let scenario = try await AgentScenario()
        defer { scenario.cleanUp() }
        let agent = try scenario.startAgent()
        defer { agent.stop() }
        let elsewhere = try scenario.inContainer(["token", "--client", Fixtures.appOne, "--scopes", "User.Read",
                                                  "--authority", "https://login.microsoftonline.com/common"], socket: agent.socket)
        #expect(elsewhere.status == 1 && elsewhere.stderr.contains("refreshes nowhere") && elsewhere.stderr.contains("--authority"),
                "\(elsewhere.stderr)")
        let own = try scenario.inContainer(["token", "--client", Fixtures.appOne, "--scopes", "User.Read", "--authority", scenario.authority],
                                           socket: agent.socket)
        #expect(own.status == 0 && own.stdout.hasPrefix("at-"), "\(own.stderr)")
        // A client with no cached token of its own is not refreshed for at the named authority either.
        let refresh = try scenario.inContainer(["token", "--client", Fixtures.appTwo, "--scopes", "User.Read", "--authority", scenario.authority],
                                               socket: agent.socket)
        #expect(refresh.status != 0, "\(refresh.stdout)")
        #expect(try await scenario.idp.stats().token_requests == 0)
    }

    @Test("--confirm with no terminal to ask on refuses to start (64, naming why), instead of refusing every request without asking anyone")
    func confirmWithoutTerminalRefuses() async throws {
        let scenario = try await AgentScenario()
        defer { scenario.cleanUp() }
        let socket = scenario.socketDirectory.appendingPathComponent("agent.sock").path
        let started = try scenario.desktop.run(["agent", "--socket", socket, "--authority", scenario.authority, "--confirm"])
        #expect(started.status == 64 && started.stderr.contains("--confirm") && started.stderr.contains("not a terminal"), "\(started.stderr)")
        #expect(!FileManager.default.fileExists(atPath: socket))
        #expect(try await scenario.idp.stats().token_requests == 0)
    }

    @Test("-c prints csh lines; --kill stops the agent TOKENCACHE_AGENT_PID names and prints the unset lines (sh and csh), and refuses a pid that is not a tokencache agent")
    func killAndCsh() async throws {
        let scenario = try await AgentScenario()
        defer { scenario.cleanUp() }
        let socket = scenario.socketDirectory.appendingPathComponent("agent.sock").path
        let started = try scenario.desktop.run(["agent", "--daemon", "-c", "--socket", socket, "--authority", scenario.authority])
        #expect(started.status == 0 && started.stdout.hasPrefix("setenv TOKENCACHE_AGENT_SOCK '\(socket)';\nsetenv TOKENCACHE_AGENT_PID '"), "\(started.stdout)")
        let pid = try #require(started.stdout.split(separator: "'").dropFirst(3).first.map(String.init))
        defer { kill(Int32(pid) ?? 0, SIGKILL) }
        var withPid = scenario.desktop
        withPid.environmentOverrides["TOKENCACHE_AGENT_PID"] = "\(getpid())"  // this test process: not an agent
        let refused = try withPid.run(["agent", "--kill"])
        #expect(refused.status == 2 && refused.stderr.contains("not a tokencache agent"), "\(refused.stderr)")
        withPid.environmentOverrides["TOKENCACHE_AGENT_PID"] = pid
        let killed = try withPid.run(["agent", "-k"])
        #expect(killed.status == 0 && killed.stdout == "unset TOKENCACHE_AGENT_SOCK;\nunset TOKENCACHE_AGENT_PID;\necho Agent pid \(pid) killed;\n", "\(killed.stdout) \(killed.stderr)")
        var gone = false
        for _ in 0..<600 where !gone {  // the agent removes its socket as it exits: up to 30 s on a loaded machine
            gone = !FileManager.default.fileExists(atPath: socket)
            if !gone { usleep(50_000) }
        }
        #expect(gone)
    }

    @Test("An agent whose --authority is at another host than the account's refresh tokens names its --authority as the reason, not a hint to use another authority it would then refuse")
    func authorityFilterNamed() async throws {
        let scenario = try await AgentScenario()
        defer { scenario.cleanUp() }
        let elsewhere = "http://127.0.0.2:\(scenario.idp.port)/\(Fixtures.tenantA)"
        let agent = try scenario.startAgent(["--authority", elsewhere])
        defer { agent.stop() }
        let token = try scenario.inContainer(["token", "--client", Fixtures.appTwo, "--scopes", "User.Read"], socket: agent.socket)
        #expect(token.status != 0)
        #expect(token.stderr.contains("another host than the agent's --authority") && token.stderr.contains("restart the agent with --authority"), "\(token.stderr)")
        #expect(!token.stderr.contains("Use an authority on"), "\(token.stderr)")
        #expect(try await scenario.idp.stats().token_requests == 0)
    }

    @Test("With the agent set, doctor shows it and that token and list ask it; remove, logout and groups say they act on this machine's cache")
    func localCommandsSayTheyAreLocal() async throws {
        let scenario = try await AgentScenario()
        defer { scenario.cleanUp() }
        let agent = try scenario.startAgent(["--authority", scenario.authority])
        defer { agent.stop() }
        let doctor = try scenario.inContainer(["doctor"], socket: agent.socket)
        #expect(doctor.stdout.contains("token agent") && doctor.stdout.contains("token and list ask it"), "\(doctor.stdout)")
        for command in [["remove", "--account", "nobody@contoso.com", "--yes"], ["logout", "--client", Fixtures.appTwo], ["groups"]] {
            let output = try scenario.inContainer(command, socket: agent.socket)
            #expect(output.stderr.contains("acts on this machine's cache, not on the token agent's"), "\(command): \(output.stderr)")
        }
    }

    @Test("--confirm asks on the agent's terminal (a real pty) before the first token of a client, account, authority and scope set: yes serves it and is remembered, no refuses, and another account is asked again")
    func confirmOnTerminal() async throws {
        let scenario = try await AgentScenario()
        defer { scenario.cleanUp() }
        // A second account in the group: an approval for Alice must not serve Bob.
        var bob = Fixtures.response(for: Fixtures.bob, scope: "User.Read", foci: "1", tag: "bob")
        bob["refresh_token"] = "rt-initial-bob"
        let saved = try scenario.desktop.run(["save", "--client", Fixtures.appOne, "--authority", scenario.authority, "--scopes", "User.Read"],
                                             input: Fixtures.json(bob))
        #expect(saved.status == 0, "\(saved.stderr)")
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../Fixtures/agent_confirm.py").standardizedFileURL.path
        try FileManager.default.createDirectory(at: scenario.socketDirectory, withIntermediateDirectories: false,
                                                attributes: [.posixPermissions: 0o700])
        let output = try await offThePool {
            try runProcess("/usr/bin/python3", [script, TestEnvironment.binDirectory.appendingPathComponent("tokencache").path,
                                                scenario.socketDirectory.appendingPathComponent("agent.sock").path,
                                                scenario.containerHome.path, Fixtures.appTwo, Fixtures.alice.username, Fixtures.bob.username,
                                                "--backend", "file", "--group", scenario.desktop.group, "--authority", scenario.authority],
                           environment: scenario.desktop.environment)
        }
        #expect(output.status == 0, "\(output.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [String: Any])
        let result = object.compactMapValues { $0 as? [String: Any] }
        let terminal = object["terminal"] as? String ?? ""
        #expect(result["first"]?["asked"] as? Bool == true && result["first"]?["stdout"] as? String == "at-issued-1\n", "\(result)")
        #expect(result["again"]?["status"] as? Int == 0 && result["again"]?["stdout"] as? String == "at-issued-1\n", "\(result)")
        #expect(result["denied"]?["asked"] as? Bool == true && result["denied"]?["status"] as? Int == 1)
        #expect((result["denied"]?["stderr"] as? String ?? "").contains("did not allow"))
        #expect(result["other"]?["asked"] as? Bool == true && result["other"]?["status"] as? Int == 1, "\(result)")
        #expect(terminal.contains("for \(Fixtures.bob.username)"), "\(terminal)")
        // Three questions, naming the asking process, client, account, authority and scopes; the repeat was not asked.
        #expect(terminal.components(separatedBy: "Allow? [y/N]").count == 4, "\(terminal)")
        #expect(terminal.contains("at \(scenario.authority)"), "\(terminal)")
        #expect(terminal.contains("tokencache[") && terminal.contains("scopes Mail.Read"), "\(terminal)")
        #expect(try await scenario.idp.stats().token_requests == 1)
    }

    @Test("the agent survives clients that disconnect mid-request, then serves 1,000 requests from 8 processes at once with no error")
    func survivesAbortsAndLoad() async throws {
        let scenario = try await AgentScenario()
        defer { scenario.cleanUp() }
        let agent = try scenario.startAgent(["--authority", scenario.authority])
        defer { agent.stop() }
        #expect(try agentClientScript(["abort", agent.socket]).stdout == "done\n")
        let request = #"{"version":1,"op":"token","client_id":"\#(Fixtures.appTwo)","scopes":["User.Read"]}"#
        let outputs = try await withThrowingTaskGroup(of: ProcessOutput.self) { group in
            for _ in 0..<8 { group.addTask { try await offThePool { try agentClientScript(["load", agent.socket, request, "125"]) } } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        var tokens = Set<String>()
        for output in outputs {
            let result = try JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [String: Any]
            #expect((result?["errors"] as? [String])?.isEmpty == true, "\(output.stdout) \(output.stderr)")
            tokens.formUnion(result?["tokens"] as? [String] ?? [])
        }
        // One refresh under the agent's lock; every other request served from the cache.
        #expect(tokens == ["at-issued-1"])
        #expect(try await scenario.idp.stats().token_requests == 1)
        #expect(agent.process.isRunning)
        let requests = try AgentClient(path: agent.socket).requests()
        #expect(requests.filter { $0.outcome == "granted" }.count >= 1000)
    }

    @Test("--daemon prints the shell lines and returns while the agent keeps serving in the background; SIGTERM stops it and removes the socket")
    func daemon() async throws {
        let scenario = try await AgentScenario()
        defer { scenario.cleanUp() }
        let socket = scenario.socketDirectory.appendingPathComponent("agent.sock").path
        let started = try scenario.desktop.run(["agent", "--daemon", "--socket", socket, "--authority", scenario.authority])
        #expect(started.status == 0, "\(started.stderr)")
        #expect(started.stdout.hasPrefix("TOKENCACHE_AGENT_SOCK='\(socket)'; export TOKENCACHE_AGENT_SOCK;\nTOKENCACHE_AGENT_PID="), "\(started.stdout)")
        let pid = try #require(started.stdout.split(separator: "'").dropFirst(3).first.flatMap { Int32($0) })
        defer { kill(pid, SIGKILL) }
        let token = try scenario.inContainer(["token", "--client", Fixtures.appTwo, "--scopes", "User.Read"], socket: socket)
        #expect(token.stdout == "at-issued-1\n", "\(token.stderr)")
        #expect(kill(pid, SIGTERM) == 0)
        var gone = false
        for _ in 0..<600 where !gone {  // up to 30 s: a loaded machine
            gone = !FileManager.default.fileExists(atPath: socket)
            if !gone { usleep(50_000) }
        }
        #expect(gone)
    }

    @Test("the socket's place is checked: a directory open to others, a path that is not a socket, and a live agent's socket are refused with a hint; a stale socket is replaced")
    func socketPlaceChecks() async throws {
        let scenario = try await AgentScenario()
        defer { scenario.cleanUp() }
        let directory = scenario.socketDirectory
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o755])
        let socket = directory.appendingPathComponent("agent.sock").path
        let open = try scenario.desktop.run(["agent", "--socket", socket])
        #expect(open.status == 1 && open.stderr.contains("open to other users") && open.stderr.contains("chmod 700 \(directory.path)"), "\(open.stderr)")
        try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: directory.path)
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: socket))
        let notSocket = try scenario.desktop.run(["agent", "--socket", socket])
        #expect(notSocket.status == 1 && notSocket.stderr.contains("is not a socket"), "\(notSocket.stderr)")
        #expect(try String(contentsOfFile: socket, encoding: .utf8) == "keep me")
        try FileManager.default.removeItem(atPath: socket)

        let agent = try scenario.startAgent()
        let second = try scenario.desktop.run(["agent", "--socket", socket])
        #expect(second.status == 1 && second.stderr.contains("already listens"), "\(second.stderr)")
        #expect(try agentClientScript(["raw", socket, #"{"version":1,"op":"requests"}"#]).stdout.contains("\"ok\":true"))
        // Killed without cleaning up: its socket is stale, and the next agent takes the place.
        kill(agent.process.processIdentifier, SIGKILL)
        agent.process.waitUntilExit()
        #expect(FileManager.default.fileExists(atPath: socket))
        let next = try scenario.startAgent()
        defer { next.stop() }
        #expect(try agentClientScript(["raw", socket, #"{"version":1,"op":"requests"}"#]).stdout.contains("\"ok\":true"))
    }

    @Test("a protocol version the agent does not speak gets a typed error naming its version")
    func unknownVersion() async throws {
        let scenario = try await AgentScenario()
        defer { scenario.cleanUp() }
        let agent = try scenario.startAgent()
        defer { agent.stop() }
        let answer = try agentClientScript(["raw", agent.socket, #"{"version":2,"op":"token"}"#]).stdout
        #expect(answer.contains("agentUnavailable") && answer.contains("speaks protocol version 1, not 2"), "\(answer)")
    }

    @Test("an error's reason crosses the socket with its context; a reason this side does not know arrives as unspecified, the error intact")
    func reasonCrossesTheSocket() throws {
        let error = TokenCacheError(.interactionRequired, "m", hint: "h",
                                    reason: .refreshTokenFromOtherHost(aliases: ["login.microsoftonline.us"], host: "login.microsoftonline.com"))
        let sent = try JSONDecoder().decode(AgentProtocol.Failure.self, from: Data(AgentProtocol.encode(AgentProtocol.Failure(error)).dropFirst(4)))  // after the length prefix
        #expect(sent.error == error)
        let newer = #"{"code":"portalFailed","reason":{"fromTheFuture":{}},"message":"m","hint":"h"}"#
        let received = try JSONDecoder().decode(AgentProtocol.Failure.self, from: Data(newer.utf8)).error
        #expect(received.code == .portalFailed && received.reason == .unspecified && received.message == "m")
    }
}
