import FoundationEssentials
import TokenCacheCore
import TokenCachePlatform

/// The one place that decides what a ``TokenRequest`` gets: the token agent or the local store,
/// which account (named, or the client's only one; one name at hosts of two clouds is never
/// guessed), which cloud and tenant, whether a refresh token is redeemed and from which single
/// sign-on stores. Swift apps (the façade's `PublicClientApplication`), the C interface (and
/// Python through it) and the CLI call it and translate arguments and errors only, so they
/// answer alike. What lives above the pipeline (the apps that redeem, the identity broker, the
/// single sign-on stores' keyring) it reaches through ``EngineServices``, which the façade gives.
package final class TokenEngine: Sendable {
    /// Where answers come from: the token agent, or a store (the group's, or another tool's, read only).
    package enum Source: Sendable {
        case agent(AgentClient)
        case store(AccountStore)
    }
    package let source: Source
    /// The local store, also when the agent answers token requests: sign-in (C's
    /// `tokencache_sign_in_*` on a default store) still saves here. Nil only on an engine
    /// ``init(agent:services:)`` made, which opens no store.
    private let localStore: AccountStore?
    /// What the engine opens or makes through the façade: the apps that redeem, the broker, the
    /// single sign-on stores.
    package let services: any EngineServices
    /// The apps per client and authority: made once, so their endpoints are discovered once.
    private let applications = Locked<[String: any RedeemingApplication]>([:])

    /// An engine on `store`, unless `agent` is given: then the agent answers.
    package init(store: AccountStore, agent: AgentClient?, services: any EngineServices) {
        source = agent.map(Source.agent) ?? .store(store)
        localStore = store
        self.services = services
    }

    /// An engine on `store`, or on the agent when `route` names it: the store is kept for
    /// sign-in either way (C's `tokencache_sign_in_*` on a default store saves there).
    package convenience init(store: AccountStore, route: EngineRoute, services: any EngineServices) {
        self.init(store: store, agent: route.agent, services: services)
    }

    /// An engine on the agent alone: it opens no store, and signs nobody in.
    package init(agent: AgentClient, services: any EngineServices) {
        source = .agent(agent)
        localStore = nil
        self.services = services
    }

    /// Keeps `app` as the one that redeems for `clientID` at `authority` with `capabilities`
    /// (a Swift app's engine redeems with the app itself).
    package func keep(_ app: any RedeemingApplication, clientID: ClientID, authority: Authority, capabilities: [String]) {
        applications.withLock { $0[Self.key(clientID, authority, capabilities)] = app }
    }

    private static func key(_ clientID: ClientID, _ authority: Authority, _ capabilities: [String]) -> String {
        clientID.value.lowercased() + " " + authority.url.absoluteString + " " + capabilities.joined(separator: ",")
    }

    /// The agent `TOKENCACHE_AGENT_SOCK` names, or the keeper this user enrolled with, unless the
    /// caller chose a local cache (``CacheChoice/isLocal``): the rule every front end follows, for
    /// tokens and account lists alike (``EngineRoute/discoveredAgent``).
    package static func agent(for choice: CacheChoice) -> AgentClient? {
        choice.isLocal ? nil : EngineRoute.discoveredAgent
    }

    /// The app that redeems (or signs in) for `clientID` at `authority`, on this engine's local
    /// store, made through ``EngineServices/application(clientID:authority:capabilities:store:)`` once.
    /// - Precondition: the engine has a local store (every engine but one opened on the agent alone).
    package func redeemingApplication(clientID: ClientID, authority: Authority, capabilities: [String] = []) -> any RedeemingApplication {
        guard let store = localStore else { preconditionFailure("an engine opened on the agent alone has no store to sign in to") }
        let key = Self.key(clientID, authority, capabilities)
        return applications.withLock { applications in
            if let kept = applications[key] { return kept }
            let app = services.application(clientID: clientID, authority: authority, capabilities: capabilities, store: store)
            applications[key] = app
            return app
        }
    }

    // MARK: The token

    /// What a request needs once everything local is decided: ``decide(_:)``'s answer.
    package enum Decision: Sendable {
        /// A cached token that serves as it is.
        case cached(TokenResult)
        /// A refresh: the app redeems at its authority (the token endpoint, under the refresh lock).
        case redeem(any RedeemingApplication, TokenRefresh)
        /// The agent answers: it chooses the account and refreshes on its side.
        case agent(AgentClient)
        /// The identity broker answers, for its account chosen by the cache's rule, at this
        /// authority (``decide(_:through:)``): the call, made on the caller's thread.
        case broker(@Sendable (TokenRequest) throws(TokenCacheError) -> TokenResult)
    }

    /// The one decision, synchronously on the caller's thread: agent or broker, which account,
    /// the cached token when it serves, else whether and where a refresh token is redeemed. It
    /// reads the store (and the broker's accounts on the session bus) and sends nothing to an
    /// identity provider. C and the CLI call it on their own thread (``blockingToken(_:)``),
    /// ``token(_:)`` in one ``BlockingWork`` job.
    /// - Throws: as ``token(_:)``, but nothing the network step throws.
    package func decide(_ request: TokenRequest) throws(TokenCacheError) -> Decision {
        if case .agent(let agent) = source { return .agent(agent) }
        if let broker = try brokerNow() { return try decide(request, through: broker) }
        // The tenant is resolved there: the account is chosen by its cloud, which a domain shares with its tenant ID.
        if let held = request.chosenAccount { return try decide(request, for: held) }
        return try decide(request, for: try blockingAccount(for: request))
    }

    /// The decision for an account already chosen (``account(for:allowing:)``): its cached access
    /// token, or a refresh at the request's authority when it is missing or stale (and the
    /// request lets it). An engine on the agent: the agent chooses and answers.
    package func decide(_ request: TokenRequest, for account: CachedAccount) throws(TokenCacheError) -> Decision {
        let store: AccountStore
        switch source {
        case .agent(let agent): return .agent(agent)
        case .store(let local): store = local
        }
        let named = request.authority
        let request = try keyedByTenant(request)
        var account = account
        if let named, let keyed = request.authority, request.redeemsRefreshTokens,
           !ASCII.equalsIgnoringCase(named.realm, keyed.realm),
           account.tenants.contains(where: { ASCII.equalsIgnoringCase($0, named.realm) }) {
            // Records saved at the domain's realm (by an earlier version) move to the tenant ID, where MSAL looks.
            account = try store.moveRealm(homeAccountID: account.homeAccountID, environment: account.environment,
                                          clientID: request.clientID, from: named.realm, to: keyed.realm) ?? account
        }
        let cached = try Self.cachedToken(request, account: account, in: store)
        let app = redeemer(for: request, account: account, cached: cached,
                                       origin: request.authority == nil ? try store.origin(of: account) : nil)
        if let app, request.forceRefresh || request.claims != nil || cached?.needsRefresh() ?? true {
            var parameters = TokenRefresh(scopes: request.scopes, account: account)
            parameters.forceRefresh = request.forceRefresh
            parameters.claims = request.claims
            return .redeem(app, parameters)
        }
        if request.claims != nil {
            // The resource refused the cached token: serving it again would only be refused again.
            throw TokenCacheError(.notFound, "A claims challenge needs a refresh, and no authority to redeem at is known for client \(request.clientID).",
                                  hint: "Give an authority to redeem the cached refresh token with the claims",
                                  reason: .noUsableToken(refreshable: true))
        }
        if let cached { return .cached(cached) }
        let refreshable = !(try store.refreshTokens(clientID: request.clientID, account: account).isEmpty)
        throw TokenCacheError(.notFound, "No usable cached access token for client \(request.clientID) and scopes \"\(request.scopes.joined(separator: " "))\".",
                              hint: refreshable ? "Give an authority to redeem the cached refresh token (no sign-in needed)" : "Sign the user in",
                              reason: .noUsableToken(refreshable: refreshable))
    }

    /// What is left of a decision once its blocking calls ran: the token, or a refresh to run.
    package enum Outcome: Sendable {
        case token(TokenResult)
        case refresh(any RedeemingApplication, TokenRefresh)
    }

    /// The decision carried out as far as it goes without the token endpoint: the cached token,
    /// or the agent's or the broker's answer (blocking calls on a local socket or the session bus).
    package func outcome(of decision: Decision, for request: TokenRequest) throws(TokenCacheError) -> Outcome {
        switch decision {
        case .cached(let result): return .token(result)
        case .redeem(let app, let parameters): return .refresh(app, parameters)
        case .agent(let agent): return .token(try Self.agentToken(from: agent, request))
        case .broker(let ask): return .token(try ask(request))
        }
    }

    /// The token the request asks for: from the agent when there is one; otherwise the chosen
    /// account's cached access token, refreshed at the request's authority when it is missing
    /// or stale (and the request lets it). One ``BlockingWork`` job decides (and asks the agent
    /// or the broker) and carries out a refresh.
    /// - Throws: `notFound` (reason `TokenCacheError.Reason.noAccount` or
    ///   `TokenCacheError.Reason.noUsableToken(refreshable:)`), `ambiguousAccount` (reason
    ///   `TokenCacheError.Reason.severalAccounts(accounts:)`,
    ///   `TokenCacheError.Reason.accountInSeveralClouds(hosts:)` or
    ///   `TokenCacheError.Reason.tokensInSeveralTenants(tenants:)`), and what the refresh throws.
    package func token(_ request: TokenRequest) async throws(TokenCacheError) -> TokenResult {
        try await token(request, decidedBy: { () throws(TokenCacheError) in try self.decide(request) })
    }

    /// The token of an account already chosen (``account(for:allowing:)``), as ``token(_:)``.
    package func token(_ request: TokenRequest, for account: CachedAccount) async throws(TokenCacheError) -> TokenResult {
        try await token(request, decidedBy: { () throws(TokenCacheError) in try self.decide(request, for: account) })
    }

    /// A decision made and carried out, a refresh included, in one ``BlockingWork`` job
    /// (``blockingToken(_:)``'s path); cancelling the task ends a wait for another process's
    /// refresh and aborts a request whose answer has not begun, never a save.
    package func token(_ request: TokenRequest,
               decidedBy decide: @escaping @Sendable () throws(TokenCacheError) -> Decision) async throws(TokenCacheError) -> TokenResult {
        try await TokenRedeemer.cancellably { (isCancelled) throws(TokenCacheError) in
            try self.carryOut(try self.outcome(of: try decide(), for: request), isCancelled: isCancelled)
        }
    }

    /// ``token(_:)`` for a caller that blocks by contract (C, the CLI): decided and carried out on
    /// the calling thread, so a cached token, the agent's or the broker's crosses no thread, and a
    /// refresh with libcurl's transport neither (the store, the lock's wait and the requests).
    /// `isCancelled` is asked as ``token(_:)``'s cancellation is (a lock wait, a request whose answer has not begun).
    package func blockingToken(_ request: TokenRequest,
                               isCancelled: @escaping @Sendable () -> Bool = { false }) throws(TokenCacheError) -> TokenResult {
        try carryOut(try outcome(of: try decide(request), for: request), isCancelled: isCancelled)
    }

    /// ``token(_:for:)`` for a caller that blocks by contract (a server's connection thread), as ``blockingToken(_:)``.
    package func blockingToken(_ request: TokenRequest, for account: CachedAccount) throws(TokenCacheError) -> TokenResult {
        try carryOut(try outcome(of: try decide(request, for: account), for: request), isCancelled: { false })
    }

    /// A decision's outcome: its token, or the refresh it named.
    private func carryOut(_ outcome: Outcome, isCancelled: @escaping @Sendable () -> Bool) throws(TokenCacheError) -> TokenResult {
        switch outcome {
        case .token(let result): return result
        case .refresh(let app, let parameters): return try redeem(parameters, with: app, isCancelled: isCancelled)
        }
    }

    /// The refresh a decision named, at the app's authority (the tenant ``keyedByTenant(_:)``
    /// resolved), on the calling thread: the app's ``TokenRedeemer`` reads again, locks, redeems
    /// (the group's refresh tokens, then the app's single sign-on stores') and saves.
    /// - Throws: `interactionRequired`, `network`, `serverError`, `cancelled`, and what saving throws.
    package func redeem(_ refresh: TokenRefresh, with app: any RedeemingApplication,
                        isCancelled: @escaping @Sendable () -> Bool = { false }) throws(TokenCacheError) -> TokenResult {
        // A claims challenge skips the cached token as a forced refresh does (MSAL's WithClaims).
        try app.tokenRedeemer.blockingToken(scopes: refresh.scopes, account: refresh.account, authority: app.authority,
                                            forceRefresh: refresh.forceRefresh || refresh.claims != nil, claims: refresh.claims,
                                            singleSignOn: app.singleSignOn, isCancelled: isCancelled)
    }

    /// The app a request redeems with, when it lets it: at the request's authority; without one,
    /// at the tenant of the cached token it replaces, else at the account's home authority (its
    /// host and home tenant, where its refresh token was issued; Microsoft Entra accounts only:
    /// another kind's authority cannot be rebuilt from the account).
    private func redeemer(for request: TokenRequest, account: CachedAccount? = nil,
                          cached: TokenResult? = nil, origin: String? = nil) -> (any RedeemingApplication)? {
        guard request.redeemsRefreshTokens else { return nil }
        if let authority = request.authority {
            return redeemingApplication(clientID: request.clientID, authority: authority, capabilities: request.clientCapabilities)
        }
        guard let account, account.authorityType == "MSSTS",
              let tenant = cached?.tenantID ?? account.homeTenantID,
              let home = Self.homeAuthority(of: account, tenant: tenant, origin: origin) else { return nil }
        return redeemingApplication(clientID: request.clientID, authority: home, capabilities: request.clientCapabilities)
    }

    /// The account's own authority for `tenant`: at its host, on the port and scheme it was saved
    /// from (`origin`, a loopback provider's) when that names the same host, else https there.
    package static func homeAuthority(of account: CachedAccount, tenant: String, origin: String?) -> Authority? {
        if let origin, let home = try? Authority("\(origin)/\(tenant)"), home.environment == account.environment.lowercased() {
            return home
        }
        return try? Authority("https://\(account.environment)/\(tenant)")
    }

    /// The account's usable cached token at the request's authority; without one, the token of
    /// the only tenant that has one (several: which is meant is not guessed, as MSAL asks for an authority).
    private static func cachedToken(_ request: TokenRequest, account: CachedAccount, in store: AccountStore) throws(TokenCacheError) -> TokenResult? {
        if let found = try store.accessToken(clientID: request.clientID, account: account, scopes: request.scopes, authority: request.authority) {
            return found
        }
        guard request.authority == nil else { return nil }
        let byTenant = try store.accessTokensByTenant(clientID: request.clientID, account: account, scopes: request.scopes)
        if byTenant.count > 1 {
            let tenants = byTenant.compactMap(\.tenantID)
            throw TokenCacheError(.ambiguousAccount, "Client \(request.clientID) has usable tokens for these scopes in \(byTenant.count) tenants: \(tenants.joined(separator: ", ")).",
                                  hint: "Name the tenant with an authority (https://HOST/TENANT)", reason: .tokensInSeveralTenants(tenants: tenants))
        }
        if let only = byTenant.first {
            store.options.logger.info("Using the token of tenant \(only.tenantID ?? "?"), the only tenant with one for these scopes")
        }
        return byTenant.first
    }

    // MARK: The tenant

    /// Whether `authority` names its tenant by a domain (`contoso.onmicrosoft.com`) that only
    /// OpenID discovery resolves: a Microsoft Entra authority (External ID's `ciamlogin.com` too)
    /// whose tenant is neither a tenant ID (a GUID) nor `common`, `organizations` or `consumers`,
    /// which Entra's discovery answers under the same name. B2C, AD FS and other OpenID
    /// providers keep the tenant as named, as MSAL does. A domain has a dot: a name without one
    /// (`contoso`, as MSAL SDKs' own cache samples file tokens) is no Entra tenant identifier
    /// and is looked up as named, without a network request.
    package static func namesTenantByDomain(_ authority: Authority) -> Bool {
        authority.kind == .aad && !AccountStore.genericRealms.contains(ASCII.lowercased(authority.realm))
            && UUID(uuidString: authority.realm) == nil && authority.realm.contains(".")
    }

    /// The authority tokens from `authority` are found and saved under, as MSAL files them: MSAL
    /// takes the realm from the tenant of the discovered token endpoint, and Entra's discovery of
    /// a domain (`/contoso.onmicrosoft.com/v2.0/.well-known/openid-configuration`) names the
    /// tenant ID's endpoints (`/TENANT-ID/oauth2/v2.0/token`). An authority that does not name
    /// its tenant by domain (``namesTenantByDomain(_:)``) is its own.
    package static func tenantAuthority(of authority: Authority, tokenEndpoint: URL) -> Authority {
        guard namesTenantByDomain(authority),
              let tenant = tokenEndpoint.path.split(separator: "/").first.map(String.init),
              !ASCII.equalsIgnoringCase(tenant, authority.realm),
              let resolved = try? authority.withTenant(tenant) else { return authority }
        return resolved
    }

    /// ``tenantAuthority(of:tokenEndpoint:)`` with the token endpoint `client` discovers (once per
    /// client: its discovery is cached); `client` then knows the tenant ID's endpoints too, so
    /// nothing is discovered twice. Nothing is sent for an authority not named by domain.
    /// - Throws: what discovery throws (`network`, reason `tokenEndpointNotFound(authority:)`…).
    package static func tenantAuthority(of authority: Authority, discoveringWith client: TokenEndpointClient) async throws(TokenCacheError) -> Authority {
        guard namesTenantByDomain(authority) else { return authority }
        let endpoints = try await client.endpoints(for: authority)
        let resolved = tenantAuthority(of: authority, tokenEndpoint: endpoints.token)
        client.remember(endpoints, for: resolved)
        return resolved
    }

    /// ``tenantAuthority(of:discoveringWith:)`` on the caller's thread, for blocking callers
    /// (``TokenEndpointClient/endpointsBlocking(for:)``).
    package static func tenantAuthority(of authority: Authority, discoveringBlockingWith client: TokenEndpointClient) throws(TokenCacheError) -> Authority {
        guard namesTenantByDomain(authority) else { return authority }
        let endpoints = try client.endpointsBlocking(for: authority)
        let resolved = tenantAuthority(of: authority, tokenEndpoint: endpoints.token)
        client.remember(endpoints, for: resolved)
        return resolved
    }

    /// The request at the authority its tokens are filed under (``tenantAuthority(of:tokenEndpoint:)``),
    /// on the caller's thread. Discovery is asked once per app, and only by a request that may
    /// send one (that may redeem): one that may not uses what this process discovered already,
    /// else looks at the authority as named.
    package func keyedByTenant(_ request: TokenRequest) throws(TokenCacheError) -> TokenRequest {
        guard let named = request.authority, Self.namesTenantByDomain(named), localStore != nil else { return request }
        let app = redeemingApplication(clientID: request.clientID, authority: named, capabilities: request.clientCapabilities)
        let resolved: Authority
        if request.redeemsRefreshTokens {
            // Decided on a blocking thread (C's, the CLI's, or the Swift app's one pool job): discovery runs there too.
            resolved = try Self.tenantAuthority(of: named, discoveringBlockingWith: app.client)
        } else if let known = app.client.knownEndpoints(for: named) {
            resolved = Self.tenantAuthority(of: named, tokenEndpoint: known.token)
        } else {
            return request
        }
        if let endpoints = app.client.knownEndpoints(for: named) {
            // The app that redeems at the tenant ID: its endpoints are the ones just discovered.
            redeemingApplication(clientID: request.clientID, authority: resolved, capabilities: request.clientCapabilities)
                .client.remember(endpoints, for: resolved)
        }
        var keyed = request
        keyed.authority = resolved
        return keyed
    }

    /// The authority a sign-in at `authority` saves its account and tokens under (MSAL's realm:
    /// the tenant of the discovered token endpoint, ``tenantAuthority(of:tokenEndpoint:)``), by
    /// `client`'s discovery (cached: a sign-in has discovered already). `client` then knows the
    /// tenant ID's endpoints too, so a later silent call discovers nothing.
    /// - Throws: what discovery throws (`network`, reason `tokenEndpointNotFound(authority:)`…).
    package static func signInAuthority(for authority: Authority, discoveringWith client: TokenEndpointClient) async throws(TokenCacheError) -> Authority {
        try await tenantAuthority(of: authority, discoveringWith: client)
    }

    /// ``signInAuthority(for:discoveringWith:)`` on the caller's thread.
    package static func blockingSignInAuthority(for authority: Authority, discoveringWith client: TokenEndpointClient) throws(TokenCacheError) -> Authority {
        try tenantAuthority(of: authority, discoveringBlockingWith: client)
    }

    // MARK: The account

    /// The account named `username` (case-insensitive) among those `clientID` can use (the
    /// listing of ``accounts(clientID:authority:)``: agent, broker, store and single sign-on
    /// stores alike), chosen by the rule of ``choose(among:for:in:)``; nil when there is none
    /// (MSAL's `account(forUsername:)`). Off the cooperative pool.
    /// - Throws: `ambiguousAccount` for one account at hosts of two clouds; what listing throws.
    package func account(forUsername username: String, clientID: ClientID, authority: Authority?) async throws(TokenCacheError) -> CachedAccount? {
        try await BlockingWork.run { () throws(TokenCacheError) -> CachedAccount? in
            let candidates = try self.accounts(clientID: clientID, authority: authority)
                .filter { AccountName.matches(username, username: $0.username, homeAccountID: nil) }
            let request = TokenRequest(clientID: clientID, scopes: [], account: username, authority: authority)
            do throws(TokenCacheError) {
                return try Self.choose(among: candidates, for: request, in: self.localStore)
            } catch where error.reason == .noAccount {
                return nil
            }
        }
    }

    /// The account a request is for: among the client's accounts (with single sign-on stores,
    /// theirs too) in the authority's cloud when it has one there, the one named, or the only one.
    /// A named account the client has not signed out of also qualifies without a refresh token of
    /// its own (its cached access token may serve, as MSAL Python finds it).
    /// `allowed` narrows the candidates first (the agent's policy). On the agent: the accounts it serves.
    package func account(for request: TokenRequest,
                         allowing allowed: @escaping @Sendable (CachedAccount) -> Bool = { _ in true }) async throws(TokenCacheError) -> CachedAccount {
        try await BlockingWork.run { () throws(TokenCacheError) in try self.blockingAccount(for: request, allowing: allowed) }
    }

    /// ``account(for:allowing:)`` on the caller's thread, for callers that block by contract (C,
    /// the command line, a server's connection thread).
    package func blockingAccount(for request: TokenRequest,
                       allowing allowed: (CachedAccount) -> Bool = { _ in true }) throws(TokenCacheError) -> CachedAccount {
        let store: AccountStore
        switch source {
        case .agent(let agent):
            return try Self.choose(among: try Self.accounts(from: agent, clientID: request.clientID).filter(allowed), for: request, in: nil)
        case .store(let local): store = local
        }
        let app = redeemer(for: request)
        let candidates = if let app, app.hasSingleSignOnStores {
            try app.accountsHere()
        } else {
            try store.accounts(clientID: request.clientID)
        }
        return try Self.choose(among: candidates.filter(allowed), for: request, in: store)
    }

    /// The rule itself, on candidates already read; `store` (when there is one) also finds a named
    /// account that is not among them.
    package static func choose(among candidates: [CachedAccount], for request: TokenRequest,
                       in store: AccountStore?) throws(TokenCacheError) -> CachedAccount {
        // An account is a home account ID in one cloud: the authority picks the cloud. At another
        // cloud the account is still found (and then refused a token there, saying why).
        let cloud = request.authority.map { Environment.canonical($0.environment) }
        let inCloud = cloud.map { cloud in candidates.filter { Environment.canonical($0.environment) == cloud } } ?? []
        let inScope = inCloud.isEmpty ? candidates : inCloud
        var chosen = inScope
        if let name = request.account {
            chosen = inScope.filter { AccountName.matches(name, $0) }
            if chosen.isEmpty, let store, let named = try namedAccount(name, authority: request.authority, in: store),
               try store.signInState(of: named, clientID: request.clientID) != .signedOut {
                chosen = [named]
            }
        }
        if chosen.count > 1, Set(chosen.map(\.homeAccountID)).count == 1 {
            // One home account ID at hosts of two clouds: never guessed (another host may have planted one).
            throw AccountStore.ambiguous(chosen[0].username.isEmpty ? chosen[0].homeAccountID : chosen[0].username, chosen)
        }
        if chosen.count > 1 {
            let listing = chosen.map { "\($0.username) (\($0.homeAccountID))" }
            throw TokenCacheError(.ambiguousAccount, "Client \(request.clientID) has \(chosen.count) accounts\(request.account.map { " named '\($0)'" } ?? "").",
                                  hint: "Name one by username or home account ID: \(listing.joined(separator: ", "))",
                                  reason: .severalAccounts(accounts: listing))
        }
        guard let account = chosen.first else {
            throw TokenCacheError(.notFound, "No account of client \(request.clientID)\(request.account.map { " matches '\($0)'" } ?? "")\(store.map { " in group \($0.group)" } ?? "").",
                                  hint: "Sign the user in with this client", reason: .noAccount)
        }
        return account
    }

    /// Any account of the group with this name, in the authority's cloud first.
    private static func namedAccount(_ name: String, authority: Authority?, in store: AccountStore) throws(TokenCacheError) -> CachedAccount? {
        if let inCloud = try store.account(name, authority: authority) { return inCloud }
        return authority == nil ? nil : try store.account(name)
    }

    // MARK: Accounts

    /// The accounts a client can use, from whoever answers its token requests (the one decision
    /// of ``decide(_:)``): the agent's (those its policy lets this client use), else the
    /// identity broker's when the app uses one and one answers, else the store's (MSAL's
    /// `allAccounts`) followed by those of the single sign-on stores whose refresh token the
    /// client could redeem at `authority` (nil: where it was issued). A nil `clientID` lists every
    /// account of the group (on the agent: every account its policy shows).
    /// - Throws: what the agent, the broker or the store throws (`agentUnavailable`, `keyringLocked`…).
    package func accounts(clientID: ClientID?, authority: Authority? = nil) throws(TokenCacheError) -> [CachedAccount] {
        let store: AccountStore
        switch source {
        case .agent(let agent): return try Self.accounts(from: agent, clientID: clientID)
        case .store(let local): store = local
        }
        guard let clientID else { return try store.allAccounts() }
        if let broker = try brokerNow() { return try broker.cachedAccounts(clientID: clientID) }
        let own = try store.accounts(clientID: clientID)
        guard services.hasSingleSignOnStores else { return own }
        if let authority {
            return own + (try redeemingApplication(clientID: clientID, authority: authority, capabilities: services.clientCapabilities)
                .singleSignOnAccounts(clientID, excluding: own))
        }
        return own + (try services.singleSignOnAccounts(group: store, clientID: clientID, excluding: own))
    }

    // MARK: The agent

    /// A token from the agent, which chooses and refreshes on its side: nothing of this
    /// process's cache is read or written, and only the access token crosses the socket.
    package static func token(from agent: AgentClient, _ request: TokenRequest) async throws(TokenCacheError) -> TokenResult {
        try await BlockingWork.run { () throws(TokenCacheError) in try agentToken(from: agent, request) }
    }

    /// ``token(from:_:)`` on the caller's thread (a blocking call on the agent's socket).
    package static func agentToken(from agent: AgentClient, _ request: TokenRequest) throws(TokenCacheError) -> TokenResult {
        let token = try agent.token(clientID: request.clientID, scopes: request.scopes, account: request.account,
                                    authority: request.authority?.url.absoluteString, forceRefresh: request.forceRefresh,
                                    claims: request.claims, clientCapabilities: request.clientCapabilities)
        let account = token.homeAccountID.map {
            CachedAccount(homeAccountID: $0, environment: request.authority?.environment ?? "", username: token.username ?? "")
        }
        return TokenResult(accessToken: token.accessToken, authenticationScheme: token.tokenType,
                           expiresOn: Date(timeIntervalSince1970: TimeInterval(token.expiresOn)),
                           refreshOn: token.refreshOn.map { Date(timeIntervalSince1970: TimeInterval($0)) },
                           tenantID: token.tenantID, scopes: token.scopes, account: account, cachedAt: nil, isFromCache: false)
    }

    /// The accounts the agent lets this client use (nil: every account it shows), as accounts.
    package static func accounts(from agent: AgentClient, clientID: ClientID?) throws(TokenCacheError) -> [CachedAccount] {
        try agent.inventory(clientID: clientID).accounts.map {
            CachedAccount(homeAccountID: $0.homeAccountID, environment: $0.environment, username: $0.username)
        }
    }
}
