import FoundationEssentials
import EncryptedFileStore
import SecretServiceStore
import TokenCacheCore
import TokenCachePlatform
import TokenCachePipeline
import Logging

/// A public client app (desktop app or command-line tool) on the shared cache: the Linux
/// counterpart of MSAL's `MSALPublicClientApplication`. It gets tokens silently from the cache,
/// redeeming refresh tokens at the token endpoint when needed, and lists and signs out the
/// accounts the app can use.
///
/// An app that never signed in gets single sign-on through the family refresh token another
/// app of the same family saved in the same group.
public final class PublicClientApplication: Sendable {
    /// Tunable behaviour.
    public struct Options: Sendable {
        /// Bound on each HTTP request, in seconds.
        public var requestTimeout: TimeInterval = 30
        /// Bound on waiting for another process's refresh of the same account, in seconds.
        public var refreshLockTimeout: TimeInterval = 60
        /// The HTTP stack.
        public var transport: any HTTPTransport = CurlTransport()
        /// Where the library logs (never secrets), when the app opens its own store.
        public var logger: Logger = Logger(label: "tokencache")
        /// Secret Service settings (collection mapping, unlock prompts), when the app opens its own store.
        public var secretService: SecretServiceBackend.Options = .init()
        /// The encrypted file's directory, when the app opens its own store and the policy picks
        /// the file; nil for the default (`$XDG_DATA_HOME/tokencache`).
        public var fileDirectory: URL?
        /// Other tools' MSAL caches (``ExternalStore/catalogue(home:dataHome:)``, e.g. Azure
        /// CLI's) whose accounts this app lists and whose refresh tokens it may redeem when its
        /// group holds none for an account: single sign-on with those tools. None by default,
        /// since opting a store in lets this app use that tool's sign-ins. A refresh token
        /// redeemed from a store and rotated by the server is written back to the store, under
        /// its owner's lock.
        public var singleSignOnStores: [ExternalStore] = []
        /// The clock of the waits (device code polling and its timeout, the browser sign-in's
        /// timeout, the checks of
        /// ``accountChanges(checkingEvery:)``): tests of logic pass a manual one and advance it.
        package var clock: any Clock<Duration> = ContinuousClock()
        /// Microsoft Graph's endpoint for ``PublicClientApplication/photo(for:refresh:)``
        /// (`https://HOST`, or `http://127.0.0.1:PORT` for a local stand-in); nil for
        /// `TOKENCACHE_GRAPH_ENDPOINT`, else the account's cloud's Graph host.
        public var graphEndpoint: URL?
        /// The client capabilities the app declares, as MSAL's `clientCapabilities`: `["cp1"]`
        /// says it handles claims challenges (``ClaimsChallenge``), so the resource may use
        /// continuous access evaluation. Sent on every token request merged into `claims`
        /// (`{"access_token":{"xms_cc":{"values":["cp1"]}}}`). None by default.
        public var clientCapabilities: [String] = []
        /// Whether silent tokens come from the identity broker on the session bus
        /// (`com.microsoft.identity.broker1`: Microsoft's broker on an enrolled machine gives
        /// device-bound tokens and passes Conditional Access device compliance). Never by
        /// default; a broker that is this cache's own provider (`tokencache broker`) is never asked.
        public var broker: BrokerUse = .never
        /// Whether a sign-in's tokens may be saved (the token keeper's rule: only an account its
        /// group holds already); nil saves every sign-in. Asked with the token endpoint's answer,
        /// the client, the authority the sign-in is saved under and its scopes, before anything is saved.
        package var admitsSignIn: (@Sendable (TokenResponse, ClientID, Authority, [String]) throws(TokenCacheError) -> Void)?

        public init() {}
    }

