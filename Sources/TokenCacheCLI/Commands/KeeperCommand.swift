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
        read it back; adding to a group the keeper holds already asks for your password on your \
        terminal, as --consent does. Your programs then find the keeper by themselves: it lists \
        your enrolled groups in --state-dir-enrolled/UID (set TOKENCACHE_KEEPER=off to stay local); \
        or name it with TOKENCACHE_AGENT_SOCK=\(KeeperProtocol.defaultSocket) and TOKENCACHE_AGENT_UID=0. --unenroll (as root, with --uid and --output) writes that \
        user's group to a new 0600 file and deletes the keeper's copy only once the file reads \
        back; the user imports the file. No process of the user can take a group back: any of \
        them could run this program. --list shows your enrolled \
        groups (accounts, allowed apps; no secrets) and your consents; as root, every user's from --state-dir.

        --consent --app APP --group G --client ID lets an app no apps file names (APP as the \
        keeper's refusal and --list name it: its executable, flatpak:ID or snap:NAME) use your \
        group G with client ID (never an interpreter, a shell or tokencache itself: the keeper \
        refuses those, since they run whatever any of your programs gives them): \
        it asks for your password on your terminal (/dev/tty, never standard input, arguments \
        or the environment), which the keeper checks with PAM (service --pam-service, default \
        \(KeeperServer.defaultPAMService)) for the user the kernel says is calling, and records \
        the consent only then. After \(ConsentLimiter.limit) failures in a row the keeper asks \
        PAM nothing for that user for a minute, twice as long at each lockout in a row (at most \
        an hour; kept across restarts). --revoke-consent --app APP --group G [--client ID] \
        withdraws it (no password: removing rights is safe). --unenroll withdraws the group's \
        consents too.

        Every decision (app, uid, op, group, client, account, scopes, outcome; never a token) is \
        written to the keeper's standard error (the journal under systemd), to syslog \
        (LOG_AUTHPRIV) where /dev/log exists and standard error is not the journal, and to the \
        caller's audit log, --state-dir/UID/audit.log (root's, 0600; past 1 MiB its newest half \
        is kept). --log shows your own newest entries (--lines, default 50, at most 500; --json \
        prints {"entries": [{"time", "app", "uid", "pid", "op", "group", "client", "account", \
        "scopes", "outcome"}]}); the keeper answers with the calling uid's only. As root, --log \
        reads --state-dir itself: --uid picks whose (default 0).
        See docs/KEEPER.md for what is not done yet (the package, polkit).
        """)

    @Option(help: ArgumentHelp("The socket's path (default \(KeeperProtocol.defaultSocket)).", valueName: "path"))
    var socket: String = KeeperProtocol.defaultSocket

    @Option(name: .customLong("state-dir"), help: ArgumentHelp("Where enrolled groups and the key are kept (default \(KeeperProtocol.defaultStateDirectory)).", valueName: "dir"))
    var stateDirectory: String = KeeperProtocol.defaultStateDirectory

    @Option(name: .customLong("apps-dir"), help: ArgumentHelp("The apps files (default \(KeeperProtocol.defaultAppsDirectory)).", valueName: "dir"))
    var appsDirectory: String = KeeperProtocol.defaultAppsDirectory

    @Flag(help: "Hand your group to the keeper (as the user), then remove your copy once the keeper has read it back.")
    var enroll = false

    @Flag(help: "As root: write --uid's group from --state-dir to a new file (--output, MSAL JSON, 0600) and read it back, then delete the keeper's copy. The keeper never hands a group back to a process of the user.")
    var unenroll = false

    @Option(help: ArgumentHelp("With --unenroll: the new file to write the group to (never an existing one).", valueName: "file"))
    var output: String?

    @Flag(help: "List your enrolled groups (accounts, allowed apps; no secrets) and your consents; as root, every user's, from --state-dir and --apps-dir.")
    var list = false

    @Flag(help: "Let --app use your --group although no apps file names it: asks for your password on your terminal, which the keeper checks with PAM.")
    var consent = false

    @Flag(name: .customLong("revoke-consent"), help: "Withdraw your consent to --app using your --group (no password).")
    var revokeConsent = false

    @Option(help: ArgumentHelp("With --consent or --revoke-consent: the app, as the keeper's refusal names it (its executable, flatpak:ID or snap:NAME).", valueName: "identity"))
    var app: String?

    @Option(help: ArgumentHelp("With --consent (required) or --revoke-consent: the client ID the consent is for, as the keeper's refusal names it (to withdraw: default every client of the app and group).", valueName: "id"), transform: ClientIDArgument.parse)
    var client: ClientID?

    @Option(name: .customLong("pam-service"), help: ArgumentHelp("Serving (root): the PAM service consent passwords are checked with (default \(KeeperServer.defaultPAMService)).", valueName: "name"))
    var pamService: String = KeeperServer.defaultPAMService

    @Flag(name: .customLong("broker-forwarding"), help: "Serving (root): take the calls `tokencache broker` forwards for enrolled users' MSAL apps (off by default: the access tokens in the broker's replies cross the user's session bus, where any process of the user may monitor them; see docs/KEEPER.md).")
    var brokerForwarding = false

    @Flag(help: "Show your own newest audit log entries (the keeper's decisions about your programs); as root, --uid's, from --state-dir.")
    var log = false

    @Option(help: ArgumentHelp("With --log: how many entries (default 50, at most \(KeeperServer.maximumLogLines)).", valueName: "n"))
    var lines: Int?

    @Option(help: ArgumentHelp("As root, with --log: whose audit log to read from --state-dir (default 0); with --unenroll: whose group.", valueName: "uid"))
    var uid: UInt32?

    @Flag(help: "With --log: print JSON with sorted keys, for scripts.")
    var json = false

    @OptionGroup(title: "Storage options (with --enroll or --unenroll)") var store: StoreOptions

    func run() throws {
        try reportingErrors {
            guard [enroll, unenroll, list, log, consent, revokeConsent].filter({ $0 }).count <= 1 else {
                throw CLIError.usage("--enroll, --unenroll, --list, --log, --consent and --revoke-consent go one at a time.")
            }
            guard consent || revokeConsent || (app == nil && client == nil) else { throw CLIError.usage("--app and --client go with --consent or --revoke-consent.") }
            guard log || (lines == nil && !json) else { throw CLIError.usage("--lines and --json go with --log.") }
            guard log || unenroll || uid == nil else { throw CLIError.usage("--uid goes with --log or --unenroll.") }
            guard unenroll || output == nil else { throw CLIError.usage("--output goes with --unenroll.") }
            if log { return try showLog() }
            if list { return try listGroups() }
            if enroll { return try enrollGroup() }
            if unenroll { return try unenrollGroup() }
            if consent || revokeConsent { return try changeConsent() }
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
        let server = try KeeperServer(socket: socket, vault: vault, appsDirectory: appsDirectory, options: options, pamService: pamService,
                                      brokerForwarding: brokerForwarding, observer: { line in Terminal.note(Terminal.escape("\(Terminal.localTime(Date())) \(line)")) })
        try server.start()
        Terminal.note("tokencache keeper: serving at \(server.path ?? "the socket systemd passed") (pid \(getpid())), state \(stateDirectory), apps \(appsDirectory)"
                      + (brokerForwarding ? ", taking calls tokencache broker forwards." : "."))
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
        let client = KeeperClient(path: socket)
        // Adding to a group the keeper holds already needs your password (any program of yours could run this).
        let adding = try client.enrolled().groups.contains { $0.group == local.group.name }
        var password = adding ? try TerminalPassword.read(prompt: "Your password, to add to your group \(local.group.name) in the token keeper: ") : []
        defer { password.withUnsafeMutableBytes { if let base = $0.baseAddress { explicit_bzero(base, $0.count) } } }
        let kept = try client.enroll(KeeperProtocol.Enrollment(group: local.group.name, cache: cache,
                                                               password: adding ? String(decoding: password, as: UTF8.self) : nil))
        // Every account and client of yours, with its kind of refresh token, must be in what the keeper read back.
        let missing = Self.slots(mine).subtracting(Self.slots(kept))
        guard missing.isEmpty else {
            throw CLIError.failed("The keeper's copy of group \(local.group) lacks \(missing.count) of your client sign-ins; your copy was kept.",
                                  hint: "Check the keeper's journal, then run --enroll again")
        }
        try local.removeAll()
        Terminal.print(TerminalText("Enrolled group \(local.group) (\(mine.accounts.count) account\(mine.accounts.count == 1 ? "" : "s")) in the token keeper at \(socket); your copy was removed."))
    }

    /// Root takes a user's group out of the keeper: it is written to a new file and read back from
    /// it, and only then is the keeper's copy deleted (if no app refreshed meanwhile). A process of
    /// the user cannot do this: any of them could run this program (docs/KEEPER.md).
    private func unenrollGroup() throws {
        guard geteuid() == 0 else {
            throw CLIError.failed("Only root takes a group out of the token keeper: any program of yours could run this command, and the keeper exists to keep your refresh tokens from them.",
                                  hint: "Ask an administrator to run `tokencache keeper --unenroll --uid \(getuid()) --group GROUP --output FILE`, then import FILE with `tokencache import --format msal-json FILE`")
        }
        guard let owner = uid, let output else { throw CLIError.usage("--unenroll needs --uid (whose group) and --output (a new file).") }
        let group = try CacheGroup(store.group ?? CacheGroup.universalStorage.name)
        let vault = try KeeperVault.openExisting(directory: stateDirectory, logger: StoreOptions.logger(verbose: store.verbose))
        let export = try vault.export(uid: owner, group: group)
        try Self.writeNewFile(output, Data(export.cache.utf8))
        // Read back from the file: every account and client the keeper holds, with its kind of refresh token, must be there.
        let readBack = AccountStore(backend: InMemoryBackend(), group: group)
        guard let written = FileManager.default.contents(atPath: output),
              (try? readBack.importMSALJSON(written)) != nil,
              Self.slots(export.inventory).isSubset(of: Self.slots(try readBack.inventory())) else {
            throw CLIError.failed("\(output) does not read back as uid \(owner)'s group \(group); the keeper still holds its copy.",
                                  hint: "Remove \(output), check the disk, and run --unenroll again")
        }
        // Its consents go with it: enrolling the group again (no password the first time) must not let the consented apps in.
        // Withdrawn first: taking rights away is always safe, and a failure there leaves the group where it was.
        let unenrolled: KeeperVault.Unenrollment
        do throws(KeeperVault.UnenrollmentFailure) {
            unenrolled = try vault.unenroll(uid: owner, group: group, ifAt: export.revision)
        } catch {
            switch error.reason {
            case .consentsNotWithdrawn:
                throw CLIError.failed("uid \(owner)'s consents for group \(group) could not be withdrawn (\(error.cause.message)); nothing was changed: the keeper still holds the group.",
                                      hint: "Remove \(output), fix the state directory, and run --unenroll again", cause: error.cause)
            case .consentsWithdrawnGroupKept(let count):
                throw CLIError.failed("uid \(owner)'s \(count) consent(s) for group \(group) were withdrawn, but the keeper's copy of the group was not deleted (\(error.cause.message)): the keeper still holds it, without those consents.",
                                      hint: "Remove \(output), fix the state directory, and run --unenroll again (the consents stay withdrawn)", cause: error.cause)
            }
        }
        let withdrawn: Int
        switch unenrolled {
        case .removed(let count): withdrawn = count
        case .changed(let count):
            throw CLIError.failed("The keeper's copy of uid \(owner)'s group \(group) changed after it was written to \(output) (an app refreshed a token); it was not deleted\(count > 0 ? ", and its \(count) consent(s) were withdrawn" : "").",
                                  hint: "Remove \(output) and run --unenroll again: it takes the newer copy")
        }
        if withdrawn > 0 { Terminal.print(TerminalText("Withdrew uid \(owner)'s \(withdrawn) consent\(withdrawn == 1 ? "" : "s") for group \(group).")) }
        let count = export.inventory.accounts.count
        Terminal.print(TerminalText("Unenrolled uid \(owner)'s group \(group) (\(count) account\(count == 1 ? "" : "s")): written to \(output) (root's, 0600) and deleted from the keeper. Give the file to the user (`chown \(owner) \(output)`), who imports it with `tokencache import --format msal-json \(output)`."))
    }

    /// Writes `data` to a new file (0600; never over an existing one, nor through a link), synced.
    static func writeNewFile(_ path: String, _ data: Data) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw CLIError.failed("\(path) could not be created: \(String(cString: strerror(errno))).", hint: "Name a new file with --output")
        }
        defer { close(fd) }
        let written = data.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        guard written == data.count, fsync(fd) == 0 else {
            unlink(path)
            throw CLIError.failed("\(path) could not be written; the keeper still holds its copy.", hint: "Check the disk, then run --unenroll again")
        }
    }

    /// Each account's clients with their kind of refresh token, to compare two copies of a group (no secrets).
    static func slots(_ inventory: GroupInventory) -> Set<String> {
        Set(inventory.accounts.flatMap { account in account.clients.map { "\(account.homeAccountID) \($0.clientID.lowercased()) \($0.refreshToken)" } })
    }

    /// Records (with your password, read from your terminal) or withdraws your consent to an app
    /// using one of your groups.
    private func changeConsent() throws {
        guard let app, !app.isEmpty, let groupName = store.group else {
            throw CLIError.usage("--\(consent ? "consent" : "revoke-consent") needs --app (as the keeper's refusal names the app) and --group.")
        }
        let group = try CacheGroup(groupName)
        let clientID = self.client
        let client = KeeperClient(path: socket)
        let clientText = clientID.map { " with client \($0)" } ?? ""
        if revokeConsent {
            let outcome = try client.consent(KeeperProtocol.ConsentRequest(revoking: true, app: app, group: group.name, clientID: clientID, password: nil))
            let existed = if case .revoked(existed: true) = outcome { true } else { false }
            return Terminal.print(TerminalText(existed ? "Withdrawn: \(app) may no longer use your group \(group)\(clientText)." : "You had not consented to \(app) using group \(group)\(clientText); nothing changed."))
        }
        guard let clientID else {
            throw CLIError.usage("--consent needs --client: a consent is for one client ID (the keeper's refusal names it).")
        }
        var password = try TerminalPassword.read(prompt: "Your password, to let \(Terminal.escape(app)) use your group \(group.name): ")
        defer { password.withUnsafeMutableBytes { if let base = $0.baseAddress { explicit_bzero(base, $0.count) } } }
        // The request's copy of the password is a Swift string, freed (not zeroed) once sent.
        let outcome = try client.consent(KeeperProtocol.ConsentRequest(revoking: false, app: app, group: group.name, clientID: clientID,
                                                                       password: String(decoding: password, as: UTF8.self)))
        switch outcome {
        case .recorded:
            Terminal.print(TerminalText("Consent recorded: \(app) may use your group \(group)\(clientText) through the token keeper (withdraw it with --revoke-consent)."))
        case .unconsentable(let reason):
            throw CLIError.failed("The token keeper refused: no consent can be given to \(app): \(reason.why); nothing was recorded.",
                                  hint: "Consent to the app's own executable, or ask an administrator to name it in the apps directory", cause: Self.refusal)
        case .notAuthenticated:
            throw CLIError.failed("The token keeper refused: your password was not accepted; no consent was recorded.",
                                  hint: "Run it again and type your login password", cause: Self.refusal)
        case .accountRefused:
            throw CLIError.failed("The token keeper refused: your password is right, but your account may not be used now (PAM's account check); no consent was recorded.",
                                  hint: "Ask an administrator (an expired password or account?)", cause: Self.refusal)
        case .tooManyFailures(let seconds):
            throw CLIError.failed("The token keeper refused: too many wrong passwords in a row; it checks none of yours for \(seconds) s.",
                                  hint: "Wait, then run it again", cause: Self.refusal)
        case .attemptInProgress:
            throw CLIError.failed("The token keeper refused: another consent of yours is being checked.", hint: "Wait for it, then run it again", cause: Self.refusal)
        case .countNotRead:
            throw CLIError.failed("The token keeper could not read its count of your failed attempts just now, so it checked no password; no consent was recorded.",
                                  hint: "Run it again; if this persists, an administrator finds why in the keeper's journal", cause: Self.refusal)
        case .unavailable:
            throw CLIError.failed("The token keeper could not check your password (PAM is not set up for it); no consent was recorded.",
                                  hint: "Ask an administrator to install the PAM service \(KeeperServer.defaultPAMService) (docs/KEEPER.md)")
        case .revoked:
            throw CLIError.failed("The token keeper answered a consent with a withdrawal.", hint: "Use a tokencache of the same release on both sides")
        }
    }

    /// The library error behind a refused consent, for `--json`'s error line: `accessDenied`.
    private static let refusal = TokenCacheError(.accessDenied, "The token keeper refused the consent.")

    /// Your enrolled groups, from the keeper; as root, every user's, read from the state directory.
    private func listGroups() throws {
        let groups: [KeeperProtocol.EnrolledGroup], consents: [(uid: UInt32, consent: KeeperConsents.Consent)]
        if geteuid() == 0 {
            // A listing writes nothing: where there is no state, it makes none.
            let vault = try KeeperVault.openExisting(directory: stateDirectory, logger: StoreOptions.logger(verbose: store.verbose))
            let apps = try AppRegistry.load(appsDirectory, logger: StoreOptions.logger(verbose: store.verbose))
            groups = vault.uids().flatMap { vault.enrolled(uid: $0, apps: apps) }
            let given = KeeperConsents(directory: stateDirectory)
            consents = try vault.uids().flatMap { uid in try given.consents(uid: uid).map { (uid, $0) } }
            Terminal.print(TerminalText("Groups in the token keeper's \(stateDirectory) (apps from \(appsDirectory)):"))
        } else {
            let enrolled = try KeeperClient(path: socket).enrolled()
            (groups, consents) = (enrolled.groups, (enrolled.consents ?? []).map { (getuid(), $0) })
            Terminal.print(TerminalText("Your groups in the token keeper at \(socket):"))
        }
        if groups.isEmpty { Terminal.print(TerminalText("  none enrolled")) }
        for entry in groups {
            let accounts = entry.accounts.map { "\($0) account\($0 == 1 ? "" : "s")" } ?? "unreadable (\(entry.problem ?? "?"))"
            let apps = entry.apps.isEmpty ? "no app allowed" : "apps: " + entry.apps.joined(separator: ", ")
            Terminal.print(TerminalText("  \(geteuid() == 0 ? "uid \(entry.uid) " : "")\(entry.group): \(accounts); \(apps)"))
        }
        Terminal.print(TerminalText(consents.isEmpty ? "Consents: none" : "Consents (apps no apps file names, allowed a group with the user's password):"))
        for (uid, consent) in consents {
            let client = consent.clientID.map { " with client \($0)" } ?? " (no client ID: allows nothing; consent again with --client)"
            Terminal.print(TerminalText("  \(geteuid() == 0 ? "uid \(uid) " : "")\(consent.app) may use \(consent.group)\(client) (since \(consent.time))"))
        }
    }

    /// The documented `--log --json` document.
    struct LogOutput: Encodable {
        var entries: [KeeperAudit.Entry]
    }

    /// Your own newest audit log entries, from the keeper; as root, `--uid`'s, read from the state directory.
    private func showLog() throws {
        if let lines, lines < 1 || lines > KeeperServer.maximumLogLines {
            throw CLIError.usage("--lines takes 1 to \(KeeperServer.maximumLogLines).")
        }
        let entries: [KeeperAudit.Entry], whose: String
        if geteuid() == 0 {
            let vault = try KeeperVault.openExisting(directory: stateDirectory, logger: StoreOptions.logger(verbose: store.verbose))
            let owner = uid ?? 0
            entries = try KeeperAudit(directory: vault.directory).entries(uid: owner, last: lines ?? 50)
            whose = "uid \(owner)'s audit log in \(stateDirectory)"
        } else {
            guard uid == nil else { throw CLIError.usage("--uid is for root, reading --state-dir; the keeper shows you your own log only.") }
            entries = try KeeperClient(path: socket).log(lines: lines)
            whose = "Your audit log in the token keeper at \(socket)"
        }
        if json { return try JSONOutput.print(LogOutput(entries: entries)) }
        guard !entries.isEmpty else { return Terminal.print(TerminalText("\(whose): no entries.")) }
        Terminal.print(TerminalText("\(whose), oldest first:"))
        Terminal.print(Terminal.table(["TIME", "APP", "PID", "OP", "GROUP", "CLIENT", "ACCOUNT", "SCOPES", "OUTCOME"], entries.map { entry in
            [TerminalText(entry.time), TerminalText(entry.app), TerminalText("\(entry.pid)"), TerminalText(entry.op), TerminalText(entry.group ?? "-"),
             TerminalText(entry.client ?? "-"), TerminalText(entry.account ?? "-"),
             TerminalText(entry.scopes.isEmpty ? "-" : entry.scopes.joined(separator: " ")), TerminalText(entry.outcome)]
        }))
    }
}
