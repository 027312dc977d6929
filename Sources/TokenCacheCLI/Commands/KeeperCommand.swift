import ArgumentParser
import FoundationEssentials
import TokenCache
import TokenCacheCore
import TokenCacheKeeper
#if canImport(Glibc)
import Glibc
#endif

struct KeeperCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keeper",
        abstract: "Run the token keeper (root): refresh tokens out of the user's reach, each app served the groups it is allowed (#62, first slice).",
        discussion: """
        As root, serves on a Unix socket (default \(KeeperProtocol.defaultSocket), or the one \
        systemd passes by socket activation) the token agent's protocol: an app gets the access \
        tokens and account details of the groups its apps file allows, from the calling user's \
        enrolled store, never a refresh token. The caller is who the kernel says: its uid \
        (SO_PEERCRED), its process (a pidfd), and its executable, which must be root's in \
        directories only root can write to, not traced and not started with LD_PRELOAD, \
        LD_AUDIT or LD_LIBRARY_PATH (or its Flatpak app ID or snap name).

        Apps files are root-owned JSON in --apps-dir, one app each: \
        {"executable": "/usr/bin/foo", "groups": ["com.example.foo"], "clientIDs": ["…"]}. \
        Enrolled groups live in --state-dir/UID/, encrypted with --state-dir/keeper.key (0600, root's).

        --enroll (run as the user) hands your group (--group, from the keyring or the encrypted \
        file as other commands open it) to the keeper, and removes your copy once the keeper has \
        read it back. Apps then use the keeper with TOKENCACHE_AGENT_SOCK=\(KeeperProtocol.defaultSocket) \
        and TOKENCACHE_AGENT_UID=0. See docs/KEEPER.md for what is not done yet (consent, audit log, package).
        """)

    @Option(help: ArgumentHelp("The socket's path (default \(KeeperProtocol.defaultSocket)).", valueName: "path"))
    var socket: String = KeeperProtocol.defaultSocket

    @Option(name: .customLong("state-dir"), help: ArgumentHelp("Where enrolled groups and the key are kept (default \(KeeperProtocol.defaultStateDirectory)).", valueName: "dir"))
    var stateDirectory: String = KeeperProtocol.defaultStateDirectory

    @Option(name: .customLong("apps-dir"), help: ArgumentHelp("The apps files (default \(KeeperProtocol.defaultAppsDirectory)).", valueName: "dir"))
    var appsDirectory: String = KeeperProtocol.defaultAppsDirectory

    @Flag(help: "Hand your group to the keeper (as the user), then remove your copy once the keeper has read it back.")
    var enroll = false

    @OptionGroup(title: "Storage options (with --enroll)") var store: StoreOptions

    func run() throws {
        try reportingErrors {
            if enroll { return try enrollGroup() }
            try serve()
        }
    }

    private func serve() throws {
        guard geteuid() == 0 else {
            throw CLIError.usage("The token keeper runs as root (it reads its callers' /proc and keeps their stores out of their reach).",
                                 hint: "Start it as root or through its systemd unit; users run `tokencache keeper --enroll`")
        }
        var options = PublicClientApplication.Options()
        options.logger = StoreOptions.logger(verbose: store.verbose)
        let vault = try KeeperVault(directory: stateDirectory, logger: options.logger)
        var signals = sigset_t()
        sigemptyset(&signals)
        for signal in [SIGINT, SIGTERM, SIGHUP] { sigaddset(&signals, signal) }
        pthread_sigmask(SIG_BLOCK, &signals, nil)
        let server = try KeeperServer(socket: socket, vault: vault, appsDirectory: appsDirectory, options: options) { line in
            Terminal.note(Terminal.escape("\(Terminal.localTime(Date())) \(line)"))
        }
        try server.start()
        Terminal.note("tokencache keeper: serving at \(server.path ?? "the socket systemd passed") (pid \(getpid())), state \(stateDirectory), apps \(appsDirectory).")
        var received: Int32 = 0
        sigwait(&signals, &received)
        server.stop()
    }

    private func enrollGroup() throws {
        let local = try store.openStore()
        let mine = try local.inventory()
        guard !mine.accounts.isEmpty else {
            throw CLIError.notFound("Group \(local.group) holds no account here: nothing to enrol.", hint: "Sign in first, or name the group with --group")
        }
        let cache = String(decoding: try local.exportMSALJSON(), as: UTF8.self)
        let kept = try KeeperClient(path: socket).enroll(KeeperProtocol.Enrollment(group: local.group.name, cache: cache))
        // Every account and client of yours, with its kind of refresh token, must be in what the keeper read back.
        func slots(_ inventory: GroupInventory) -> Set<String> {
            Set(inventory.accounts.flatMap { account in account.clients.map { "\(account.homeAccountID) \($0.clientID.lowercased()) \($0.refreshToken)" } })
        }
        let missing = slots(mine).subtracting(slots(kept))
        guard missing.isEmpty else {
            throw CLIError.failed("The keeper's copy of group \(local.group) lacks \(missing.count) of your client sign-ins; your copy was kept.",
                                  hint: "Check the keeper's journal, then run --enroll again")
        }
        try local.removeAll()
        Terminal.print(TerminalText("Enrolled group \(local.group) (\(mine.accounts.count) account\(mine.accounts.count == 1 ? "" : "s")) in the token keeper at \(socket); your copy was removed."))
    }
}
