import FoundationEssentials
import Logging

/// The account store: MSAL-schema token caches for several client apps sharing one group.
///
/// Apps save token endpoint responses, find accounts and tokens following MSAL's rules, and
/// sign out. Every app that opens a store on the same backend and group sees the same
/// accounts, which is what gives single sign-on between apps.
///
/// Lookups run against an in-memory index; before each operation the store asks the backend
/// for the group's revision and reloads only when another process changed it.
public final class AccountStore: Sendable {
    /// Behaviour that apps can tune.
    public struct Options: Sendable {
        /// Access tokens expiring sooner than this are not returned (MSAL uses 5 minutes).
        public var expiryMargin: TimeInterval = 300
        /// Where the library logs; secrets are never logged.
        public var logger: Logger = Logger(label: "tokencache")
        /// Whether usernames and account IDs may appear in logs.
        public var privacy: LogPrivacy = LogPrivacy()

        /// Default options.
        public init() {}
    }

    /// Where entries are stored.
    @_spi(Backend) public let backend: any CacheBackend
    /// The sharing group this store reads and writes.
    public let group: CacheGroup
    /// The options in force.
    public let options: Options

    private struct State: Sendable {
        package var index = CacheIndex()
        package var revision: CacheRevision?
        package var isLoaded = false
        /// The last listing's index while the full one is not loaded (it may lack token secrets).
        package var listing: (index: CacheIndex, revision: CacheRevision)?
    }
    private let state = Locked(State())

    /// Opens the store for a group on any backend, one chosen at run time. Nothing is read until
    /// the first call. Apps pass a concrete backend (`EncryptedFileBackend`, `SecretServiceBackend`,
    /// ``InMemoryBackend``) or a `BackendSelection` to the initializer of the same label.
    @_spi(Backend) public init(backend: any CacheBackend, group: CacheGroup = .universalStorage, options: Options = Options()) {
        self.backend = backend
        self.group = group
        self.options = options
    }

    /// Opens the store for a group kept in this process's memory (nothing persists). Nothing is
    /// read until the first call.
    public convenience init(backend: InMemoryBackend, group: CacheGroup = .universalStorage, options: Options = Options()) {
        self.init(backend: backend as any CacheBackend, group: group, options: options)
    }

    /// Where the group lives, for people: "Secret Service collection 'Login' (alias default)",
    /// "encrypted file ~/.local/share/tokencache/…".
    public var location: String { backend.location(of: group) }

    private var logger: Logger { options.logger }

    // MARK: Saving

    /// Stores a token endpoint response the way MSAL does: access, refresh and ID tokens,
    /// the account and the app metadata (with the FOCI family), and marks the app signed in.
    /// Cached access tokens of the same account, client and tenant whose scopes overlap the new
    /// token's are replaced.
    ///
    /// - Parameters:
    ///   - response: the parsed response.
    ///   - clientID: the app the tokens were issued to.
    ///   - authority: the authority the tokens came from.
    ///   - scopes: the scopes requested; used when the response does not list granted scopes.
    /// - Returns: the access token as a ``TokenResult``.
    /// - Throws: ``TokenCacheError``; on error the cache is left exactly as it was.
    @discardableResult
    public func save(_ response: TokenResponse, clientID: String, authority: Authority,
                     scopes: [String], now: Date = Date()) throws(TokenCacheError) -> TokenResult {
        try save(response, clientID: try ClientID(clientID), authority: authority, scopes: scopes, homeAccountID: nil, now: now)
    }

    /// Saves a response for a known account: a refresh response may carry neither client_info
    /// nor an ID token, and then belongs to the account whose refresh token was redeemed.
    ///
    /// - Parameter redeemedRefreshToken: the refresh token the response was obtained with. A
    ///   rotating server no longer accepts it, so every other entry of the account still holding
    ///   it (the family token another app of the family saved under its own key) gets the new
    ///   refresh token, as MSAL updates the redeemed entry.
    @discardableResult
    package func save(_ response: TokenResponse, clientID: ClientID, authority: Authority, scopes: [String],
              homeAccountID: String?, redeemedRefreshToken: String? = nil, now: Date = Date()) throws(TokenCacheError) -> TokenResult {
        let entities = try ResponseEntities(response: response, clientID: clientID, authority: authority,
                                            scopes: scopes, knownHomeAccountID: homeAccountID, now: now)
        if entities.accessToken["target"]?.isEmpty ?? true {
            throw TokenCacheError.invalidResponse("scope", "is empty and no scopes were requested")
        }
        return try mutate { index in
            var changes: [CacheChange] = []
            let newAT = entities.accessToken
            if entities.homeAccountID != nil {
                for old in Self.overlapping(newAT, in: index) where old.key != newAT.key {
                    changes.append(.remove(.accessToken, key: old.key))
                }
            }
            for entry in entities.all {
                var entry = entry
                if entry.kind == .appMetadata, let stored = index.existing(matching: entry) {
                    // Keep fields other SDKs or apps added (display_name, …).
                    var merged = stored.fields
                    merged["family_id"] = nil
                    entry.fields = merged.merging(entry.fields) { $1 }
                }
                changes += Self.upsert(entry, in: index)
            }
            if let home = entities.homeAccountID {
                changes += Self.upsert(Self.accountMetadata(home: home, clientID: clientID, state: .signedIn), in: index)
            }
            if let redeemed = redeemedRefreshToken, let home = entities.homeAccountID,
               let newRT = entities.refreshToken, let newSecret = newRT["secret"], newSecret != redeemed {
                changes += Self.rotation(in: index, homeAccountID: home, environment: newRT["environment"] ?? "",
                                         redeemed: redeemed, rotated: newSecret, modified: newRT.fields["last_modification_time"],
                                         except: index.existing(matching: newRT)?.key ?? newRT.key)
            }
            logger.debug("Saving token response", metadata: [
                "client_id": .string(clientID.value), "account": options.privacy.pii(entities.homeAccountID ?? "-"),
                "changes": .stringConvertible(changes.count)])
            return changes
        } result: { index in
            let account = entities.homeAccountID.flatMap {
                self.account(homeAccountID: $0, cloud: Environment.canonical(authority.environment), clientID: clientID, in: index)
            }
            return Self.result(AccessToken(entry: entities.accessToken), account: account)
                .with(account: account, idToken: entities.idToken?["secret"], isFromCache: false)
        }
    }

