import FoundationEssentials
import Logging
import Synchronization
import TokenCache
import TokenCacheAgent
import TokenCacheCore
#if canImport(Glibc)
import Glibc
#endif

/// Who called, as the bus daemon vouches for it (`GetConnectionCredentials`).
package struct BrokerCaller: Sendable, Hashable {
    /// The caller's unique bus name (`:1.42`).
    package var sender: String
    package var pid: UInt32?
    package var uid: UInt32?
    /// Which app it is (``CallerIdentity``), found from the pid (and the bus's pidfd) before the
    /// request is answered; nil until then.
    package var identity: CallerIdentity?
    /// Its start time, read while its pidfd pinned it: with the pid it names the process the
    /// token keeper identifies again when the broker forwards (``KeeperForwardRequest``).
    package var started: UInt64?

    package init(sender: String, pid: UInt32?, uid: UInt32?, identity: CallerIdentity? = nil, started: UInt64? = nil) {
        (self.sender, self.pid, self.uid, self.identity, self.started) = (sender, pid, uid, identity, started)
    }

    /// What the log names the caller by: its identity (a Flatpak or Snap app ID, or the
    /// executable), never /proc/PID/comm, which the caller sets.
    var command: String? { identity?.description }
}

/// The identity broker's answers (`tokencache broker`): each method's request parsed by
/// ``BrokerProtocol``, answered from the group's store through the library's ``TokenEngine``
/// under the agent's policy (``AgentPolicy``: clients, accounts, scopes, authorities), and logged
/// without secrets. A reply never holds a refresh token; a refresh token is redeemed only at the
/// host that issued it (the engine's rule). For a user enrolled with the token keeper, each call
/// is forwarded to the keeper with the calling app's process (``KeeperForwardRequest``): the
/// keeper decides which app gets what, and the refresh tokens stay in it.
package final class BrokerService: Sendable {
    /// Asks the person at the broker; true to allow (the gate asks one question at a time).
    package typealias Confirmation = PolicyGate.Confirmation

    /// The group's store this broker answers from; nil when it forwards to the token keeper.
    package let store: AccountStore?
    /// The token keeper calls are forwarded to; nil when the broker answers from its store.
    package let keeper: AgentClient?
    /// The allow lists, `--app` and `--confirm`: the one policy the agent serves under too.
    package let serverPolicy: ServerPolicy
    package var policy: AgentPolicy { serverPolicy.lists }
    /// What `getLinuxBrokerVersion` answers.
    package let version: String
    private let engine: TokenEngine?
    private let logger: Logger
    /// `--confirm` and who owns which client: the gate the agent passes too (``PolicyGate``).
    package var gate: PolicyGate { serverPolicy.gate }
    private let observer: (@Sendable (AgentProtocol.LoggedRequest) -> Void)?
    private let ownUID: UInt32
    private let log = Mutex<[AgentProtocol.LoggedRequest]>([])
    /// Calls being answered, by sender.
    private let inFlight = Mutex<[String: Int]>([:])
    /// Whether an interactive sign-in runs (one at a time).
    private let signingIn = Mutex<Bool>(false)

    /// The request log keeps this many entries (the oldest go first).
    package static let logCapacity = 1000
    /// A sender gets this many calls answered at once; more are refused `overloaded` at once.
    package static let callsPerSender = 8

    /// - Parameter appClients: the client IDs each sandboxed app (Flatpak app ID or snap name) may use.
    package init(store: AccountStore, policy: AgentPolicy, version: String, options: PublicClientApplication.Options = .init(),
                 ownUID: UInt32 = getuid(), appClients: [String: [ClientID]] = [:], confirmation: Confirmation? = nil,
                 observer: (@Sendable (AgentProtocol.LoggedRequest) -> Void)? = nil) {
        self.store = store
        self.keeper = nil
        self.serverPolicy = ServerPolicy(.broker, lists: policy, appClients: appClients, confirmation: confirmation)
        self.version = version
        self.engine = TokenEngine(store: store, options: options)
        self.logger = store.options.logger
        self.ownUID = ownUID
        self.observer = observer
    }

    /// A broker that forwards every app's call to the token keeper (`keeper`, the route's agent
    /// for a user enrolled with it), which identifies the app and answers from its store. The
    /// lists of `policy` still narrow what is asked (clients, accounts, scopes, authorities).
    package init(keeper: AgentClient, policy: AgentPolicy, version: String, logger: Logger, ownUID: UInt32 = getuid(),
                 observer: (@Sendable (AgentProtocol.LoggedRequest) -> Void)? = nil) {
        self.store = nil
        self.keeper = keeper
        self.serverPolicy = ServerPolicy(.broker, lists: policy, appClients: [:], confirmation: nil)
        self.version = version
        self.engine = nil
        self.logger = logger
        self.ownUID = ownUID
        self.observer = observer
    }

    /// The logged requests, oldest first.
    package var requests: [AgentProtocol.LoggedRequest] { log.withLock { $0 } }

    /// Answers one call of the interface: the reply JSON, an error reply when it fails (never a throw).
    package func handle(_ method: BrokerWire.Method, protocolVersion: String, correlationID: String,
                        json: String, caller given: BrokerCaller) async -> String {
        var caller = given
        if caller.identity == nil { caller.identity = CallerIdentity.identify(pid: caller.pid) }
        // The bus lets only this user's processes in, but a bus may be configured otherwise: refuse others.
        guard caller.uid == ownUID else {
            record(method, nil, caller, outcome: "refused: uid \(caller.uid.map { "\($0)" } ?? "unknown") is not the broker's")
            return BrokerWire.errorReply(.incorrectConfiguration, code: TokenCacheError.Code.accessDenied.description,
                                             context: "The broker serves only the user it runs as.")
        }
        let request: BrokerProtocol.Request
        do throws(BrokerProtocol.RequestError) {
            request = try BrokerProtocol.parse(json, method: method)
        } catch {
            record(method, nil, caller, outcome: "failed: invalidRequest \(error.message)")
            return BrokerProtocol.errorReply(error)
        }
        // One sender cannot hold every thread: its calls beyond the bound are refused at once.
        let admitted = inFlight.withLock { calls in
            guard calls[caller.sender, default: 0] < Self.callsPerSender else { return false }
            calls[caller.sender, default: 0] += 1
            return true
        }
        guard admitted else {
            let error = TokenCacheError(.overloaded, "The broker is busy: this caller already has \(Self.callsPerSender) calls being answered.",
                                        hint: "Wait for them to finish, then retry")
            record(method, request, caller, outcome: "refused: \(error.code) \(error.message)")
            return BrokerProtocol.errorReply(error)
        }
        defer {
            inFlight.withLock { calls in
                calls[caller.sender, default: 1] -= 1
                if calls[caller.sender] == 0 { calls[caller.sender] = nil }
            }
        }
        do throws(TokenCacheError) {
            let (reply, note, client) = try await answer(method, request, caller: caller)
            // The first caller served a client ID owns it: another's removeAccount for it needs the user's yes.
            if note == nil, let client, let who = caller.identity {
                gate.claim(client: client, by: who.description)
            }
            record(method, request, caller, outcome: note ?? "granted")
            return reply
        } catch {
            let refused = error.code == .accessDenied
            record(method, request, caller, outcome: "\(refused ? "refused" : "failed"): \(error.code) \(error.message)")
            return BrokerProtocol.errorReply(error)
        }
    }

    /// The reply, the log's outcome when it is not plain `granted`, and the client the request named (checked).
    private func answer(_ method: BrokerWire.Method, _ request: BrokerProtocol.Request,
                        caller: BrokerCaller) async throws(TokenCacheError) -> (String, String?, ClientID?) {
        if let keeper { return try await forwarded(method, request, caller: caller, to: keeper) }
        let store = try localStore()
        switch method {
        case .getAccounts:
            let client = try allowedClient(request)
            // A client new here that nobody allowed sees no accounts (the family's included): the
            // app then signs in interactively, as it would on a machine with no account.
            if try await standing(client: client, caller: caller) == .newHere {
                return (BrokerWire.accountsReply([]), "refused: \(Self.newClientMessage(client, caller)) (answered with no accounts)", client)
            }
            // With --confirm, listing a client's accounts is asked too (once per caller and client).
            let key = PolicyGate.Key(caller: Self.name(caller), operation: "getAccounts", client: client)
            guard await gate.admits(key, question: "\(Self.who(caller)) asks the broker for the accounts of client \(client).") else {
                return (BrokerWire.accountsReply([]), "refused: the broker's user did not allow listing the accounts of client \(client) (answered with no accounts)", client)
            }
            return (BrokerWire.accountsReply(try await accounts(clientID: client)), nil, client)
        case .acquireTokenSilently:
            let client = try allowedClient(request)
            if try await standing(client: client, caller: caller) == .newHere { throw Self.newClientError(client, caller) }
            let (result, account) = try await token(request, client: client, caller: caller)
            return (BrokerWire.tokenReply(result, account: account), nil, client)
        case .acquireTokenInteractively:
            // A cached or refreshable token serves without interaction, as Microsoft's broker does;
            // otherwise the user signs in in the system browser, and the account joins the group.
            // A client new here that nobody allowed goes to the browser straight away: the family's
            // refresh token is not redeemed for it, the user's sign-in is what lets it in.
            let client = try allowedClient(request)
            if try await standing(client: client, caller: caller) != .newHere {
                do throws(TokenCacheError) {
                    let (result, account) = try await token(request, client: client, caller: caller)
                    return (BrokerWire.tokenReply(result, account: account), nil, client)
                } catch where [.notFound, .ambiguousAccount, .interactionRequired].contains(error.code) {}
            }
            let (result, account) = try await signIn(request, client: client, caller: caller)
            return (BrokerWire.tokenReply(result, account: account), nil, client)
        case .removeAccount:
            let client = try allowedClient(request)
            if try await standing(client: client, caller: caller) == .newHere { throw Self.newClientError(client, caller) }
            let target = try await BlockingWork.run { [store] () throws(TokenCacheError) in
                try store.signOutTarget(clientID: client, account: request.account?.name)
            }
            // Only the client's own tokens go (AccountStore.signOut): other apps keep the account. A
            // caller removes from a client another caller uses only with the user's yes.
            let owner = gate.owner(of: client)
            let foreign = owner != nil && owner != Self.name(caller)
            let key = PolicyGate.Key(caller: Self.name(caller), operation: "removeAccount", client: client, account: target.homeAccountID)
            let name = target.username.isEmpty ? target.homeAccountID : target.username
            guard await gate.admits(key, needsConsent: foreign, question: "\(Self.who(caller)) asks the broker to sign client \(client) out of \(name)"
                + (foreign ? ", a client \(owner ?? "another program") uses." : ".")) else {
                throw TokenCacheError(.accessDenied, foreign
                    ? "The broker refused: client \(client) is used here by \(owner ?? "another program"), not by \(caller.command ?? "this caller"), which may not sign it out."
                    : "The broker's user did not allow signing client \(client) out of \(name).",
                                      hint: foreign ? "Sign out from the app that uses it, or run `tokencache logout --client \(client)`" : "Ask whoever runs the broker to allow it")
            }
            try await BlockingWork.run { [store] () throws(TokenCacheError) in try store.signOut(target, clientID: client) }
            return ("{}", nil, client)
        case .getLinuxBrokerVersion:
            return (BrokerWire.versionReply(version), nil, nil)
        case .cancelInteractiveFlow:
            // Nothing interactive runs here, so there is nothing to cancel.
            return ("{}", nil, nil)
        case .acquirePrtSsoCookie, .generateSignedHttpRequest:
            throw TokenCacheError(.unsupportedFlow, "tokencache broker has no device identity: \(method.rawValue) is not supported.",
                                  hint: "Use Microsoft's identity broker on an enrolled device for device-bound tokens")
        }
    }

    /// The request's client: one the policy serves, checked as ``ClientID`` here, where a
    /// broker request's client enters, and carried as one to the store.
    private func allowedClient(_ request: BrokerProtocol.Request) throws(TokenCacheError) -> ClientID {
        // Checked before the policy: a malformed ID is the caller's mistake (invalidArgument), not a refusal.
        let client = try ClientID(required: request.clientID, field: "clientId")
        try serverPolicy.check(client: client)
        return client
    }

    /// How a caller stands with a client ID.
    enum Standing: Equatable {
        /// Named for it: `--client`, `--app`, or a `--confirm` answer for this caller and client.
        case allowed
        /// A host caller, and the client has signed in here (its app metadata is in the group).
        case held
        /// A host caller, and the client is new here: no accounts listed, no family refresh token redeemed.
        case newHere
    }

    /// Whether the caller may use `client`, and how. Throws `accessDenied` for a caller that could not
    /// be identified, and for a sandboxed app the client is not allowed for.
    private func standing(client: ClientID, caller: BrokerCaller) async throws(TokenCacheError) -> Standing {
        let identity = caller.identity ?? .unknown(reason: "not identified")
        let key = PolicyGate.Key(caller: identity.description, operation: "client", client: client)
        if gate.decision(for: key, needsConsent: true) == .allow { return .allowed }
        switch identity {
        case .unknown(let reason):
            throw TokenCacheError(.accessDenied, "The broker refused: it cannot tell which app is calling (\(reason)), and serves only apps it can identify.",
                                  hint: "Call it from a process it can look at in /proc (not in another pid namespace or with /proc hidden)")
        case .flatpak(let id), .snap(let id):
            if serverPolicy.allows(client: client, app: id) { return .allowed }
            if try await ask(client: client, key: key, caller: caller, about: "which it is not allowed yet") { return .allowed }
            throw TokenCacheError(.accessDenied, "The broker refused: the sandboxed app \(identity) is not allowed client \(client) (a sandboxed app gets only the client IDs allowed for its app ID).",
                                  hint: "To allow it, restart the broker with --app \(id)=\(client) (or with --confirm to be asked)")
        case .host:
            if policy.clients.contains(where: { $0.matches(client) }) { return .allowed }
            let store = try localStore()
            let held = try await BlockingWork.run { [store] () throws(TokenCacheError) in !(try store.appMetadata(clientID: client)).isEmpty }
            if held { return .held }
            if try await ask(client: client, key: key, caller: caller, about: "which has not signed in here") { return .allowed }
            return .newHere
        }
    }

    /// With `--confirm`, asks the user whether `caller` may use `client`; the answer yes is remembered for them.
    private func ask(client: ClientID, key: PolicyGate.Key, caller: BrokerCaller, about: String) async throws(TokenCacheError) -> Bool {
        guard await gate.admits(key, needsConsent: true, question: "\(Self.who(caller)) asks the broker for client \(client), \(about).") else { return false }
        // Using the client starts with listing its accounts: that yes covers the listing too.
        gate.remember(PolicyGate.Key(caller: key.caller, operation: "getAccounts", client: client))
        return true
    }

    /// Whom the gate remembers answers for: the caller's identity, never its pid or comm.
    private static func name(_ caller: BrokerCaller) -> String { (caller.identity ?? .unknown(reason: "not identified")).description }

    /// The caller as the policy knows it: its identity (the kernel's word) and pid.
    private static func policyCaller(_ caller: BrokerCaller) -> ServerPolicy.Caller {
        ServerPolicy.Caller(identity: name(caller), pid: caller.pid.map(Int64.init))
    }

    /// The caller as a question names it: by its identity (the kernel's word), not the comm it sets.
    private static func who(_ caller: BrokerCaller) -> String { policyCaller(caller).described }

    private static func newClientMessage(_ client: ClientID, _ caller: BrokerCaller) -> String {
        "client \(client) has not signed in here and was not allowed for \(caller.command ?? "this caller"); the broker lists no accounts and redeems no family refresh token for it"
    }

    private static func newClientError(_ client: ClientID, _ caller: BrokerCaller) -> TokenCacheError {
        TokenCacheError(.accessDenied, "The broker refused: " + newClientMessage(client, caller) + ".",
                        hint: "Sign in with that app (it opens the browser), run `tokencache login --client \(client)`, or restart the broker with --client \(client) (or --confirm to be asked)")
    }

    /// The client's accounts (signed in, not signed out) the policy lets it see.
    func accounts(clientID: ClientID) async throws(TokenCacheError) -> [CachedAccount] {
        let store = try localStore()
        let accounts = try await BlockingWork.run { [store] () throws(TokenCacheError) in try store.accounts(clientID: clientID) }
        return accounts.filter { serverPolicy.allows(account: $0) }
    }

    /// The token a silent request asks for: the engine chooses the account (within the policy),
    /// serves the cached token or redeems at the request's authority, whose host must be the
    /// refresh token's issuer.
    private func token(_ request: BrokerProtocol.Request, client: ClientID, caller: BrokerCaller) async throws(TokenCacheError) -> (TokenResult, CachedAccount) {
        try serverPolicy.check(scopes: request.scopes)
        let authority = try serverPolicy.authority(request.authority)
        var tokenRequest = TokenRequest(clientID: client, scopes: request.scopes, account: request.accountName, authority: authority)
        tokenRequest.claims = request.claims
        let engine = try localEngine()
        let target = try await engine.account(for: tokenRequest) { [serverPolicy] in serverPolicy.allows(account: $0) }
        try await serverPolicy.confirmToken(caller: Self.policyCaller(caller), client: client, account: target.homeAccountID,
                                            accountName: target.username.isEmpty ? target.homeAccountID : target.username,
                                            authority: authority, scopes: request.scopes)
        return (try Self.replyable(try await engine.token(tokenRequest, for: target), of: target, client: client), target)
    }

    /// The user signs in in the system browser (the library's sign-in: PKCE, loopback redirect,
    /// `$BROWSER`, the desktop portal or xdg-open), at the request's authority, with its username
    /// as the login hint; the result is saved to the group like any sign-in.
    private func signIn(_ request: BrokerProtocol.Request, client: ClientID, caller: BrokerCaller) async throws(TokenCacheError) -> (TokenResult, CachedAccount) {
        guard !request.scopes.isEmpty else {
            throw TokenCacheError(.accessDenied, "The broker refused: an interactive sign-in must name its scopes.", hint: "Name the scopes to sign in for")
        }
        try serverPolicy.check(scopes: request.scopes)
        guard let authority = try serverPolicy.authority(request.authority) else {
            throw TokenCacheError(.invalidArgument, "An interactive request must name an authority (authParameters.authority).", field: "authority")
        }
        try await checkSignInAuthority(authority)
        let hint = request.account?.username ?? request.username.flatMap { $0.isEmpty ? nil : $0 }
        // One sign-in at a time (its question included): each holds a thread for minutes.
        let started = signingIn.withLock { running in
            if running { return false }
            running = true
            return true
        }
        guard started else {
            throw TokenCacheError(.overloaded, "The broker is busy: another sign-in runs in the browser, and it runs one at a time.",
                                  hint: "Finish or cancel that sign-in, then retry")
        }
        defer { signingIn.withLock { $0 = false } }
        try await serverPolicy.confirmToken(caller: Self.policyCaller(caller), client: client, account: "sign-in " + (hint ?? ""),
                                            accountName: hint ?? "a new account", authority: authority, scopes: request.scopes)
        var parameters = InteractiveTokenParameters(scopes: request.scopes)
        parameters.loginHint = hint
        parameters.claims = request.claims
        parameters.authority = authority
        let result: TokenResult
        let engine = try localEngine()
        do {
            result = try await engine.application(clientID: client, authority: authority).acquireToken(parameters)
        } catch where error.code == .browserUnavailable {
            throw TokenCacheError(.unsupportedFlow, "The broker cannot open a browser to sign in (\(error.message))",
                                  hint: "Sign in with `tokencache login --device-code --client \(client)`, then retry")
        }
        guard let account = result.account, serverPolicy.allows(account: account) else {
            throw TokenCacheError(.accessDenied, "The broker refused: the account signed in is not one it serves.", hint: "Restart the broker with --account naming it")
        }
        return (try Self.replyable(result, of: account, client: client), account)
    }

    /// The hosts of Microsoft's clouds (each cloud's aliases): where a broker without an
    /// `--authority` policy signs users in, besides the hosts that issued the group's accounts.
    package static let microsoftHosts: Set<String> = [
        "login.microsoftonline.com", "login.windows.net", "login.microsoft.com", "sts.windows.net",
        "login.partner.microsoftonline.cn", "login.chinacloudapi.cn", "login.microsoftonline.de",
        "login.microsoftonline.us", "login.usgovcloudapi.net", "login-us.microsoftonline.com",
    ]

    /// Without an `--authority` policy, an interactive sign-in goes only to Microsoft's cloud hosts
    /// or to a host that already issued one of this group's accounts: a caller cannot plant a
    /// look-alike account from a host of its own.
    private func checkSignInAuthority(_ authority: Authority) async throws(TokenCacheError) {
        guard policy.authorities.isEmpty else { return }  // serverPolicy.authority kept the request within the policy
        let host = Environment.canonical(authority.environment.lowercased())
        if Self.microsoftHosts.contains(host) { return }
        let store = try localStore()
        let issued = try await BlockingWork.run { [store] () throws(TokenCacheError) in
            Set(try store.allAccounts().map { Environment.canonical($0.environment.lowercased()) })
        }
        guard issued.contains(host) else {
            throw TokenCacheError(.accessDenied, "The broker refused to sign in at \(authority.environment): without an --authority policy it signs in only at Microsoft's cloud hosts or at a host that issued this group's accounts.",
                                  hint: "If \(authority.environment) is your identity provider, restart the broker with --authority \(authority.url.absoluteString)")
        }
    }

    private func localStore() throws(TokenCacheError) -> AccountStore {
        guard let store else { throw TokenCacheError(.backendUnavailable, "The broker forwards to the token keeper and has no store of its own.") }
        return store
    }

    private func localEngine() throws(TokenCacheError) -> TokenEngine {
        guard let engine else { throw TokenCacheError(.backendUnavailable, "The broker forwards to the token keeper and has no store of its own.") }
        return engine
    }

    // MARK: Forwarding to the token keeper

    /// A call answered by the token keeper: the broker checks what its own lists narrow (clients,
    /// scopes, authorities, accounts), then sends the app's pid and start time with the request;
    /// the keeper identifies the app, applies its apps files and the user's consents, and
    /// answers with the access token, ID token and account (never a refresh token).
    private func forwarded(_ method: BrokerWire.Method, _ request: BrokerProtocol.Request, caller: BrokerCaller,
                           to keeper: AgentClient) async throws(TokenCacheError) -> (String, String?, ClientID?) {
        switch method {
        case .getAccounts:
            let client = try allowedClient(request)
            let forward = try Self.forward(.accounts, request, client: client, caller: caller)
            let response = try await BlockingWork.run { () throws(TokenCacheError) in try keeper.exchange(forward) }
            guard let accounts = response.accounts else { throw Self.keeperAnswered(without: "accounts", keeper) }
            return (BrokerWire.accountsReply(accounts.map(\.cachedAccount).filter { serverPolicy.allows(account: $0) }), nil, client)
        case .acquireTokenSilently:
            let client = try allowedClient(request)
            let (result, account) = try await keeperToken(request, client: client, caller: caller, keeper: keeper)
            return (BrokerWire.tokenReply(result, account: account), nil, client)
        case .acquireTokenInteractively:
            // The keeper's token when it holds one; the broker runs no sign-in for a forwarded app
            // (the keeper redeems sign-ins of apps that call it themselves), so the app is told the ways that reach the keeper.
            let client = try allowedClient(request)
            do throws(TokenCacheError) {
                let (result, account) = try await keeperToken(request, client: client, caller: caller, keeper: keeper)
                return (BrokerWire.tokenReply(result, account: account), nil, client)
            } catch where [.notFound, .interactionRequired].contains(error.code) {
                throw TokenCacheError(.interactionRequired, "The token keeper holds no usable token of client \(client) for this account (\(error.message)), and the broker does not sign in through the keeper.",
                                      hint: "Sign in with an app that uses tokencache's library (the keeper redeems its sign-in), or to a local cache with `tokencache login --backend file --client \(client)` and hand that to the keeper with `tokencache keeper --enroll`",
                                      reason: error.reason)
            }
        case .removeAccount:
            throw TokenCacheError(.unsupportedFlow, "The token keeper holds this account: an app does not sign it out through the broker.",
                                  hint: "An administrator unenrols the group (`tokencache keeper --unenroll`)")
        case .getLinuxBrokerVersion:
            return (BrokerWire.versionReply(version), nil, nil)
        case .cancelInteractiveFlow:
            return ("{}", nil, nil)
        case .acquirePrtSsoCookie, .generateSignedHttpRequest:
            throw TokenCacheError(.unsupportedFlow, "tokencache broker has no device identity: \(method.rawValue) is not supported.",
                                  hint: "Use Microsoft's identity broker on an enrolled device for device-bound tokens")
        }
    }

    /// The keeper's token for the app's request, when a broker reply can carry it.
    private func keeperToken(_ request: BrokerProtocol.Request, client: ClientID, caller: BrokerCaller,
                             keeper: AgentClient) async throws(TokenCacheError) -> (TokenResult, CachedAccount) {
        try serverPolicy.check(scopes: request.scopes)
        let authority = try serverPolicy.authority(request.authority)
        var forward = try Self.forward(.token, request, client: client, caller: caller)
        forward.authority = authority?.url.absoluteString
        forward.scopes = request.scopes
        let response = try await BlockingWork.run { [forward] () throws(TokenCacheError) in try keeper.exchange(forward) }
        guard let token = response.token, let details = token.account else { throw Self.keeperAnswered(without: "token", keeper) }
        let account = details.cachedAccount
        guard serverPolicy.allows(account: account) else {
            throw TokenCacheError(.accessDenied, "The broker refused: the token keeper's account for this request is not one the broker serves.",
                                  hint: "Restart the broker with --account naming it")
        }
        return (try Self.replyable(token.result(of: account), of: account, client: client), account)
    }

    /// The forwarded request for `caller`, whose pid and start time the bus and its pidfd gave.
    private static func forward(_ inner: KeeperForwardRequest.Inner, _ request: BrokerProtocol.Request, client: ClientID,
                                caller: BrokerCaller) throws(TokenCacheError) -> KeeperForwardRequest {
        guard let pid = caller.pid, pid > 0, pid <= UInt32(Int32.max), let started = caller.started else {
            throw TokenCacheError(.accessDenied, "The broker refused: it cannot tell the token keeper which process is calling (the bus named no live process).",
                                  hint: "Call it from a process on this machine's session bus")
        }
        return KeeperForwardRequest(inner: inner, appPID: Int32(pid), appStarted: started, clientID: client,
                                    account: request.accountName, claims: request.claims)
    }

    private static func keeperAnswered(without field: String, _ keeper: AgentClient) -> TokenCacheError {
        TokenCacheError(.agentUnavailable, "The token keeper at \(keeper.path) answered a forwarded call without the \(field): it is not a keeper that serves the identity broker.",
                        hint: "Use a tokencache of the same release for the keeper and the broker", reason: .agentProtocol(path: keeper.path))
    }

    /// The result, when a reply can carry it.
    private static func replyable(_ result: TokenResult, of target: CachedAccount, client: ClientID) throws(TokenCacheError) -> TokenResult {
        // The runtime takes a reply without these as a success with no token or no account
        // (docs/BROKER.md): say instead that the account needs signing in again.
        guard !result.accessToken.isEmpty, result.idToken?.split(separator: ".", omittingEmptySubsequences: false).count == 3,
              target.homeAccountID.split(separator: ".").count == 2 else {
            throw TokenCacheError(.notFound, "The cache holds no ID token or client info for \(target.username.isEmpty ? target.homeAccountID : target.username) of client \(client), which a broker reply must carry.",
                                  hint: "Sign in again with `tokencache login --client \(client)`", reason: .noUsableToken(refreshable: false))
        }
        return result
    }

    /// A log line: who (pid, uid, command), what (method, client, scopes, account), the outcome. No secrets.
    private func record(_ method: BrokerWire.Method, _ request: BrokerProtocol.Request?, _ caller: BrokerCaller, outcome: String) {
        let entry = AgentProtocol.LoggedRequest(
            time: Int64(Date().timeIntervalSince1970), channel: "bus", pid: caller.pid.map { Int32(bitPattern: $0) }, uid: caller.uid,
            command: caller.command, operation: method.rawValue, clientID: request?.clientID,
            scopes: request.flatMap { $0.scopes.isEmpty ? nil : $0.scopes }, account: request?.accountName, outcome: outcome)
        log.withLock { log in
            if log.count >= Self.logCapacity { log.removeFirst(log.count - Self.logCapacity + 1) }
            log.append(entry)
        }
        observer?(entry)
        logger.info("Broker request", metadata: [
            "pid": "\(caller.pid.map { "\($0)" } ?? "-")", "uid": "\(caller.uid.map { "\($0)" } ?? "-")", "op": "\(method.rawValue)",
            "client": "\(request?.clientID ?? "-")", "outcome": "\(outcome)"])
    }
}
