import FoundationEssentials
import SecretServiceStore
import TokenCacheCore
import TokenCachePipeline

/// The engine's seams (``EngineServices``) as the façade fills them for an app's options: apps
/// that redeem are `PublicClientApplication`s (with other tools' stores), the identity broker is
/// asked on the session bus by ``PublicClientApplication/Options/broker``, and the opted-in
/// single sign-on stores are read through one Secret Service connection, opened once.
struct ApplicationServices: EngineServices {
    /// Transport, timeouts, broker use and single sign-on stores of the apps the engine redeems with.
    let options: PublicClientApplication.Options
    /// The Swift app the engine was built for, if any: the apps made for its client and
    /// capabilities are it at another authority (``PublicClientApplication/redeeming(at:)``).
    private let app: PublicClientApplication?
    /// The Secret Service connection the single sign-on stores' keyring items are read through
    /// when no app lists them (an account listing without an authority): opened once.
    private let storesKeyring = Locked<SecretServiceBackend?>(nil)

    init(options: PublicClientApplication.Options, app: PublicClientApplication? = nil) {
        self.options = options
        self.app = app
    }

    var clientCapabilities: [String] { options.clientCapabilities }
    var brokerUse: BrokerUse { options.broker }
    var hasSingleSignOnStores: Bool { !options.singleSignOnStores.isEmpty }

    func application(clientID: ClientID, authority: Authority, capabilities: [String], store: AccountStore) -> any RedeemingApplication {
        if let app, app.listedClientID == clientID, app.options.clientCapabilities == capabilities, app.store === store {
            return app.redeeming(at: authority)
        }
        var options = options
        options.clientCapabilities = capabilities
        return PublicClientApplication(clientID: clientID, authority: authority, store: store, options: options)
    }

    func brokerOnBus() throws(TokenCacheError) -> BrokerOnBus {
        try BrokerClient.onBus()
    }

    func singleSignOnAccounts(group: AccountStore, clientID: ClientID, excluding known: [CachedAccount]) throws(TokenCacheError) -> [CachedAccount] {
        let stores = SingleSignOnStores(options.singleSignOnStores, group: group, clientID: clientID) { [options, storesKeyring] in
            storesKeyring.withLock { (opened: inout SecretServiceBackend?) -> SecretServiceBackend? in
                if opened == nil { opened = try? SecretServiceBackend(options: options.secretService) }
                return opened
            }
        }
        return try stores.accounts(excluding: known, redeemableAt: nil)
    }
}

/// The engines the façade and its front ends (C, the CLI, the servers) build: on a Swift app's
/// options, with ``ApplicationServices`` as their seams.
extension TokenEngine {
    /// An engine on `store`, unless `agent` is given: then the agent answers.
    package convenience init(store: AccountStore, agent: AgentClient? = nil, options: PublicClientApplication.Options = .init()) {
        self.init(store: store, agent: agent, services: ApplicationServices(options: options))
    }

    /// An engine on `store`, or on the agent `route` names (the store kept for sign-in).
    package convenience init(store: AccountStore, route: EngineRoute, options: PublicClientApplication.Options = .init()) {
        self.init(store: store, route: route, services: ApplicationServices(options: options))
    }

    /// The engine of a Swift app: its agent or store, redeeming with the app itself at its authority.
    convenience init(application app: PublicClientApplication) {
        self.init(store: app.store, agent: app.agent, services: ApplicationServices(options: app.options, app: app))
        // An app whose client ID was refused redeems nothing: its requests throw before they get here.
        if let clientID = app.listedClientID {
            keep(app, clientID: clientID, authority: app.authority, capabilities: app.options.clientCapabilities)
        }
    }

    /// The engine for a caller: on the agent `route` names, else on the store `open` opens
    /// (called only then, so an agent's user needs no local cache).
    package static func open(_ route: EngineRoute, options: PublicClientApplication.Options = .init(),
                             store open: () throws -> AccountStore) rethrows -> TokenEngine {
        switch route {
        case .agent(let agent): TokenEngine(agent: agent, services: ApplicationServices(options: .init()))
        case .local: TokenEngine(store: try open(), options: options)
        }
    }

    /// The app that redeems (or signs in) for `clientID` at `authority`, on this engine's local
    /// store and options (``redeemingApplication(clientID:authority:capabilities:)``).
    /// - Precondition: the engine has a local store, and was built by the façade (its apps are
    ///   `PublicClientApplication`s).
    package func application(clientID: ClientID, authority: Authority, capabilities: [String] = []) -> PublicClientApplication {
        guard let app = redeemingApplication(clientID: clientID, authority: authority, capabilities: capabilities) as? PublicClientApplication else {
            preconditionFailure("an engine the façade built redeems with PublicClientApplication (ApplicationServices)")
        }
        // The engine's route holds for its sign-ins too: the keeper redeems an enrolled user's.
        guard case .agent(let agent) = source else { return app }
        return app.routed(to: agent)
    }
}

/// A Swift app as the engine redeems with it.
extension PublicClientApplication: RedeemingApplication {
    /// Whether ``Options/singleSignOnStores`` lists any store.
    package var hasSingleSignOnStores: Bool { !options.singleSignOnStores.isEmpty }

    /// The pipeline's refresh of this app's tokens (``TokenEngine/redeem(_:with:)`` drives it).
    package var tokenRedeemer: TokenRedeemer {
        get throws(TokenCacheError) { try redeemer.get() }
    }

    /// The redemption from ``Options/singleSignOnStores``, which the pipeline does not import.
    package var singleSignOn: TokenRedeemer.SingleSignOn? {
        guard hasSingleSignOnStores, let clientID = listedClientID else { return nil }
        return { [self] (scopes, account, authority, claims, isCancelled) throws(TokenCacheError) -> TokenResult? in
            try refreshFromSingleSignOnStores(clientID, scopes: scopes, account: account, authority: authority, claims: claims,
                                              isCancelled: isCancelled)
        }
    }
}