    /// The application (client) ID.
    public let clientID: String
    /// `clientID` checked once, when the app was created: the client of every token request it makes.
    let checkedClientID: Result<ClientID, TokenCacheError>
    /// The authority tokens come from, unless a request names another.
    public let authority: Authority
    /// The shared cache.
    public let store: AccountStore
    /// The token endpoint client: discovery is asked and remembered here, once per app.
    package let client: TokenEndpointClient
    /// The pipeline's refresh of this app's tokens, on `client` and `store` (for a client ID
    /// `ClientID` refused: its error, thrown by every request).
    let redeemer: Result<TokenRedeemer, TokenCacheError>
    package let options: Options
    /// The Secret Service connection for opted-in keyring stores when the group is not kept
    /// there: opened on first use, then kept (shared with ``redeeming(at:)``'s apps).
    let storesKeyring: Locked<SecretServiceBackend?>
    /// The token agent that answers this app's silent requests and account lists instead of the
    /// store (``EngineRoute``): only for an app opened from a configuration.
    let agent: AgentClient?

    /// Creates the app on a store the caller opened (which it always uses: a store chosen by the
    /// caller is never replaced by the token agent).
    public convenience init(clientID: ClientID, authority: Authority, store: AccountStore, options: Options = Options()) {
        self.init(clientID: clientID.value, checked: .success(clientID), authority: authority, store: store, options: options, agent: nil)
    }

    /// Creates the app for a client ID not checked yet: it is checked here, once. An ID
    /// `ClientID` refuses finds no account, and token requests, sign-ins and ``remove(_:)`` throw
    /// its `invalidArgument` error before anything is sent or saved. Prefer the initializer
    /// taking a `ClientID`, which checks it where it enters.
    public convenience init(clientID: String, authority: Authority, store: AccountStore, options: Options = Options()) {
        self.init(clientID: clientID, checked: Result { () throws(TokenCacheError) in try ClientID(clientID) },
                  authority: authority, store: store, options: options, agent: nil)
    }

    private init(clientID: String, checked: Result<ClientID, TokenCacheError>, authority: Authority, store: AccountStore,
                 options: Options, agent: AgentClient?, sharing shared: TokenEndpointClient? = nil,
                 storesKeyring: Locked<SecretServiceBackend?> = Locked(nil)) {
        self.clientID = clientID
        checkedClientID = checked
        self.authority = authority
        self.store = store
        self.options = options
        self.agent = agent
        self.storesKeyring = storesKeyring
        self.client = shared ?? TokenEndpointClient(transport: options.transport, timeout: options.requestTimeout,
                                                    logger: store.options.logger, capabilities: options.clientCapabilities)
        redeemer = checked.map { [client] clientID in
            TokenRedeemer(clientID: clientID, store: store, client: client, refreshLockTimeout: options.refreshLockTimeout)
        }
    }

    /// The app on a store the caller opened, answered where `route` sends its caller: by the token
    /// agent or the keeper (which also redeems its sign-ins: an enrolled user's refresh token stays
    /// there), else by the store. For front ends that took the pipeline's route (the CLI, C).
    package convenience init(clientID: ClientID, authority: Authority, store: AccountStore, options: Options = Options(), route: EngineRoute) {
        self.init(clientID: clientID.value, checked: .success(clientID), authority: authority, store: store, options: options, agent: route.agent)
    }

    /// This app answered by `agent` (the engine's route), sharing its endpoint client and stores' keyring.
    func routed(to agent: AgentClient?) -> PublicClientApplication {
        guard let agent else { return self }
        return PublicClientApplication(clientID: clientID, checked: checkedClientID, authority: authority, store: store, options: options,
                                       agent: agent, sharing: client, storesKeyring: storesKeyring)
    }

    /// This app redeeming at `authority` (a request's own, or the tenant ID a domain names): its
    /// endpoint client and stores' keyring are shared, so discovery is asked once per app, not per request.
    func redeeming(at authority: Authority) -> PublicClientApplication {
        PublicClientApplication(clientID: clientID, checked: checkedClientID, authority: authority, store: store, options: options,
                                agent: nil, sharing: client, storesKeyring: storesKeyring)
    }