    /// Parses and stores a token endpoint response body. See ``save(_:clientID:authority:scopes:now:)``.
    @discardableResult
    public func save(responseJSON: Data, clientID: String, authority: Authority,
                     scopes: [String], now: Date = Date()) throws(TokenCacheError) -> TokenResult {
        return try save(try TokenResponse(json: responseJSON), clientID: clientID, authority: authority, scopes: scopes, now: now)
    }

    // MARK: Accounts

    /// Accounts a client can use silently: those with a refresh token of the client or of its
    /// family, minus those the client signed out of (MSAL's `allAccounts`). An account is one
    /// home account ID in one cloud, as in MSAL: the same ID at hosts of two clouds is two accounts.
    /// A client ID ``ClientID`` refuses has none.
    public func accounts(clientID: String) throws(TokenCacheError) -> [CachedAccount] {
        guard let clientID = Self.lookup(clientID) else { return [] }
        return try accounts(clientID: clientID)
    }

    /// `accounts(clientID:)` of a client checked where it entered.
    package func accounts(clientID: ClientID) throws(TokenCacheError) -> [CachedAccount] {
        try read { index in
            Self.accountKeys(in: index).compactMap { key in
                guard Self.canUse(home: key.home, cloud: key.cloud, clientID: clientID, in: index) else { return nil }
                return self.account(homeAccountID: key.home, cloud: key.cloud, clientID: clientID, in: index)
            }
        }
    }

    /// A client ID of a public read taking a `String`: nil for one ``ClientID`` refuses, which no
    /// entry of this store holds (a save refuses it), so such a read finds nothing, as before.
    private static func lookup(_ clientID: String) -> ClientID? {
        try? ClientID(clientID)
    }

    /// Every account in the group, whichever apps use it: one per home account ID and cloud.
    public func allAccounts() throws(TokenCacheError) -> [CachedAccount] {
        try read { index in
            Self.accountKeys(in: index).compactMap { self.account(homeAccountID: $0.home, cloud: $0.cloud, clientID: nil, in: index) }
        }
    }

    /// The account with this username (case-insensitive) or home account ID, among the accounts
    /// `clientID` can use (or all accounts when `clientID` is nil).
    ///
    /// - Parameter authority: the cloud to look in. Without one, an account with records at
    ///   hosts of different clouds (another host saved a response claiming its home account ID)
    ///   is not guessed: ``TokenCacheError/Code/ambiguousAccount`` names the hosts.
    public func account(_ usernameOrHomeAccountID: String, clientID: String? = nil,
                        authority: Authority? = nil) throws(TokenCacheError) -> CachedAccount? {
        var client: ClientID?
        if let clientID {
            // Converted once here: a client ID ClientID refuses can use no account (a save refuses it).
            guard let checked = Self.lookup(clientID) else { return nil }
            client = checked
        }
        let wanted = usernameOrHomeAccountID.lowercased()
        let cloud = authority.map { Environment.canonical($0.environment) }
        return try read { (index) throws(TokenCacheError) -> CachedAccount? in
            // Account records are few per user: match on them, then build only the chosen account.
            let records = (index.entries(.account, homeAccountID: wanted).isEmpty
                ? index.all(.account).filter { AccountName.matches(wanted, username: $0["username"], homeAccountID: nil) }
                : index.entries(.account, homeAccountID: wanted))
                .filter { cloud == nil || Self.cloud(of: $0) == cloud }
            let homes = Array(Set(records.compactMap { $0["home_account_id"] })).sorted()
            for home in homes {
                let clouds = Array(Set(records.filter { $0["home_account_id"] == home }.map(Self.cloud(of:)))).sorted()
                    .filter { cloud in client.map { Self.canUse(home: home, cloud: cloud, clientID: $0, in: index) } ?? true }
                let found = clouds.compactMap { self.account(homeAccountID: home, cloud: $0, clientID: client, in: index) }
                if found.count > 1 { throw Self.ambiguous(usernameOrHomeAccountID, found) }
                if let account = found.first { return account }
            }
            return nil
        }
    }

