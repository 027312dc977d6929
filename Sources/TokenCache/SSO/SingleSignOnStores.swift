import FoundationEssentials
import SecretServiceStore
@_spi(Backend) import TokenCacheCore
import Logging

/// An app's opted-in stores (``PublicClientApplication/Options/singleSignOnStores``) as single
/// sign-on reads them: what each holds, and the accounts they offer the app. Shared by the app
/// API and the C interface, so every language lists the same accounts.
package struct SingleSignOnStores: Sendable {
    /// Access to each store, in the order the app opted into them.
    package let accesses: [ExternalStoreAccess]
    private let group: AccountStore
    private let clientID: ClientID

    /// `stores` read for `clientID` of `group`. Keyring stores share the group's Secret Service
    /// connection when the group is kept there, else the one `openKeyring` gives (called only
    /// when a store is in the keyring; nil when none can be opened: their reads then say why).
    package init(_ stores: [ExternalStore], group: AccountStore, clientID: ClientID,
                 openKeyring: () -> SecretServiceBackend?) {
        var keyring = group.backend as? SecretServiceBackend
        if keyring == nil, stores.contains(where: \.isEncrypted) { keyring = openKeyring() }
        accesses = stores.map { ExternalStoreAccess($0, secretService: keyring, logger: group.options.logger) }
        self.group = group
        self.clientID = clientID
    }

    /// A store's contents; nil when it is absent or cannot be reached or read here (logged):
    /// another tool's missing or broken cache must not break this app. A locked keyring is
    /// thrown, never read as "no accounts there".
    func snapshot(_ access: ExternalStoreAccess) throws(TokenCacheError) -> AccountStore? {
        do {
            return try access.read()
        } catch where error.code == .keyringLocked {
            throw TokenCacheError(.keyringLocked, "The keyring holding \(access.store.name)'s cache, which this app may use for single sign-on, is locked.",
                                  hint: error.hint ?? "Unlock the keyring, then retry")
        } catch {
            group.options.logger.debug("Single sign-on store skipped", metadata: [
                "store": .string(access.store.name), "code": "\(error.code)"])
            return nil
        }
    }

    /// The stores' accounts that `known` does not list, that the app did not sign out of, and
    /// whose refresh token (the app's own or its family's) the app could redeem: at `authority`
    /// under the host rule, or, when nil, at the host that issued it (a listing with no
    /// authority yet, as the C interface's).
    package func accounts(excluding known: [CachedAccount], redeemableAt authority: Authority?) throws(TokenCacheError) -> [CachedAccount] {
        guard !accesses.isEmpty else { return [] }
        var seen = Set(known.map(\.homeAccountID))
        var found: [CachedAccount] = []
        let appMetadata = try group.appMetadata(clientID: clientID).map(\.entry)
        for access in accesses {
            guard let theirs = try snapshot(access) else { continue }
            for account in try theirs.allAccounts() where !seen.contains(account.homeAccountID) {
                guard try group.signInState(of: account, clientID: clientID) != .signedOut,
                      try !theirs.refreshTokens(clientID: clientID, homeAccountID: account.homeAccountID, redeemableAt: authority,
                                                appMetadata: appMetadata).isEmpty else { continue }
                seen.insert(account.homeAccountID)
                found.append(account)
            }
        }
        return found
    }
}