    /// Creates the app from a (plugin-generated) configuration on a store the caller opened.
    public convenience init(configuration: AppConfiguration, store: AccountStore, options: Options = Options()) throws(TokenCacheError) {
        let clientID = try configuration.validated()
        self.init(clientID: clientID, authority: try configuration.parsedAuthority, store: store,
                  options: try Self.options(options, with: configuration))
    }

    /// `options` with the configuration's client capabilities and single sign-on stores (from the catalogue) added.
    /// - Throws: `invalidArgument` (field `singleSignOnStores`) for a name the catalogue does not have.
    static func options(_ options: Options, with configuration: AppConfiguration) throws(TokenCacheError) -> Options {
        var options = options
        for capability in configuration.clientCapabilities where !options.clientCapabilities.contains(capability) {
            options.clientCapabilities.append(capability)
        }
        let named = try ExternalStore.named(configuration.singleSignOnStores)
        options.singleSignOnStores += named.filter { store in !options.singleSignOnStores.contains { $0.name == store.name } }
        return options
    }

    /// Creates the app from its configuration and opens the configuration's group on the
    /// backend its policy selects, as `MSALPublicClientApplication(configuration:)` opens the
    /// keychain sharing group: every app configured with the same group shares its accounts.
    ///
    /// Opening connects to the session bus when the policy may use the Secret Service, which can
    /// take a few milliseconds; from async code prefer ``open(configuration:options:)``.
    /// - Throws: `TokenCacheError` `invalidArgument` naming the configuration field at fault,
    ///   or `backendUnavailable`, `keyringLocked`… when the policy's backend cannot be used.
    public convenience init(configuration: AppConfiguration, options: Options = Options()) throws(TokenCacheError) {
        let clientID = try configuration.validated()
        let store = try AccountStore.open(group: try configuration.cacheGroup, policy: configuration.backend, logger: options.logger,
                                          fileDirectory: options.fileDirectory, secretService: options.secretService).store
        let options = try Self.options(options, with: configuration)
        // The default group on the automatic backend, without single sign-on stores, is no local
        // cache chosen: the pipeline routes to TOKENCACHE_AGENT_SOCK's agent.
        let route = EngineRoute(namedGroup: store.group != .universalStorage, namedBackend: configuration.backend != .automatic,
                                otherStores: !options.singleSignOnStores.isEmpty, group: store.group.name)
        self.init(clientID: clientID.value, checked: .success(clientID), authority: try configuration.parsedAuthority, store: store,
                  options: options, agent: route.agent)
    }

    /// ``init(configuration:options:)`` without holding a cooperative thread while the backend opens.
    public static func open(configuration: AppConfiguration, options: Options = Options()) async throws(TokenCacheError) -> PublicClientApplication {
        try await BlockingWork.run { () throws(TokenCacheError) in try PublicClientApplication(configuration: configuration, options: options) }
    }

    // MARK: Accounts

    /// The accounts this app can use silently: those with a refresh token of the app or of its
    /// family that the app has not signed out of (MSAL's `allAccounts`).
    /// With ``Options/singleSignOnStores``, the accounts of those stores follow the group's.
    /// With the token agent (``init(configuration:options:)``), the accounts it serves this app;
    /// with ``Options/broker`` and a broker that answers, the broker's.
    public func accounts() async throws(TokenCacheError) -> [CachedAccount] {
        guard let clientID = listedClientID else { return [] }
        let engine = TokenEngine(application: self)
        return try await BlockingWork.run { [self] () throws(TokenCacheError) in try engine.accounts(clientID: clientID, authority: authority) }
    }

    /// The client whose accounts the app lists: nil for a client ID `ClientID` refused, which has none.
    var listedClientID: ClientID? {
        try? checkedClientID.get()
    }

    /// This cache's accounts for the app with its single sign-on stores' (the agent and the
    /// broker aside: the engine decided against them), on the caller's thread.
    package func accountsHere() throws(TokenCacheError) -> [CachedAccount] {
        guard let clientID = listedClientID else { return [] }
        let own = try store.accounts(clientID: clientID)
        return options.singleSignOnStores.isEmpty ? own : own + (try singleSignOnAccounts(clientID, excluding: own))
    }

