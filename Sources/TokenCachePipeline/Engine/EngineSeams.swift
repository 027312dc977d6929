import TokenCacheCore

// The seams through which the engine reaches what lives above the pipeline (#58 item 1): the
// app that redeems (with other tools' stores, which the pipeline does not import), the identity
// broker on the session bus (GDBus), and the single sign-on stores' keyring. Defined here,
// implemented by the façade (TokenCache), handed to the engine when it is built.

/// A refresh the engine decided on: what the app that redeems needs besides its authority.
package struct TokenRefresh: Sendable {
    /// The scopes the token must carry.
    package var scopes: [String]
    /// The account whose refresh token is redeemed.
    package var account: CachedAccount
    /// Skips the access token cached when the request started.
    package var forceRefresh = false
    /// A claims challenge (decoded JSON) the refresh carries.
    package var claims: String?

    /// A refresh of `account`'s token for `scopes`.
    package init(scopes: [String], account: CachedAccount) {
        self.scopes = scopes
        self.account = account
    }
}

/// The app that redeems for one client at one authority, as the engine uses it: its token
/// endpoint client (whose discovery resolves a tenant named by domain), its accounts with its
/// single sign-on stores', and the parts of a refresh the engine drives (``TokenEngine/redeem(_:with:)``):
/// its ``TokenRedeemer`` and its redemption from other tools' stores.
package protocol RedeemingApplication: Sendable {
    /// Where the app redeems: the tenant tokens are filed under, which the engine resolved.
    var authority: Authority { get }
    /// The token endpoint client: discovery is asked and remembered here, once per app.
    var client: TokenEndpointClient { get }
    /// The refresh at ``authority`` (lock, re-read, redemption, save), on the app's store.
    /// - Throws: the `invalidArgument` error of a client ID `ClientID` refused.
    var tokenRedeemer: TokenRedeemer { get throws(TokenCacheError) }
    /// The redemption from the app's single sign-on stores (other tools' caches, which the
    /// pipeline does not import), for the redeemer; nil when the app opted into none.
    var singleSignOn: TokenRedeemer.SingleSignOn? { get }
    /// Whether the app lists and redeems other tools' stores' accounts too.
    var hasSingleSignOnStores: Bool { get }
    /// The local cache's accounts for the app with its single sign-on stores', on the caller's thread.
    /// - Throws: what reading the stores throws (`keyringLocked`…).
    func accountsHere() throws(TokenCacheError) -> [CachedAccount]
    /// The single sign-on stores' accounts whose refresh token the app could redeem at its
    /// authority and that `known` does not list.
    /// - Throws: what reading the stores throws (`keyringLocked`…).
    func singleSignOnAccounts(_ clientID: ClientID, excluding known: [CachedAccount]) throws(TokenCacheError) -> [CachedAccount]
}

/// An account as the identity broker describes it, for the engine's choice.
package protocol BrokerAccountDescription: Sendable {
    /// The account as this library's accounts are.
    var cachedAccount: CachedAccount { get }
    /// The tenant the broker signed it in at, if it says.
    var realm: String? { get }
}

/// A connection to the identity broker (Microsoft's, on the session bus): blocking calls, each
/// bounded, which the engine makes on the caller's thread or in a ``BlockingWork`` job.
package protocol BrokerConnection: Sendable {
    /// An account as the broker gives it, kept whole to be handed back.
    associatedtype Account: BrokerAccountDescription
    /// The accounts the broker lets `clientID` use.
    /// - Throws: `backendUnavailable`, `timedOut`, `serverError` (reason `brokerRefused`).
    func accounts(clientID: ClientID) throws(TokenCacheError) -> [Account]
    /// An access token for `account` at `authority` without user interaction.
    /// - Throws: `interactionRequired` or `serverError` (reason `brokerRefused(status:code:)`).
    func token(clientID: ClientID, authority: Authority, scopes: [String], account: Account,
               claims: String?) throws(TokenCacheError) -> TokenResult
}

extension BrokerConnection {
    /// The broker's accounts for `clientID` as this library's accounts are.
    /// - Throws: as ``accounts(clientID:)``.
    package func cachedAccounts(clientID: ClientID) throws(TokenCacheError) -> [CachedAccount] {
        try accounts(clientID: clientID).map(\.cachedAccount)
    }
}

/// Who answers on the identity broker's bus name, as the façade finds it: the facts
/// ``TokenEngine/brokerNow()`` decides on with the app's ``BrokerUse``.
package enum BrokerOnBus: Sendable {
    /// Another broker than this cache's own (Microsoft's).
    case broker(any BrokerConnection)
    /// `tokencache broker`, which serves this same cache.
    case ourProvider
    /// Nobody owns the name.
    case nobody
    /// No session bus: the error connecting gave.
    case noBus(TokenCacheError)
}

/// What the engine opens or makes through the façade: the apps that redeem, the identity broker
/// (when the app uses one) and the single sign-on stores (when it opted into some).
package protocol EngineServices: Sendable {
    /// The client capabilities an account listing's apps declare.
    var clientCapabilities: [String] { get }
    /// When the app asks the identity broker: the engine applies it (``TokenEngine/brokerNow()``).
    var brokerUse: BrokerUse { get }
    /// Whether the app opted into other tools' stores.
    var hasSingleSignOnStores: Bool { get }
    /// A new app that redeems for `clientID` at `authority` on `store` (the engine keeps it).
    func application(clientID: ClientID, authority: Authority, capabilities: [String], store: AccountStore) -> any RedeemingApplication
    /// Who answers on the identity broker's bus name now (session bus calls, on the caller's thread).
    /// - Throws: what asking the name's owner throws, a missing session bus aside (``BrokerOnBus/noBus(_:)``).
    func brokerOnBus() throws(TokenCacheError) -> BrokerOnBus
    /// The single sign-on stores' accounts of `clientID` that `known` does not list, redeemable
    /// where their refresh tokens were issued (a listing with no authority).
    /// - Throws: what reading the stores throws (`keyringLocked`…).
    func singleSignOnAccounts(group: AccountStore, clientID: ClientID, excluding known: [CachedAccount]) throws(TokenCacheError) -> [CachedAccount]
}
