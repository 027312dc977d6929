import FoundationEssentials
import Logging
import Synchronization
import TokenCache
import TokenCacheCore

/// What a token agent may hand out. Empty lists allow anything of their kind.
package struct AgentPolicy: Sendable {
    /// Client (application) IDs that may get tokens.
    package var clients: [ClientID] = []
    /// Accounts (username or home account ID) whose tokens may be handed out.
    package var accounts: [String] = []
    /// Scopes a request may ask for: each requested scope must be one of them.
    package var scopes: [String] = []
    /// Authorities a request may name; the first is used for requests that name none, and
    /// is where the agent redeems refresh tokens.
    package var authorities: [Authority] = []

    package init() {}

    package func allows(client: ClientID) -> Bool { clients.isEmpty || clients.contains { $0.matches(client) } }

    /// ``allows(client:)`` for a client ID read back from the store (an inventory row).
    package func allows(storedClient: String) -> Bool { clients.isEmpty || clients.contains { $0.matches(stored: storedClient) } }

    package func allows(account: CachedAccount) -> Bool {
        accounts.isEmpty || accounts.contains { AccountName.matches($0, account) }
    }

    /// The scopes of `requested` that are not allowed.
    package func disallowed(scopes requested: [String]) -> [String] {
        scopes.isEmpty ? [] : requested.filter { wanted in !scopes.contains { ASCII.equalsIgnoringCase($0, wanted) } }
    }
}

