import FoundationEssentials
import TokenCacheCore
import TokenCachePipeline
import Logging

/// An app that hosts its own sign-in UI with Microsoft Entra External ID's native
/// authentication (API V1): email + one-time code, email + password, sign-up and self-service
/// password reset. The Linux counterpart of MSAL's `MSALNativeAuthPublicClientApplication`, in
/// Swift's async style: each step returns the next state, whose methods take the next step.
///
/// Tokens are saved to the shared cache as MSAL saves them (home account `uid.utid` from
/// `client_info`, environment the authority's host, realm the tenant ID), so every app of the group, `tokencache
/// list` and MSAL Python see the account. As MSAL does, the app keeps one native-auth account:
/// a new sign-in signs the app out of the previous one.
public final class NativeAuthPublicClientApplication: Sendable {
    /// The ways the app lets users prove who they are; the server answers `redirect`
    /// (``NativeAuthError/Reason/browserRequired``) for a user whose method is not among them.
    public enum ChallengeType: String, Sendable, Hashable, CaseIterable {
        /// A one-time code sent by email.
        case oob
        /// A password.
        case password
    }

    /// The application (client) ID.
    public let clientID: String
    /// `clientID` as checked when the app was created: the client of every request and save.
    let checkedClientID: ClientID
    /// The CIAM authority, for example `https://contoso.ciamlogin.com/contoso.onmicrosoft.com`.
    public let authority: Authority
    /// The ways the app lets users sign in.
    public let challengeTypes: Set<ChallengeType>
    /// The same app for the browser fallback and silent tokens, on the same store.
    public let application: PublicClientApplication
    let api: NativeAuthAPI

    /// Creates the app on a store the caller opened.
    ///
    /// - Parameters:
    ///   - clientID: the app's application (client) ID.
    ///   - authority: `https://{tenant}.ciamlogin.com` (which becomes
    ///     `https://{tenant}.ciamlogin.com/{tenant}.onmicrosoft.com`, as MSAL rewrites it),
    ///     `https://{tenant}.ciamlogin.com/{tenant ID or domain}`, or a custom domain with the tenant in the path.
    ///   - challengeTypes: the methods the app's UI offers; `redirect` is always sent besides.
    ///   - store: the shared cache the tokens are saved to.
    ///   - options: transport, timeouts and the rest, as ``PublicClientApplication/Options``.
    /// - Throws: `invalidArgument` (``NativeAuthError/Reason/tokenCache(_:)``) for a client ID
    ///   `ClientID` refuses, or an authority that is not https (http only on loopback, for tests).
    public convenience init(clientID: String, authority: String, challengeTypes: Set<ChallengeType> = [.oob, .password],
                            store: AccountStore, options: PublicClientApplication.Options = .init()) throws(NativeAuthError) {
        guard !challengeTypes.isEmpty else {
            throw NativeAuthError(TokenCacheError.invalidArgument("challengeTypes", "is empty", hint: "Offer oob, password or both"))
        }
        let checked: ClientID
        do { checked = try ClientID(clientID) } catch { throw NativeAuthError(error) }
        try self.init(clientID: checked, authority: authority, challengeTypes: challengeTypes, store: store, options: options)
    }

    /// The app for a client ID its front end checked (C's `tokencache_native_*`, the CLI); as the
    /// public initializer otherwise. `route` is the pipeline's for the caller: with the token
    /// keeper, the keeper redeems the sign-in's last grant and its silent tokens come from there.
    package init(clientID checked: ClientID, authority: String, challengeTypes: Set<ChallengeType> = [.oob, .password],
                 store: AccountStore, options: PublicClientApplication.Options = .init(), route: EngineRoute = .local) throws(NativeAuthError) {
        guard !challengeTypes.isEmpty else {
            throw NativeAuthError(TokenCacheError.invalidArgument("challengeTypes", "is empty", hint: "Offer oob, password or both"))
        }
        do { self.authority = try Self.authority(authority) } catch { throw NativeAuthError(error) }
        self.clientID = checked.value
        self.checkedClientID = checked
        self.challengeTypes = challengeTypes
        self.application = PublicClientApplication(clientID: checked, authority: self.authority, store: store, options: options, route: route)
        let sent = ChallengeType.allCases.filter(challengeTypes.contains).map(\.rawValue) + ["redirect"]
        self.api = NativeAuthAPI(client: application.client, authority: self.authority, clientID: checked,
                                 challengeTypes: sent.joined(separator: " "), clock: options.clock)
    }