    /// The account with this username (case-insensitive), among those this app can use; nil when
    /// there is none (MSAL's `account(forUsername:)`). An account is a home account ID in one
    /// cloud: the one in this app's authority's cloud when there is one; otherwise the same
    /// account at hosts of two other clouds throws `TokenCacheError.Code.ambiguousAccount`.
    /// Chosen by the rule of every front end (the CLI's `--account`, C and Python).
    public func account(forUsername username: String) async throws(TokenCacheError) -> CachedAccount? {
        let clientID = try checkedClientID.get()
        return try await TokenEngine(application: self).account(forUsername: username, clientID: clientID, authority: authority)
    }

    /// A token for the account named (a username or home account ID; nil: the app's only
    /// account), without user interaction: the account is chosen by the rule every front end
    /// follows (the CLI's `token --account`, C's and Python's silent calls), then as
    /// ``acquireTokenSilent(_:)``. With the token agent (``init(configuration:options:)``), the
    /// agent chooses and answers.
    /// - Throws: as ``acquireTokenSilent(_:)``, and `notFound` (reason
    ///   `TokenCacheError.Reason.noAccount`) or `ambiguousAccount` (reason
    ///   `TokenCacheError.Reason.severalAccounts(accounts:)` or
    ///   `TokenCacheError.Reason.accountInSeveralClouds(hosts:)`).
    public func acquireTokenSilent(scopes: [String], accountNamed name: String?,
                                   forceRefresh: Bool = false) async throws(TokenCacheError) -> TokenResult {
        try await acquireTokenSilent(scopes: scopes, accountNamed: name, forceRefresh: forceRefresh, claims: nil)
    }

    /// A token that answers a resource's claims challenge (``ClaimsChallenge``, from its
    /// `WWW-Authenticate` header): as ``acquireTokenSilent(scopes:accountNamed:forceRefresh:)``,
    /// but the cached access token is skipped and the refresh carries the challenge's claims
    /// (merged with ``Options/clientCapabilities``), as MSAL does with `WithClaims`.
    /// - Throws: as ``acquireTokenSilent(scopes:accountNamed:forceRefresh:)``; when the token
    ///   endpoint wants the user (`interactionRequired`), `TokenCacheError.server` has the
    ///   claims to sign in with.
    public func acquireTokenSilent(scopes: [String], accountNamed name: String?,
                                   answering challenge: ClaimsChallenge) async throws(TokenCacheError) -> TokenResult {
        try await acquireTokenSilent(scopes: scopes, accountNamed: name, forceRefresh: true, claims: challenge.claims)
    }

    private func acquireTokenSilent(scopes: [String], accountNamed name: String?, forceRefresh: Bool,
                                    claims: String?) async throws(TokenCacheError) -> TokenResult {
        let request = try silentRequest(scopes: scopes, account: name, authority: authority, forceRefresh: forceRefresh, claims: claims)
        return try await TokenEngine(application: self).token(request)
    }

    /// A silent call as the engine takes it: this app's client and capabilities, the caller's rest.
    private func silentRequest(scopes: [String], account: String?, authority: Authority, forceRefresh: Bool,
                               claims: String?) throws(TokenCacheError) -> TokenRequest {
        var request = TokenRequest(clientID: try checkedClientID.get(), scopes: scopes, account: account, authority: authority)
        (request.forceRefresh, request.claims) = (forceRefresh, claims)
        request.clientCapabilities = options.clientCapabilities
        return request
    }

    /// Signs this app out of an account, as MSAL's `remove(account)` does: the app's own tokens
    /// go and the app no longer lists the account; other apps of the group keep it, and their
    /// single sign-on with it.
    public func remove(_ account: CachedAccount) async throws(TokenCacheError) {
        let clientID = try checkedClientID.get()
        return try await BlockingWork.run { [store] () throws(TokenCacheError) in try store.signOut(account, clientID: clientID) }
    }

