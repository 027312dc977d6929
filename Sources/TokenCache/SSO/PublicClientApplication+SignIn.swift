import FoundationEssentials
import TokenCacheCore
import TokenCachePipeline
import TokenCachePlatform
import Logging

extension PublicClientApplication {
    /// Signs the user in with the system browser: the authorization code flow with PKCE (S256)
    /// and a loopback redirect (RFC 8252), as MSAL Python and MSAL.NET do on desktops.
    ///
    /// A one-shot listener on 127.0.0.1 and ::1 (the same port on both; an ephemeral one unless
    /// ``InteractiveTokenParameters/redirectPort`` says otherwise) receives the redirect to
    /// `http://localhost:<port>`. The browser is given only a start page at a random path on that listener,
    /// which redirects to the authorization URL; the listener answers only connections of this
    /// process's user, answers a redirect whose `state` is missing or wrong with 400 and keeps
    /// waiting, and ends at the redirect with this sign-in's `state`. The code is redeemed at the
    /// token endpoint with the PKCE verifier, the ID token's `nonce` is checked, and the result is
    /// saved to the shared cache, so every app of the group sees the account. The redirect URI
    /// `http://localhost` must be registered for the app (Entra ID accepts any port on it).
    ///
    /// - Throws: `TokenCacheError` with code `cancelled` (the user cancelled, or the task was
    ///   cancelled), `accessDenied`, `authorizationFailed` (the authority's error; `server` has
    ///   it), `interactionRequired` (`prompt` `none` and the user would have to act),
    ///   `stateMismatch` (field `nonce`: the ID token's nonce is not this sign-in's), `timedOut`
    ///   (no answer within ``InteractiveTokenParameters/timeout``; the message counts forged
    ///   answers refused), `portUnavailable`, `browserUnavailable`, `unsupportedFlow`, `network`,
    ///   `serverError`. Nothing is saved on an error.
    public func acquireToken(_ parameters: InteractiveTokenParameters) async throws(TokenCacheError) -> TokenResult {
        try await TokenRedeemer.cancellably { (isCancelled) throws(TokenCacheError) in
            try self.blockingInteractiveSignIn(parameters, isCancelled: isCancelled)
        }
    }