    /// The authority URL, with a bare `https://{tenant}.ciamlogin.com` completed as MSAL completes it.
    static func authority(_ text: String) throws(TokenCacheError) -> Authority {
        let trimmed = text.hasSuffix("/") ? String(text.dropLast()) : text
        if let components = URLComponents(string: trimmed), let host = components.host?.lowercased(),
           host.hasSuffix(".ciamlogin.com"), components.path.isEmpty || components.path == "/" {
            let tenant = host.dropLast(".ciamlogin.com".count)
            return try Authority("\(trimmed)/\(tenant).onmicrosoft.com", kind: .aad)
        }
        return try Authority(trimmed, kind: .aad)
    }

    // MARK: Sign-in

    /// The result of a sign-in step.
    public enum SignInResult: Sendable {
        /// Signed in: the tokens are saved.
        case completed(NativeAuthAccount)
        /// A code was emailed: ask the user for it.
        case codeRequired(SignInCodeRequiredState)
        /// This user signs in with a password: ask for it.
        case passwordRequired(SignInPasswordRequiredState)
    }

    /// Starts signing a user in. With a password, a password user is signed in at once; an
    /// email-code user gets a code (``SignInResult/codeRequired(_:)``) whatever the password.
    ///
    /// - Throws: ``NativeAuthError`` with reason `browserRequired` (call ``signInWithBrowser(_:)``),
    ///   `userNotFound`, `invalidCredentials`, `invalidUsername`, `passwordResetRequired`,
    ///   `notEnabled`, or `tokenCache` (network, cache; `cancelled` or the pool's `overloaded`, as every step).
    public func signIn(username: String, password: String? = nil, scopes: [String]) async throws(NativeAuthError) -> SignInResult {
        try await NativeAuthJob.run { (isCancelled) throws(NativeAuthError) in
            try self.blockingSignIn(username: username, password: password, scopes: scopes, isCancelled: isCancelled)
        }
    }

    /// ``signIn(username:password:scopes:)`` on the calling thread, for callers that block by
    /// contract (C, the command line); so are the `blocking…` steps of every state.
    package func blockingSignIn(username: String, password: String? = nil, scopes: [String],
                                isCancelled: @escaping @Sendable () -> Bool = { false }) throws(NativeAuthError) -> SignInResult {
        let username = try Self.checked(username: username)
        let start = try api.step("/oauth2/v2.0/initiate", ["username": username, "challenge_type": api.challengeTypes], isCancelled: isCancelled)
        return try signInChallenge(try start.continuationToken("initiate"), username: username, password: password, scopes: scopes,
                                   isCancelled: isCancelled)
    }

    /// Asks for the user's challenge (a code is emailed, or a password is due).
    func signInChallenge(_ token: String, username: String, password: String?, scopes: [String],
                         isCancelled: @escaping @Sendable () -> Bool) throws(NativeAuthError) -> SignInResult {
        let answer = try api.step("/oauth2/v2.0/challenge", ["continuation_token": token, "challenge_type": api.challengeTypes],
                                  isCancelled: isCancelled)
        let next = try answer.continuationToken("challenge")
        switch answer["challenge_type"]?.stringValue {
        case "oob"?:
            return .codeRequired(SignInCodeRequiredState(application: self, username: username, scopes: scopes,
                                                         continuationToken: next, challenge: answer))
        case "password"?:
            let state = SignInPasswordRequiredState(application: self, username: username, scopes: scopes, continuationToken: next)
            guard let password else { return .passwordRequired(state) }
            return .completed(try state.blockingSubmitPassword(password, isCancelled: isCancelled))
        default:
            throw NativeAuthError(TokenCacheError.invalidResponse("challenge_type", "is not oob, password or redirect"))
        }
    }