    /// The error for a name that matches one home account ID in several clouds.
    package static func ambiguous(_ name: String, _ accounts: [CachedAccount]) -> TokenCacheError {
        TokenCacheError(.ambiguousAccount,
                        "Account '\(name)' has records at hosts of different clouds: \(accounts.map(\.environment).joined(separator: ", ")); which one is meant is not guessed.",
                        hint: "Pass the authority of the one meant (--authority https://HOST/TENANT in the CLI), and remove the one you do not recognise",
                        reason: .accountInSeveralClouds(hosts: accounts.map(\.environment)))
    }

    /// Whether a client may use an account silently: not signed out, with a refresh token in the cloud.
    private static func canUse(home: String, cloud: String, clientID: ClientID, in index: CacheIndex) -> Bool {
        signInState(home: home, clientID: clientID, in: index) != .signedOut
            && !refreshTokens(from: refreshTokenCandidates(home: home, environment: cloud, in: index), clientID: clientID.value,
                              environment: nil, appMetadata: index.all(.appMetadata)).isEmpty
    }

    /// The sign-in state a client has recorded for an account.
    public func signInState(of account: CachedAccount, clientID: String) throws(TokenCacheError) -> SignInState? {
        guard let clientID = Self.lookup(clientID) else { return nil }
        return try signInState(of: account, clientID: clientID)
    }

    /// `signInState(of:clientID:)` of a client checked where it entered.
    package func signInState(of account: CachedAccount, clientID: ClientID) throws(TokenCacheError) -> SignInState? {
        try read { Self.signInState(home: account.homeAccountID, clientID: clientID, in: $0) }
    }

    // MARK: Tokens

    /// A cached access token for the account, client and scopes that does not expire within
    /// ``Options/expiryMargin``, or nil. A token past its `refresh_on` is still returned (check
    /// ``TokenResult/needsRefresh(now:)``) so it can serve as a fallback if refreshing fails.
    ///
    /// - Parameter authority: restricts the tenant; nil or `common`/`organizations` means the
    ///   account's home tenant.
    public func accessToken(clientID: String, account: CachedAccount, scopes: [String],
                            authority: Authority? = nil, now: Date = Date()) throws(TokenCacheError) -> TokenResult? {
        guard let clientID = Self.lookup(clientID) else {
            _ = try Self.resourceScopes(scopes)  // scopes of none are refused as before
            return nil
        }
        return try accessToken(clientID: clientID, account: account, scopes: scopes, authority: authority, now: now)
    }

    /// `accessToken(clientID:account:scopes:authority:now:)` of a client checked where it entered.
    package func accessToken(clientID: ClientID, account: CachedAccount, scopes: [String],
                             authority: Authority? = nil, now: Date = Date()) throws(TokenCacheError) -> TokenResult? {
        let requested = try Self.resourceScopes(scopes)
        let environment = Environment.canonical(authority?.environment ?? account.environment)
        let deadline = now.timeIntervalSince1970 + options.expiryMargin
        // Tenants that answer: the authority's own; for generic authorities also the home tenant.
        let authorityRealm = authority?.realm
        let homeRealm: String? = if let authorityRealm, !Self.genericRealms.contains(ASCII.lowercased(authorityRealm)) {
            nil
        } else {
            account.homeTenantID ?? account.tenants.first
        }
        return try read { index in
            guard index.signInState(homeAccountID: account.homeAccountID, clientID: clientID.value) != .signedOut else { return nil }
            var best: IndexedAccessToken?
            for at in index.accessTokens(homeAccountID: account.homeAccountID)
            where at.expiresOn > (best?.expiresOn ?? 0)
                && Self.isUsable(at, clientID: clientID, environment: environment, scopes: requested, deadline: deadline)
                && ((authorityRealm.map { ASCII.equalsIgnoringCase(at.realm, $0) } ?? false)
                    || (homeRealm.map { ASCII.equalsIgnoringCase(at.realm, $0) } ?? false)) {
                best = at
            }
            return best.map { $0.result.with(account: account, idToken: Self.idToken(for: $0, of: account, in: index)) }
        }
    }

    /// The usable cached access token of each tenant (realm) the account has one in, for the
    /// client and scopes, sorted by tenant: for callers that know no authority (`tokencache
    /// token`), which use a token only when exactly one tenant has one, as MSAL asks for an
    /// authority otherwise.
    public func accessTokensByTenant(clientID: String, account: CachedAccount, scopes: [String],
                                     now: Date = Date()) throws(TokenCacheError) -> [TokenResult] {
        guard let clientID = Self.lookup(clientID) else {
            _ = try Self.resourceScopes(scopes)  // scopes of none are refused as before
            return []
        }
        return try accessTokensByTenant(clientID: clientID, account: account, scopes: scopes, now: now)
    }

    /// `accessTokensByTenant(clientID:account:scopes:now:)` of a client checked where it entered.
    package func accessTokensByTenant(clientID: ClientID, account: CachedAccount, scopes: [String],
                                      now: Date = Date()) throws(TokenCacheError) -> [TokenResult] {
        let requested = try Self.resourceScopes(scopes)
        let environment = Environment.canonical(account.environment)
        let deadline = now.timeIntervalSince1970 + options.expiryMargin
        return try read { index in
            guard index.signInState(homeAccountID: account.homeAccountID, clientID: clientID.value) != .signedOut else { return [] }
            var best: [String: IndexedAccessToken] = [:]
            for at in index.accessTokens(homeAccountID: account.homeAccountID)
            where Self.isUsable(at, clientID: clientID, environment: environment, scopes: requested, deadline: deadline)
                && at.expiresOn > (best[ASCII.lowercased(at.realm)]?.expiresOn ?? 0) {
                best[ASCII.lowercased(at.realm)] = at
            }
            return best.sorted { $0.key < $1.key }.map {
                $0.value.result.with(account: account, idToken: Self.idToken(for: $0.value, of: account, in: index))
            }
        }
    }

