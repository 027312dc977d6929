import ArgumentParser
internal import CLinux
import Dispatch
import Synchronization
import FoundationEssentials
import TokenCache
import TokenCacheAgent
import TokenCacheBroker
#if canImport(Glibc)
import Glibc
#endif

struct BrokerCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "broker",
        abstract: "Answer broker-enabled MSAL apps on the session bus (com.microsoft.identity.broker1) from the group's cache (or, for a user enrolled with the token keeper, from the keeper).",
        discussion: """
        Runs in the foreground and owns the session-bus name com.microsoft.identity.broker1, \
        which MSAL apps with the broker turned on (MSAL Python's enable_broker_on_linux through \
        pymsalruntime, MSAL.NET, MSAL Node, azure-identity-broker) ask for their tokens. They \
        then find the accounts already signed in here and get their tokens silently: getAccounts \
        lists the accounts the calling client is signed in to; acquireTokenSilently serves the \
        cached access token or redeems the account's refresh token, only at the host that issued \
        it; removeAccount signs that client out (other apps stay signed in). Refresh tokens never \
        cross the bus. acquireTokenInteractively answers from the cache too, and otherwise signs the \
        user in in the system browser ($BROWSER, the desktop portal or xdg-open; without one it \
        answers an error that says to run `tokencache login --device-code`); \
        acquirePrtSsoCookie and generateSignedHttpRequest (device identity) are not supported.

        Who can ask: processes of yours on the session bus; callers of another uid are \
        refused. Each caller is identified as xdg-desktop-portal does it (from the bus daemon's \
        pid and pidfd): a Flatpak app by its app ID, a Snap by its name, any other process by \
        its executable. A program on the host gets the client IDs that signed in here (their \
        apps' sign-ins left them in the group) and those --client names; for a client ID new \
        here it lists no accounts and redeems no family refresh token unless allowed. A \
        sandboxed app gets only the client IDs --app allows for its app ID (--app \
        org.example.App=CLIENT_ID). Interactive sign-ins run one at a time and, without \
        --authority, only at Microsoft's cloud hosts or a host that issued the group's accounts; \
        a caller gets at most 8 calls answered at once. --client, --account, --scopes and \
        --authority limit what it serves, as for `tokencache agent`; --confirm asks on its \
        terminal (or, started by the bus, in a desktop dialog) before the first token of each \
        caller, client, account, authority and scopes, before a caller lists or removes a \
        client's accounts, and whether a caller may use a client ID it is not allowed; a yes is \
        remembered for exactly what was asked, as the agent's (one policy gate). removeAccount \
        signs out only the client named, and a caller other than the one that first used that \
        client here needs the user's yes. Every request is logged on standard error with the caller's \
        identity, pid and uid, and `tokencache broker --list-requests` shows the log (to host \
        callers only).

        For a user enrolled with the token keeper (`tokencache keeper --enroll`; or \
        TOKENCACHE_AGENT_SOCK naming it) it opens no cache: each app's call goes to the keeper \
        with the app's pid, the keeper identifies the app itself and answers what its apps \
        files and your consents allow (docs/KEEPER.md); --app and --confirm are refused then.

        It refuses to start when another process owns the name (Microsoft's \
        microsoft-identity-broker on an Intune-enrolled machine, or another broker). \
        --install writes a D-Bus service file ($XDG_DATA_HOME/dbus-1/services) and a systemd \
        user unit ($XDG_CONFIG_HOME/systemd/user/tokencache-broker.service) that start it on \
        the first call, with the options given, as the tokencache on PATH (else this binary: \
        it says so when that is a temporary path); a second --install replaces the first's \
        options, naming what it replaced. It refuses while the name has an owner or \
        Microsoft's broker is installed. --uninstall removes both files. A broker that fails \
        to start writes why to $XDG_DATA_HOME/tokencache/broker-start-failure, which doctor \
        and --list-requests show; neither starts an installed broker.

        Examples:
          tokencache broker --client 04b07795-8ddb-461a-bbee-02f9e1bf7b46
          tokencache broker --install
          tokencache broker --list-requests
          tokencache broker --uninstall
        """)

    @OptionGroup var served: ServedOptions

    @Option(name: .customLong("app"), help: ArgumentHelp("Let the sandboxed app (Flatpak app ID or snap name) use this client ID (repeatable).",
                                                        valueName: "app-id=client-id"))
    var apps: [String] = []

    @Flag(help: "Ask before the first token of each caller, client, account, authority and scopes, and before listing or removing accounts: on the broker's terminal, or (started by the bus, --install) in a desktop dialog (zenity); with neither, refuse.")
    var confirm = false

    @Flag(help: "Write a D-Bus service file and a systemd user unit that start the broker on demand, then exit.")
    var install = false

    @Flag(help: "Remove the files --install wrote, then exit.")
    var uninstall = false

    @Flag(name: .customLong("list-requests"), help: "Show the running broker's log of requests (who asked for what) and exit.")
    var listRequests = false

    @Flag(help: "With --list-requests, print JSON.")
    var json = false

    @OptionGroup(title: "Storage options") var store: StoreOptions

    static let unitName = "tokencache-broker.service"

    func validate() throws {
        if [install, uninstall, listRequests].filter({ $0 }).count > 1 {
            throw ValidationError("Give one of --install, --uninstall and --list-requests.")
        }
        _ = try appClients()
    }

    /// `--app APP_ID=CLIENT_ID`, by app ID.
    func appClients() throws -> [String: [ClientID]] {
        var map: [String: [ClientID]] = [:]
        for entry in apps {
            let parts = entry.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
            guard parts.count == 2, !parts[0].isEmpty, let client = try? ClientIDArgument.parse(parts[1]) else {
                throw ValidationError("--app takes APP_ID=CLIENT_ID (a Flatpak app ID or snap name, and a client ID): '\(entry)' is not.")
            }
            map[parts[0], default: []].append(client)
        }
        return map
    }

    func run() throws {
        try reportingErrors {
            if listRequests { return try printRequests() }
            if uninstall { return try removeFiles() }
            if install { return try writeFiles() }
            do {
                try serve()
            } catch let error where !Self.serving.withLock({ $0 }) {
                // Started by the bus, its stderr goes to the journal at best, and the caller sees
                // only Spawn.ChildExited: kept where doctor and --list-requests show it (#59 item 10).
                Self.recordFailure(Self.describe(error))
                throw error
            }
        }
    }

    /// Whether this process got as far as serving (a failure after that is no failure to start).
    private static let serving = Mutex(false)

    // MARK: The last failure to start

    /// Where the last failure of `tokencache broker` to start is kept (mode 0600): beside the
    /// D-Bus service file --install writes, so a broker the bus starts and the user's doctor agree.
    static var failureFile: String { dataHome() + "/tokencache/broker-start-failure" }

    /// An error as its one line and hint say it.
    static func describe(_ error: any Error) -> String {
        switch error {
        case let error as TokenCacheError: [CLIHints.message(of: error), CLIHints.hint(for: error)].compactMap { $0 }.joined(separator: " Hint: ")
        case let error as CLIError: [error.message, error.hint].compactMap { $0 }.joined(separator: " Hint: ")
        default: String(describing: error)
        }
    }

    /// Keeps why the broker did not start (when and the message, escaped), replacing the last.
    static func recordFailure(_ message: String) {
        let path = failureFile
        let directory = String(path[..<path.lastIndex(of: "/")!])
        mkdir(directory, 0o700)
        let descriptor = open(path + ".new", O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { return }
        let line = "\(Date().ISO8601Format()) pid \(getpid()): \(Terminal.escape(message))\n"
        let written = StandardIO.write(Data(line.utf8), to: descriptor)
        close(descriptor)
        if written { rename(path + ".new", path) } else { unlink(path + ".new") }
    }

    /// The last failure to start, when the broker has not started since: "TIME pid N: MESSAGE".
    static func lastFailure() -> String? {
        guard let data = FileManager.default.contents(atPath: failureFile), data.count < 64 * 1024 else { return nil }
        let text = String(String(decoding: data, as: UTF8.self).split(separator: "\n").first ?? "")
        return text.isEmpty ? nil : Terminal.escape(text)
    }

    private func serve() throws {
        let policy = try served.policy()
        let service: BrokerService
        let servingWhat: String
        // The pipeline's route decides: a user enrolled with the token keeper (or an agent named) is answered by it.
        if let keeper = store.agent() {
            guard apps.isEmpty, !confirm else {
                throw CLIError.usage("--app and --confirm decide which app gets what from this broker's own cache; the token keeper (\(keeper.source)) decides that for its groups, from its apps files and your consents.",
                               hint: "Leave them out, or name a local cache (--group, --backend) to serve from it")
            }
            service = BrokerService(keeper: keeper, policy: policy, version: TokenCacheVersion.string,
                                    logger: StoreOptions.logger(verbose: store.verbose), observer: AgentCommand.show)
            servingWhat = "groups of the token keeper at \(Terminal.escape(keeper.path)) (forwarding each app's call)"
        } else {
            let store = try self.store.openStore()
            var options = PublicClientApplication.Options()
            options.logger = store.options.logger
            service = BrokerService(store: store, policy: policy, version: TokenCacheVersion.string, options: options,
                                    appClients: try appClients(), confirmation: confirm ? (isatty(STDIN_FILENO) == 1 ? AgentCommand.askOnTerminal : Self.askOnDesktop) : nil,
                                    observer: AgentCommand.show)
            servingWhat = "group \(store.group)"
        }
        var signals = sigset_t()
        sigemptyset(&signals)
        for signal in [SIGINT, SIGTERM, SIGHUP] { sigaddset(&signals, signal) }
        pthread_sigmask(SIG_BLOCK, &signals, nil)
        let bus = BrokerBus(service: service)
        // The bus going away (the session ended, the name taken) wakes the wait as a signal would:
        // a broker no bus can reach must not linger. Sent to this thread: threads started before
        // the mask (the store's) would take a process-wide SIGTERM and end the process unheard.
        let waiting = pthread_self()
        try bus.start(whenEnded: { pthread_kill(waiting, SIGTERM) })
        Self.serving.withLock { $0 = true }
        unlink(Self.failureFile)
        Terminal.note("tokencache broker: serving \(servingWhat) as \(BrokerWire.busName) on the session bus (pid \(getpid()); Ctrl-C or kill to stop).")
        var received: Int32 = 0
        sigwait(&signals, &received)
        bus.stop()
        if bus.endedByBus {
            throw TokenCacheError(.noSessionBus, "The session bus closed the broker's connection (or gave its name to another process); the broker stopped.",
                                  hint: "Nothing to do when the session ended; otherwise start it again (`tokencache broker`, or through --install)")
        }
    }

    /// `--confirm` without a terminal (a broker the bus started): asks in a zenity dialog on the
    /// session's display, one question at a time, and waits for the answer; no display or no
    /// zenity means no.
    @Sendable static func askOnDesktop(_ question: String) -> Bool {
        questions.sync { askInDialog(question) }
    }

    private static let questions = DispatchQueue(label: "org.swift-tokencache.broker.confirm")

    private static func askInDialog(_ question: String) -> Bool {
        let zenity = "/usr/bin/zenity"
        guard ["DISPLAY", "WAYLAND_DISPLAY"].contains(where: { !(StoreSettings.environment($0) ?? "").isEmpty }),
              access(zenity, X_OK) == 0 else {
            Terminal.note("tokencache broker: refused (no terminal or desktop dialog to ask in): \(Terminal.escape(question))")
            return false
        }
        // Escaped: the question quotes what the caller sent (client, scopes, account).
        let arguments = [zenity, "--question", "--no-markup", "--title=tokencache broker", "--timeout=120", "--text=\(Terminal.escape(question)) Allow?"]
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0)
        tc_spawn_close_from(&actions, 3)
        var argv = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        guard posix_spawn(&pid, zenity, &actions, nil, &argv, environ) == 0 else { return false }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        // Exited normally with 0: the user chose Yes (1: No, 5: the dialog timed out).
        return status & 0x7f == 0 && (status >> 8) & 0xff == 0
    }

    // MARK: --install, --uninstall

    private var serviceFile: String { Self.dataHome() + "/dbus-1/services/\(BrokerWire.busName).service" }
    private var unitFile: String { Self.configHome() + "/systemd/user/\(Self.unitName)" }

    private static func dataHome() -> String {
        StoreSettings.environment("XDG_DATA_HOME").flatMap { $0.hasPrefix("/") ? $0 : nil } ?? (home() + "/.local/share")
    }

    private static func configHome() -> String {
        StoreSettings.environment("XDG_CONFIG_HOME").flatMap { $0.hasPrefix("/") ? $0 : nil } ?? (home() + "/.config")
    }

    private static func home() -> String { StoreSettings.environment("HOME") ?? "/" }

    /// Where Microsoft's broker installs itself (its package's D-Bus service file, unit and
    /// binary), and the D-Bus service directories of the system (XDG_DATA_DIRS).
    static func microsoftBroker() -> String? {
        let dataDirectories = (StoreSettings.environment("XDG_DATA_DIRS") ?? "/usr/local/share:/usr/share").split(separator: ":").map(String.init)
        let candidates = dataDirectories.map { "\($0)/dbus-1/services/\(BrokerWire.busName).service" } + [
            "/usr/lib/systemd/user/microsoft-identity-broker.service", "/opt/microsoft/identity-broker",
            "/usr/bin/microsoft-identity-broker",
        ]
        return candidates.first { access($0, F_OK) == 0 }
    }

    private func writeFiles() throws {
        if let found = Self.microsoftBroker() {
            throw CLIError.failed("Microsoft's identity broker is installed here (\(found)); nothing was written.",
                                  hint: "Leave com.microsoft.identity.broker1 to it; remove microsoft-identity-broker first to use tokencache broker instead")
        }
        if try BrokerBus.nameHasOwner() {
            throw CLIError.failed("Another process owns \(BrokerWire.busName) on this session bus; nothing was written.",
                                  hint: "Stop it first (`tokencache broker` in a terminal, or Microsoft's broker), then run --install again")
        }
        var arguments = Array(CommandLine.arguments.dropFirst())
        arguments.removeAll { $0 == "--install" }
        for argument in arguments where argument.contains(where: { " \t\n\"'\\%$;".contains($0) }) {
            throw CLIError.usage("The argument '\(Terminal.escape(argument))' cannot be written into a service file.",
                                 hint: "Use values without spaces, quotes, backslashes, %, $ or ;")
        }
        let running = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let (executable, note) = Self.executableToInstall(running: running)
        let command = ([executable] + arguments).joined(separator: " ")
        let replaced = Self.installedCommand(in: unitFile).flatMap { $0 == command ? nil : $0 }
        let service = """
            [D-BUS Service]
            Name=\(BrokerWire.busName)
            Exec=\(command)
            SystemdService=\(Self.unitName)

            """
        let unit = """
            [Unit]
            Description=tokencache identity broker (\(BrokerWire.busName)) on the shared token cache

            [Service]
            Type=dbus
            BusName=\(BrokerWire.busName)
            ExecStart=\(command)

            """
        for (path, text) in [(serviceFile, service), (unitFile, unit)] {
            try FileManager.default.createDirectory(atPath: String(path[..<path.lastIndex(of: "/")!]), withIntermediateDirectories: true)
            try Data(text.utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
        }
        if let replaced {
            Terminal.print("Replaced the installed `\(Terminal.escape(replaced))`: its options are not kept (give every option to --install).")
        }
        Terminal.print("Installed: \(serviceFile) and \(unitFile). Broker-enabled MSAL apps start `\(command)` on their first call.")
        if let note { Terminal.note(note) }
    }

    /// The path the unit runs: the `tokencache` on PATH (an installed one, which an upgrade keeps
    /// in place) before this process's executable; a note when that is another binary than this
    /// one, or when only this one is there and it is a temporary path (a build directory, /tmp).
    static func executableToInstall(running: String) -> (path: String, note: String?) {
        let path = StoreSettings.environment("PATH") ?? ""
        let installed = path.split(separator: ":").map(String.init).filter { $0.hasPrefix("/") }
            .map { $0 + "/tokencache" }.first { access($0, X_OK) == 0 }
        if let installed {
            let resolved = realpath(installed, nil).map { pointer in defer { free(pointer) }; return String(cString: pointer) }
            return (installed, resolved == running ? nil
                : "The broker is started as \(installed) (the tokencache on PATH), not as this binary (\(running)).")
        }
        let temporary = ["/tmp/", "/var/tmp/", "/dev/shm/"] + [StoreSettings.environment("TMPDIR")].compactMap { $0 }.filter { $0.hasPrefix("/") }
            .map { $0.hasSuffix("/") ? $0 : $0 + "/" }
        if running.contains("/.build/") || running.hasSuffix(" (deleted)") || temporary.contains(where: running.hasPrefix) {
            return (running, "\(running) is a temporary path (a build directory or a temporary directory): the broker no longer starts once it is gone. Install tokencache on PATH and run --install again.")
        }
        return (running, nil)
    }

    /// The command an earlier --install wrote into the unit, if any.
    static func installedCommand(in unitFile: String) -> String? {
        guard let data = FileManager.default.contents(atPath: unitFile) else { return nil }
        return String(decoding: data, as: UTF8.self).split(separator: "\n")
            .first { $0.hasPrefix("ExecStart=") }.map { String($0.dropFirst("ExecStart=".count)) }
    }

    private func removeFiles() throws {
        var removed: [String] = []
        for path in [serviceFile, unitFile] where access(path, F_OK) == 0 {
            try FileManager.default.removeItem(atPath: path)
            removed.append(path)
        }
        if removed.isEmpty { throw CLIError.notFound("No broker files were installed (\(serviceFile), \(unitFile)).") }
        Terminal.print("Removed: \(removed.joined(separator: " and ")). A broker already running keeps running until stopped.")
    }

    private func printRequests() throws {
        // The broker gives its log to host callers only, which it tells by /proc/PID/exe: closed
        // to it while this process is not dumpable (main made it so). This process opens no store
        // and holds no token, so it lets itself be looked at for this call.
        // Asked only of a broker that runs: a call to the name would start an installed one (#59 item 10).
        guard try BrokerBus.nameHasOwner() else {
            let failure = Self.lastFailure().map { " Its last start failed: \($0)" } ?? ""
            throw CLIError.failed("No broker runs on this session bus (--list-requests starts none).\(failure)",
                                  hint: failure.isEmpty ? "Start it with `tokencache broker`, or let a broker-enabled app's first call start the installed one"
                                      : "Fix what stopped it, then start it with `tokencache broker` to see it serve")
        }
        _ = tc_set_dumpable(1)
        try AgentCommand.printLog(try BrokerBus.requests(), json: json)
    }
}
