import FoundationEssentials
import EncryptedFileStore
import SecretServiceStore
import TokenCacheCore
import TokenCachePlatform
import Logging

/// A public client app (desktop app or command-line tool) that gets tokens silently from the
/// shared cache, redeeming refresh tokens at the token endpoint when needed: the Linux
/// counterpart of MSAL's `acquireTokenSilent`.
///
/// An app that never signed in gets single sign-on through the family refresh token another
/// app of the same family saved.
public final class PublicClientApplication: Sendable {
    /// Tunable behaviour.
    public struct Options: Sendable {
        /// Bound on each HTTP request, in seconds.
        public var requestTimeout: TimeInterval = 30
        /// Bound on waiting for another process's refresh of the same account, in seconds.
        public var refreshLockTimeout: TimeInterval = 60
        /// The HTTP stack.
        public var transport: any HTTPTransport = CurlTransport()

        public init() {}
    }

    /// The application (client) ID.
    public let clientID: String
    /// The authority tokens come from.
    public let authority: Authority
    /// The shared cache.
    public let store: AccountStore
    let client: TokenEndpointClient
    let options: Options

    /// Creates the app.
    public init(clientID: String, authority: Authority, store: AccountStore, options: Options = Options()) {
        self.clientID = clientID
        self.authority = authority
        self.store = store
        self.options = options
        self.client = TokenEndpointClient(transport: options.transport, timeout: options.requestTimeout,
                                          logger: store.options.logger)
    }

    /// Creates the app from a (plugin-generated) configuration.
    public convenience init(configuration: AppConfiguration, store: AccountStore, options: Options = Options()) throws(TokenCacheError) {
        try configuration.validate()
        self.init(clientID: configuration.clientID, authority: try configuration.parsedAuthority, store: store, options: options)
    }

    /// Accounts this app can use silently.
    public func accounts() throws(TokenCacheError) -> [CachedAccount] {
        try store.accounts(clientID: clientID)
    }