    /// Removes an account and every token of it from the group, for every app that shares the
    /// group: a sign-out everywhere. Returns how many cache entries were removed. A store opted
    /// in for single sign-on (``Options/singleSignOnStores``) still holds the account: remove it
    /// there too (`tokencache remove --account NAME --all-stores`), or sign this app out with
    /// ``remove(_:)``, which no store's tokens then override.
    @discardableResult
    public func removeFromEveryApp(_ account: CachedAccount) async throws(TokenCacheError) -> Int {
        try await BlockingWork.run { [store] () throws(TokenCacheError) in try store.remove(account) }
    }

    /// The accounts this app can use, first as they are now and then each time they change:
    /// another app or process of the group signed in or out, or this one did.
    ///
    /// The group's revision is checked every `interval` (on the Secret Service a counter of its
    /// change signals, on the encrypted file the file's identity), and the accounts are read
    /// again only when it moved. The sequence ends when the task iterating it is cancelled, and
    /// throws the `TokenCacheError` a read failed with (a locked keyring, a tampered file).
    public func accountChanges(checkingEvery interval: Duration = .seconds(1)) -> AccountChanges {
        AccountChanges(store: store, clientID: listedClientID, interval: interval, clock: options.clock)
    }

    // MARK: Silent tokens

    /// Returns a token without user interaction; see ``acquireTokenSilent(_:)``.
    public func acquireTokenSilent(scopes: [String], account: CachedAccount,
                                   forceRefresh: Bool = false) async throws(TokenCacheError) -> TokenResult {
        var parameters = SilentTokenParameters(scopes: scopes, account: account)
        parameters.forceRefresh = forceRefresh
        return try await acquireTokenSilent(parameters)
    }

    /// Returns a token for the scopes without user interaction: a cached access token when one
    /// is usable, otherwise one obtained by redeeming a refresh token (the family's first, then
    /// the app's own), which is saved to the cache.
    ///
    /// Refreshes of one account and client are serialised across processes (of one account and
    /// family when the app redeems a family refresh token, which every app of the family shares),
    /// and the cache is read again after taking the lock, so a rotated refresh token is never
    /// redeemed twice.
    ///
    /// With ``SilentTokenParameters/forceRefresh`` the access token cached when the call starts
    /// is skipped (a token another process obtained while this call waited for the refresh lock
    /// is returned); with ``SilentTokenParameters/claims`` (a claims challenge) the cache is
    /// skipped and the refresh carries the claims, as MSAL does.
    ///
    /// With ``Options/broker`` and a broker that answers, the broker gives the token instead
    /// (nothing of it is saved here).
    ///
    /// - Throws: `TokenCacheError` with code `interactionRequired` (sign in interactively;
    ///   `server` has the error codes and claims challenge), `network` or `serverError` (retry
    ///   later). Nothing is removed from the cache because of an error.
    public func acquireTokenSilent(_ parameters: SilentTokenParameters) async throws(TokenCacheError) -> TokenResult {
        try await TokenEngine(application: self).token(try silentRequest(parameters))
    }

    /// ``acquireTokenSilent(_:)`` for a caller that blocks by contract (the command line), on the calling thread.
    package func blockingTokenSilent(_ parameters: SilentTokenParameters) throws(TokenCacheError) -> TokenResult {
        try TokenEngine(application: self).blockingToken(try silentRequest(parameters))
    }

    /// A silent call for an account already chosen, as the engine takes it.
    private func silentRequest(_ parameters: SilentTokenParameters) throws(TokenCacheError) -> TokenRequest {
        // The agent, the broker (asked by the account's home account ID), the tenant and the refresh are the engine's.
        var request = try silentRequest(scopes: parameters.scopes, account: parameters.account.homeAccountID,
                                        authority: try parameters.resolvedAuthority(default: authority),
                                        forceRefresh: parameters.forceRefresh, claims: parameters.claims)
        request.chosenAccount = parameters.account
        return request
    }

    /// The error for an answer worth retrying later (``TokenRedeemer/transientFailure(_:)``).
    static func transientFailure(_ details: ServerErrorDetails) -> TokenCacheError? {
        TokenRedeemer.transientFailure(details)
    }
}