/// The token agent's core: answers requests for the group's access tokens under a policy,
/// refreshing through ``PublicClientApplication/acquireTokenSilent(_:)`` (so the host rule, the
/// refresh locks and rotation apply as for any app), and keeps a log of every request in memory.
/// It never hands out a refresh token, ID token, key or passphrase: its answers carry
/// ``AgentProtocol/Token`` only.
package final class TokenAgent: Sendable {
    /// Asks the person at the agent whether to allow a first request of a client for some
    /// scopes; true to allow. Called once per new client/scope pair, one question at a time.
    package typealias Confirmation = PolicyGate.Confirmation

    package let store: AccountStore
    /// The allow lists and `--confirm`: the one policy the broker serves under too.
    package let serverPolicy: ServerPolicy
    package var policy: AgentPolicy { serverPolicy.lists }
    /// `--confirm`: the gate the broker passes too, keyed by caller, client, account, authority and scopes.
    package var gate: PolicyGate { serverPolicy.gate }
    /// The library's one token request: account, tenant and refresh as for every front end.
    private let engine: TokenEngine
    private let observer: (@Sendable (AgentProtocol.LoggedRequest) -> Void)?
    private let log = Mutex<[AgentProtocol.LoggedRequest]>([])
    /// Connections refused because another user made them, per channel: counted, never put in
    /// the request log, whose entries they would push out (#57 item 6).
    private let refusalCounts = Mutex<[String: Refusals]>([:])
    private var logger: Logger { store.options.logger }

    /// The request log keeps this many entries (the oldest go first).
    package static let logCapacity = 1000

    package init(store: AccountStore, policy: AgentPolicy, options: PublicClientApplication.Options = .init(),
                 confirmation: Confirmation? = nil, observer: (@Sendable (AgentProtocol.LoggedRequest) -> Void)? = nil) {
        self.observer = observer
        self.store = store
        self.serverPolicy = ServerPolicy(.agent, lists: policy, confirmation: confirmation)
        self.engine = TokenEngine(store: store, options: options)
    }

    /// The logged requests, oldest first, then one line per channel that refused other users'
    /// connections: how many, and the last one's uid and time.
    package var requests: [AgentProtocol.LoggedRequest] {
        log.withLock { $0 } + refusalCounts.withLock { $0 }.sorted { $0.key < $1.key }.map { channel, refused in
            AgentProtocol.LoggedRequest(time: refused.lastTime, channel: channel, pid: nil, uid: refused.lastUID, command: nil, operation: "connect",
                                        clientID: nil, scopes: nil, account: nil, outcome: refused.summary)
        }
    }

    /// Connections another user made, refused without a look at their request.
    package struct Refusals: Sendable, Hashable {
        /// How many.
        package var count = 0
        /// The last one's uid (nil: its owner could not be found).
        package var lastUID: UInt32?
        /// The last one's time, seconds since 1970.
        package var lastTime: Int64 = 0
        /// The uids whose first refusal went to the logger (a few: each later one is only counted).
        var announced: Set<UInt32?> = []

        var summary: String {
            "refused: \(count) connection\(count == 1 ? "" : "s") from other users (counted, not logged one by one), the last from uid \(lastUID.map { "\($0)" } ?? "unknown")"
        }
    }

    /// The refusals counted so far on `channel` (`socket`, `managed-identity`).
    package func refusals(on channel: String) -> Refusals { refusalCounts.withLock { $0[channel] ?? Refusals() } }

    /// Counts a connection refused because `uid` (nil: unknown) is not this user. Only the first
    /// from each of a few uids reaches the logger: a flood costs a counter, not a log line each.
    func countRefusal(channel: String, uid: UInt32?, pid: Int32? = nil, note: String = "") {
        let now = Int64(Date().timeIntervalSince1970)
        let announce = refusalCounts.withLock { refusals in
            var refused = refusals[channel] ?? Refusals()
            refused.count += 1
            (refused.lastUID, refused.lastTime) = (uid, now)
            let announce = refused.announced.count < 16 && refused.announced.insert(uid).inserted
            refusals[channel] = refused
            return announce
        }
        guard announce else { return }
        let entry = AgentProtocol.LoggedRequest(
            time: now, channel: channel, pid: pid, uid: uid, command: nil, operation: "connect", clientID: nil, scopes: nil, account: nil,
            outcome: "refused: connection from uid \(uid.map { "\($0)" } ?? "unknown"), not the agent's user\(note) (more from it are counted: agent --list-requests)")
        observer?(entry)
        logger.notice("Agent refused another user's connection", metadata: ["channel": "\(channel)", "uid": "\(uid.map { "\($0)" } ?? "-")"])
    }

    /// Answers one request that came over the socket from `peer`, on the connection's own
    /// (blocking) thread: the store, a refresh and a `--confirm` question all run there.
    package func handle(_ request: AgentProtocol.Request, peer: AgentPeer) -> AgentProtocol.Response {
        switch request.operation {
        case .requests:
            return AgentProtocol.Response(requests: requests)
        case .list:
            do throws(TokenCacheError) {
                // Checked where it enters, as for a token: an ID ClientID refuses matches no client anyway.
                let client = try request.clientID.map { (text) throws(TokenCacheError) in try ClientID(text) }
                let inventory = try list(clientID: client, account: request.account)
                record(request, channel: "socket", peer: peer, outcome: "granted")
                return AgentProtocol.Response(inventory: inventory)
            } catch {
                record(request, channel: "socket", peer: peer, outcome: Self.outcome(of: error))
                return AgentProtocol.Response(error)
            }
        case .token:
            do throws(TokenCacheError) {
                // From another process: checked here, where it enters, as every front end checks
                // it, before any policy or cache sees it; then carried as a ClientID.
                let client = try ClientID(required: request.clientID, field: "client_id")
                let result = try token(clientID: client, scopes: request.scopes ?? [], account: request.account,
                                             authority: request.authority, forceRefresh: request.forceRefresh ?? false,
                                             claims: request.claims, clientCapabilities: request.clientCapabilities ?? [],
                                             caller: ServerPolicy.Caller(identity: peer.executable, pid: Int64(peer.pid)))
                record(request, channel: "socket", peer: peer, outcome: "granted")
                return AgentProtocol.Response(token: AgentProtocol.Token(result))
            } catch {
                record(request, channel: "socket", peer: peer, outcome: Self.outcome(of: error))
                return AgentProtocol.Response(error)
            }
        }
    }

    static func outcome(of error: TokenCacheError) -> String {
        "\(error.code == .accessDenied ? "refused" : "failed"): \(error.code) \(error.message)"
    }

    /// Adds a line to the request log and to the logger (no secrets: a request holds none).
    func record(_ request: AgentProtocol.Request, operation: String? = nil, channel: String, peer: AgentPeer?, outcome: String) {
        let entry = AgentProtocol.LoggedRequest(
            time: Int64(Date().timeIntervalSince1970), channel: channel, pid: peer?.pid, uid: peer?.uid, command: peer?.command,
            operation: operation ?? request.operation.rawValue, clientID: request.clientID, scopes: request.scopes, account: request.account,
            outcome: outcome)
        log.withLock { log in
            if log.count >= Self.logCapacity { log.removeFirst(log.count - Self.logCapacity + 1) }
            log.append(entry)
        }
        observer?(entry)
        logger.info("Agent request", metadata: [
            "channel": "\(channel)", "pid": "\(peer.map { "\($0.pid)" } ?? "-")", "command": "\(entry.command ?? "-")",
            "op": "\(entry.operation)", "client": "\(request.clientID ?? "-")",
            "scopes": "\((request.scopes ?? []).joined(separator: " "))", "account": "\(request.account ?? "-")",
            "outcome": "\(outcome)"])
    }

    /// The group's inventory as the policy lets it be seen: allowed accounts and clients only.
    /// Blocking (the store is read on the calling thread).
    func list(clientID: ClientID?, account: String?) throws(TokenCacheError) -> GroupInventory {
        var inventory = try engine.inventory(clientID: nil, account: nil)
        func named(_ identifier: String, _ entry: GroupInventory.Account) -> Bool {
            ASCII.equalsIgnoringCase(identifier, entry.username) || ASCII.equalsIgnoringCase(identifier, entry.homeAccountID)
        }
        func shown(_ client: GroupInventory.Client) -> Bool {
            policy.allows(storedClient: client.clientID) && (clientID.map { $0.matches(stored: client.clientID) } ?? true)
        }
        inventory.accounts = inventory.accounts.compactMap { (entry: GroupInventory.Account) -> GroupInventory.Account? in
            guard policy.accounts.isEmpty || policy.accounts.contains(where: { named($0, entry) }),
                  account.map({ named($0, entry) }) ?? true else { return nil }
            var entry = entry
            entry.clients = entry.clients.filter(shown)
            return entry.clients.isEmpty && (!policy.clients.isEmpty || clientID != nil) ? nil : entry
        }
        return inventory
    }

    /// An access token for the client and scopes, within the policy: cached, or obtained by
    /// redeeming a refresh token of the group at the authority (the request's, else the
    /// policy's first). `caller` is who asks, as the kernel identified it: `--confirm`'s question
    /// names it and its answer is remembered for it. Blocking: the store, the refresh and the
    /// question run on the calling thread (a connection's; never async code).
    package func token(clientID: ClientID, scopes: [String], account: String?, authority: String?, forceRefresh: Bool = false,
                       claims: String? = nil, clientCapabilities: [String] = [],
                       caller: ServerPolicy.Caller) throws(TokenCacheError) -> TokenResult {
        guard !scopes.isEmpty else { throw TokenCacheError.invalidArgument("scopes", "is empty", hint: "Name at least one scope") }
        try serverPolicy.check(client: clientID)
        try serverPolicy.check(scopes: scopes)
        var request = TokenRequest(clientID: clientID, scopes: scopes, account: account, authority: try serverPolicy.authority(authority))
        request.forceRefresh = forceRefresh
        (request.claims, request.clientCapabilities) = (claims, clientCapabilities)
        _ = try request.claimsParameter  // claims that cannot carry the capabilities: refused before any lookup
        // No authority policy: the agent refreshes nowhere (docs/AGENT.md), so a named authority
        // only picks among the cached tokens, and must be theirs (#44 item 4).
        request.redeemsRefreshTokens = !policy.authorities.isEmpty
        let target = try engine.blockingAccount(for: request) { serverPolicy.allows(account: $0) }
        try serverPolicy.confirmToken(caller: caller, client: clientID, account: target.homeAccountID,
                                            accountName: target.username.isEmpty ? target.homeAccountID : target.username,
                                            authority: request.authority, scopes: scopes)
        do {
            return try engine.blockingToken(request, for: target)
        } catch where !policy.authorities.isEmpty && {
            error.reason.refreshTokenFromOtherHost != nil
        }() {
            // The agent's --authority is the reason: a hint to use another authority would only be
            // refused next as "not one the agent serves" (#46). Name the filter instead.
            throw serverPolicy.refused("this account's refresh tokens were issued at another host than the agent's --authority \(request.authority?.url.absoluteString ?? ""), where it redeems",
                               allowed: policy.authorities.map(\.url.absoluteString), option: "--authority")
        } catch where error.reason == .noUsableToken(refreshable: true) || error.reason == .noUsableToken(refreshable: false) {
            // Say which of the agent's settings stands in the way, not only that nothing is cached.
            if let named = request.authority, policy.authorities.isEmpty {
                throw serverPolicy.refused("authority \(named.url.absoluteString) holds no cached token of this account, and an agent started without --authority refreshes nowhere",
                                   allowed: [], option: "--authority")
            }
            throw TokenCacheError(.notFound, "The agent has no usable cached access token for client \(clientID) and these scopes, and no authority to refresh at.",
                                  hint: "Restart the agent with --authority URL: an agent started without one refreshes nowhere", reason: error.reason)
        }
    }
}
