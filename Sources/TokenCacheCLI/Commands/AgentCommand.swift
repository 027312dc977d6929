import ArgumentParser
internal import CLinux
import Dispatch
import FoundationEssentials
import TokenCache
import TokenCacheAgent
#if canImport(Glibc)
import Glibc
#endif

struct AgentCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "agent",
        abstract: "Serve the group's access tokens over a Unix socket, for SSH sessions and containers (like ssh-agent).",
        discussion: """
        Runs in the foreground (or with --daemon in the background) and serves access tokens of \
        the group to processes of the same user that reach its socket: `tokencache token` and \
        `tokencache list` use it when TOKENCACHE_AGENT_SOCK is set and no --backend, --group, \
        --collection or --passphrase-file is given. The agent refreshes on its side; refresh \
        tokens, keys and passphrases never cross the socket. It keeps nothing on disk but the \
        socket.

        On start it prints shell lines that set TOKENCACHE_AGENT_SOCK (and TOKENCACHE_AGENT_PID), \
        as `ssh-agent -s` does: `eval "$(tokencache agent --daemon)"`. The socket is created with \
        mode 0600 in a directory of mode 0700 (default $XDG_RUNTIME_DIR/tokencache/agent.sock), \
        and connections from other users are refused (SO_PEERCRED). Forward it into an SSH \
        session with `ssh -R /run/user/UID/tokencache.sock:$TOKENCACHE_AGENT_SOCK host` (a \
        directory only you can write there: clients refuse a socket in one others can write, or \
        whose listener is another user's), or bind-mount it into a container \
        (TOKENCACHE_AGENT_UID names the agent's uid when the container's user differs).

        Policy: --client, --account, --scopes and --authority limit what it hands out; the first \
        --authority is where it redeems refresh tokens (without one it refreshes nowhere and \
        serves cached tokens only, a named authority only the cached token's own). --scopes \
        limits the scopes a request may ask for, not what a token grants: the token endpoint may \
        grant more than was asked. --confirm asks on the agent's terminal before the first token \
        of each caller (its executable), client, account, authority and scope set, as the \
        broker's --confirm does. Every request is logged on the agent's \
        standard error and kept in memory: `tokencache agent --list-requests` shows who asked for \
        what.

        --managed-identity also serves the App Service managed-identity protocol on 127.0.0.1 \
        (a random port) and prints IDENTITY_ENDPOINT and IDENTITY_HEADER: Azure SDKs' \
        ManagedIdentityCredential / DefaultAzureCredential then get tokens of the one --client \
        and --account for the scope `<resource>/.default`. A request without the header gets 401.

        Examples:
          eval "$(tokencache agent --daemon \\
              --authority https://login.microsoftonline.com/organizations)"
          tokencache agent --client 04b07795-8ddb-461a-bbee-02f9e1bf7b46 \\
              --authority https://login.microsoftonline.com/organizations --confirm
          tokencache agent --managed-identity --client 04b07795-... \\
              --account alice@contoso.com \\
              --authority https://login.microsoftonline.com/organizations
          tokencache agent --list-requests
        """)

    @Option(help: ArgumentHelp("The socket's path (default $XDG_RUNTIME_DIR/tokencache/agent.sock; with --list-requests, TOKENCACHE_AGENT_SOCK's).", valueName: "path"))
    var socket: String?

    @Flag(help: "Run in the background: print the shell lines, then detach.")
    var daemon = false

    @OptionGroup var served: ServedOptions

    @Flag(help: "Ask on the agent's terminal before the first token of each caller, client, account, authority and scope set.")
    var confirm = false

    @Flag(name: .customLong("managed-identity"), help: "Also serve the App Service managed-identity protocol on 127.0.0.1 (needs one --client).")
    var managedIdentity = false

    @Flag(name: .customLong("list-requests"), help: "Show the running agent's log of requests (who asked for what) and exit.")
    var listRequests = false

    @Flag(help: "With --list-requests, print JSON.")
    var json = false

    @Flag(name: [.customShort("k"), .customLong("kill")], help: "Stop the agent TOKENCACHE_AGENT_PID names and print the lines that unset its variables (as ssh-agent -k).")
    var kill = false

    @Flag(name: [.customShort("c"), .customLong("csh")], help: "Print csh lines (setenv) instead of sh lines, as ssh-agent -c.")
    var csh = false

    @Flag(help: .hidden)
    var detached = false

    @OptionGroup(title: "Storage options") var store: StoreOptions

    func validate() throws {
        if managedIdentity && served.clients.count != 1 { throw ValidationError("--managed-identity needs exactly one --client (the identity it serves).") }
        if managedIdentity && served.accounts.count > 1 { throw ValidationError("--managed-identity serves one account: give at most one --account.") }
        if confirm && daemon { throw ValidationError("--confirm asks on the agent's terminal: run it in the foreground, without --daemon.") }
        if kill && (daemon || listRequests || managedIdentity) { throw ValidationError("--kill stops the running agent: give it alone (with -c for csh lines).") }
    }

    func run() throws {
        try reportingErrors {
            if listRequests { return try printRequests() }
            if kill { return try killAgent() }
            if confirm && isatty(STDIN_FILENO) != 1 {
                // It would refuse every request without asking anyone (#46): refuse to start instead.
                throw CLIError.usage("--confirm asks on the agent's terminal, and its standard input is not a terminal.",
                                     hint: "Run it in a terminal, or drop --confirm and limit what it serves with --client, --account and --scopes")
            }
            if daemon { return try Self.runInBackground() }
            if detached { _ = setsid() }
            try serve()
        }
    }

    private func serve() throws {
        let policy = try served.policy()
        let store = try self.store.openStore()
        let path = try socket ?? Self.defaultSocketPath()
        var options = PublicClientApplication.Options()
        options.logger = store.options.logger
        let agent = TokenAgent(store: store, policy: policy, options: options,
                               confirmation: confirm ? Self.askOnTerminal : nil, observer: Self.show)
        // Signals are taken by sigwait below: blocked before any thread starts, so all inherit it.
        var signals = sigset_t()
        sigemptyset(&signals)
        for signal in [SIGINT, SIGTERM, SIGHUP] { sigaddset(&signals, signal) }
        pthread_sigmask(SIG_BLOCK, &signals, nil)
        let server = try AgentServer(path: path, agent: agent)
        let endpoint = managedIdentity ? try ManagedIdentityEndpoint(agent: agent, clientID: served.clients[0], account: served.accounts.first) : nil
        try server.start()
        try endpoint?.start()
        var lines = [("TOKENCACHE_AGENT_SOCK", path), ("TOKENCACHE_AGENT_PID", "\(getpid())")]
        if let endpoint { lines += [("IDENTITY_ENDPOINT", endpoint.url), ("IDENTITY_HEADER", endpoint.header)] }
        let shell = lines.map { csh ? "setenv \($0) \(Self.shellQuoted($1));\n" : "\($0)=\(Self.shellQuoted($1)); export \($0);\n" }.joined()
            + "echo Agent pid \(getpid());\n"
        StandardIO.write(Data(shell.utf8), to: STDOUT_FILENO)
        Terminal.note("tokencache agent: serving group \(store.group) at \(path)\(endpoint.map { " and \($0.url)" } ?? "") (pid \(getpid()); Ctrl-C or kill to stop).")
        if detached {
            // The launcher reads the lines until end of file: let go of its pipe and the terminal.
            let null = open("/dev/null", O_RDWR)
            for fd in [STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO] { dup2(null, fd) }
            close(null)
        }
        var received: Int32 = 0
        sigwait(&signals, &received)
        endpoint?.stop()
        server.stop()
    }

    /// `$XDG_RUNTIME_DIR/tokencache/agent.sock`; without XDG_RUNTIME_DIR a fresh private
    /// directory under /tmp, as ssh-agent makes.
    static func defaultSocketPath() throws -> String {
        if let runtime = getenv("XDG_RUNTIME_DIR").map({ String(cString: $0) }), runtime.hasPrefix("/") {
            return runtime + "/tokencache/agent.sock"
        }
        var template = Array("/tmp/tokencache-XXXXXX".utf8CString)
        guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else {
            throw CLIError.failed("XDG_RUNTIME_DIR is not set and no directory could be made under /tmp.", hint: "Pass --socket PATH")
        }
        return String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self) + "/agent.sock"
    }

    static func shellQuoted(_ value: String) -> String {
        "'" + value.replacing("'", with: "'\\''") + "'"
    }

    /// One line per request on standard error (no secrets: requests carry none).
    @Sendable static func show(_ entry: AgentProtocol.LoggedRequest) {
        let who = entry.pid.map { "\(entry.command ?? "?")[\($0)] uid \(entry.uid.map { "\($0)" } ?? "?")" } ?? entry.channel
        let what = [entry.clientID.map { "client \($0)" }, entry.scopes.map { "scopes \($0.joined(separator: " "))" },
                    entry.account.map { "account \($0)" }].compactMap { $0 }.joined(separator: ", ")
        Terminal.note(Terminal.escape("\(Terminal.localTime(Date(timeIntervalSince1970: TimeInterval(entry.time)))) \(who): \(entry.operation)\(what.isEmpty ? "" : " (\(what))") -> \(entry.outcome)"))
    }

    private static let questions = DispatchQueue(label: "org.swift-tokencache.agent.confirm")

    /// Asks on the terminal, one question at a time, and waits for the answer; no terminal means no.
    @Sendable static func askOnTerminal(_ question: String) -> Bool {
        questions.sync {
            guard isatty(STDIN_FILENO) == 1 else {
                Terminal.note("tokencache agent: refused (no terminal to ask on): \(Terminal.escape(question))")
                return false
            }
            return Terminal.confirm(TerminalText(question + " Allow?"))
        }
    }

    /// `--daemon`: starts the agent again detached (setsid, standard streams on /dev/null once
    /// it is listening), passes its shell lines on, and returns.
    private static func runInBackground() throws {
        var arguments = CommandLine.arguments
        arguments.removeAll { $0 == "--daemon" }
        arguments.append("--detached")
        // The agent keeps no other descriptor of this process (``Subprocess``).
        let pid: pid_t, pipe: Int32
        do throws(Subprocess.SpawnFailure) {
            (pid, pipe) = try Subprocess.spawn(arguments, executable: "/proc/self/exe")
        } catch {
            throw CLIError.failed("Could not start the agent: \(error.reason).")
        }
        defer { close(pipe) }
        let output = StandardIO.readAll(from: pipe, limit: 1 << 20) ?? Data()
        guard !output.isEmpty else {
            var status: Int32 = 0
            waitpid(pid, &status, 0)
            throw CLIError.failed("The agent did not start (its error is above).")
        }
        StandardIO.write(output, to: STDOUT_FILENO)
    }

    /// `--kill`: stops the agent `TOKENCACHE_AGENT_PID` names, once it is sure that process is a
    /// tokencache agent of this user, and prints the lines that unset its variables.
    private func killAgent() throws {
        guard let text = StoreSettings.environment("TOKENCACHE_AGENT_PID"), let pid = Int32(text), pid > 1 else {
            throw CLIError.usage("No agent to stop: TOKENCACHE_AGENT_PID is not set.",
                                 hint: "Set it to the pid `tokencache agent` printed, as `eval \"$(tokencache agent --daemon)\"` does")
        }
        // /proc tells whose process it is and what it runs: never signal another program that got the pid.
        var info = stat()
        let arguments = (try? Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/cmdline")))?.split(separator: 0).map { String(decoding: $0, as: UTF8.self) } ?? []
        guard stat("/proc/\(pid)", &info) == 0, info.st_uid == getuid(),
              arguments.first.map({ $0.hasSuffix("tokencache") }) == true, arguments.contains("agent") else {
            throw CLIError.notFound("Process \(pid) (TOKENCACHE_AGENT_PID) is not a tokencache agent of yours; nothing was stopped.",
                                    hint: "Unset TOKENCACHE_AGENT_PID and TOKENCACHE_AGENT_SOCK if the agent is gone")
        }
        guard Glibc.kill(pid, SIGTERM) == 0 else {
            throw CLIError.failed("Could not stop agent \(pid): \(String(cString: strerror(errno))).")
        }
        let names = ["TOKENCACHE_AGENT_SOCK", "TOKENCACHE_AGENT_PID"]
        let shell = names.map { csh ? "unsetenv \($0);\n" : "unset \($0);\n" }.joined() + "echo Agent pid \(pid) killed;\n"
        StandardIO.write(Data(shell.utf8), to: STDOUT_FILENO)
    }

    private func printRequests() throws {
        guard let path = socket ?? AgentClient.fromEnvironment?.path else {
            throw CLIError.usage("No agent to ask: TOKENCACHE_AGENT_SOCK is not set.", hint: "Pass --socket PATH, or set TOKENCACHE_AGENT_SOCK")
        }
        try Self.printLog(try AgentClient(path: path).requests(), json: json)
    }

    /// A request log as a table, or JSON (`agent --list-requests`, `broker --list-requests`).
    static func printLog(_ requests: [AgentProtocol.LoggedRequest], json: Bool) throws {
        if json {
            try JSONOutput.print(requests.map(RequestOutput.init))
            return
        }
        if requests.isEmpty { return Terminal.print("No requests yet.") }
        Terminal.print(Terminal.table(["TIME", "FROM", "OP", "CLIENT", "SCOPES", "ACCOUNT", "OUTCOME"], requests.map { entry in
            [TerminalText(Terminal.localTime(Date(timeIntervalSince1970: TimeInterval(entry.time)))),
             TerminalText(entry.pid.map { "\(entry.command ?? "?")[\($0)] uid \(entry.uid.map { "\($0)" } ?? "?")" } ?? entry.channel),
             TerminalText(entry.operation), TerminalText(entry.clientID ?? "-"),
             TerminalText(entry.scopes?.joined(separator: " ") ?? "-"), TerminalText(entry.account ?? "-"),
             TerminalText(entry.outcome)]
        }))
    }
}

