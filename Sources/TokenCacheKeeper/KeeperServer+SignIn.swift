import FoundationEssentials
import TokenCache
import TokenCacheCore

// Sign-in through the keeper (#62 item 4, docs/KEEPER.md "Signing in"): the app runs the flow,
// the keeper redeems its last step, so the refresh token never enters the app. The keeper adds
// no account to a group this way, and asks only hosts its group's accounts signed in at: any
// process of the user can start an allowed app with a browser of its own choosing (login
// CSRF), and an app-named host would have root send requests where the app chose (SSRF).

extension KeeperServer {
    /// An app's browser sign-in, finished here (``KeeperCodeRedemption``): the app is authorized
    /// for the group and client as for a token (its apps file entry or its user's consent), the
    /// code is redeemed at the token endpoint the keeper's own discovery of the authority names,
    /// the ID token's nonce is checked, and the tokens are saved to the caller's uid's store. The
    /// answer carries the access token, ID token and account; the refresh token stays here. The
    /// code, verifier and nonce are never logged.
    func redeem(_ message: Data, group named: String?, from caller: KeeperCaller) -> AgentProtocol.Response {
        let redemption = try? JSONDecoder().decode(KeeperCodeRedemption.self, from: message)
        return signIn(redemption.map { SignInRequest($0.clientID, $0.authority, $0.authorityType, $0.scopes, $0.clientCapabilities) },
                      op: KeeperCodeRedemption.operation, named: named, caller: caller,
                      malformed: "is not a sign-in to redeem (client_id, authority, scopes, code, redirect_uri, code_verifier, nonce)",
                      validate: { () throws(TokenCacheError) in try redemption?.check() }) { app, client, authority throws(TokenCacheError) in
            guard let redemption else { throw TokenCacheError.invalidArgument("request", "is not a sign-in to redeem") }
            return try app.blockingRedeem(redemption, clientID: client, authority: authority)
        }
    }

    /// A device code sign-in run here for an app (``KeeperDeviceCodeSignIn``), authorized as a
    /// token is: the keeper asks the authority for the code, sends the app what to show the user
    /// (`interim`: the user code and where to enter it, never the device code), polls, saves the
    /// tokens to the caller's uid's store and answers with the access token, ID token and account.
    /// The caller hanging up (`hungUp`) ends the polling; nothing is saved then. The wait is
    /// bounded (the app's timeout, else ``KeeperDeviceCodeSignIn/defaultTimeoutSeconds``) whatever the authority says.
    func deviceCodeSignIn(_ message: Data, group named: String?, from caller: KeeperCaller,
                          interim: @escaping (AgentProtocol.Response) -> Bool, hungUp: @escaping @Sendable () -> Bool) -> AgentProtocol.Response {
        let request = try? JSONDecoder().decode(KeeperDeviceCodeSignIn.self, from: message)
        return signIn(request.map { SignInRequest($0.clientID, $0.authority, $0.authorityType, $0.scopes, $0.clientCapabilities) },
                      op: KeeperDeviceCodeSignIn.operation, named: named, caller: caller,
                      malformed: "is not a device code sign-in (client_id, authority, scopes)",
                      validate: { () throws(TokenCacheError) in
            if let timeout = request?.timeoutSeconds, !(1...KeeperDeviceCodeSignIn.maximumTimeoutSeconds).contains(timeout) {
                throw TokenCacheError.invalidArgument("timeout_seconds", "is not from 1 to \(KeeperDeviceCodeSignIn.maximumTimeoutSeconds)")
            }
        }) { app, _, _ throws(TokenCacheError) in
            guard let request else { throw TokenCacheError.invalidArgument("request", "is not a device code sign-in") }
            var parameters = DeviceCodeParameters(scopes: request.scopes)
            parameters.claims = request.claims
            parameters.timeout = TimeInterval(request.timeoutSeconds ?? KeeperDeviceCodeSignIn.defaultTimeoutSeconds)
            return try app.blockingDeviceCodeSignIn(parameters, onCode: { code in
                _ = interim(AgentProtocol.Response(deviceCode: code.wire))
            }, isCancelled: hungUp)
        }
    }