    /// The requested scopes, lower-cased, without `openid profile offline_access`.
    private static func resourceScopes(_ scopes: [String]) throws(TokenCacheError) -> [String] {
        var requested: [String] = []
        requested.reserveCapacity(scopes.count)
        for scope in scopes {
            let lowered = ASCII.lowercased(scope)
            if !Scopes.reserved.contains(lowered) { requested.append(lowered) }
        }
        guard !requested.isEmpty else {
            throw TokenCacheError.invalidArgument("scopes", "no scopes other than openid, profile and offline_access were given",
                                                  hint: "Ask for at least one resource scope, for example User.Read")
        }
        return requested
    }

    /// Whether an access token may be returned for a plain request of the client and scopes.
    private static func isUsable(_ at: IndexedAccessToken, clientID: ClientID, environment: String,
                                 scopes: [String], deadline: Double) -> Bool {
        at.isPlainBearer && !at.result.accessToken.isEmpty && at.expiresOn > deadline
            && ASCII.equalsIgnoringCase(at.clientID, clientID.value) && at.environment == environment
            && scopes.allSatisfy { at.targets.contains($0) }
    }

    /// The ID token cached for an access token's account, app, cloud and tenant, as MSAL returns
    /// one with a cached access token.
    private static func idToken(for at: IndexedAccessToken, of account: CachedAccount, in index: CacheIndex) -> String? {
        index.entries(.idToken, homeAccountID: account.homeAccountID).first {
            ASCII.equalsIgnoringCase($0["client_id"] ?? "", at.clientID)
                && Environment.canonical($0["environment"] ?? "") == at.environment
                && ASCII.equalsIgnoringCase($0["realm"] ?? "", at.realm)
        }?["secret"]
    }

    package static let genericRealms: Set<String> = ["common", "organizations", "consumers"]

    /// The refresh token a client should redeem for an account, in MSAL's order: the family's
    /// token when app metadata names a family, family "1" when the app has no metadata yet,
    /// then the app's own, newest first. Nil when the app signed out of the account.
    package func refreshToken(clientID: ClientID, account: CachedAccount) throws(TokenCacheError) -> RefreshToken? {
        try refreshTokens(clientID: clientID, account: account).first
    }

    /// Every refresh token the client may redeem for the account, in the order to try them.
    package func refreshTokens(clientID: ClientID, account: CachedAccount) throws(TokenCacheError) -> [RefreshToken] {
        try read { index in
            guard Self.signInState(home: account.homeAccountID, clientID: clientID, in: index) != .signedOut else { return [] }
            return Self.refreshTokens(home: account.homeAccountID, clientID: clientID,
                                      environment: account.environment, in: index).map(RefreshToken.init(entry:))
        }
    }

    /// The refresh tokens the client may redeem for the account at `authority`, in the order to
    /// try them: only tokens issued by the authority's host or, for a Microsoft Entra
    /// authority, a host of the same cloud (``Environment/authority(_:accepts:)``). Family
    /// tokens are Microsoft's: an app with a B2C, AD FS or generic OIDC authority redeems only
    /// its own.
    package func refreshTokens(clientID: ClientID, account: CachedAccount, redeemableAt authority: Authority) throws(TokenCacheError) -> [RefreshToken] {
        try refreshTokens(clientID: clientID, homeAccountID: account.homeAccountID, redeemableAt: authority, appMetadata: nil)
    }

    /// ``refreshTokens(clientID:account:redeemableAt:)`` with the client's family membership
    /// read from `appMetadata` (its own group's) instead of this store's: for another tool's
    /// cache, which knows nothing of the client. With no `authority`, the tokens the client
    /// could redeem at the hosts that issued them, in any environment.
    package func refreshTokens(clientID: ClientID, homeAccountID: String, redeemableAt authority: Authority?,
                               appMetadata: [CacheEntry]?) throws(TokenCacheError) -> [RefreshToken] {
        try read { index in
            guard Self.signInState(home: homeAccountID, clientID: clientID, in: index) != .signedOut else { return [] }
            return Self.refreshTokens(home: homeAccountID, clientID: clientID, environment: authority?.environment,
                                      appMetadata: appMetadata ?? Array(index.all(.appMetadata)), in: index)
                .filter { entry in
                    guard !(entry["secret"] ?? "").isEmpty else { return false }
                    guard let authority else { return true }
                    return Environment.authority(authority, accepts: entry["environment"] ?? "")
                        && (authority.kind == .aad || ASCII.equalLowercased(entry["client_id"], clientID.value))
                }
                .map(RefreshToken.init(entry:))
        }
    }

