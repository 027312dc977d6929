import FoundationEssentials
import TokenCacheCore
import TokenCacheHTTP

/// The engine's seams for an app on a store alone, without the façade (the `TokenCacheEncryptedFile`
/// product: no GLib, so no identity broker on the session bus and no other tools' keyring stores).
/// Its apps that redeem are ``StoreApplication``s; its endpoint clients share one process-wide
/// discovery cache, as MSAL.NET's is, since each call of
/// ``TokenCacheCore/AccountStore/acquireTokenSilent(clientID:scopes:accountNamed:authority:transport:)``
/// builds a new engine.
struct StoreServices: EngineServices {
    /// The HTTP stack of every request (libcurl's by default).
    let transport: any HTTPTransport
    /// Bound on each HTTP request, in seconds (`PublicClientApplication.Options`' default).
    var requestTimeout: TimeInterval = 30
    /// Bound on waiting for another process's refresh of the same account, in seconds.
    var refreshLockTimeout: TimeInterval = 60

    /// Endpoints discovered, per authority: the process's (a domain-named tenant is resolved once),
    /// unless a test gives its own.
    var discovered = StoreServices.processDiscovery
    static let processDiscovery = TokenEndpointClient.Discovered([:])

    var clientCapabilities: [String] { [] }
    var brokerUse: BrokerUse { .never }
    var hasSingleSignOnStores: Bool { false }

    func application(clientID: ClientID, authority: Authority, capabilities: [String], store: AccountStore) -> any RedeemingApplication {
        let client = TokenEndpointClient(transport: transport, timeout: requestTimeout, logger: store.options.logger,
                                         capabilities: capabilities, sharing: discovered)
        return StoreApplication(authority: authority, client: client,
                                tokenRedeemer: TokenRedeemer(clientID: clientID, store: store, client: client,
                                                             refreshLockTimeout: refreshLockTimeout))
    }

    // Never asked: the broker use is `.never` (``TokenEngine/brokerNow()``).
    func brokerOnBus() throws(TokenCacheError) -> BrokerOnBus { .nobody }

    func singleSignOnAccounts(group: AccountStore, clientID: ClientID, excluding known: [CachedAccount]) throws(TokenCacheError) -> [CachedAccount] {
        []
    }
}

/// An app that redeems on a store alone: the pipeline's ``TokenRedeemer`` at one authority, with
/// no single sign-on stores.
struct StoreApplication: RedeemingApplication {
    let authority: Authority
    let client: TokenEndpointClient
    let tokenRedeemer: TokenRedeemer

    var singleSignOn: TokenRedeemer.SingleSignOn? { nil }
    var hasSingleSignOnStores: Bool { false }

    func accountsHere() throws(TokenCacheError) -> [CachedAccount] {
        try tokenRedeemer.store.accounts(clientID: tokenRedeemer.clientID)
    }

    func singleSignOnAccounts(_ clientID: ClientID, excluding known: [CachedAccount]) throws(TokenCacheError) -> [CachedAccount] {
        []
    }
}

extension AccountStore {
    /// An access token without user interaction, for an app that opens its store itself and has
    /// no `PublicClientApplication`: an app on the `TokenCacheEncryptedFile` product, which links
    /// no GLib (`import EncryptedFileStore` and `import TokenCachePipeline`).
    ///
    /// The cached access token while it is usable; else the cached refresh token (the family's
    /// first, then the app's own) is redeemed at `authority` under the cross-process refresh lock,
    /// and the new tokens are saved to this store. The account is chosen by the rule every front
    /// end follows (`PublicClientApplication.acquireTokenSilent(scopes:accountNamed:)`, the CLI's
    /// `token --account`): the one named, else the client's only one. A tenant named by domain is
    /// resolved by OpenID discovery (cached per process), so its tokens are found and saved at the
    /// tenant ID. Only this store answers: neither the token agent, nor an identity broker, nor
    /// other tools' stores are asked.
    ///
    /// ```swift
    /// let store = AccountStore(backend: EncryptedFileBackend(), group: .universalStorage)
    /// let token = try await store.acquireTokenSilent(clientID: try ClientID(id), scopes: ["User.Read"],
    ///                                                authority: try Authority("https://login.microsoftonline.com/organizations"))
    /// ```
    /// - Parameters:
    ///   - clientID: the app (application ID).
    ///   - scopes: the scopes the token must carry.
    ///   - name: a username (case-insensitive) or home account ID; nil for the client's only account.
    ///   - authority: where the refresh token is redeemed; it also picks the cloud and the tenant.
    ///   - transport: the HTTP stack; by default libcurl, loaded on the first request.
    /// - Returns: the token, and the account it is for.
    /// - Throws: `notFound` (reason `TokenCacheError.Reason.noAccount`), `ambiguousAccount`,
    ///   `interactionRequired` (sign the user in; `TokenCacheError.server` says why), `network` or
    ///   `serverError` (retry later), `libcurlMissing`, and what reading or saving the store throws.
    ///   Nothing is removed from the cache because of an error.
    public func acquireTokenSilent(clientID: ClientID, scopes: [String], accountNamed name: String? = nil, authority: Authority,
                                   transport: any HTTPTransport = CurlTransport()) async throws(TokenCacheError) -> TokenResult {
        try await acquireTokenSilent(TokenRequest(clientID: clientID, scopes: scopes, account: name, authority: authority),
                                     services: StoreServices(transport: transport))
    }

    /// The request through an engine on this store alone (tests give the clock and timeouts).
    func acquireTokenSilent(_ request: TokenRequest, services: StoreServices) async throws(TokenCacheError) -> TokenResult {
        try await TokenEngine(store: self, agent: nil, services: services).token(request)
    }
}