    /// A native authentication sign-in's last grant (``KeeperNativeRedemption``), redeemed here
    /// for an app authorized as for a token, and saved as a native sign-in is (the tenant's realm,
    /// one account per client at the host). The provider's refusal goes back with its server
    /// details, so the app reads the same typed reason (a wrong code, an expired flow) as when it
    /// redeems itself. The grant's secrets are never logged.
    func redeemNative(_ message: Data, group named: String?, from caller: KeeperCaller) -> AgentProtocol.Response {
        let redemption = try? JSONDecoder().decode(KeeperNativeRedemption.self, from: message)
        let grantType = redemption?.grant["grant_type"].map { KeeperAudit.printable($0) } ?? "-"
        return signIn(redemption.map { SignInRequest($0.clientID, $0.authority, nil, $0.scopes, $0.clientCapabilities) },
                      op: "\(KeeperNativeRedemption.operation) \(grantType)", named: named, caller: caller,
                      malformed: "is not a native sign-in to redeem (client_id, authority, scopes, grant)",
                      validate: { () throws(TokenCacheError) in try redemption?.check() }) { app, client, _ throws(TokenCacheError) in
            guard let redemption else { throw TokenCacheError.invalidArgument("request", "is not a native sign-in to redeem") }
            do throws(NativeAuthError) {
                let native = try NativeAuthPublicClientApplication(clientID: client, authority: redemption.authority, store: app.store, options: app.options)
                return try native.redeemHere(redemption.grant, scopes: redemption.scopes, isCancelled: { false }).token
            } catch {
                if case .tokenCache(let underlying) = error.reason { throw underlying }
                throw TokenCacheError(.authorizationFailed, error.message, hint: error.hint, server: error.server)
            }
        }
    }

    /// What every sign-in op names: the app's client, the authority and its kind, the scopes and
    /// client capabilities.
    struct SignInRequest {
        var clientID: String
        var authority: String
        var authorityType: String?
        var scopes: [String]
        var clientCapabilities: [String]?

        init(_ clientID: String, _ authority: String, _ authorityType: String?, _ scopes: [String], _ clientCapabilities: [String]?) {
            (self.clientID, self.authority, self.authorityType, self.scopes, self.clientCapabilities) = (clientID, authority, authorityType, scopes, clientCapabilities)
        }
    }

    /// Runs one sign-in op: checks and authorizes what `request` names, confines the sign-in to
    /// the group's hosts and accounts (``confined(_:authority:capabilities:)``), runs `body` with
    /// an app on the caller's store, audits the outcome and answers with the token, ID token and account.
    private func signIn(_ request: SignInRequest?, op: String, named: String?, caller: KeeperCaller, malformed: String,
                        validate: () throws(TokenCacheError) -> Void = {},
                        _ body: (PublicClientApplication, ClientID, Authority) throws(TokenCacheError) -> TokenResult) -> AgentProtocol.Response {
        let logged = request.map { AgentProtocol.Request(operation: .token, clientID: $0.clientID, scopes: $0.scopes, authority: $0.authority) }
        let host = request.flatMap { try? Authority($0.authority).environment }.map { " at \(KeeperAudit.printable($0))" } ?? ""
        do throws(TokenCacheError) {
            guard let request else { throw TokenCacheError.invalidArgument("request", malformed, hint: "See docs/KEEPER.md, \"Signing in\"") }
            guard !request.scopes.isEmpty else { throw TokenCacheError.invalidArgument("scopes", "is empty", hint: "Name at least one scope") }
            let (client, authority, store, options) = try signInTarget(clientID: request.clientID, authority: request.authority, type: request.authorityType,
                                                                       capabilities: request.clientCapabilities ?? [], named: named, caller: caller,
                                                                       validate: validate)
            let result = try body(PublicClientApplication(clientID: client, authority: authority, store: store, options: options), client, authority)
            guard let account = result.account else { throw TokenCacheError.invalidResponse("id_token", "names no account") }
            decided(caller, op: op, group: store.group.name, request: logged, outcome: "granted: signed in \(account.username) (\(account.homeAccountID))\(host)")
            return AgentProtocol.Response(token: AgentProtocol.Token(forBroker: result, account: account))
        } catch {
            decided(caller, op: op, group: named, request: logged, outcome: "\(error.code == .accessDenied ? "refused" : "failed"): \(error.code) \(error.message)\(host)")
            return AgentProtocol.Response(error)
        }
    }