    /// Gives every refresh token of the account in `environment`'s cloud whose secret is
    /// `redeemed` the secret `rotated`: another tool's cache keeps working after this project
    /// redeemed its token at a server that rotates them. Returns how many entries changed.
    package func replaceRefreshTokenSecret(homeAccountID: String, environment: String, redeemed: String, rotated: String,
                                           now: Date = Date()) throws(TokenCacheError) -> Int {
        var changed = 0
        try mutate { index in
            // Another tool's entries keep their shape: stamped only where they carry the field.
            let changes = Self.rotation(in: index, homeAccountID: homeAccountID, environment: environment, redeemed: redeemed,
                                        rotated: rotated, modified: .string(String(Int(now.timeIntervalSince1970))), stampingUnstamped: false)
            changed = changes.count
            return changes
        } result: { _ in () }
        return changed
    }

    /// The changes giving the account's refresh tokens in `environment`'s cloud that hold
    /// `redeemed` the secret `rotated`, stamped `modified` (with `stampingUnstamped` false, only
    /// entries that carry a modification time); the entry keyed `except` (the one a response
    /// just wrote) is left alone. Only the same account and cloud: a secret equal to the
    /// redeemed one elsewhere is not this server's to replace.
    private static func rotation(in index: CacheIndex, homeAccountID: String, environment: String, redeemed: String,
                                 rotated: String, modified: JSONValue?, stampingUnstamped: Bool = true,
                                 except key: String? = nil) -> [CacheChange] {
        let environment = Environment.canonical(environment)
        return index.entries(.refreshToken, homeAccountID: homeAccountID)
            .filter { $0.key != key && $0["secret"] == redeemed && Environment.canonical($0["environment"] ?? "") == environment }
            .map { stale in
                var updated = stale
                updated.fields["secret"] = .string(rotated)
                if stampingUnstamped || stale.fields["last_modification_time"] != nil {
                    updated.fields["last_modification_time"] = modified
                }
                return .upsert(updated)
            }
    }

    /// The app metadata recorded for a client, if any.
    public func appMetadata(clientID: String) throws(TokenCacheError) -> [AppMetadata] {
        guard let clientID = Self.lookup(clientID) else { return [] }
        return try appMetadata(clientID: clientID)
    }

    /// `appMetadata(clientID:)` of a client checked where it entered.
    package func appMetadata(clientID: ClientID) throws(TokenCacheError) -> [AppMetadata] {
        let clientID = clientID.value.lowercased()
        return try read { index in
            index.all(.appMetadata).filter { $0["client_id"]?.lowercased() == clientID }.map(AppMetadata.init(entry:))
        }
    }

    /// Every entry in the group, for the CLI and tests (package only: entries hold refresh tokens).
    package func entries() throws(TokenCacheError) -> [CacheEntry] {
        try read { index in EntityKind.allCases.flatMap { index.all($0) } }
    }

    // MARK: Signing out and removing

    /// Records that a client is not in a family after all (the server answered
    /// `client_mismatch` to a family refresh token), so it stops using family tokens.
    package func leaveFamily(clientID: ClientID, environment: String) throws(TokenCacheError) {
        let clientID = clientID.value
        try mutate { index in
            let existing = index.all(.appMetadata).first {
                $0["client_id"]?.lowercased() == clientID.lowercased()
                    && Environment.canonical($0["environment"] ?? "") == Environment.canonical(environment)
            }
            var fields = existing?.fields ?? ["client_id": .string(clientID), "environment": .string(environment)]
            fields["family_id"] = ""
            return Self.upsert(CacheEntry(kind: .appMetadata, fields: fields, key: existing?.key), in: index)
        } result: { _ in () }
    }

    /// Signs one app out of an account: the app's access, ID and own refresh tokens in the
    /// account's cloud are removed and its state becomes `signed_out`. Other apps keep the
    /// account and their SSO, including the family refresh token.
    /// - Throws: `invalidArgument` (field `client ID`) for a client ID ``ClientID`` refuses: nothing is written.
    public func signOut(_ account: CachedAccount, clientID: String) throws(TokenCacheError) {
        try signOut(account, clientID: try ClientID(clientID))
    }

    /// `signOut(_:clientID:)` of a client checked where it entered.
    package func signOut(_ account: CachedAccount, clientID: ClientID) throws(TokenCacheError) {
        let cloud = Environment.canonical(account.environment)
        try mutate { index in
            var changes: [CacheChange] = []
            for kind in [EntityKind.accessToken, .idToken, .refreshToken] {
                for entry in index.entries(kind, homeAccountID: account.homeAccountID)
                where entry["client_id"]?.lowercased() == clientID.value.lowercased() && Self.cloud(of: entry) == cloud
                    && (kind != .refreshToken || (entry["family_id"] ?? "").isEmpty) {
                    changes.append(.remove(kind, key: entry.key))
                }
            }
            changes += Self.upsert(Self.accountMetadata(home: account.homeAccountID, clientID: clientID, state: .signedOut), in: index)
            logger.debug("Signing app out of account", metadata: [
                "client_id": .string(clientID.value), "account": options.privacy.pii(account.homeAccountID)])
            return changes
        } result: { _ in () }
    }

    /// Records a readable name for an app in its app metadata (`display_name`, an extra field
    /// other SDKs keep and ignore), so admins see "Notes" rather than a client ID in
    /// `tokencache list`. Later saves keep it. It may be called before the app's first sign-in.
    public func setAppDisplayName(_ name: String, clientID: String, authority: Authority) throws(TokenCacheError) {
        try setAppDisplayName(name, clientID: try ClientID(clientID), authority: authority)
    }