    /// Signs this app out of an account; other apps stay signed in.
    public func signOut(_ account: CachedAccount) throws(TokenCacheError) {
        try store.signOut(account, clientID: clientID)
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
    /// - Parameter forceRefresh: skip the access token cached when the call starts; a token
    ///   another process obtained while this call waited for the refresh lock is returned.
    /// - Throws: ``TokenCacheError`` with code `interactionRequired` (sign in interactively;
    ///   `server` has the error codes and claims challenge), `network` or `serverError` (retry
    ///   later). Nothing is removed from the cache because of an error.
    public func acquireTokenSilent(scopes: [String], account: CachedAccount,
                                   forceRefresh: Bool = false) async throws(TokenCacheError) -> TokenResult {
        let before = try await cachedToken(scopes: scopes, account: account)
        if !forceRefresh, let before, !before.needsRefresh() {
            return before
        }
        let lockName = try await BlockingWork.run { [self] () throws(TokenCacheError) in try refreshLockName(for: account) }
        let lock = try await RefreshLock.acquire(name: lockName, timeout: options.refreshLockTimeout)
        defer { withExtendedLifetime(lock) {} }

        // Another process may have refreshed while we waited for the lock. With forceRefresh only
        // a token other than the one seen before waiting will do: cached_at has whole seconds, so
        // it cannot tell a token saved just before this call from one saved just after.
        let cached = try await cachedToken(scopes: scopes, account: account)
        if let cached, !cached.needsRefresh(), !forceRefresh || cached.accessToken != before?.accessToken {
            return cached
        }
        do {
            return try await refresh(scopes: scopes, account: account)
        } catch let error where error.code == .network || error.code == .serverError {
            // A token past refresh_on still works: serve it rather than fail on a transient error.
            if let cached, !forceRefresh {
                store.options.logger.debug("Refresh failed transiently; returning the cached token", metadata: ["code": "\(error.code)"])
                return cached
            }
            throw error
        }
    }

    /// The usable cached access token, read off the cooperative pool (the read may wait on D-Bus or a file).
    private func cachedToken(scopes: [String], account: CachedAccount) async throws(TokenCacheError) -> TokenResult? {
        try await BlockingWork.run { [self] () throws(TokenCacheError) in
            try store.accessToken(clientID: clientID, account: account, scopes: scopes, authority: authority)
        }
    }

    /// The refresh lock's name: group, account, and whose refresh token the app redeems — its
    /// family's (shared by every app of the family, so they must wait for each other) or its own
    /// (so apps with their own tokens refresh in parallel).
    private func refreshLockName(for account: CachedAccount) throws(TokenCacheError) -> String {
        let owner = try redeemableRefreshTokens(for: account).first?.familyID
            .map { "family:\($0)" } ?? "client:\(clientID.lowercased())"
        return "\(store.group.name)|\(account.homeAccountID)|\(Environment.canonical(authority.environment))|\(owner)"
    }

    /// The refresh tokens this app may send to its authority for the account: only those issued
    /// by the authority's host or, for Microsoft Entra, a host of the same cloud. The lock name
    /// and the redemption loop both read them, so both follow the same rule.
    private func redeemableRefreshTokens(for account: CachedAccount) throws(TokenCacheError) -> [RefreshToken] {
        try store.refreshTokens(clientID: clientID, account: account, redeemableAt: authority)
    }

    /// Bound on redemptions per refresh: each cached refresh token once, and a token another
    /// process rotated meanwhile once more.
    private static let maximumRedemptions = 8

    private func refresh(scopes: [String], account: CachedAccount) async throws(TokenCacheError) -> TokenResult {
        // Checked before any request: a refresh token goes only to the host that issued it.
        if try await BlockingWork.run({ [self] () throws(TokenCacheError) in try redeemableRefreshTokens(for: account).isEmpty }) {
            let others = try await BlockingWork.run { [self] () throws(TokenCacheError) in
                try store.refreshTokens(clientID: clientID, account: account)
            }
            throw Self.noRedeemableToken(account: account, authority: authority, others: others)
        }
        let endpoint = try await client.tokenEndpoint(for: authority)
        var lastRejection: ServerErrorDetails?
        // Secrets, not keys: when another SDK (which does not take our lock) rotated a token under
        // the same key meanwhile, the new secret is worth a try.
        var tried = Set<String>()
        while tried.count < Self.maximumRedemptions, let refreshToken = try await BlockingWork.run({ [self, tried] () throws(TokenCacheError) in
            try redeemableRefreshTokens(for: account).first { !tried.contains($0.secret) }
        }) {
            tried.insert(refreshToken.secret)
            let outcome = try await client.redeem(refreshToken: refreshToken.secret, clientID: clientID, scopes: scopes,
                                                  at: endpoint, isMicrosoft: authority.kind != .oidc)
            switch outcome {
            case .tokens(let response):
                if let type = response.tokenType, !ASCII.equalsIgnoringCase(type, "Bearer") {
                    throw TokenCacheError.invalidResponse("token_type", "is not Bearer, though a Bearer token was requested")
                }
                // The response must be the account's own (else userMismatch, nothing saved).
                return try await BlockingWork.run { [self] () throws(TokenCacheError) in
                    try store.save(response, clientID: clientID, authority: authority, scopes: scopes,
                                   homeAccountID: account.homeAccountID, redeemedRefreshToken: refreshToken.secret)
                }
            case .rejected(let details):
                lastRejection = details
                if details.httpStatus == 429 || details.httpStatus >= 500 {
                    throw TokenCacheError(.serverError, "The token endpoint answered \(details.httpStatus) (\(details.error)).",
                                          hint: details.retryAfter.map { "Retry after \($0) s; the cache was not changed" }
                                              ?? "Retry later; the cache was not changed", server: details)
                }
                if refreshToken.familyID != nil && details.suberror == "client_mismatch" {
                    // This app is not in the family after all, as MSAL concludes: stop using family tokens.
                    try await BlockingWork.run { [self] () throws(TokenCacheError) in
                        try store.leaveFamily(clientID: clientID, environment: account.environment)
                    }
                }
            }
        }
        let details = lastRejection
        let isInteraction = details == nil || ["invalid_grant", "interaction_required", "consent_required", "login_required"]
            .contains(details!.error)
        throw TokenCacheError(
            isInteraction ? .interactionRequired : .serverError,
            details.map { "The token endpoint refused every refresh token (\($0.error)\($0.suberror.map { ", \($0)" } ?? ""))." }
                ?? "No refresh token is cached for this account and app.",
            hint: isInteraction ? "Sign the user in interactively" + (details?.claims != nil ? " with the claims challenge" : "")
                : "Check the app registration (client ID, authority)",
            server: details)
    }

    /// The error when the account has no refresh token this authority may see: sending one
    /// issued by another host would hand it to a stranger, so nothing is sent.
    private static func noRedeemableToken(account: CachedAccount, authority: Authority,
                                          others: [RefreshToken]) -> TokenCacheError {
        if others.isEmpty {
            return TokenCacheError(.interactionRequired, "No refresh token is cached for this account and app.",
                                   hint: "Sign the user in interactively")
        }
        let issuers = Array(Set(others.map { ASCII.lowercased($0.environment) })).sorted()
        return TokenCacheError(
            .interactionRequired,
            "The account's refresh tokens were issued by \(issuers.joined(separator: ", ")), not by \(authority.environment); "
                + "a refresh token is redeemed only at the host that issued it (or an alias of it), so nothing was sent.",
            hint: "Use an authority on \(Environment.aliases(of: issuers[0]).joined(separator: " or ")), or sign the user in interactively at \(authority.environment)")
    }
}
