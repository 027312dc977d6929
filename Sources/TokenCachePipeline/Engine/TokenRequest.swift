#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import TokenCacheCore

/// A request for an access token as every front end states it: a Swift app's call, the C
/// function's arguments (and so Python's keywords) and the CLI's flags translate into this, and
/// ``TokenEngine`` decides the rest — which account, cloud, tenant, store or agent answers.
package struct TokenRequest: Sendable {
    /// The client app (application ID), checked where the front end built the request.
    package var clientID: ClientID
    /// The scopes the token must carry.
    package var scopes: [String]
    /// A username (case-insensitive) or home account ID; nil for the client's only account.
    package var account: String?
    /// The account itself, when the caller holds it already (a Swift app's ``CachedAccount``):
    /// used as it is, not chosen again by ``account``.
    package var chosenAccount: CachedAccount?
    /// Where to look and redeem: it picks the cloud and the tenant. Nil: the cached token of the
    /// account's only tenant that has one, and nothing is redeemed (nowhere is known to redeem at).
    package var authority: Authority?
    /// Whether a refresh token may be redeemed at `authority` when no cached access token is usable.
    package var redeemsRefreshTokens = true
    /// Skips the access token cached when the request starts (a refresh happens).
    package var forceRefresh = false
    /// A claims challenge (decoded JSON): the cache is skipped and the refresh carries it.
    package var claims: String?
    /// The client capabilities (`cp1`) the caller declares: merged into `claims` on every token
    /// request made for it (``ClaimsRequest``), here, at the agent and at a broker.
    package var clientCapabilities: [String] = []
    /// The `claims` parameter a token request for this carries (claims and capabilities merged,
    /// as MSAL sends them); nil when there is none.
    package var claimsParameter: String? {
        get throws(TokenCacheError) { try ClaimsRequest.merged(capabilities: clientCapabilities, claims: claims) }
    }

    package init(clientID: ClientID, scopes: [String], account: String? = nil, authority: Authority? = nil) {
        self.clientID = clientID
        self.scopes = scopes
        self.account = account
        self.authority = authority
    }
}

/// What a caller chose of a local cache, as each front end states it from its own arguments:
/// the one value that says whether this process's cache or the token agent
/// (`TOKENCACHE_AGENT_SOCK`) answers its token requests and account lists
/// (``TokenEngine/agent(for:)``).
package struct CacheChoice: Sendable, Equatable {
    /// A group was named: the CLI's `--group`, a C store opened on a group, a configuration's
    /// group other than the default.
    package var namedGroup: Bool
    /// A backend or its settings were named: the CLI's `--backend`, `--collection` or
    /// `--passphrase-file`, a C backend other than AUTO, a configuration's backend other than `auto`.
    package var namedBackend: Bool
    /// Another tool's store is read or opted into for single sign-on: the CLI's `--store` and
    /// `--sso-store`, C's `tokencache_store_set_sso_stores`, ``PublicClientApplication/Options/singleSignOnStores``.
    package var otherStores: Bool

    package init(namedGroup: Bool = false, namedBackend: Bool = false, otherStores: Bool = false) {
        self.namedGroup = namedGroup
        self.namedBackend = namedBackend
        self.otherStores = otherStores
    }

    /// Whether a local cache was chosen: then this process's cache answers, never the agent.
    package var isLocal: Bool { namedGroup || namedBackend || otherStores }
}

/// Who answers a caller's token requests and account lists: the token agent
/// (`TOKENCACHE_AGENT_SOCK`), the token keeper when this user enrolled a group with it, or this
/// process's local cache. Front ends state only what their caller named; the pipeline applies
/// the rule (``TokenEngine/agent(for:)``).
package enum EngineRoute: Sendable {
    /// The agent answers (the keeper is one): no local cache was chosen, and the environment
    /// names an agent or this user enrolled with the keeper.
    case agent(AgentClient)
    /// This process's cache answers.
    case local

    /// The agent a caller that named no local cache gets: the one `TOKENCACHE_AGENT_SOCK` names,
    /// else the installed keeper when this user enrolled a group with it (``KeeperDiscovery``;
    /// `TOKENCACHE_KEEPER=off` turns that off). An enrolled user's groups left the local cache at
    /// enrolment, so nothing falls back to it when the keeper fails or refuses.
    package static var discoveredAgent: AgentClient? {
        AgentClient.fromEnvironment ?? KeeperDiscovery.installed?.keeper(for: getuid())
    }

    /// The route for what a caller named of a local cache: a group (`namedGroup`, `group` its
    /// name), a backend or its settings (`namedBackend`), another tool's store read or opted into
    /// (`otherStores`). A named group this user enrolled with the keeper is the keeper's (its
    /// local copy went at enrolment); any other named group is local, as a named backend or store is.
    /// `agent` is ``discoveredAgent`` and `keeper` the installed one; tests give their own.
    package init(namedGroup: Bool, namedBackend: Bool, otherStores: Bool = false, group: String? = nil,
                 agent: @autoclosure () -> AgentClient? = EngineRoute.discoveredAgent,
                 keeper: @autoclosure () -> KeeperDiscovery? = KeeperDiscovery.installed) {
        let choice = CacheChoice(namedGroup: namedGroup, namedBackend: namedBackend, otherStores: otherStores)
        if !choice.isLocal, let agent = agent() {
            self = .agent(agent)
        } else if namedGroup, !namedBackend, !otherStores, let group, let kept = keeper()?.keeper(for: getuid(), group: group) {
            self = .agent(kept)
        } else {
            // A local cache named: the agent never answers, whatever the environment names.
            self = .local
        }
    }

    /// The agent that answers, nil when the local cache does.
    package var agent: AgentClient? {
        if case .agent(let agent) = self { return agent }
        return nil
    }
}