    /// `setAppDisplayName(_:clientID:authority:)` of a client checked where it entered.
    package func setAppDisplayName(_ name: String, clientID: ClientID, authority: Authority) throws(TokenCacheError) {
        try Self.validate(appDisplayName: name)
        try mutate { index in
            var entry = CacheEntry(kind: .appMetadata, fields: ["client_id": .string(clientID.value),
                                                                "environment": .string(authority.environment)])
            if let stored = index.existing(matching: entry) {
                entry = stored
            } else {
                // MSAL reads app metadata without `family_id` as "not in a family" and then
                // skips the family refresh token; without any app metadata it tries family 1.
                // Metadata made only for a name says the latter, so naming an app before its
                // first sign-in keeps single sign-on. That sign-in's response sets the real value.
                entry.fields["family_id"] = .string("1")
            }
            entry.fields["display_name"] = .string(name)
            return Self.upsert(entry, in: index)
        } result: { _ in () }
    }

    /// Checks an app display name: one line of 1 to 200 characters.
    package static func validate(appDisplayName name: String) throws(TokenCacheError) {
        guard !name.isEmpty, name.count <= 200, !name.contains(where: \.isNewline) else {
            throw TokenCacheError.invalidArgument("display name", "must be one line of 1 to 200 characters")
        }
    }

    /// Removes an account for every app: its tokens and account records in the account's cloud,
    /// and its sign-in states once no other cloud holds the home account ID.
    /// - Returns: the number of entries removed.
    @discardableResult
    public func remove(_ account: CachedAccount) throws(TokenCacheError) -> Int {
        var removed = 0
        let cloud = Environment.canonical(account.environment)
        try mutate { index in
            let others = Self.clouds(ofHomeAccountID: account.homeAccountID, in: index).contains { $0 != cloud }
            let changes = EntityKind.allCases.flatMap { kind in
                index.entries(kind, homeAccountID: account.homeAccountID)
                    .filter { entry in entry["environment"] == nil ? !others : Self.cloud(of: entry) == cloud }
                    .map { CacheChange.remove(kind, key: $0.key) }
            }
            removed = changes.count
            logger.debug("Removing account for every app", metadata: ["account": options.privacy.pii(account.homeAccountID)])
            return changes
        } result: { _ in () }
        return removed
    }

    /// Removes every entry of the group ("wipe all").
    public func removeAll() throws(TokenCacheError) {
        try state.withLock { (state) throws(TokenCacheError) in
            try backend.removeAll(in: group)
            state = State()
        }
        logger.debug("Removed every entry of the group", metadata: ["group": .string(group.name)])
    }

    // MARK: Reading and writing through the index

    /// Runs `body` on an index that reflects the backend's current state.
    package func read<T: Sendable>(_ body: (CacheIndex) throws(TokenCacheError) -> T) throws(TokenCacheError) -> T {
        try state.withLock { (state) throws(TokenCacheError) -> T in
            try refreshIfNeeded(&state)
            return try body(state.index)
        }
    }

    /// Computes changes on a current index, writes them, then updates the index.
    package func mutate<T: Sendable>(_ changes: (CacheIndex) throws(TokenCacheError) -> [CacheChange],
                             result: (CacheIndex) -> T) throws(TokenCacheError) -> T {
        try state.withLock { (state) throws(TokenCacheError) -> T in
            try refreshIfNeeded(&state)
            let changes = try changes(state.index)
            if !changes.isEmpty {
                let revision: CacheRevision?
                do throws(TokenCacheError) {
                    revision = try backend.apply(changes, to: group, expected: state.revision)
                } catch {
                    // The backend may have applied part of a batch: re-read before the next call.
                    state.isLoaded = false
                    throw error
                }
                for change in changes { state.index.apply(change) }
                state.revision = revision
                // Someone else wrote meanwhile: our index lacks their changes; reload next time.
                if revision == nil { state.isLoaded = false }
            }
            return result(state.index)
        }
    }

    private func refreshIfNeeded(_ state: inout State) throws(TokenCacheError) {
        if try isCurrent(state) { return }
        let snapshot = try backend.load(group)
        state.index = CacheIndex(snapshot.entries)
        state.listing = nil
        state.revision = snapshot.revision
        state.isLoaded = true
        logger.trace("Loaded group", metadata: ["group": .string(group.name), "entries": .stringConvertible(snapshot.entries.count)])
    }

    /// Whether the loaded index still shows the group as the backend has it.
    private func isCurrent(_ state: State) throws(TokenCacheError) -> Bool {
        guard state.isLoaded, let known = state.revision else { return false }
        return try backend.currentRevision(of: group) == known
    }

    /// The index a listing reads: the store's own when it is current, else the group read for
    /// listing (``CacheBackend/loadForListing(_:)``), kept apart for the next listing only: it
    /// may lack token secrets. (Kept, too, so that a short-lived process does not spend time
    /// freeing it.)
    package func listingIndex() throws(TokenCacheError) -> CacheIndex {
        try state.withLock { (state) throws(TokenCacheError) -> CacheIndex in
            if try isCurrent(state) { return state.index }
            if let listing = state.listing, try backend.currentRevision(of: group) == listing.revision { return listing.index }
            let snapshot = try backend.loadForListing(group)
            let index = CacheIndex(snapshot.entries, digestingAccessTokens: false)
            state.listing = snapshot.revision.map { (index, $0) }
            return index
        }
    }