    /// ``acquireToken(_:)`` for a caller that blocks by contract (C, the command line): discovery,
    /// the browser, the listener's wait, the redemption and the save run on the calling thread;
    /// one watcher on the blocking pool keeps the timeout on the app's clock. `isCancelled` ends
    /// the sign-in as cancelling the task does. An app's own async `BrowserOpener.custom` is bridged.
    package func blockingInteractiveSignIn(_ parameters: InteractiveTokenParameters,
                                           isCancelled: @escaping @Sendable () -> Bool = { false }) throws(TokenCacheError) -> TokenResult {
        let clientID = try checkedClientID.get()
        let authority = parameters.authority ?? self.authority
        // The keeper would refuse the code of an app it does not allow, or of a host its group never
        // signed in at: asked before anything is sent to the authority or the user signs in.
        if let keeper = agent, keeper.isKeeper { try keeper.checkSignIn(clientID: clientID, authority: authority) }
        let endpoints = try client.endpointsBlocking(for: authority, cancelled: isCancelled)
        guard let authorizationEndpoint = endpoints.authorization else {
            throw TokenCacheError(.unsupportedFlow, "OpenID discovery for \(authority) gave no usable authorization_endpoint.",
                                  hint: "Check the authority URL; the endpoint must be https on the authority's host")
        }
        let pkce = try PKCE.make()
        let state = PKCE.randomState(), nonce = PKCE.randomState()
        let listener = try LoopbackListener(port: parameters.redirectPort)
        defer { listener.close() }
        // localhost, as MSAL Python sends: Entra matches it against the registered http://localhost
        // with any port; the listener holds both addresses it resolves to (127.0.0.1 and ::1).
        let redirectURI = "http://localhost:\(listener.port)"
        let url = try AuthorizationRequest.url(endpoint: authorizationEndpoint, clientID: clientID, redirectURI: redirectURI,
                                               state: state, challenge: pkce.challenge, nonce: nonce, parameters: parameters,
                                               claims: try client.claimsParameter(parameters.claims))
        // The browser gets only this page, which redirects this user's browser to `url`: the
        // state, challenge and nonce stay out of every process's arguments.
        let startPath = "/start/" + PKCE.randomState()
        guard let startURL = URL(string: redirectURI + startPath) else { throw AuthorizationRequest.cancelled }
        let logger = store.options.logger
        logger.debug("Interactive sign-in: waiting for the redirect", metadata: [
            "port": .stringConvertible(listener.port), "addresses": .string(listener.addresses.joined(separator: " ")),
            "authority": .string(authority.description)])

        // The timeout on the app's clock, counted from the listener's start, watched beside this
        // thread's wait (which hears the caller's cancellation itself, whatever the clock).
        let ended = Locked(false)
        let clock = options.clock, timeout = Duration.milliseconds(Int64(max(parameters.timeout, 0) * 1000))
        try BlockingPool.shared.submit("interactive sign-in timeout") {
            let stop: @Sendable () -> Bool = { ended.withLock { $0 } || isCancelled() }
            let slept = clock.sleepBlocking(for: timeout, isCancelled: stop)
            if ended.withLock({ $0 }) { return }
            if slept { listener.timeOut() } else { listener.cancel() }
        }
        defer { ended.withLock { $0 = true } }
        if isCancelled() { throw AuthorizationRequest.cancelled }
        do {
            try parameters.browser.openBlocking(startURL, isCancelled: isCancelled)
        } catch {
            if isCancelled() { throw AuthorizationRequest.cancelled }
            if let error = error as? TokenCacheError { throw error }
            throw TokenCacheError(.browserUnavailable, "The browser could not be opened: \(ServerText.printable(String(describing: error), limit: 200)).",
                                  hint: "Check the BrowserOpener, or sign in with the device code flow")
        }
        let expectation = LoopbackListener.Expectation(path: "/", state: state, start: (startPath, url.absoluteString))
        let outcome = listener.waitForRedirectHere(expectation, isCancelled: isCancelled) { query in
            query["code"] != nil ? AuthorizationRequest.successPage : AuthorizationRequest.failurePage
        }
        let query: [String: String]
        switch outcome {
        case .redirect(let received): query = received
        case .cancelled: throw AuthorizationRequest.cancelled
        case .timedOut:
            throw TokenCacheError(.timedOut, "No sign-in arrived within \(Int(parameters.timeout)) s\(AuthorizationRequest.describe(listener.refusals.withLock { $0 })); nothing was saved.",
                                  hint: "Finish signing in in the browser sooner, or raise InteractiveTokenParameters.timeout",
                                  reason: .signInTimedOut)
        case .failed(let reason):
            throw TokenCacheError(.portUnavailable, "The loopback listener failed: \(reason).", hint: "Retry the sign-in")
        }
        if let error = query["error"] {
            throw AuthorizationRequest.redirectError(error, subcode: query["error_subcode"], description: query["error_description"])
        }
        guard let code = query["code"], !code.isEmpty else {
            throw TokenCacheError(.authorizationFailed, "The sign-in redirect carried no code.", hint: "Start the sign-in again")
        }
        let redemption = KeeperCodeRedemption(group: agent?.group, clientID: clientID, authority: authority, scopes: parameters.scopes, code: code,
                                              redirectURI: redirectURI, codeVerifier: pkce.verifier, nonce: nonce, claims: parameters.claims,
                                              clientCapabilities: options.clientCapabilities)
        // An enrolled user's keeper redeems: the refresh token stays there, out of this process.
        if let keeper = agent, keeper.isKeeper { return try keeper.redeem(redemption) }
        return try blockingRedeem(redemption, clientID: clientID, authority: authority, tokenEndpoint: endpoints.token, isCancelled: isCancelled)
    }

