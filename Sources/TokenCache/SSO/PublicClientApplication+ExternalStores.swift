import FoundationEssentials
import SecretServiceStore
import TokenCacheCore
import Logging

/// Single sign-on with other tools' caches (``PublicClientApplication/Options/singleSignOnStores``):
/// their accounts are listed, and when the app's group has no refresh token for an account that
/// the authority may see, one from an opted-in store is redeemed. The response is saved to the
/// app's group; the store gets only the rotated refresh token, under its owner's lock, in place
/// of the one redeemed, so the tool that owns it keeps working.
extension PublicClientApplication {
    /// Access to each opted-in store; keyring stores share the group's Secret Service connection
    /// when the group is kept there, else one the app opens once (none when it cannot be made:
    /// their reads then say why).
    func singleSignOnAccesses() -> [ExternalStoreAccess] {
        let stores = options.singleSignOnStores
        guard !stores.isEmpty else { return [] }
        var keyring = store.backend as? SecretServiceBackend
        if keyring == nil, stores.contains(where: \.isEncrypted) {
            keyring = storesKeyring.withLock { (opened: inout SecretServiceBackend?) -> SecretServiceBackend? in
                if opened == nil { opened = try? SecretServiceBackend(options: options.secretService) }
                return opened
            }
        }
        return stores.map { ExternalStoreAccess($0, secretService: keyring, logger: store.options.logger) }
    }

    /// A store's contents; nil when it is absent or cannot be reached or read here (logged):
    /// another tool's missing or broken cache must not break this app. A locked keyring is
    /// thrown, never read as "no accounts there".
    private func snapshot(_ access: ExternalStoreAccess) throws(TokenCacheError) -> AccountStore? {
        do {
            return try access.read()
        } catch where error.code == .keyringLocked {
            throw TokenCacheError(.keyringLocked, "The keyring holding \(access.store.name)'s cache, which this app may use for single sign-on, is locked.",
                                  hint: error.hint ?? "Unlock the keyring, then retry")
        } catch {
            store.options.logger.debug("Single sign-on store skipped", metadata: [
                "store": .string(access.store.name), "code": "\(error.code)"])
            return nil
        }
    }

    /// The accounts of the opted-in stores that this app could redeem a token of at its
    /// authority and that its group does not list (`known`), unless the app signed out of them.
    func singleSignOnAccounts(excluding known: [CachedAccount]) throws(TokenCacheError) -> [CachedAccount] {
        var seen = Set(known.map(\.homeAccountID))
        var found: [CachedAccount] = []
        let appMetadata = try store.appMetadata(clientID: clientID).map(\.entry)
        for access in singleSignOnAccesses() {
            guard let theirs = try snapshot(access) else { continue }
            for account in try theirs.allAccounts() where !seen.contains(account.homeAccountID) {
                guard try store.signInState(of: account, clientID: clientID) != .signedOut,
                      try !theirs.refreshTokens(clientID: clientID, homeAccountID: account.homeAccountID, redeemableAt: authority,
                                                appMetadata: appMetadata).isEmpty else { continue }
                seen.insert(account.homeAccountID)
                found.append(account)
            }
        }
        return found
    }

    /// Redeems a refresh token of the account from an opted-in store, trying the stores in
    /// order; nil when none holds one this app may send to `authority` or every one was refused.
    /// - Throws: `serverError` (429, 5xx), `userMismatch`, and the errors of saving to the group.
    func refreshFromSingleSignOnStores(scopes: [String], account: CachedAccount, authority: Authority,
                                       claims: String?) async throws(TokenCacheError) -> TokenResult? {
        let accesses = options.singleSignOnStores.isEmpty ? [] : try await BlockingWork.run { [self] () throws(TokenCacheError) in
            // Signed out here means signed out for this app, wherever the tokens are.
            try store.signInState(of: account, clientID: clientID) == .signedOut ? [] : singleSignOnAccesses()
        }
        let appMetadata = accesses.isEmpty ? [] : try await BlockingWork.run { [self] () throws(TokenCacheError) in
            try store.appMetadata(clientID: clientID).map(\.entry)
        }
        for access in accesses {
            let candidates = try await BlockingWork.run { [self] () throws(TokenCacheError) -> [RefreshToken] in
                guard let theirs = try snapshot(access) else { return [] }
                // The host rule applies as to the group's own tokens (redeemableAt).
                return try theirs.refreshTokens(clientID: clientID, homeAccountID: account.homeAccountID,
                                                redeemableAt: authority, appMetadata: appMetadata)
            }
            guard !candidates.isEmpty else { continue }
            let endpoint = try await client.tokenEndpoint(for: authority)
            for refreshToken in candidates.prefix(4) {
                store.options.logger.debug("Redeeming a refresh token from a single sign-on store", metadata: [
                    "store": .string(access.store.name), "family": .string(refreshToken.familyID ?? "-")])
                let outcome = try await client.redeem(refreshToken: refreshToken.secret, clientID: clientID, scopes: scopes,
                                                      claims: claims, at: endpoint, isMicrosoft: authority.kind != .oidc)
                switch outcome {
                case .tokens(let response):
                    let rotated = response.refreshToken.flatMap { $0.isEmpty || $0 == refreshToken.secret ? nil : $0 }
                    do {
                        let result = try await saveRefreshed(response, account: account, authority: authority, scopes: scopes, redeemed: nil)
                        if let rotated { await writeBack(rotated, replacing: refreshToken, of: account, to: access) }
                        return result
                    } catch {
                        // The rotated token replaces the redeemed one wherever the group could
                        // not take it (locked, full disk): at a server that revokes on rotation
                        // the store's would be dead otherwise. Not when the response is not
                        // this account's or not a Bearer response: then it is nobody's to keep.
                        if let rotated, error.code != .userMismatch, error.code != .invalidTokenResponse {
                            await writeBack(rotated, replacing: refreshToken, of: account, to: access)
                        }
                        throw error
                    }
                case .rejected(let details):
                    if let failure = Self.transientFailure(details) { throw failure }
                    if refreshToken.familyID != nil && details.suberror == "client_mismatch" {
                        try await BlockingWork.run { [self] () throws(TokenCacheError) in
                            try store.leaveFamily(clientID: clientID, environment: account.environment)
                        }
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
                           to access: ExternalStoreAccess) async {
        let logger = store.options.logger
        do {
            let changed = try await BlockingWork.run { () throws(TokenCacheError) -> Int in
                try access.modify { (theirs) throws(TokenCacheError) -> (write: Bool, result: Int) in
                    let changed = try theirs.replaceRefreshTokenSecret(
                        homeAccountID: account.homeAccountID, environment: redeemed.entry["environment"] ?? account.environment,
                        redeemed: redeemed.secret, rotated: rotated)
                    return (changed > 0, changed)
                }
            }
            logger.debug("Rotated refresh token written back", metadata: [
                "store": .string(access.store.name), "entries": .stringConvertible(changed)])
        } catch {
            logger.warning("The rotated refresh token could not be written back to the single sign-on store", metadata: [
                "store": .string(access.store.name), "code": "\(error.code)", "error": .string(error.message)])
        }
    }
}