    // MARK: Rules

    /// An upsert, or nothing when an entry with the same fields is already stored. An entry
    /// another SDK stored under a different key is updated under its own key.
    package static func upsert(_ entry: CacheEntry, in index: CacheIndex) -> [CacheChange] {
        guard let stored = index.existing(matching: entry) else { return [.upsert(entry)] }
        if stored.fields == entry.fields { return [] }
        var updated = entry
        updated.key = stored.key
        return [.upsert(updated)]
    }

    package static func sameSlot(_ a: CacheEntry, _ b: CacheEntry) -> Bool {
        a["client_id"]?.lowercased() == b["client_id"]?.lowercased()
            && a["realm"]?.lowercased() == b["realm"]?.lowercased()
            && Environment.canonical(a["environment"] ?? "") == Environment.canonical(b["environment"] ?? "")
            && a.fields["ext_cache_key"] == b.fields["ext_cache_key"]
    }

    package static func accountMetadata(home: String, clientID: ClientID, state: SignInState) -> CacheEntry {
        CacheEntry(kind: .accountMetadata, fields: [
            "home_account_id": .string(home), "client_id": .string(clientID.value),
            "sign_in_state": .string(state.rawValue),
        ])
    }

    package static func signInState(home: String, clientID: ClientID, in index: CacheIndex) -> SignInState? {
        index.signInState(homeAccountID: home, clientID: clientID.value)
    }

    package static func homeAccountIDs(in index: CacheIndex) -> [String] {
        Array(Set(index.all(.account).compactMap { $0["home_account_id"] })).sorted()
    }

    /// The cloud of an entry's environment: MSAL's alias set for Microsoft hosts (its first
    /// name), otherwise the host itself. An account is a home account ID in one cloud.
    package static func cloud(of entry: CacheEntry) -> String {
        Environment.canonical(entry["environment"] ?? "")
    }

    /// The clouds an account has account records in, sorted.
    package static func clouds(ofHomeAccountID home: String, in index: CacheIndex) -> [String] {
        Array(Set(index.entries(.account, homeAccountID: home).map(cloud(of:)))).sorted()
    }

    /// Every account of the group as (home account ID, cloud), sorted.
    package static func accountKeys(in index: CacheIndex) -> [(home: String, cloud: String)] {
        // One pass over the account records, not a lookup per home account ID: the clouds
        // ``clouds(ofHomeAccountID:in:)`` finds for each (records filed under the ID as the
        // index files them, so IDs that differ in letter case share theirs).
        var homes = Set<String>()
        var cloudsByFiledHome: [String: Set<String>] = [:]
        for entry in index.all(.account) {
            let home = entry["home_account_id"]
            if let home { homes.insert(home) }
            cloudsByFiledHome[CacheIndex.accountKey(home ?? ""), default: []].insert(cloud(of: entry))
        }
        return homes.sorted().flatMap { home in (cloudsByFiledHome[CacheIndex.accountKey(home)] ?? []).sorted().map { (home, $0) } }
    }

    /// MSAL's refresh token order for a client.
    package static func refreshTokens(home: String, clientID: ClientID, environment: String?, in index: CacheIndex) -> [CacheEntry] {
        refreshTokens(home: home, clientID: clientID, environment: environment, appMetadata: index.all(.appMetadata), in: index)
    }

    /// The same, with the group's app metadata at hand (a listing looks it up once, not per client).
    package static func refreshTokens(home: String, clientID: ClientID, environment: String?,
                              appMetadata: some Sequence<CacheEntry>, in index: CacheIndex) -> [CacheEntry] {
        refreshTokens(from: refreshTokenCandidates(home: home, environment: environment, in: index),
                      clientID: clientID.value, environment: environment, appMetadata: appMetadata)
    }

    /// An account's refresh tokens in the environment (any when nil), most recently modified
    /// first: the same for every client of the account (a listing reads them once per account).
    package static func refreshTokenCandidates(home: String, environment: String?, in index: CacheIndex) -> [CacheEntry] {
        let environment = environment.map(Environment.canonical)
        return refreshTokenCandidates(index.entries(.refreshToken, homeAccountID: home)
            .filter { environment == nil || Environment.canonical($0["environment"] ?? "") == environment })
    }

    /// The same, from refresh tokens already narrowed to the account and environment.
    package static func refreshTokenCandidates(_ tokens: [CacheEntry]) -> [CacheEntry] {
        // Each token's modification time read once, not at every comparison of the sort.
        // An empty secret (kept as another SDK wrote it) is nothing to redeem. (A listing's
        // entries have no secret member at all: it is left in the decrypted document.)
        tokens
            .filter { $0.fields["secret"] != .string("") }
            .map { (entry: $0, modified: $0.fields["last_modification_time"]?.secondsValue ?? 0) }
            .sorted(by: Self.newerFirst)
            .map(\.entry)
    }

    /// Most recently modified first; ties in key order, so every run (and every process) picks
    /// the same token.
    private static func newerFirst(_ a: (entry: CacheEntry, modified: Double), _ b: (entry: CacheEntry, modified: Double)) -> Bool {
        a.modified != b.modified ? a.modified > b.modified : a.entry.key < b.entry.key
    }

