#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import FoundationEssentials
import Logging
import TokenCache
import TokenCacheAgent
import TokenCacheBroker
import TokenCacheCore

/// The token keeper (#62): a system service that holds enrolled users' groups where their own
/// processes cannot read them (``KeeperVault``) and serves each app, identified by the kernel
/// (``KeeperCaller``), the access tokens of the groups its apps file allows (``AppRegistry``),
/// from the caller's own uid's store. It refreshes with the stored refresh tokens at their
/// issuer (``TokenEngine``, as the agent does) and never hands a refresh token out.
package final class KeeperServer: Sendable {
    /// The socket's path; nil for one systemd passed (socket activation).
    package let path: String?
    private let listener: SocketListener
    private let vault: KeeperVault
    private let appsDirectory: String
    private let logger: Logger
    let options: PublicClientApplication.Options
    private let observer: @Sendable (String) -> Void
    /// Each uid's audit log, in the state directory.
    private let audit: KeeperAudit
    /// Whether decisions also go to syslog (LOG_AUTHPRIV): where /dev/log exists and standard
    /// error is not the journal already (systemd sets JOURNAL_STREAM then).
    private let syslogs: Bool
    /// The consents users gave with their password.
    private let consents: KeeperConsents
    /// Failed consent attempts per uid, on the keeper's clock.
    private let limiter: ConsentLimiter
    /// The PAM service consent passwords are checked with.
    private let pamService: String
    /// Whether calls `tokencache broker` forwards are taken (``forward(_:group:from:)``).
    private let brokerForwarding: Bool
    /// Connections served per uid.
    private let connections = KeeperConnections(limit: KeeperServer.maximumConnectionsPerUID)

    /// The most entries one `log` request gets (an answer stays well under the protocol's 1 MiB).
    package static let maximumLogLines = 500

    /// Bound on each request (from the connection or the previous answer) and each read and write.
    static let ioTimeoutSeconds = 10
    /// Connections served at once; more wait in the listen backlog.
    static let maximumConnections = 32
    /// Connections of one uid served at once (a quarter of ``maximumConnections``): more are refused at once.
    package static let maximumConnectionsPerUID = 8

    /// The PAM service consent is checked with by default (packaging/pam/tokencache-keeper).
    package static let defaultPAMService = "tokencache-keeper"

    /// Listens at `socket`, or on the descriptor systemd passed (LISTEN_FDS) when it passed one.
    /// - Parameters:
    ///   - pamService: the PAM service consent passwords are checked with.
    ///   - brokerForwarding: whether to take the calls `tokencache broker` forwards for apps (off
    ///     by default: the access tokens in its replies cross the user's session bus, which any
    ///     process of the user may monitor).
    ///   - clock: the time since the Unix epoch, which consent back-offs are counted on (and saved with).
    ///   - observer: gets each decision's log line (who, what, outcome; never a token).
    package init(socket: String, vault: KeeperVault, appsDirectory: String, options: PublicClientApplication.Options,
                 pamService: String = KeeperServer.defaultPAMService, brokerForwarding: Bool = false, clock: (@Sendable () -> Duration)? = nil,
                 observer: @escaping @Sendable (String) -> Void = { _ in }) throws(TokenCacheError) {
        if let passed = Self.socketFromSystemd() {
            (listener, path) = (SocketListener(passed), nil)
        } else {
            (listener, path) = (SocketListener(try Self.listen(socket)), socket)
        }
        // Every message then carries its sender's pid, which each request is checked against (KeeperCaller.confirmed).
        SenderCredentials.enable(on: listener.socket)
        (self.vault, self.appsDirectory, self.options, self.logger, self.observer) = (vault, appsDirectory, options, options.logger, observer)
        audit = KeeperAudit(directory: vault.directory)
        consents = KeeperConsents(directory: vault.directory)
        limiter = ConsentLimiter(directory: vault.directory, now: clock ?? ConsentLimiter.wallClock)
        self.pamService = pamService
        self.brokerForwarding = brokerForwarding
        syslogs = access("/dev/log", W_OK) == 0 && getenv("JOURNAL_STREAM") == nil
        if syslogs { openlog(nil, LOG_PID, LOG_AUTHPRIV) }
    }

    /// Starts accepting on a thread of its own; returns at once.
    package func start() throws(TokenCacheError) {
        vault.publishEveryonesEnrolledGroups()
        try listener.start(label: "org.swift-tokencache.keeper.accept", maximumConnections: Self.maximumConnections) { [self] in serve($0) }
    }

    /// Stops accepting and removes the socket file it made.
    package func stop() {
        guard listener.stop(), let path else { return }
        unlink(path)
    }

    // MARK: Serving

    private func serve(_ connection: SocketDescriptor) {
        connection.setTimeouts(seconds: Self.ioTimeoutSeconds)
        // One uid's connections are bounded before anything else is done for them (no request read, no /proc scan).
        if let uid = connection.peerCredentials()?.uid {
            guard connections.acquire(uid: uid) else {
                let refusal = connections.refusal(uid: uid)
                _ = log(nil, op: "-", group: nil, request: nil, outcome: "refused: uid \(uid): \(refusal.message)")
                // Its request is read first (within the usual deadline, then zeroed): a client whose
                // request is still unsent when the socket closes gets EPIPE, never the refusal.
                discardRequest(connection)
                _ = connection.write(all: AgentProtocol.encode(AgentProtocol.Response(refusal)))
                return
            }
            defer { connections.release(uid: uid) }
            serveAccepted(connection)
        } else {
            serveAccepted(connection)
        }
    }

    /// Reads one framed request and forgets it (zeroed: it may hold a consent's password).
    private func discardRequest(_ connection: SocketDescriptor) {
        let start = ContinuousClock.now
        let deadline = ReadDeadline(at: .seconds(Self.ioTimeoutSeconds), perRead: .seconds(Self.ioTimeoutSeconds), now: { start.duration(to: .now) })
        guard let (head, _) = SenderCredentials.read(connection, exactly: 4, by: deadline) else { return }
        let length = Int(head[0]) << 24 | Int(head[1]) << 16 | Int(head[2]) << 8 | Int(head[3])
        guard length > 0, length <= AgentProtocol.maximumMessageBytes,
              case (var body, _)? = SenderCredentials.read(connection, exactly: length, by: deadline) else { return }
        body.withUnsafeMutableBytes { explicit_bzero($0.baseAddress!, $0.count) }
    }

    private func serveAccepted(_ connection: SocketDescriptor) {
        // Replaced by the unidentified caller once a request fails its confirmation: a later
        // request on that connection (no holder scan) must not be answered as the app.
        var accepted = KeeperCaller.identify(connection)
        let start = ContinuousClock.now
        let now: @Sendable () -> Duration = { start.duration(to: .now) }
        var deadline = ReadDeadline(at: now() + .seconds(Self.ioTimeoutSeconds), perRead: .seconds(Self.ioTimeoutSeconds), now: now)
        var first = true
        while let (head, headSenders) = SenderCredentials.read(connection, exactly: 4, by: deadline) {
            let length = Int(head[0]) << 24 | Int(head[1]) << 16 | Int(head[2]) << 8 | Int(head[3])
            guard length > 0, length <= AgentProtocol.maximumMessageBytes else {
                // Answered, then closed: the rest of an oversized message is never read.
                audit(log(accepted, op: "-", group: nil, request: nil, outcome: "refused: a message of \(length) bytes"))
                _ = connection.write(all: AgentProtocol.encode(AgentProtocol.Response(TokenCacheError.invalidArgument(
                    "request", "is \(length) bytes; the keeper reads messages of 1 to \(AgentProtocol.maximumMessageBytes) bytes",
                    hint: "See docs/AGENT.md for the protocol"))))
                return
            }
            // Bound as a variable, not copied: the one buffer is zeroed below.
            guard case (var body, let bodySenders)? = SenderCredentials.read(connection, exactly: length, by: deadline) else { return }
            // Identified at accept; confirmed for each request: sent by that process, which still runs what it ran then.
            let caller = accepted.map { $0.confirmed(on: connection, senders: headSenders.union(bodySenders), holders: first) }
            first = false
            if caller?.identity == nil { accepted = caller }
            // Decoded in place, then zeroed (a consent's password was in it); the decoder's own copies are freed unzeroed.
            let response = body.withUnsafeMutableBytes { raw in
                defer { explicit_bzero(raw.baseAddress!, raw.count) }
                let request = Data(bytesNoCopy: raw.baseAddress!, count: raw.count, deallocator: .none)
                return answer(request, from: caller, on: connection)
            }
            deadline = ReadDeadline(at: now() + .seconds(Self.ioTimeoutSeconds), perRead: .seconds(Self.ioTimeoutSeconds), now: now)
            guard connection.write(all: AgentProtocol.encode(response)) else { return }
        }
    }

    /// The answer to one message, on the connection's own (blocking) thread: the files, PAM, the
    /// store and a refresh all run there.
    /// `connection` carries the first of two answers and says when the caller hung up (a device
    /// code sign-in's).
    func answer(_ message: Data, from caller: KeeperCaller?, on connection: SocketDescriptor? = nil) -> any Encodable & Sendable {
        guard let envelope = try? JSONDecoder().decode(KeeperProtocol.Envelope.self, from: message) else {
            decided(caller, op: "-", group: nil, request: nil, outcome: "refused: not a JSON request")
            return AgentProtocol.Response(TokenCacheError.invalidArgument("request", "is not a JSON object of protocol version \(AgentProtocol.version)",
                                                                          hint: "See docs/KEEPER.md for the protocol"))
        }
        let op = envelope.op ?? "-"
        do throws(TokenCacheError) {
            guard (envelope.version ?? AgentProtocol.version) == AgentProtocol.version else {
                throw TokenCacheError(.agentUnavailable, "The token keeper speaks protocol version \(AgentProtocol.version), not \(envelope.version ?? 0).",
                                      hint: "Use a tokencache of the same release on both sides")
            }
            guard let caller else { throw KeeperProtocol.refused("the kernel did not say who is calling", hint: "Call from a local process") }
            if op == "log" {
                // Any caller, identified or not, gets its own uid's entries (SO_PEERCRED), whatever the request names.
                let asked = try? JSONDecoder().decode(KeeperProtocol.LogRequest.self, from: message)
                let lines = min(max(asked?.lines ?? 50, 1), Self.maximumLogLines)
                let entries = try audit.entries(uid: caller.uid, last: lines)
                decided(caller, op: op, group: nil, request: nil, outcome: "granted: \(entries.count) entries")
                return KeeperProtocol.AuditLog(entries: entries)
            }
            if op == "enroll" {
                guard let enrollment = try? JSONDecoder().decode(KeeperProtocol.Enrollment.self, from: message) else {
                    throw TokenCacheError.invalidArgument("request", "is not an enrolment (group, cache)", hint: "See docs/KEEPER.md")
                }
                let inventory = try enroll(enrollment, from: caller)
                decided(caller, op: op, group: enrollment.group, request: nil, outcome: "granted: \(inventory.accounts.count) account(s) stored")
                return AgentProtocol.Response(inventory: inventory)
            }
            if op == "groups" {
                try Self.requireOwnProgram(caller, to: "list your groups", hint: "List them with `tokencache keeper --list`")
                let groups = vault.enrolled(uid: caller.uid, apps: try AppRegistry.load(appsDirectory, logger: logger))
                let given = try consents.consents(uid: caller.uid)
                decided(caller, op: op, group: nil, request: nil, outcome: "granted: \(groups.count) group(s), \(given.count) consent(s)")
                return KeeperProtocol.Enrolled(groups: groups, consents: given)
            }
            if op == "consent" || op == "revoke-consent" {
                return try consent(message, op: op, from: caller)
            }
            if op == KeeperForwardRequest.operation {
                return try forward(message, group: envelope.group, from: caller)
            }
            if op == KeeperCodeRedemption.operation {
                return redeem(message, group: envelope.group, from: caller)
            }
            if op == KeeperDeviceCodeSignIn.operation {
                return deviceCodeSignIn(message, group: envelope.group, from: caller,
                                        interim: { connection?.write(all: AgentProtocol.encode($0)) ?? false },
                                        hungUp: { connection?.peerHungUp ?? false })
            }
            if op == KeeperNativeRedemption.operation {
                return redeemNative(message, group: envelope.group, from: caller)
            }
            if op == KeeperSignInCheck.operation {
                guard let check = try? JSONDecoder().decode(KeeperSignInCheck.self, from: message) else {
                    throw TokenCacheError.invalidArgument("request", "is not a sign-in check (client_id)", hint: "See docs/KEEPER.md, \"Signing in\"")
                }
                let (client, authority, store, _) = try signInTarget(clientID: check.clientID, authority: check.authority, type: check.authorityType,
                                                                     capabilities: [], named: envelope.group, caller: caller)
                decided(caller, op: op, group: store.group.name, request: AgentProtocol.Request(operation: .token, clientID: client.value),
                        outcome: "granted: may sign in at \(KeeperAudit.printable(authority.environment))")
                return AgentProtocol.Response()
            }
            if op == "export" || op == "unenroll" {
                // Any process of the user can run the keeper's own program with arguments of its
                // choosing: handing a group back (its refresh tokens) or deleting it on a user
                // process's request would undo what the keeper is for. Root unenrols, until consent exists.
                throw KeeperProtocol.refused("it hands no group back to, and deletes none for, a process of the user (any program of the user could ask)",
                                             hint: "Ask an administrator to run `tokencache keeper --unenroll --uid UID --group GROUP --output FILE` as root")
            }
            guard let request = try? JSONDecoder().decode(AgentProtocol.Request.self, from: message) else {
                throw TokenCacheError.invalidArgument("request", "is not a request of protocol version \(AgentProtocol.version) (op token, list or enroll)",
                                                      hint: "See docs/KEEPER.md for the protocol")
            }
            let response: AgentProtocol.Response
            let group: String
            switch request.operation {
            case .token:
                // The client is checked first, as where any request enters: a missing one is
                // invalidArgument for every caller, not an empty name refused by an app's client list.
                let client = try ClientID(required: request.clientID, field: "client_id")
                let (store, _) = try authorize(caller, group: envelope.group, client: client)
                response = AgentProtocol.Response(token: AgentProtocol.Token(try token(request, client: client, store: store)))
                group = store.group.name
            case .list:
                let (store, entry) = try authorize(caller, group: envelope.group, client: nil)
                response = AgentProtocol.Response(inventory: try list(request, store: store, entry: entry))
                group = store.group.name
            case .requests: throw KeeperProtocol.refused("it shows no request log over its socket", hint: "Read the keeper's journal")
            }
            decided(caller, op: op, group: group, request: request, outcome: "granted")
            return response
        } catch {
            decided(caller, op: op, group: envelope.group, request: try? JSONDecoder().decode(AgentProtocol.Request.self, from: message),
                outcome: "\(error.code == .accessDenied ? "refused" : "failed"): \(error.code) \(error.message)")
            return AgentProtocol.Response(error)
        }
    }

    /// An app's call the identity broker forwarded (``KeeperForwardRequest``): only the keeper's
    /// own program may forward, and the app is identified here as a caller of the keeper's socket
    /// is (``KeeperCaller/forwarded(pid:started:by:)``), then served as one: its apps file entry or
    /// its user's consent, its uid's store. The answer adds the ID token and the account's details
    /// a broker reply must carry; never a refresh token. Decisions are logged as the app's, "via broker".
    func forward(_ message: Data, group named: String?, from forwarder: KeeperCaller) throws(TokenCacheError) -> AgentProtocol.Response {
        guard brokerForwarding else {
            throw TokenCacheError(.unsupportedFlow, "The token keeper does not take calls forwarded by tokencache broker: its administrator has not turned them on.",
                                  hint: "An administrator starts the keeper with --broker-forwarding (docs/KEEPER.md says what that lets the user's processes see); apps can ask the keeper directly meanwhile")
        }
        try Self.requireOwnProgram(forwarder, to: "forward an app's request", hint: "Apps reach the keeper through `tokencache broker`")
        guard let forward = try? JSONDecoder().decode(KeeperForwardRequest.self, from: message) else {
            throw TokenCacheError.invalidArgument("request", "is not a forwarded request (inner, app_pid, app_started, client_id)", hint: "See docs/KEEPER.md")
        }
        let client = try ClientID(required: forward.clientID, field: "client_id")
        let app = KeeperCaller.forwarded(pid: forward.appPID, started: forward.appStarted, by: forwarder)
        let request = forward.tokenRequest
        let op = "\(KeeperForwardRequest.operation) \(forward.inner.rawValue)"
        do throws(TokenCacheError) {
            let (store, _) = try authorize(app, group: named, client: client)
            let response: AgentProtocol.Response
            switch forward.inner {
            case .token:
                let result = try token(request, client: client, store: store)
                guard let account = result.account else {
                    throw TokenCacheError(.notFound, "The token keeper holds no account record for this token of client \(client).",
                                          hint: "Sign in again with `tokencache login --client \(client)` and enrol it", reason: .noAccount)
                }
                response = AgentProtocol.Response(token: AgentProtocol.Token(forBroker: result, account: account))
            case .accounts:
                response = AgentProtocol.Response(accounts: try store.accounts(clientID: client).map(AgentProtocol.AccountDetails.init))
            }
            decided(app, op: op, group: store.group.name, request: request, outcome: "granted")
            return response
        } catch {
            decided(app, op: op, group: named, request: request, outcome: "\(error.code == .accessDenied ? "refused" : "failed"): \(error.code) \(error.message)")
            return AgentProtocol.Response(error)
        }
    }

    /// A consent, checked with the password of the caller's uid (SO_PEERCRED, never the request's
    /// say) through PAM, or its withdrawal (no password: removing rights is safe). Only the
    /// keeper's own program may ask: it reads the password from the user's terminal.
    func consent(_ message: Data, op: String, from caller: KeeperCaller) throws(TokenCacheError) -> KeeperProtocol.ConsentAnswer {
        try Self.requireOwnProgram(caller, to: "record or withdraw consent", hint: "Consent with `tokencache keeper --consent --app APP --group GROUP`")
        guard let request = try? JSONDecoder().decode(KeeperProtocol.ConsentRequest.self, from: message) else {
            throw TokenCacheError.invalidArgument("request", "is not a consent (app, group, password)", hint: "See docs/KEEPER.md")
        }
        let group = try CacheGroup(request.group)
        guard !request.app.isEmpty, request.app == KeeperAudit.printable(request.app) else {
            throw TokenCacheError.invalidArgument("app", "is empty, longer than \(KeeperAudit.maximumFieldLength) characters or holds control characters",
                                                  hint: "Name the app as the keeper's refusal does")
        }
        let client = try request.clientID.map { (text) throws(TokenCacheError) in try ClientID(text) }
        let (app, uid, consents) = (request.app, caller.uid, consents)
        // The app right after "consent of", the client at the end: each line reads "consent of APP recorded for client ID".
        let forClient = client.map { " for client \($0)" } ?? " for every client"
        // Each audit line names the app in its outcome; never the password.
        if op == "revoke-consent" {
            let existed = try consents.revoke(uid: uid, app: app, group: group.name, clientID: client)
            decided(caller, op: op, group: group.name, request: nil, outcome: existed ? "granted: consent of \(app) withdrawn\(forClient)" : "granted: there was no consent of \(app)\(forClient)")
            return KeeperProtocol.ConsentAnswer(outcome: .revoked(existed: existed))
        }
        guard let client else {
            throw TokenCacheError.invalidArgument("client_id", "is missing: a consent is for one client ID", hint: "Consent with `tokencache keeper --consent --app APP --group GROUP --client CLIENT`")
        }
        // Before the password is checked: refused whatever the password, and no failure counted.
        // By name only: the app's path is the user's to choose, and is never walked as root (UnconsentableApp.reason).
        if let unconsentable = UnconsentableApp.reason(for: app) {
            decided(caller, op: op, group: group.name, request: nil, outcome: "refused: consent of \(app) not given\(forClient): unconsentable: \(unconsentable.why) (PAM not asked)")
            return KeeperProtocol.ConsentAnswer(outcome: .unconsentable(unconsentable))
        }
        guard let password = request.password, !password.isEmpty else {
            throw TokenCacheError.invalidArgument("password", "is missing", hint: "Consent with `tokencache keeper --consent`, which asks for it on your terminal")
        }
        if let refusal = checkPassword(password, of: caller) {
            decided(caller, op: op, group: group.name, request: nil,
                          outcome: "\(refusal.outcome == .unavailable ? "failed" : "refused"): consent of \(app) not given\(forClient): \(refusal.why)")
            return KeeperProtocol.ConsentAnswer(outcome: refusal.outcome)
        }
        let consent = KeeperConsents.Consent(app: app, group: group.name, clientID: client, time: Date().formatted(.iso8601))
        try consents.record(consent, uid: uid)
        decided(caller, op: op, group: group.name, request: nil, outcome: "granted: consent of \(app) recorded\(forClient) (PAM service \(pamService))")
        return KeeperProtocol.ConsentAnswer(outcome: .recorded)
    }

    /// Checks `password` of the caller's uid (its user name from the uid SO_PEERCRED gave) with
    /// PAM, through the back-off.
    /// - Returns: nil when PAM accepted it; else the refusal and why, for the audit log (no password).
    func checkPassword(_ password: String, of caller: KeeperCaller) -> (outcome: KeeperProtocol.ConsentOutcome, why: String)? {
        let uid = caller.uid
        let secret = PAMSecret(password.utf8)
        // The back-off's saved count, the name lookup (NSS may ask a directory server) and PAM are blocking work.
        let checked = { () -> Result<PAM.Verdict, ConsentLimiter.Refusal> in
            do throws(ConsentLimiter.Refusal) { try limiter.begin(uid: uid) } catch { return .failure(error) }
            let verdict: PAM.Verdict
            if let user = Self.userName(uid) { verdict = PAM.verify(service: pamService, user: user, password: secret) } else { verdict = .unavailable("uid \(uid) has no user name") }
            // PAM unavailable is not a wrong password: it does not count toward a lockout.
            switch verdict {
            case .verified: limiter.end(uid: uid, outcome: .succeeded)
            case .notAuthenticated, .accountRefused: limiter.end(uid: uid, outcome: .failed)
            case .unavailable: limiter.end(uid: uid, outcome: .notChecked)
            }
            return .success(verdict)
        }()
        let verdict: PAM.Verdict
        switch checked {
        case .failure(let refusal):
            let outcome: KeeperProtocol.ConsentOutcome
            var why = ""
            switch refusal {
            case .tooManyFailures(let wait): outcome = .tooManyFailures(retryAfterSeconds: Int(wait.components.seconds) + 1)
            case .attemptInProgress: outcome = .attemptInProgress
            case .countNotRead(let path, let reason):
                // The audit log (root's) says which file and why; the user, only to try again.
                outcome = .countNotRead
                why = ": the saved count of failed attempts \(path) could not be read (\(reason))"
            case .countUnreadable(let path, let reason, let wait):
                // Said to the user as a lockout; the audit log (root's) says which file and why.
                outcome = .tooManyFailures(retryAfterSeconds: Int(wait.components.seconds) + 1)
                why = ": the saved count of failed attempts \(path) does not read (\(reason)), which counts as the longest back-off"
            }
            return (outcome, "\(outcome)\(why) (PAM not asked)")
        case .success(let answer): verdict = answer
        }
        switch verdict {
        case .verified: return nil
        case .notAuthenticated(let why): return (.notAuthenticated, "PAM: \(why)")
        case .accountRefused(let why): return (.accountRefused, "PAM account check: \(why)")
        case .unavailable(let why): return (.unavailable, "not checked: \(why)")
        }
    }

    /// The user name of `uid` (getpwuid_r), which PAM checks the password of.
    static func userName(_ uid: UInt32) -> String? {
        var entry = passwd(), result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 16 << 10)
        guard getpwuid_r(uid, &entry, &buffer, buffer.count, &result) == 0, result != nil, let name = entry.pw_name else { return nil }
        return String(cString: name)
    }

    /// The caller's store of the group it asks for, when its apps file allows it that group (and `client`).
    func authorize(_ caller: KeeperCaller, group named: String?, client: ClientID?) throws(TokenCacheError) -> (AccountStore, AppRegistry.Entry) {
        guard let identity = caller.identity else {
            throw KeeperProtocol.refused("the caller (pid \(caller.pid)) is not identified as an app: \(caller.unidentifiedBecause ?? "unknown")",
                                         hint: "Run the app as installed, without a debugger, LD_PRELOAD, LD_AUDIT or LD_LIBRARY_PATH")
        }
        var entries = try AppRegistry.load(appsDirectory, logger: logger).entries(for: identity)
        let listed = !entries.isEmpty
        // An interpreter, a shell or tokencache itself runs what any process of the user gives it: no consent is
        // offered for it, and none recorded before the rule named it counts (asked of unlisted apps only).
        let unconsentable = listed ? nil : UnconsentableApp.reason(for: identity.description, pid: caller.pid)
        if !listed, unconsentable == nil {
            // Not listed: the groups its user consented to, with their password, each for the client IDs consented.
            entries = try consents.allowed(uid: caller.uid, app: identity.description)
                .filter { named == nil || $0.group == named }
                .map { AppRegistry.Entry(groups: [$0.group], clientIDs: $0.clientIDs) }
        }
        let consentHint = { (group: String) in
            unconsentable.map { "An administrator may name the app's own executable in \(self.appsDirectory); no consent can be given to \(identity): \($0.why)" }
                ?? "Its package installs an entry there, an administrator adds one, or you consent with your password: `tokencache keeper --consent --app \(identity) --group \(group) --client \(client?.value ?? "CLIENT")`"
        }
        guard let first = entries.first, !first.groups.isEmpty else {
            throw KeeperProtocol.refused("\(identity) is not an app of \(appsDirectory)\(named.map { " and you have not consented to its use of group \($0)" } ?? "")",
                                         hint: consentHint(named ?? "GROUP"))
        }
        let group = try CacheGroup(named ?? first.groups[0])
        guard let entry = entries.first(where: { $0.groups.contains(group.name) }) else {
            throw KeeperProtocol.refused("\(identity) may not use group \(group.name) (its groups: \(entries.flatMap(\.groups).joined(separator: ", ")))",
                                         hint: "Ask for one of its groups")
        }
        if let client, !entry.allows(client: client) {
            throw KeeperProtocol.refused("\(identity) may not use client \(client) (its clients: \((entry.clientIDs ?? []).joined(separator: ", ")))",
                                         hint: listed ? "Ask for one of its client IDs" : consentHint(group.name))
        }
        guard let store = try vault.store(uid: caller.uid, group: group, creating: false) else {
            throw TokenCacheError(.notFound, "The token keeper holds no group \(group.name) of uid \(caller.uid).",
                                  hint: "Enrol it with `tokencache keeper --enroll --group \(group.name)`", reason: .noAccount)
        }
        return (store, entry)
    }

    /// A token of the caller's store: cached, or refreshed at the refresh token's issuer.
    func token(_ request: AgentProtocol.Request, client: ClientID, store: AccountStore) throws(TokenCacheError) -> TokenResult {
        let engine = TokenEngine(store: store, options: options)
        guard let scopes = request.scopes, !scopes.isEmpty else { throw TokenCacheError.invalidArgument("scopes", "is empty", hint: "Name at least one scope") }
        var tokenRequest = TokenRequest(clientID: client, scopes: scopes, account: request.account,
                                        authority: try request.authority.map { (text) throws(TokenCacheError) in try Authority(text) })
        tokenRequest.forceRefresh = request.forceRefresh ?? false
        (tokenRequest.claims, tokenRequest.clientCapabilities) = (request.claims, request.clientCapabilities ?? [])
        return try engine.blockingToken(tokenRequest, for: try engine.blockingAccount(for: tokenRequest))
    }

    /// The caller's group as its app may see it: the clients its apps file names.
    func list(_ request: AgentProtocol.Request, store: AccountStore, entry: AppRegistry.Entry) throws(TokenCacheError) -> GroupInventory {
        // Checked where it enters, as the token request's is: an ID ClientID refuses matches no client anyway.
        let client = try request.clientID.map { (text) throws(TokenCacheError) in try ClientID(text) }
        var inventory = try TokenEngine(store: store, options: options).inventory(clientID: client, account: request.account)
        inventory.location = "token keeper"
        inventory.accounts = inventory.accounts.compactMap { account in
            var account = account
            account.clients = account.clients.filter { entry.allows(storedClient: $0.clientID) }
            return account.clients.isEmpty ? nil : account
        }
        return inventory
    }

    /// Refuses a caller that is not the keeper's own program: another one (an interpreter running
    /// any script) could replace the user's tokens with its own, or take their refresh tokens.
    static func requireOwnProgram(_ caller: KeeperCaller, to what: String, hint: String) throws(TokenCacheError) {
        guard case .host(let path)? = caller.identity, isOwnExecutable(path) else {
            throw KeeperProtocol.refused("only the keeper's own program (\(ownExecutable)) may \(what), and the caller is \(caller.identity?.description ?? "not identified: \(caller.unidentifiedBecause ?? "unknown")")",
                                         hint: "\(hint) as installed, without LD_PRELOAD, LD_AUDIT, LD_LIBRARY_PATH or a debugger")
        }
    }

    /// Stores `enrollment` under the caller's uid, then reads it back for the caller to compare.
    /// Adding to a group the keeper holds already needs the user's password (checked as a
    /// consent is): any process of the user can run the keeper's program with a cache of its own.
    func enroll(_ enrollment: KeeperProtocol.Enrollment, from caller: KeeperCaller) throws(TokenCacheError) -> GroupInventory {
        try Self.requireOwnProgram(caller, to: "enrol", hint: "Enrol with `tokencache keeper --enroll`")
        let group = try CacheGroup(enrollment.group)
        let uid = caller.uid
        if try vault.store(uid: uid, group: group, creating: false) != nil {
            guard let password = enrollment.password, !password.isEmpty else {
                throw KeeperProtocol.refused("group \(group.name) is enrolled already, and adding to it needs your password",
                                             hint: "Enrol with `tokencache keeper --enroll` on a terminal: it asks for your password")
            }
            if let refusal = checkPassword(password, of: caller) {
                throw KeeperProtocol.refused("adding to your enrolled group \(group.name) needs your password, and it was not accepted (\(refusal.outcome): \(refusal.why))",
                                             hint: "Run it again on a terminal and type your login password")
            }
        }
        guard let store = try vault.store(uid: uid, group: group, creating: true) else {
            throw TokenCacheError(.fileSystem, "The token keeper could not open its store of uid \(uid).")
        }
        try store.importMSALJSON(Data(enrollment.cache.utf8))
        // Read back from the file, not from this store's memory: what the caller compares is what was written.
        guard let written = try vault.store(uid: uid, group: group, creating: false) else {
            throw TokenCacheError(.fileSystem, "The token keeper could not read back group \(group.name) of uid \(uid).")
        }
        var inventory = try written.inventory()
        inventory.location = "token keeper"
        vault.publishEnrolledGroups(uid: uid)
        return inventory
    }

    /// The keeper's executable, as /proc/self/exe names it.
    static var ownExecutable: String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        return count > 0 ? String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self) : "?"
    }

    /// Whether `path` is the file the keeper runs (same device and inode).
    static func isOwnExecutable(_ path: String) -> Bool {
        var own = stat(), other = stat()
        return stat("/proc/self/exe", &own) == 0 && stat(path, &other) == 0 && own.st_dev == other.st_dev && own.st_ino == other.st_ino
    }

    /// A decision, logged (``log(_:op:group:request:outcome:)``) and then written to syslog and
    /// the caller's audit log.
    func decided(_ caller: KeeperCaller?, op: String, group: String?, request: AgentProtocol.Request?, outcome: String) {
        audit(log(caller, op: op, group: group, request: request, outcome: outcome))
    }

    /// One line per decision in the keeper's log (standard error: the journal under systemd):
    /// who, what, outcome; never a token. Returns it, with the audit log's entry when the kernel
    /// said who called, for ``audit(_:)``.
    private func log(_ caller: KeeperCaller?, op: String, group: String?, request: AgentProtocol.Request?,
                     outcome: String) -> (line: String, entry: KeeperAudit.Entry?) {
        // Every field a caller chose is bounded and printable: one request must not fill the audit
        // log (wiping what it held at the trim) nor forge a line in the journal or syslog.
        let clean = KeeperAudit.printable
        let (group, outcome) = (group.map { clean($0) }, clean(outcome))
        let requested = (client: request?.clientID.map { clean($0) }, account: request?.account.map { clean($0) },
                         scopes: (request?.scopes ?? []).prefix(KeeperAudit.maximumScopes).map { clean($0) })
        let client = requested.client ?? "-", scopes = requested.scopes.joined(separator: " "), account = requested.account ?? "-"
        let described = clean(caller?.described ?? "unknown caller")
        logger.notice("Keeper decision", metadata: [
            "caller": "\(described)", "uid": "\(caller.map { "\($0.uid)" } ?? "-")", "op": "\(op)",
            "group": "\(group ?? "-")", "client": "\(client)", "scopes": "\(scopes)", "account": "\(account)", "outcome": "\(outcome)"])
        let line = "\(described): \(op) group \(group ?? "-") client \(client) scopes \(scopes.isEmpty ? "-" : scopes) account \(account) -> \(outcome)"
        observer(line)
        let entry = caller.map { caller in
            KeeperAudit.Entry(time: Date().formatted(.iso8601), app: clean(caller.audited),
                              uid: caller.uid, pid: caller.pid, op: op, group: group, client: requested.client, account: requested.account,
                              scopes: requested.scopes, outcome: outcome)
        }
        return (line, entry)
    }

    /// Sends a decision to syslog (LOG_AUTHPRIV, where there is one) and appends it to its
    /// caller's audit log (blocking: call on a thread of its own or the blocking pool).
    private func audit(_ record: (line: String, entry: KeeperAudit.Entry?)) {
        if syslogs {
            record.line.withCString { text in withVaList([text]) { vsyslog(LOG_AUTHPRIV | LOG_NOTICE, "%s", $0) } }
        }
        // Only an enrolled uid gets a directory and an audit log: a uid with nothing enrolled (any
        // user, or one of many subordinate uids) is logged to standard error and syslog only.
        guard let entry = record.entry, !vault.groups(uid: entry.uid).isEmpty else { return }
        do throws(TokenCacheError) {
            try audit.append(entry)
        } catch {
            logger.error("The keeper's audit log was not written", metadata: ["uid": "\(entry.uid)", "error": "\(error.code): \(error.message)"])
        }
    }

    // MARK: The socket

    /// The listening socket systemd passed (LISTEN_PID is this process, LISTEN_FDS at least 1: fd 3).
    static func socketFromSystemd() -> SocketDescriptor? {
        guard let pid = getenv("LISTEN_PID").map({ String(cString: $0) }), pid == "\(getpid())",
              let count = getenv("LISTEN_FDS").map({ String(cString: $0) }).flatMap(Int.init), count >= 1 else { return nil }
        for name in ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"] { unsetenv(name) }  // not inherited by anything it starts
        var info = stat()
        guard fstat(3, &info) == 0, info.st_mode & S_IFMT == S_IFSOCK else { return nil }
        _ = fcntl(3, F_SETFD, FD_CLOEXEC)
        return SocketDescriptor(3)
    }

    /// Listens at `path`, mode 0666 (every user may call; who calls is the kernel's to say), in a
    /// directory of the keeper's that no one else can write to (made 0755 when missing).
    static func listen(_ path: String) throws(TokenCacheError) -> SocketDescriptor {
        var address = try UnixSocket.address(path)
        let directory = UnixSocket.parent(of: path)
        if mkdir(directory, 0o755) == 0 { chmod(directory, 0o755) }
        var folder = stat()
        guard lstat(directory, &folder) == 0, folder.st_mode & S_IFMT == S_IFDIR, folder.st_uid == geteuid(), folder.st_mode & 0o022 == 0 else {
            throw TokenCacheError(.unsafeFile, "The keeper's socket directory \(directory) is missing, not the keeper's, or others can write to it.",
                                  hint: "Choose another path with --socket")
        }
        var status = stat()
        if lstat(path, &status) == 0 {
            guard status.st_mode & S_IFMT == S_IFSOCK else {
                throw TokenCacheError(.unsafeFile, "\(path) exists and is not a socket; the keeper does not replace it.", hint: "Choose another path with --socket")
            }
            if (try? UnixSocket.connect(path)) != nil {
                throw TokenCacheError(.portUnavailable, "A token keeper already listens at \(path).", hint: "Stop it, or choose another path with --socket")
            }
            unlink(path)
        }
        let socket = try UnixSocket.newSocket()
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(socket.fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0 else {
            throw TokenCacheError(.portUnavailable, "Could not listen at \(path): \(String(cString: strerror(errno))).", hint: "Choose another path with --socket")
        }
        // Before listen: no one connects while the mode is another.
        guard chmod(path, 0o666) == 0, Glibc.listen(socket.fd, 64) == 0 else {
            let failure = errno
            unlink(path)
            throw TokenCacheError(.portUnavailable, "Could not listen at \(path): \(String(cString: strerror(failure))).")
        }
        return socket
    }
}
