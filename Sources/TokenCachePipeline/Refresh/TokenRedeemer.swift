import FoundationEssentials
import TokenCacheCore
import TokenCachePlatform
import Logging

/// The refresh of one client's tokens at one authority, on a store: the cache read, the one
/// staleness check, the cross-process refresh lock, the re-read under it, the redemption loop
/// (family tokens first, the host rule, rotation by another SDK) and the save. It imports no
/// store: a front end passes the store and, for single sign-on with other tools' caches, a
/// ``SingleSignOn`` redemption it builds on them.
package final class TokenRedeemer: Sendable {
    /// The application (client) ID, checked where it entered.
    package let clientID: ClientID
    /// The shared cache.
    package let store: AccountStore
    /// The token endpoint's client (discovery cached per authority).
    package let client: TokenEndpointClient
    /// Bound on waiting for another process's refresh of the same account, in seconds.
    package let refreshLockTimeout: TimeInterval

    /// A redemption from other tools' caches when the group's refresh tokens cannot serve: nil
    /// when none holds one or every one was refused. The front end builds it on those stores; it
    /// runs on the refreshing thread, and `isCancelled` aborts a request whose answer has not begun.
    package typealias SingleSignOn = @Sendable (_ scopes: [String], _ account: CachedAccount, _ authority: Authority,
                                                _ claims: String?, _ isCancelled: @escaping @Sendable () -> Bool) throws(TokenCacheError) -> TokenResult?

    package init(clientID: ClientID, store: AccountStore, client: TokenEndpointClient, refreshLockTimeout: TimeInterval) {
        self.clientID = clientID
        self.store = store
        self.client = client
        self.refreshLockTimeout = refreshLockTimeout
    }

    /// Runs blocking `work` in one job of the blocking pool (the async entry of a refresh:
    /// ``TokenEngine``'s `token`); its argument says whether the task was cancelled meanwhile.
    package static func cancellably<T: Sendable>(
        _ work: @escaping @Sendable (_ isCancelled: @escaping @Sendable () -> Bool) throws(TokenCacheError) -> T
    ) async throws(TokenCacheError) -> T {
        let cancelled = Locked(false)
        let outcome: Result<T, TokenCacheError> = await withTaskCancellationHandler {
            do throws(TokenCacheError) {
                return .success(try await BlockingWork.run { () throws(TokenCacheError) in try work { cancelled.withLock { $0 } } })
            } catch {
                return .failure(error)
            }
        } onCancel: {
            cancelled.withLock { $0 = true }
        }
        return try outcome.get()
    }

    /// The token at `authority` (already the tenant tokens are filed under): the cached one when
    /// usable, else one redeemed under the refresh lock, after reading the cache again. All of it
    /// on the calling thread, which must be one that may block (C's, the command line's, a pool
    /// job's): the store, the lock's wait and, with libcurl's transport, the requests.
    /// `isCancelled` is asked while waiting for the lock, before other tools' stores are asked,
    /// and during a request until the server's answer begins; true ends the call with `cancelled`
    /// (or a network error for an aborted request). An answer that began is read and saved.
    package func blockingToken(scopes: [String], account: CachedAccount, authority: Authority, forceRefresh: Bool, claims: String?,
                               singleSignOn: SingleSignOn?, isCancelled: @escaping @Sendable () -> Bool = { false }) throws(TokenCacheError) -> TokenResult {
        let before = try cachedToken(scopes: scopes, account: account, authority: authority)
        if !forceRefresh, let before, !before.needsRefresh() {
            return before
        }
        let lock = try RefreshLock.acquireBlocking(name: try refreshLockName(for: account, at: authority), timeout: refreshLockTimeout,
                                                   isCancelled: isCancelled)
        defer { withExtendedLifetime(lock) {} }

        // Another process may have refreshed while we waited for the lock. With forceRefresh only
        // a token other than the one seen before waiting will do: cached_at has whole seconds, so
        // it cannot tell a token saved just before this call from one saved just after.
        let cached = try cachedToken(scopes: scopes, account: account, authority: authority)
        if let cached, !cached.needsRefresh(), !forceRefresh || cached.accessToken != before?.accessToken {
            return cached
        }
        do {
            return try refresh(scopes: scopes, account: account, authority: authority, claims: claims, singleSignOn: singleSignOn,
                               isCancelled: isCancelled)
        } catch let error where error.code == .network || error.code == .serverError {
            // A token past refresh_on still works: serve it rather than fail on a transient error.
            if let cached, !forceRefresh, claims == nil {
                store.options.logger.debug("Refresh failed transiently; returning the cached token", metadata: ["code": "\(error.code)"])
                return cached
            }
            throw error
        }
    }

    /// The usable cached access token.
    private func cachedToken(scopes: [String], account: CachedAccount, authority: Authority) throws(TokenCacheError) -> TokenResult? {
        try store.accessToken(clientID: clientID, account: account, scopes: scopes, authority: authority)
    }

    /// The refresh lock's name: group, account, and whose refresh token the app redeems — its
    /// family's (shared by every app of the family, so they must wait for each other) or its own
    /// (so apps with their own tokens refresh in parallel).
    private func refreshLockName(for account: CachedAccount, at authority: Authority) throws(TokenCacheError) -> String {
        let owner = try redeemableRefreshTokens(for: account, at: authority).first?.familyID
            .map { "family:\($0)" } ?? "client:\(clientID.value.lowercased())"
        return "\(store.group.name)|\(account.homeAccountID)|\(Environment.canonical(authority.environment))|\(owner)"
    }

    /// The refresh tokens this app may send to its authority for the account: only those issued
    /// by the authority's host or, for Microsoft Entra, a host of the same cloud. The lock name
    /// and the redemption loop both read them, so both follow the same rule.
    private func redeemableRefreshTokens(for account: CachedAccount, at authority: Authority) throws(TokenCacheError) -> [RefreshToken] {
        try store.refreshTokens(clientID: clientID, account: account, redeemableAt: authority)
    }

    /// Bound on redemptions per refresh: each cached refresh token once, and a token another
    /// process rotated meanwhile once more.
    private static let maximumRedemptions = 8

    /// The redemption, under the lock: the group's refresh tokens in turn, then the single sign-on stores'.
    private func refresh(scopes: [String], account: CachedAccount, authority: Authority, claims: String?,
                         singleSignOn: SingleSignOn?, isCancelled: @escaping @Sendable () -> Bool) throws(TokenCacheError) -> TokenResult {
        // Another tool's cache, through the app's single sign-on stores.
        func fromSingleSignOn() throws(TokenCacheError) -> TokenResult? {
            guard let singleSignOn else { return nil }
            if isCancelled() {
                throw TokenCacheError(.cancelled, "The refresh was cancelled before other tools' caches were asked; nothing was changed.",
                                      hint: "Retry when the token is needed again")
            }
            return try singleSignOn(scopes, account, authority, claims, isCancelled)
        }
        // Read once here, and again only after a refusal (another SDK may have rotated a token
        // meanwhile). Checked before any request: a refresh token goes only to the host that issued it.
        var candidates = try redeemableRefreshTokens(for: account, at: authority)
        if candidates.isEmpty {
            if let result = try fromSingleSignOn() {
                return result
            }
            throw Self.noRedeemableToken(account: account, authority: authority,
                                         others: try store.refreshTokens(clientID: clientID, account: account))
        }
        let endpoint = try client.tokenEndpointBlocking(for: authority, cancelled: isCancelled)
        var lastRejection: ServerErrorDetails?
        // Secrets, not keys: when another SDK (which does not take our lock) rotated a token under
        // the same key meanwhile, the new secret is worth a try.
        var tried = Set<String>()
        while tried.count < Self.maximumRedemptions, let refreshToken = candidates.first(where: { !tried.contains($0.secret) }) {
            tried.insert(refreshToken.secret)
            let outcome = try client.redeemBlocking(refreshToken: refreshToken.secret, clientID: clientID, scopes: scopes, claims: claims,
                                                    at: endpoint, isMicrosoft: authority.kind != .oidc, cancelled: isCancelled)
            switch outcome {
            case .tokens(let response):
                // Saved whatever the caller does now: the server may have rotated the refresh token.
                return try saveRefreshed(response, account: account, authority: authority, scopes: scopes,
                                                 redeemed: refreshToken.secret)
            case .rejected(let details):
                lastRejection = details
                if let failure = Self.transientFailure(details) { throw failure }
                // This app is not in the family after all, as MSAL concludes: stop using family tokens.
                if refreshToken.familyID != nil && details.suberror == "client_mismatch" {
                    try store.leaveFamily(clientID: clientID, environment: account.environment)
                }
                candidates = try redeemableRefreshTokens(for: account, at: authority)
            }
        }
        let details = lastRejection
        let isInteraction = details == nil || ["invalid_grant", "interaction_required", "consent_required", "login_required"]
            .contains(details!.error)
        // The group's tokens are stale; a tool the user signed in to since may hold a good one.
        if isInteraction, let result = try fromSingleSignOn() {
            return result
        }
        throw TokenCacheError(
            isInteraction ? .interactionRequired : .serverError,
            details.map { "The token endpoint refused every refresh token (\($0.error)\($0.suberror.map { ", \($0)" } ?? ""))." }
                ?? "No refresh token is cached for this account and app.",
            hint: isInteraction ? "Sign the user in interactively" + (details?.claims != nil ? " with the claims challenge" : "")
                : "Check the app registration (client ID, authority)",
            server: details, reason: details == nil ? .noRefreshToken : isInteraction ? .refreshTokenRejected : .clientRejected)
    }

    /// Saves a refresh response to the group: a Bearer token of the account's own, or nothing
    /// (`invalidResponse`, `userMismatch`). `redeemed` is the group's token it was obtained with.
    /// On the calling thread; no cancellation stops it (a rotated refresh token must not be lost).
    package func saveRefreshed(_ response: TokenResponse, account: CachedAccount, authority: Authority, scopes: [String],
                               redeemed: String?) throws(TokenCacheError) -> TokenResult {
        if let type = response.tokenType, !ASCII.equalsIgnoringCase(type, "Bearer") {
            throw TokenCacheError.invalidResponse("token_type", "is not Bearer, though a Bearer token was requested")
        }
        return try store.save(response, clientID: clientID, authority: authority, scopes: scopes,
                              homeAccountID: account.homeAccountID, redeemedRefreshToken: redeemed)
    }

    /// The error for an answer worth retrying later (429, 5xx), which ends a refresh; nil otherwise.
    package static func transientFailure(_ details: ServerErrorDetails) -> TokenCacheError? {
        guard details.httpStatus == 429 || details.httpStatus >= 500 else { return nil }
        return TokenCacheError(.serverError, "The token endpoint answered \(details.httpStatus) (\(details.error)).",
                               hint: details.retryAfter.map { "Retry after \($0) s; the cache was not changed" }
                                   ?? "Retry later; the cache was not changed", server: details)
    }

    /// The error when the account has no refresh token this authority may see: sending one
    /// issued by another host would hand it to a stranger, so nothing is sent.
    private static func noRedeemableToken(account: CachedAccount, authority: Authority,
                                          others: [RefreshToken]) -> TokenCacheError {
        if others.isEmpty {
            return TokenCacheError(.interactionRequired, "No refresh token is cached for this account and app.",
                                   hint: "Sign the user in interactively", reason: .noRefreshToken)
        }
        let issuers = Array(Set(others.map { ASCII.lowercased($0.environment) })).sorted()
        let aliases = Environment.aliases(of: issuers[0])
        return TokenCacheError(
            .interactionRequired,
            "The account's refresh tokens were issued by \(issuers.joined(separator: ", ")), not by \(authority.environment); "
                + "a refresh token is redeemed only at the host that issued it (or an alias of it), so nothing was sent.",
            hint: "Use an authority on \(aliases.joined(separator: " or ")), or sign the user in interactively at \(authority.environment)",
            reason: .refreshTokenFromOtherHost(aliases: aliases, host: authority.environment))
    }
}