    /// MSAL's order for a client among an account's `candidates` (``refreshTokenCandidates(home:environment:in:)``):
    /// the family's tokens first when the client is in a family (or not known to be outside
    /// one), then its own.
    package static func refreshTokens(from candidates: [CacheEntry], clientID: String, environment: String?,
                              appMetadata: some Sequence<CacheEntry>) -> [CacheEntry] {
        let environment = environment.map(Environment.canonical)
        // The lowest key among the client's entries: the index's order is hash order, and a client
        // with app metadata in two environments must be read the same way by every process.
        var metadata: CacheEntry?
        for entry in appMetadata where ASCII.equalLowercased(entry["client_id"], clientID)
            && (environment == nil || Environment.canonical(entry["environment"] ?? "") == environment) {
            if metadata.map({ entry.key < $0.key }) ?? true { metadata = entry }
        }
        let family: String? = metadata == nil ? "1" : AppMetadata(entry: metadata!).familyID
        let familyTokens = family.map { family in candidates.filter { $0["family_id"] == family } } ?? []
        // The candidates are one kind's entries, so a key names one of them (an account has a
        // few: compared in place, not hashed).
        let ownTokens = candidates.filter { candidate in
            ASCII.equalLowercased(candidate["client_id"], clientID) && !familyTokens.contains { $0.key == candidate.key }
        }
        return familyTokens + ownTokens
    }

    /// Where the account's records were saved from when that was not https on the default port
    /// (a loopback provider): the origin (``Authority/origin``) its host alone leaves out; nil
    /// otherwise, or when another tool wrote them.
    package func origin(of account: CachedAccount) throws(TokenCacheError) -> String? {
        try read { index in
            index.entries(.account, homeAccountID: account.homeAccountID)
                .filter { $0["environment"] == account.environment }
                .sorted { $0.key < $1.key }
                .lazy.compactMap { $0[Authority.originField] }.first
        }
    }

    /// The account of a home account ID in a cloud, described from that cloud's records only:
    /// what another cloud holds for the same ID never shows in it.
    package func account(homeAccountID home: String, cloud: String, clientID: ClientID?, in index: CacheIndex) -> CachedAccount? {
        Self.account(homeAccountID: home, cloud: cloud, clientID: clientID, in: index,
                     idTokens: index.entries(.idToken, homeAccountID: home).filter { Self.cloud(of: $0) == cloud })
    }

    /// The same, with the account's ID tokens in the cloud at hand (a listing has read them).
    package static func account(homeAccountID home: String, cloud: String, clientID: ClientID?, in index: CacheIndex,
                                idTokens inCloud: [CacheEntry]) -> CachedAccount? {
        // Sorted by key: the index's order is hash order, which differs between processes, and
        // every process must describe an account the same way.
        let records = index.entries(.account, homeAccountID: home).filter { Self.cloud(of: $0) == cloud }
            .sorted { $0.key < $1.key }.map(AccountEntity.init(entry:))
        guard !records.isEmpty else { return nil }
        let homeTenant = Self.tenant(ofHomeAccountID: home)
        let primary = records.first { record in homeTenant.map { ASCII.equalLowercased(record.realm, $0) } ?? false }
            ?? records.min { ($0.realm, $0.entry.key) < ($1.realm, $1.entry.key) }!
        let idTokens = inCloud.sorted { $0.key < $1.key }.map(IDToken.init(entry:))
        let idToken = idTokens.first { token in (clientID.map { ASCII.equalLowercased(token.clientID, $0.value) } ?? false) && token.realm == primary.realm }
            ?? idTokens.first { $0.realm == primary.realm } ?? idTokens.first
        return CachedAccount(
            homeAccountID: home, environment: primary.environment,
            username: primary.username.isEmpty ? records.first { !$0.username.isEmpty }?.username ?? "" : primary.username,
            localAccountID: primary.localAccountID,
            tenants: Array(Set(records.map(\.realm))).sorted(),
            authorityType: primary.authorityType,
            claims: idToken?.claims)
    }

    /// The tenant of a home account ID (`uid.utid`), when it has exactly two parts.
    package static func tenant(ofHomeAccountID home: String) -> String? {
        // On the bytes: a home account ID is ASCII, and splitting the String walks grapheme
        // clusters. Otherwise the characters, where a combining mark after a dot joins it.
        let utf8 = home.utf8
        guard utf8.allSatisfy({ $0 < 0x80 }) else {
            let parts = home.split(separator: ".")
            return parts.count == 2 ? String(parts[1]) : nil
        }
        let parts = utf8.split(separator: UInt8(ascii: "."))
        return parts.count == 2 ? String(Substring(parts[1])) : nil
    }

    package static func result(_ at: AccessToken, account: CachedAccount?) -> TokenResult {
        result(at, scopes: at.scopes, expiresOn: at.entry.fields["expires_on"]?.secondsValue, account: account)
    }

    /// The same, from the scopes and expiry (seconds since 1970) the caller has already read.
    package static func result(_ at: AccessToken, scopes: [String], expiresOn seconds: Double?, account: CachedAccount?) -> TokenResult {
        TokenResult(
            accessToken: at.secret, authenticationScheme: at.tokenType,
            expiresOn: Date(timeIntervalSince1970: seconds ?? 0), refreshOn: at.refreshOn,
            tenantID: at.realm.isEmpty ? nil : at.realm, scopes: scopes, account: account, cachedAt: at.cachedAt)
    }
}