    /// Signs in in the system browser, when a native step threw ``NativeAuthError/Reason/browserRequired``:
    /// the authorization code flow of ``PublicClientApplication/acquireToken(_:)``, saved the same way.
    public func signInWithBrowser(_ parameters: InteractiveTokenParameters) async throws(NativeAuthError) -> NativeAuthAccount {
        try await NativeAuthJob.run { (isCancelled) throws(NativeAuthError) in
            try self.blockingSignInWithBrowser(parameters, isCancelled: isCancelled)
        }
    }

    /// ``signInWithBrowser(_:)`` on the calling thread.
    package func blockingSignInWithBrowser(_ parameters: InteractiveTokenParameters,
                                           isCancelled: @escaping @Sendable () -> Bool = { false }) throws(NativeAuthError) -> NativeAuthAccount {
        let result: TokenResult
        do {
            result = try application.blockingInteractiveSignIn(parameters, isCancelled: isCancelled)
        } catch {
            throw NativeAuthError(error)
        }
        guard let account = result.account else {
            throw NativeAuthError(TokenCacheError.invalidResponse("client_info", "is missing: the sign-in gave no account"))
        }
        do { try keepOnly(account) } catch { throw NativeAuthError(error) }
        return NativeAuthAccount(application: application, account: account, idToken: result.idToken)
    }

    // MARK: Sign-up

    /// The result of a sign-up step.
    public enum SignUpResult: Sendable {
        /// A code was emailed to verify the address: ask the user for it.
        case codeRequired(SignUpCodeRequiredState)
        /// The user flow needs a password (`credential_required`).
        case passwordRequired(SignUpPasswordRequiredState)
        /// The user flow needs these attributes (`attributes_required`).
        case attributesRequired(SignUpAttributesRequiredState)
        /// The account exists: sign the user in with the state, without asking again.
        case completed(SignInAfterFlowState)
    }

    /// Starts signing a user up: with a password for an email + password account, without one
    /// for an email-code account; `attributes` are the user flow's (`displayName`, `extension_…`).
    ///
    /// - Throws: ``NativeAuthError`` with reason `userAlreadyExists`, `passwordPolicy`,
    ///   `attributeValidation`, `invalidUsername`, `browserRequired`, `notEnabled`, `tokenCache`.
    public func signUp(username: String, password: String? = nil, attributes: [String: String] = [:]) async throws(NativeAuthError) -> SignUpResult {
        try await NativeAuthJob.run { (isCancelled) throws(NativeAuthError) in
            try self.blockingSignUp(username: username, password: password, attributes: attributes, isCancelled: isCancelled)
        }
    }

    /// ``signUp(username:password:attributes:)`` on the calling thread.
    package func blockingSignUp(username: String, password: String? = nil, attributes: [String: String] = [:],
                                isCancelled: @escaping @Sendable () -> Bool = { false }) throws(NativeAuthError) -> SignUpResult {
        let username = try Self.checked(username: username)
        var fields = ["username": username, "challenge_type": api.challengeTypes]
        if let password { fields["password"] = password }
        if !attributes.isEmpty { fields["attributes"] = Self.json(attributes) }
        let start = try api.step("/signup/v1.0/start", fields, isCancelled: isCancelled)
        return try signUpChallenge(try start.continuationToken("sign-up start"), username: username, isCancelled: isCancelled)
    }

    func signUpChallenge(_ token: String, username: String, isCancelled: @escaping @Sendable () -> Bool) throws(NativeAuthError) -> SignUpResult {
        let answer = try api.step("/signup/v1.0/challenge", ["continuation_token": token, "challenge_type": api.challengeTypes],
                                  isCancelled: isCancelled)
        let next = try answer.continuationToken("sign-up challenge")
        switch answer["challenge_type"]?.stringValue {
        case "oob"?:
            return .codeRequired(SignUpCodeRequiredState(application: self, username: username, continuationToken: next, challenge: answer))
        case "password"?:
            return .passwordRequired(SignUpPasswordRequiredState(application: self, username: username, continuationToken: next))
        default:
            throw NativeAuthError(TokenCacheError.invalidResponse("challenge_type", "is not oob, password or redirect"))
        }
    }