/// A line of the agent's request log as `--list-requests --json` prints it: its time in ISO 8601,
/// as every other JSON output (the socket carries seconds since 1970).
private struct RequestOutput: Encodable {
    var time: Date
    var channel: String
    var pid: Int32?
    var uid: UInt32?
    var command: String?
    var op: String
    var clientId: String?
    var scopes: [String]?
    var account: String?
    var outcome: String

    init(_ entry: AgentProtocol.LoggedRequest) {
        (time, channel, pid, uid, command) = (Date(timeIntervalSince1970: TimeInterval(entry.time)), entry.channel, entry.pid, entry.uid, entry.command)
        (op, clientId, scopes, account, outcome) = (entry.operation, entry.clientID, entry.scopes, entry.account, entry.outcome)
    }
}

/// What a token server (`agent`, `broker`) serves: its policy's options.
struct ServedOptions: ParsableArguments {
    @Option(name: .customLong("client"), help: ArgumentHelp("Serve only this client app (repeatable).", valueName: "id"), transform: ClientIDArgument.parse)
    var clients: [ClientID] = []

    @Option(name: .customLong("account"), help: ArgumentHelp("Serve only this account, username or home account ID (repeatable).", valueName: "name|home-id"))
    var accounts: [String] = []

    @Option(help: ArgumentHelp("Refuse a request that asks for a scope not among these (space-separated; repeatable). It limits what may be asked, not what a token grants: the token endpoint may grant more.", valueName: "scopes"))
    var scopes: [String] = []

    @Option(name: .customLong("authority"), help: ArgumentHelp("Serve only this authority (repeatable); the first is where refresh tokens are redeemed.", valueName: "url"))
    var authorities: [String] = []

    func validate() throws {
        if !scopes.isEmpty, scopeList(scopes).isEmpty { throw ValidationError("--scopes must name at least one scope.") }
    }

    func policy() throws -> AgentPolicy {
        var policy = AgentPolicy()
        policy.clients = clients
        policy.accounts = accounts
        policy.scopes = scopeList(scopes)
        policy.authorities = try authorities.map { try Authority($0) }
        return policy
    }
}
