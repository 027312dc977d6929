import FoundationEssentials
import SecretServiceStore
import TokenCacheCore
import TokenCachePipeline
import Logging

/// Single sign-on with other tools' caches (``PublicClientApplication/Options/singleSignOnStores``):
/// their accounts are listed, and when the app's group has no refresh token for an account that
/// the authority may see, one from an opted-in store is redeemed. The response is saved to the
/// app's group; the store gets only the rotated refresh token, under its owner's lock, in place
/// of the one redeemed, so the tool that owns it keeps working.
extension PublicClientApplication {
    /// The opted-in stores, read for this app; a keyring store outside the group's Secret Service
    /// uses one connection the app opens once.
    func singleSignOnStores(_ clientID: ClientID) -> SingleSignOnStores {
        SingleSignOnStores(options.singleSignOnStores, group: store, clientID: clientID) {
            storesKeyring.withLock { (opened: inout SecretServiceBackend?) -> SecretServiceBackend? in
                if opened == nil { opened = try? SecretServiceBackend(options: options.secretService) }
                return opened
            }
        }
    }

    /// The opted-in stores' accounts this app could redeem a token of at its authority and that
    /// its group does not list (`known`), unless the app signed out of them.
    package func singleSignOnAccounts(_ clientID: ClientID, excluding known: [CachedAccount]) throws(TokenCacheError) -> [CachedAccount] {
        try singleSignOnStores(clientID).accounts(excluding: known, redeemableAt: authority)
    }

    /// Redeems a refresh token of the account from an opted-in store, trying the stores in
    /// order; nil when none holds one this app may send to `authority` or every one was refused.
    /// On the calling thread, as the rest of the refresh (``TokenRedeemer``): the stores, the
    /// requests (`isCancelled` aborts one whose answer has not begun) and the saves.
    /// - Throws: `serverError` (429, 5xx), `userMismatch`, and the errors of saving to the group.
    func refreshFromSingleSignOnStores(_ clientID: ClientID, scopes: [String], account: CachedAccount, authority: Authority,
                                       claims: String?, isCancelled: @escaping @Sendable () -> Bool) throws(TokenCacheError) -> TokenResult? {
        // Signed out here means signed out for this app, wherever the tokens are.
        guard !options.singleSignOnStores.isEmpty, try store.signInState(of: account, clientID: clientID) != .signedOut else { return nil }
        let stores = singleSignOnStores(clientID)
        let appMetadata = try store.appMetadata(clientID: clientID).map(\.entry)
        for access in stores.accesses {
            if isCancelled() {
                throw TokenCacheError(.cancelled, "The refresh was cancelled while other tools' caches were asked; nothing more was sent.",
                                      hint: "Retry when the token is needed again")
            }
            guard let theirs = try stores.snapshot(access) else { continue }
            // The host rule applies as to the group's own tokens (redeemableAt).
            let candidates = try theirs.refreshTokens(clientID: clientID, homeAccountID: account.homeAccountID,
                                                      redeemableAt: authority, appMetadata: appMetadata)
            guard !candidates.isEmpty else { continue }
            let endpoint = try client.tokenEndpointBlocking(for: authority, cancelled: isCancelled)
            for refreshToken in candidates.prefix(4) {
                store.options.logger.debug("Redeeming a refresh token from a single sign-on store", metadata: [
                    "store": .string(access.store.name), "family": .string(refreshToken.familyID ?? "-")])
                let outcome = try client.redeemBlocking(refreshToken: refreshToken.secret, clientID: clientID, scopes: scopes,
                                                        claims: claims, at: endpoint, isMicrosoft: authority.kind != .oidc, cancelled: isCancelled)
                switch outcome {
                case .tokens(let response):
                    let rotated = response.refreshToken.flatMap { $0.isEmpty || $0 == refreshToken.secret ? nil : $0 }
                    let saved: Result<TokenResult, TokenCacheError>
                    do {
                        saved = .success(try redeemer.get().saveRefreshed(response, account: account, authority: authority,
                                                                                  scopes: scopes, redeemed: nil))
                    } catch {
                        saved = .failure(error)
                    }
                    // Written back even when the group could not take the response (locked, full
                    // disk): at a server that revokes on rotation the store's token would be dead
                    // otherwise. Not for another account's or a non-Bearer response: nobody's to keep.
                    let nobodys = if case .failure(let error) = saved {
                        error.code == .userMismatch || error.code == .invalidTokenResponse
                    } else { false }
                    if let rotated, !nobodys { writeBack(rotated, replacing: refreshToken, of: account, to: access) }
                    return try saved.get()
                case .rejected(let details):
                    if let failure = Self.transientFailure(details) { throw failure }
                    if refreshToken.familyID != nil && details.suberror == "client_mismatch" {
                        try store.leaveFamily(clientID: clientID, environment: account.environment)
                        return nil
                    }
                }
            }
        }
        return nil
    }

    /// Puts the rotated refresh token where the redeemed one was, under the store's lock. Only
    /// entries still holding the redeemed secret change: a token the owner rotated meanwhile is
    /// newer and stays. A failure is logged, not thrown: the app has its token, and the old
    /// refresh token stays usable at servers that do not revoke on rotation (Entra ID).
    private func writeBack(_ rotated: String, replacing redeemed: RefreshToken, of account: CachedAccount,
                           to access: ExternalStoreAccess) {
        let logger = store.options.logger
        do throws(TokenCacheError) {
            let changed = try access.modify { (theirs) throws(TokenCacheError) -> (write: Bool, result: Int) in
                let changed = try theirs.replaceRefreshTokenSecret(
                    homeAccountID: account.homeAccountID, environment: redeemed.entry["environment"] ?? account.environment,
                    redeemed: redeemed.secret, rotated: rotated)
                return (changed > 0, changed)
            }
            logger.debug("Rotated refresh token written back", metadata: [
                "store": .string(access.store.name), "entries": .stringConvertible(changed)])
        } catch {
            logger.warning("The rotated refresh token could not be written back to the single sign-on store", metadata: [
                "store": .string(access.store.name), "code": "\(error.code)", "error": .string(error.message)])
        }
    }
}
