import Synchronization
import TokenCacheCore
import TokenCachePlatform

/// The one gate the token agent and the identity broker pass before serving (#57 item 5): with
/// `--confirm` it asks the user, and remembers a yes for exactly what the question named — who
/// asked, the operation, and the request's client, account, authority and scopes. A yes for
/// scopes A never covers scopes B, nor one caller another's. Without `--confirm` it allows what
/// the static policy (``AgentPolicy``) let through, except what needs the user's consent, which it
/// denies (there is no one to ask).
///
/// It also records which caller first used each client ID here: a client's accounts are that
/// caller's to remove; another caller that names the same client needs the user's yes.
package final class PolicyGate: Sendable {
    /// Asks the person at the server and waits for the answer; true to allow. It may block for
    /// as long as the person takes (the gate calls it only where a thread may block), and asks
    /// one question at a time if its person can answer only one (a terminal, a dialog).
    package typealias Confirmation = @Sendable (String) -> Bool

    /// What an answer is remembered for.
    package struct Key: Hashable, Sendable {
        /// Who asked: a Flatpak app ID, a snap name, an executable, or a channel (`managed-identity`).
        package var caller: String
        /// `token`, `getAccounts`, `removeAccount`, `signIn`, `client` (whether the caller may use the client at all).
        package var operation: String
        /// The client's ``ClientID/policyKey`` (lowercased).
        package var client: String
        /// A home account ID or username, empty for none.
        package var account: String
        /// The authority's URL, empty for none.
        package var authority: String
        /// Lowercased, sorted, each once.
        package var scopes: [String]

        package init(caller: String, operation: String, client: ClientID, account: String = "", authority: String = "", scopes: [String] = []) {
            (self.caller, self.operation, self.client) = (caller, operation, client.policyKey)
            (self.account, self.authority) = (account, authority)
            self.scopes = Array(Set(scopes.map(ASCII.lowercased))).sorted()
        }
    }

    /// What the gate does with a key.
    package enum Decision: Equatable, Sendable {
        /// Serve: the user said yes to this key, or no one is to be asked and the policy allows it.
        case allow
        /// Ask the user first.
        case ask
        /// Refuse: the key needs the user's yes and there is no one to ask.
        case deny
    }

    private let confirmation: Confirmation?
    private let allowed = Mutex<Set<Key>>([])
    /// The caller that first used each client ID (by its policy key) here.
    private let owners = Mutex<[String: String]>([:])

    package init(confirmation: Confirmation?) { self.confirmation = confirmation }

    /// Whether the user is asked (`--confirm`).
    package var asks: Bool { confirmation != nil }

    /// The decision for `key`; `needsConsent`: the policy alone does not allow it.
    package func decision(for key: Key, needsConsent: Bool = false) -> Decision {
        if allowed.withLock({ $0.contains(key) }) { return .allow }
        if confirmation != nil { return .ask }
        return needsConsent ? .deny : .allow
    }

    /// True when `key` may be served: allowed before, or asked now (`question`) and answered yes,
    /// which is remembered for `key` only. A no is not remembered: the next request asks again.
    /// Blocks while the user answers: for a server's blocking threads (the agent's and the
    /// keeper's connections), never async code.
    package func admits(_ key: Key, needsConsent: Bool = false, question: @autoclosure () -> String) -> Bool {
        switch decision(for: key, needsConsent: needsConsent) {
        case .allow: return true
        case .deny: return false
        case .ask:
            guard let confirmation else { return false }
            return settle(key, yes: confirmation(question()))
        }
    }

    /// ``admits(_:needsConsent:question:)`` for async code (the broker's D-Bus handlers): the
    /// question is asked on a thread of the blocking pool, holding no cooperative thread while the
    /// user answers (nor one of Dispatch's, which Linux adds only about once a second). A pool at
    /// its ceiling asks nothing: no.
    package func admits(_ key: Key, needsConsent: Bool = false, question: @autoclosure () -> String) async -> Bool {
        switch decision(for: key, needsConsent: needsConsent) {
        case .allow: return true
        case .deny: return false
        case .ask:
            guard let confirmation else { return false }
            let asked = question()
            // Not cancellable: an answer given is remembered even if its caller went meanwhile.
            let yes = try? await BlockingPool.shared.run("policy question", cancellable: false) { () throws(TokenCacheError) in confirmation(asked) }
            return settle(key, yes: yes ?? false)
        }
    }

    /// Remembers a yes for `key`; returns the answer.
    private func settle(_ key: Key, yes: Bool) -> Bool {
        if yes { allowed.withLock { _ = $0.insert(key) } }
        return yes
    }

    /// Remembers a yes for `key` that a broader question already gave.
    package func remember(_ key: Key) { allowed.withLock { _ = $0.insert(key) } }

    /// Records that `caller` used `client` (the first caller to do so owns it); returns the owner.
    @discardableResult
    package func claim(client: ClientID, by caller: String) -> String {
        owners.withLock { owners in
            if let owner = owners[client.policyKey] { return owner }
            owners[client.policyKey] = caller
            return caller
        }
    }

    /// The caller that first used `client` here, nil when none has.
    package func owner(of client: ClientID) -> String? { owners.withLock { $0[client.policyKey] } }
}