    /// Redeems a browser sign-in's authorization code at `authority`'s token endpoint (discovered
    /// here when `tokenEndpoint` is nil), checks the ID token's nonce and saves the result to this
    /// app's store: the last step of ``blockingInteractiveSignIn(_:isCancelled:)``, and what the
    /// token keeper does with an enrolled user's app's code (``KeeperCodeRedemption``).
    /// - Throws: `authorizationFailed` (the code refused), `stateMismatch` (field `nonce`),
    ///   `network`, `serverError`. Nothing is saved on an error.
    package func blockingRedeem(_ redemption: KeeperCodeRedemption, clientID: ClientID, authority: Authority, tokenEndpoint: URL? = nil,
                                isCancelled: @escaping @Sendable () -> Bool = { false }) throws(TokenCacheError) -> TokenResult {
        let endpoint: URL
        if let tokenEndpoint { endpoint = tokenEndpoint } else { endpoint = try client.endpointsBlocking(for: authority, cancelled: isCancelled).token }
        let redeemed = try client.redeemBlocking(grant: redemption.grant, clientID: clientID, scopes: redemption.scopes, at: endpoint,
                                                 isMicrosoft: authority.kind != .oidc, cancelled: isCancelled)
        switch redeemed {
        case .tokens(let response):
            try AuthorizationRequest.checkNonce(response, redemption.nonce)
            return try blockingSaveSignIn(response, clientID: clientID,
                                          authority: try TokenEngine.blockingSignInAuthority(for: authority, discoveringWith: client),
                                          scopes: redemption.scopes)
        case .rejected(let details):
            throw SignInErrors.rejected(details, what: "authorization code")
        }
    }

    /// Signs the user in with a code entered on another device (RFC 8628): for SSH sessions,
    /// containers and machines with no browser.
    ///
    /// `onCode` receives what to show the user (``DeviceCodeMessage/message``); the call then
    /// polls the token endpoint at the authority's interval (longer after `slow_down`) until the
    /// user finishes, and saves the result to the shared cache. Entra ID's device endpoint is
    /// `<authority>/oauth2/v2.0/devicecode` when discovery does not name one; other
    /// authorities must name it in discovery.
    ///
    /// - Throws: `TokenCacheError` with code `accessDenied` (the user declined), `timedOut`
    ///   (the code expired, or ``DeviceCodeParameters/timeout`` passed: reason `deviceCodeTimedOut`), `cancelled` (the task was cancelled), `unsupportedFlow` (no device
    ///   authorization endpoint, as on some AD FS versions), `authorizationFailed`, `network`,
    ///   `serverError`. Nothing is saved on an error.
    public func acquireTokenWithDeviceCode(_ parameters: DeviceCodeParameters,
                                           onCode: @escaping @Sendable (DeviceCodeMessage) -> Void) async throws(TokenCacheError) -> TokenResult {
        try await TokenRedeemer.cancellably { (isCancelled) throws(TokenCacheError) in
            try self.blockingDeviceCodeSignIn(parameters, onCode: onCode, isCancelled: isCancelled)
        }
    }