    /// `/signup/v1.0/continue`, and what its answer asks for next.
    func signUpContinue(_ fields: [String: String], username: String, isCancelled: @escaping @Sendable () -> Bool) throws(NativeAuthError) -> SignUpResult {
        switch try api.call("/signup/v1.0/continue", fields, isCancelled: isCancelled) {
        case .success(let answer):
            return .completed(SignInAfterFlowState(application: self, username: username,
                                                   continuationToken: try answer.continuationToken("sign-up continue")))
        case .redirect:
            throw .browserRequired
        case .failure(let envelope):
            switch (envelope.details.error, envelope.continuationToken) {
            case ("credential_required", let token?):
                return try signUpChallenge(token, username: username, isCancelled: isCancelled)
            case ("attributes_required", let token?):
                return .attributesRequired(SignUpAttributesRequiredState(application: self, username: username, continuationToken: token,
                                                                         requiredAttributes: envelope.requiredAttributes))
            default:
                throw envelope.error
            }
        }
    }

    // MARK: Password reset

    /// Starts a self-service password reset: a code is emailed to the user.
    ///
    /// - Throws: ``NativeAuthError`` with reason `userNotFound`, `userHasNoPassword`,
    ///   `browserRequired`, `invalidUsername`, `notEnabled`, `tokenCache`.
    public func resetPassword(username: String) async throws(NativeAuthError) -> ResetPasswordCodeRequiredState {
        try await NativeAuthJob.run { (isCancelled) throws(NativeAuthError) in try self.blockingResetPassword(username: username, isCancelled: isCancelled) }
    }

    /// ``resetPassword(username:)`` on the calling thread.
    package func blockingResetPassword(username: String, isCancelled: @escaping @Sendable () -> Bool = { false }) throws(NativeAuthError) -> ResetPasswordCodeRequiredState {
        let username = try Self.checked(username: username)
        // A reset proves the user by email code whatever the app's sign-in methods.
        let start = try api.step("/resetpassword/v1.0/start", ["username": username, "challenge_type": "oob redirect"], isCancelled: isCancelled)
        return try resetChallenge(try start.continuationToken("reset start"), username: username, isCancelled: isCancelled)
    }

    func resetChallenge(_ token: String, username: String, isCancelled: @escaping @Sendable () -> Bool) throws(NativeAuthError) -> ResetPasswordCodeRequiredState {
        let answer = try api.step("/resetpassword/v1.0/challenge", ["continuation_token": token, "challenge_type": "oob redirect"],
                                  isCancelled: isCancelled)
        guard answer["challenge_type"]?.stringValue == "oob" else {
            throw NativeAuthError(TokenCacheError.invalidResponse("challenge_type", "is not oob in a password reset"))
        }
        return ResetPasswordCodeRequiredState(application: self, username: username,
                                              continuationToken: try answer.continuationToken("reset challenge"), challenge: answer)
    }

    // MARK: Accounts

    /// The account this app is signed in to, if any (MSAL's `getNativeAuthUserAccount`). Entries
    /// earlier versions saved under the authority's domain path move to the tenant ID first.
    public func currentAccount() async throws(TokenCacheError) -> NativeAuthAccount? {
        try await BlockingWork.run { () throws(TokenCacheError) -> NativeAuthAccount? in
            guard let account = try self.accounts().first(where: { $0.environment == self.authority.environment }) else { return nil }
            return NativeAuthAccount(application: self.application, account: try self.movedToTenant(account), idToken: nil)
        }
    }

    /// The app's accounts, as ``PublicClientApplication/accounts()`` lists them, on the calling thread.
    private func accounts() throws(TokenCacheError) -> [CachedAccount] {
        try TokenEngine(application: application).accounts(clientID: checkedClientID, authority: application.authority)
    }

