import FoundationEssentials
@_spi(Backend) import TokenCacheCore
import TokenCachePipeline

/// What ``PublicClientApplication/acquireTokenSilent(_:)`` asks for: MSAL's
/// `MSALSilentTokenParameters`.
public struct SilentTokenParameters: Sendable, Hashable {
    /// The scopes the token must grant, for example `User.Read`.
    public var scopes: [String]
    /// The account, from ``PublicClientApplication/accounts()``.
    public var account: CachedAccount
    /// The authority for this request, when it differs from the app's (another cloud's alias,
    /// a B2C policy); nil for the app's.
    public var authority: Authority?
    /// The tenant for this request (a tenant ID or domain), on the app's Microsoft Entra
    /// authority or ``authority``: a guest account's token from another tenant. Nil for the
    /// authority's own.
    public var tenantID: String?
    /// Skip the access token cached when the call starts and redeem a refresh token.
    public var forceRefresh = false
    /// A claims challenge (JSON, from a resource's `WWW-Authenticate` header or an
    /// `interactionRequired` error's `TokenCacheError.server`): the cache is skipped and the
    /// refresh request carries the claims.
    public var claims: String?

    /// Parameters for a token for the scopes and account.
    public init(scopes: [String], account: CachedAccount) {
        self.scopes = scopes
        self.account = account
    }

    /// The authority the request goes to: ``authority`` or the app's, on ``tenantID`` if set.
    func resolvedAuthority(default appAuthority: Authority) throws(TokenCacheError) -> Authority {
        let base = authority ?? appAuthority
        return try tenantID.map { tenant throws(TokenCacheError) in try base.withTenant(tenant) } ?? base
    }
}

/// The accounts an app can use, as they change: see ``PublicClientApplication/accountChanges(checkingEvery:)``.
public struct AccountChanges: AsyncSequence, Sendable {
    public typealias Element = [CachedAccount]
    public typealias Failure = TokenCacheError

    let store: AccountStore
    /// Nil for a client ID `ClientID` refused: it has no accounts.
    let clientID: ClientID?
    let interval: Duration
    let clock: any Clock<Duration>

    public func makeAsyncIterator() -> Iterator {
        Iterator(store: store, clientID: clientID, interval: interval, clock: clock)
    }

    /// Yields the current accounts at once, then each differing list.
    public struct Iterator: AsyncIteratorProtocol {
        let store: AccountStore
        let clientID: ClientID?
        let interval: Duration
        let clock: any Clock<Duration>
        private var last: [CachedAccount]?
        private var revision: CacheRevision?

        init(store: AccountStore, clientID: ClientID?, interval: Duration, clock: any Clock<Duration>) {
            self.store = store
            self.clientID = clientID
            self.interval = interval
            self.clock = clock
        }

        /// The next list of accounts; nil once the iterating task is cancelled.
        public mutating func next() async throws(TokenCacheError) -> [CachedAccount]? {
            while !Task.isCancelled {
                if last != nil {
                    do { try await clock.sleep(for: interval) } catch { return nil }
                }
                let (store, clientID, known) = (store, clientID, revision)
                // The revision is read before the accounts: a change between the two is seen next time.
                let read: (CacheRevision?, [CachedAccount]?)
                do {
                    read = try await BlockingWork.run { () throws(TokenCacheError) -> (CacheRevision?, [CachedAccount]?) in
                        let now = try store.backend.currentRevision(of: store.group)
                        if let now, now == known { return (now, nil) }
                        guard let clientID else { return (now, []) }
                        return (now, try store.accounts(clientID: clientID))
                    }
                } catch where error.code == .cancelled && Task.isCancelled {
                    return nil  // cancelled before the read started: the sequence ends, as documented
                }
                revision = read.0
                if let accounts = read.1, accounts != last {
                    last = accounts
                    return accounts
                }
            }
            return nil
        }
    }
}