    /// ``acquireTokenWithDeviceCode(_:onCode:)`` for a caller that blocks by contract (C, the
    /// command line): the requests, the waits between polls and the save run on the calling
    /// thread, and `onCode` is called on it. `isCancelled` ends the wait as cancelling the task does.
    package func blockingDeviceCodeSignIn(_ parameters: DeviceCodeParameters, onCode: (DeviceCodeMessage) -> Void,
                                          isCancelled: @escaping @Sendable () -> Bool = { false }) throws(TokenCacheError) -> TokenResult {
        let clientID = try checkedClientID.get()
        let authority = parameters.authority ?? self.authority
        if let keeper = agent, keeper.isKeeper {
            // The keeper polls: the token endpoint's answer, with the refresh token, never reaches this process.
            let request = KeeperDeviceCodeSignIn(group: keeper.group, clientID: clientID, authority: authority, scopes: parameters.scopes,
                                                 claims: parameters.claims, timeoutSeconds: parameters.timeout.map { Int(min(max($0, 1), 86_400).rounded(.up)) },
                                                 clientCapabilities: options.clientCapabilities)
            return try keeper.deviceCodeSignIn(request, onCode: { onCode(DeviceCodeMessage($0)) }, isCancelled: isCancelled)
        }
        let endpoints = try client.endpointsBlocking(for: authority, cancelled: isCancelled)
        let fallback = authority.kind == .aad ? URL(string: authority.url.absoluteString + "/oauth2/v2.0/devicecode") : nil
        guard let deviceEndpoint = endpoints.deviceAuthorization ?? fallback else {
            throw TokenCacheError(.unsupportedFlow, "\(authority) offers no device code sign-in (its discovery names no device_authorization_endpoint).",
                                  hint: authority.kind == .adfs ? "AD FS before 2019 has no device code flow: use acquireToken (browser) instead"
                                      : "Use acquireToken (browser sign-in) with this authority",
                                  reason: .deviceCodeUnsupported(adfs: authority.kind == .adfs))
        }
        var flow = DeviceCodeFlow(client: client, clientID: clientID, scopes: parameters.scopes, isMicrosoft: authority.kind != .oidc,
                                  clock: options.clock)
        flow.timeout = parameters.timeout.map { .milliseconds(Int64(max($0, 0) * 1000)) }
        let authorization = try flow.start(at: deviceEndpoint, claims: parameters.claims, isCancelled: isCancelled)
        onCode(authorization.message)
        let response = try flow.poll(authorization, tokenEndpoint: endpoints.token, claims: parameters.claims, isCancelled: isCancelled)
        return try blockingSaveSignIn(response, clientID: clientID,
                                      authority: try TokenEngine.blockingSignInAuthority(for: authority, discoveringWith: client), scopes: parameters.scopes)
    }

    /// Saves a sign-in's tokens for this app (off the cooperative pool): every app of the group
    /// then sees the account, and its refresh token is redeemable only at the authority's host.
    func saveSignIn(_ response: TokenResponse, clientID: ClientID, authority: Authority, scopes: [String]) async throws(TokenCacheError) -> TokenResult {
        try await BlockingWork.run(cancellable: false) { [self] () throws(TokenCacheError) in
            try blockingSaveSignIn(response, clientID: clientID, authority: authority, scopes: scopes)
        }
    }

    /// ``saveSignIn(_:clientID:authority:scopes:)`` on the calling thread.
    func blockingSaveSignIn(_ response: TokenResponse, clientID: ClientID, authority: Authority, scopes: [String]) throws(TokenCacheError) -> TokenResult {
        if let type = response.tokenType, !ASCII.equalsIgnoringCase(type, "Bearer") {
            throw TokenCacheError.invalidResponse("token_type", "is not Bearer, though a Bearer token was requested")
        }
        try options.admitsSignIn?(response, clientID, authority, scopes)
        return try store.save(response, clientID: clientID, authority: authority, scopes: scopes, homeAccountID: nil)
    }
}

/// The authorization request of the browser flow and the pages served back.
enum AuthorizationRequest {
    /// Parameters the flow sets itself; extra query parameters cannot replace them.
    static let reserved: Set<String> = ["client_id", "response_type", "redirect_uri", "scope", "state", "code_challenge",
                                        "code_challenge_method", "nonce", "prompt", "login_hint", "domain_hint", "claims"]

    static func url(endpoint: URL, clientID: ClientID, redirectURI: String, state: String, challenge: String, nonce: String,
                    parameters: InteractiveTokenParameters, claims: String? = nil) throws(TokenCacheError) -> URL {
        if let clash = parameters.extraQueryParameters.keys.sorted().first(where: { reserved.contains($0.lowercased()) }) {
            throw TokenCacheError.invalidArgument("extraQueryParameters", "'\(clash)' is set by the sign-in itself",
                                                  hint: "Use the matching InteractiveTokenParameters property instead")
        }
        let scopes = parameters.scopes + parameters.extraScopesToConsent + ["openid", "profile", "offline_access"]
        var fields: [(String, String)] = [
            ("client_id", clientID.value), ("response_type", "code"), ("redirect_uri", redirectURI),
            ("scope", scopes.joined(separator: " ")), ("state", state),
            ("code_challenge", challenge), ("code_challenge_method", "S256"),
            // OIDC Core 3.1.2.1: the scope has openid, so the ID token must carry this nonce back.
            ("nonce", nonce),
        ]
        if let prompt = parameters.prompt { fields.append(("prompt", prompt.rawValue)) }
        if let hint = parameters.loginHint { fields.append(("login_hint", hint)) }
        if let hint = parameters.domainHint { fields.append(("domain_hint", hint)) }
        if let claims { fields.append(("claims", claims)) }
        fields += parameters.extraQueryParameters.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        // Appended to any query the endpoint has (B2C's `p=<policy>`).
        let query = fields.map { "\(ASCII.percentEncoded($0.0))=\(ASCII.percentEncoded($0.1))" }.joined(separator: "&")
        let base = endpoint.absoluteString
        guard let url = URL(string: base + (base.contains("?") ? "&" : "?") + query) else {
            throw TokenCacheError.invalidArgument("authority", "its authorization endpoint gives no URL")
        }
        return url
    }

