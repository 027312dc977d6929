import TokenCache
import TokenCacheCore

/// The one policy the token agent and the identity broker serve under (#58 item 4): the allow
/// lists (``AgentPolicy``: clients, accounts, scopes, authorities) and the confirmation gate
/// (``PolicyGate``: `--confirm`, keyed by the caller's identity, the operation, client, account,
/// authority and scopes). Both servers ask it the same questions in the same order — is the
/// client allowed, are the scopes, which authority, may this caller have this token — and refuse
/// with the same typed error; what differs is only how each names itself (``Server``).
///
/// The caller it is given is who the kernel says (the agent's peer credentials and executable,
/// the bus daemon's pid and pidfd for the broker), never what a request says.
package final class ServerPolicy: Sendable {
    /// Which server asks: how refusals and questions name it.
    package struct Server: Sendable, Hashable {
        /// In sentences: `token agent`, `broker`.
        package var name: String
        /// In "restart the …" and "not one the … serves": `agent`, `broker`.
        package var short: String
        /// Where a token comes from when no authority is named or allowed.
        package var unnamedAuthority: String

        /// `tokencache agent`: without an authority it serves cached tokens only.
        package static let agent = Server(name: "token agent", short: "agent", unnamedAuthority: "the cache")
        /// `tokencache broker`: without an authority the engine refreshes at the account's home.
        package static let broker = Server(name: "broker", short: "broker", unnamedAuthority: "the account's home authority")
    }

    /// A caller as the kernel identified it.
    package struct Caller: Sendable, Hashable {
        /// Whom answers are remembered for: a Flatpak or Snap app ID, an executable, a channel.
        package var identity: String
        /// Its process, when there is one to name.
        package var pid: Int64?

        package init(identity: String, pid: Int64? = nil) { (self.identity, self.pid) = (identity, pid) }

        /// How a question names it: its identity and pid, never the comm it sets.
        package var described: String { pid.map { "\(identity) (pid \($0))" } ?? identity }
    }

    package let server: Server
    /// The allow lists.
    package let lists: AgentPolicy
    /// `--confirm`, and which caller first used each client.
    package let gate: PolicyGate
    /// The client IDs each sandboxed app may use (`--app APP_ID=CLIENT_ID`), by lowercased app ID,
    /// each as its ``ClientID/policyKey``.
    private let appClients: [String: Set<String>]

    /// - Parameter appClients: the client IDs each sandboxed app (Flatpak app ID or snap name) may use.
    package init(_ server: Server, lists: AgentPolicy, appClients: [String: [ClientID]] = [:], confirmation: PolicyGate.Confirmation?) {
        (self.server, self.lists) = (server, lists)
        self.appClients = appClients.reduce(into: [:]) { map, entry in
            map[ASCII.lowercased(entry.key), default: []].formUnion(entry.value.map(\.policyKey))
        }
        self.gate = PolicyGate(confirmation: confirmation)
    }

    /// Whether `--app` allows the sandboxed app `appID` (a Flatpak app ID or snap name) `client`.
    package func allows(client: ClientID, app appID: String) -> Bool {
        appClients[ASCII.lowercased(appID)]?.contains(client.policyKey) == true
    }

    /// Throws `accessDenied` unless the allow list names `client` (or names none).
    package func check(client: ClientID) throws(TokenCacheError) {
        guard lists.allows(client: client) else {
            throw refused("client \(client) is not one the \(server.short) serves", allowed: lists.clients.map(\.value), option: "--client")
        }
    }

    /// Throws `accessDenied` naming the scopes the allow list does not name.
    package func check(scopes: [String]) throws(TokenCacheError) {
        let disallowed = lists.disallowed(scopes: scopes)
        guard disallowed.isEmpty else {
            throw refused("scope \(disallowed.joined(separator: " ")) is not one the \(server.short) serves", allowed: lists.scopes, option: "--scopes")
        }
    }

    /// Whether the allow list lets `account`'s tokens out.
    package func allows(account: CachedAccount) -> Bool { lists.allows(account: account) }

    /// The authority a request names, when the allow list allows it; else the list's first; nil
    /// when neither exists.
    package func authority(_ text: String?) throws(TokenCacheError) -> Authority? {
        guard let text else { return lists.authorities.first }
        let named = try Authority(text)
        guard lists.authorities.isEmpty || lists.authorities.contains(where: { $0.url == named.url }) else {
            throw refused("authority \(named.url.absoluteString) is not one the \(server.short) serves",
                          allowed: lists.authorities.map(\.url.absoluteString), option: "--authority")
        }
        return named
    }

    /// With `--confirm`, asks before the first token of each caller, client, account, authority
    /// and scope set: what the question named is what the answer approves (#44, #57), so allowing
    /// one account, scope set or program never serves another. Blocks while the user answers: for
    /// a server's blocking threads (the agent's and the keeper's connections).
    /// - Parameters:
    ///   - account: what the answer is remembered for (a home account ID, or a sign-in's hint).
    ///   - accountName: how the question names the account.
    package func confirmToken(caller: Caller, client: ClientID, account: String, accountName: String, authority: Authority?,
                              scopes: [String]) throws(TokenCacheError) {
        let asked = tokenQuestion(caller: caller, client: client, account: account, accountName: accountName, authority: authority, scopes: scopes)
        guard gate.admits(asked.key, question: asked.question) else { throw notAllowed(client: client) }
    }

    /// ``confirmToken(caller:client:account:accountName:authority:scopes:)`` for async code (the
    /// broker's handlers): no cooperative thread is held while the user answers.
    package func confirmToken(caller: Caller, client: ClientID, account: String, accountName: String, authority: Authority?,
                              scopes: [String]) async throws(TokenCacheError) {
        let asked = tokenQuestion(caller: caller, client: client, account: account, accountName: accountName, authority: authority, scopes: scopes)
        guard await gate.admits(asked.key, question: asked.question) else { throw notAllowed(client: client) }
    }

    /// What a token's confirmation is remembered for, and how it asks.
    private func tokenQuestion(caller: Caller, client: ClientID, account: String, accountName: String, authority: Authority?,
                               scopes: [String]) -> (key: PolicyGate.Key, question: String) {
        let place = authority?.url.absoluteString ?? server.unnamedAuthority
        return (PolicyGate.Key(caller: caller.identity, operation: "token", client: client, account: account, authority: place, scopes: scopes),
                "\(caller.described) asks the \(server.short) for a token of client \(client) for \(accountName) "
                    + "at \(place), scopes \(scopes.joined(separator: " ")).")
    }

    private func notAllowed(client: ClientID) -> TokenCacheError {
        TokenCacheError(.accessDenied, "The \(server.name)'s user did not allow client \(client) a token of this account for these scopes.",
                        hint: "Ask whoever runs the \(server.short) to allow it (it asks on its terminal or desktop)")
    }

    /// A refusal by the allow lists, naming what they allow and the option that would.
    package func refused(_ what: String, allowed: [String], option: String) -> TokenCacheError {
        TokenCacheError(.accessDenied, "The \(server.name) refused: \(what)\(allowed.isEmpty ? "" : " (allowed: \(allowed.joined(separator: ", ")))").",
                        hint: "Ask for an allowed one, or restart the \(server.short) with \(option) naming it")
    }
}