    /// Ends a sign-in with the grant of its last step: redeemed here and saved to the store, or,
    /// for a user enrolled with the token keeper, redeemed and saved by the keeper (the refresh
    /// token never enters this process; the keeper's refusal is read as the provider's would be).
    func finish(_ grant: [String: String], scopes: [String], isCancelled: @escaping @Sendable () -> Bool) throws(NativeAuthError) -> NativeAuthAccount {
        if let keeper = application.agent, keeper.isKeeper {
            let redemption = KeeperNativeRedemption(group: keeper.group, clientID: checkedClientID, authority: authority, scopes: scopes, grant: grant,
                                                    clientCapabilities: application.options.clientCapabilities)
            do throws(TokenCacheError) {
                let result = try keeper.redeem(redemption)
                guard let account = result.account else { throw TokenCacheError.invalidResponse("account", "is missing from the keeper's answer") }
                return NativeAuthAccount(application: application, account: account, idToken: result.idToken)
            } catch {
                // The provider's refusal, as the keeper relayed it: the same typed reason as here.
                if error.code == .authorizationFailed, let server = error.server { throw NativeAuthError.from(server) }
                throw NativeAuthError(error)
            }
        }
        return try redeemHere(grant, scopes: scopes, isCancelled: isCancelled).account
    }

    /// Redeems a sign-in's last grant at this authority's token endpoint and saves it to this
    /// app's store (what the token keeper runs for an enrolled user's app): the account and the token.
    package func redeemHere(_ grant: [String: String], scopes: [String],
                            isCancelled: @escaping @Sendable () -> Bool) throws(NativeAuthError) -> (account: NativeAuthAccount, token: TokenResult) {
        try complete(try api.token(grant, scopes: scopes, isCancelled: isCancelled), scopes: scopes)
    }

    /// Saves a native sign-in's tokens, as MSAL does: `client_info` is required, the realm is
    /// the tenant ID (`utid`, which MSAL's discovery of the authority resolves a domain to),
    /// and the app keeps only this account.
    func complete(_ response: TokenResponse, scopes: [String]) throws(NativeAuthError) -> (account: NativeAuthAccount, token: TokenResult) {
        do {
            guard let encoded = response.clientInfo, let info = try ClientInfo.parse(encoded) else {
                throw TokenCacheError.invalidResponse("client_info", "is missing; native sign-in requires it")
            }
            let result = try application.blockingSaveSignIn(response, clientID: checkedClientID, authority: try authority.withTenant(info.utid), scopes: scopes)
            guard let saved = result.account else {
                throw TokenCacheError.invalidResponse("id_token", "gave no account record")
            }
            let account = try movedToTenant(saved)
            try keepOnly(account)
            return (NativeAuthAccount(application: application, account: account, idToken: result.idToken), result)
        } catch let error as NativeAuthError {
            throw error
        } catch let error as TokenCacheError {
            throw NativeAuthError(error)
        } catch {
            throw NativeAuthError(TokenCacheError(.invalidTokenResponse, "The sign-in could not be saved."))
        }
    }

    /// Moves what earlier versions saved under the authority's path (`contoso.onmicrosoft.com`)
    /// to the tenant ID, where MSAL looks for it; the account as it then reads.
    private func movedToTenant(_ account: CachedAccount) throws(TokenCacheError) -> CachedAccount {
        guard let tenant = account.homeTenantID, !ASCII.equalsIgnoringCase(tenant, authority.realm) else { return account }
        return try application.store.moveRealm(homeAccountID: account.homeAccountID, environment: account.environment,
                                               clientID: checkedClientID, from: authority.realm, to: tenant) ?? account
    }

    /// Signs the app out of every other account at this authority's host: one native-auth
    /// account per client. Done after saving the new one, so an error loses nothing.
    private func keepOnly(_ account: CachedAccount) throws(TokenCacheError) {
        for other in try accounts() where other.homeAccountID != account.homeAccountID && other.environment == account.environment {
            try application.store.signOut(other, clientID: checkedClientID)
        }
    }

    static func checked(username: String) throws(NativeAuthError) -> String {
        let trimmed = ASCII.trimmed(username)
        guard trimmed.contains("@"), !trimmed.contains(where: \.isWhitespace), trimmed.utf8.count <= 256 else {
            throw NativeAuthError(.invalidUsername, "The username is not an email address.", hint: "Enter the user's email address")
        }
        return trimmed
    }

    static func json(_ attributes: [String: String]) -> String {
        let object = JSONObject(uniqueKeysWithValues: attributes.map { ($0.key, JSONValue.string($0.value)) })
        return (try? JSON.encode(object)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }
}