    /// The ID token's `nonce` must be the one sent (OIDC Core 3.1.3.7): else the code was not
    /// issued for this sign-in. A response without an ID token has nothing to check.
    static func checkNonce(_ response: TokenResponse, _ nonce: String) throws(TokenCacheError) {
        guard let idToken = response.idToken else { return }
        guard try IDTokenClaims(jwt: idToken).all["nonce"]?.stringValue == nonce else {
            throw TokenCacheError(.stateMismatch, "The ID token's nonce is not the one this sign-in sent: the code was issued for another sign-in; nothing was saved.",
                                  hint: "Start the sign-in again; if it repeats, another program may be answering on the loopback port", field: "nonce")
        }
    }

    /// What the listener refused, for a timeout's message (empty when nothing was).
    static func describe(_ refusals: LoopbackListener.Refusals) -> String {
        var parts: [String] = []
        if refusals.wrongState > 0 { parts.append("\(refusals.wrongState) redirect(s) with a state other than this sign-in's were refused") }
        if refusals.otherUser > 0 { parts.append("\(refusals.otherUser) connection(s) from another user were refused") }
        return parts.isEmpty ? "" : " (" + parts.joined(separator: "; ") + ")"
    }

    static let cancelled = TokenCacheError(.cancelled, "The sign-in was cancelled; nothing was saved.",
                                           hint: "Start the sign-in again when the user is ready")

    /// The authority's error redirect as an error. Its text is the server's: kept to its own
    /// characters in the message, and in `server` with control characters removed.
    static func redirectError(_ error: String, subcode: String?, description: String?) -> TokenCacheError {
        let details = ServerErrorDetails(error: ServerText.errorCode(error), suberror: subcode.map(ServerText.errorCode),
                                         errorDescription: description.map { ServerText.printable($0) }, httpStatus: 302)
        switch (details.error, details.suberror) {
        case ("access_denied", "cancel"):
            return TokenCacheError(.cancelled, "The user cancelled the sign-in; nothing was saved.",
                                   hint: "Start the sign-in again when the user is ready", server: details)
        case ("access_denied", _):
            return TokenCacheError(.accessDenied, "The sign-in was denied (access_denied); nothing was saved.",
                                   hint: "The user or an administrator declined: check consent and the user's access to the app", server: details)
        case ("interaction_required", _), ("login_required", _), ("consent_required", _):
            return TokenCacheError(.interactionRequired, "The authority needs the user to act (\(details.error)), which prompt none forbids.",
                                   hint: "Sign in again without prompt none", server: details)
        default:
            return TokenCacheError(.authorizationFailed, "The authority refused the sign-in (\(details.error)); nothing was saved.",
                                   hint: "Check the app registration (client ID, redirect URI http://localhost, scopes)", server: details)
        }
    }

    static let successPage = LoopbackListener.Page(status: 200, html: page(
        title: "Signed in", text: "You are signed in. You can close this window and go back to the application."))
    static let failurePage = LoopbackListener.Page(status: 200, html: page(
        title: "Sign-in failed", text: "The sign-in did not complete. Go back to the application for details."))

    /// A fixed page: nothing from the request is echoed into it.
    private static func page(title: String, text: String) -> String {
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>\(title)</title></head>"
            + "<body style=\"font-family:sans-serif;margin:3em\"><h1>\(title)</h1><p>\(text)</p></body></html>"
    }
}