    /// What a sign-in op or `sign-in-check` names, checked (`validate`: the op's own fields, before
    /// authorization) and authorized: the client, the authority of its kind, the caller's store
    /// and the keeper's options confining the sign-in to it (``confined(_:authority:capabilities:)``).
    func signInTarget(clientID: String, authority text: String, type: String?, capabilities: [String], named: String?, caller: KeeperCaller,
                      validate: () throws(TokenCacheError) -> Void = {}) throws(TokenCacheError)
        -> (ClientID, Authority, AccountStore, PublicClientApplication.Options) {
        let client = try ClientID(required: clientID, field: "client_id")
        let kind = try type.map { (type) throws(TokenCacheError) in
            guard let kind = Authority.Kind(rawValue: type) else { throw TokenCacheError.invalidArgument("authority_type", "is not aad, b2c, adfs or oidc") }
            return kind
        }
        let authority = try Authority(text, kind: kind)
        try validate()
        let (store, _) = try authorize(caller, group: named, client: client)
        return (client, authority, store, try confined(store, authority: authority, capabilities: capabilities))
    }

    /// The keeper's options for a sign-in into `store` at `authority`: refused before any request
    /// unless one of the group's accounts signed in at that host, and saving only an account the
    /// group holds already at it, with an ID token (so its nonce was checked). A new account comes
    /// in through enrolment, which asks the user's password.
    func confined(_ store: AccountStore, authority: Authority, capabilities: [String]) throws(TokenCacheError) -> PublicClientApplication.Options {
        // Accounts name their host without a port: another port is another service (loopback aside, where tests run their providers).
        if let port = authority.url.port, port != 443, !Authority.isLoopback(authority.url.host ?? "") {
            throw KeeperProtocol.refused("the authority names port \(port): the keeper signs in only at the standard https port", hint: "Name the authority without a port")
        }
        let accounts = try store.inventory().accounts
        let host = Environment.canonical(authority.environment)
        let known = Set(accounts.filter { Environment.canonical($0.environment) == host }.map(\.homeAccountID))
        let addHint = "To add an account, sign in to a local cache (`tokencache login --backend file …`) and move it to the keeper with `tokencache keeper --enroll`, which asks your password"
        guard !known.isEmpty else {
            throw KeeperProtocol.refused("none of group \(store.group.name)'s accounts signed in at \(authority.environment), and a sign-in through the keeper adds no account",
                                         hint: addHint)
        }
        var options = self.options
        options.clientCapabilities = capabilities
        let group = store.group.name
        options.admitsSignIn = { response, clientID, authority, scopes throws(TokenCacheError) in
            guard response.idToken != nil else { throw TokenCacheError.invalidResponse("id_token", "is missing: the sign-in cannot be checked") }
            let entities = try ResponseEntities(response: response, clientID: clientID, authority: authority, scopes: scopes, knownHomeAccountID: nil, now: Date())
            guard let home = entities.homeAccountID, known.contains(home) else {
                throw KeeperProtocol.refused("the account signed in is not one of group \(group)'s at \(authority.environment), and a sign-in through the keeper adds no account (nothing was saved)",
                                             hint: addHint)
            }
        }
        return options
    }
}
