import FoundationEssentials

/// An account as an app sees it: one user at one authority host, across the tenants the
/// cache holds for them.
public struct CachedAccount: Sendable, Hashable, Identifiable {
    /// `<uid>.<utid>` for Microsoft identity accounts, the ID token's `sub` for AD FS.
    public let homeAccountID: String
    /// The authority host, for example `login.microsoftonline.com`.
    public let environment: String
    /// The username (`preferred_username`, or `upn` for AD FS); may be empty.
    public let username: String
    /// The object ID in the home tenant (or `sub`).
    public let localAccountID: String
    /// The tenants (realms) the cache has account records for, sorted.
    public let tenants: [String]
    /// `MSSTS` or `ADFS`.
    public let authorityType: String
    /// Claims from the account's ID token, when one is cached.
    public let claims: IDTokenClaims?

    public var id: String { "\(homeAccountID)-\(environment)" }

    /// The home tenant ID (`utid`), when the home account ID has the `<uid>.<utid>` form.
    public var homeTenantID: String? {
        // On contiguous UTF-8: this runs on every access-token lookup.
        var id = homeAccountID
        return id.withUTF8 { bytes -> String? in
            let dot = UInt8(ascii: ".")
            guard let first = bytes.firstIndex(of: dot), !bytes[(first + 1)...].contains(dot) else { return nil }
            return String(decoding: UnsafeBufferPointer(rebasing: bytes[(first + 1)...]), as: UTF8.self)
        }
    }
}

extension CachedAccount {
    /// An account known only by what a token agent says of it (no records of this cache).
    package init(homeAccountID: String, environment: String, username: String) {
        self.init(homeAccountID: homeAccountID, environment: environment, username: username,
                  localAccountID: String(homeAccountID.prefix { $0 != "." }), tenants: [], authorityType: "MSSTS", claims: nil)
    }

    /// An account as the token keeper describes it to the identity broker (no records of this cache).
    package init(homeAccountID: String, environment: String, username: String, localAccountID: String, tenants: [String], claims: IDTokenClaims?) {
        self.init(homeAccountID: homeAccountID, environment: environment, username: username, localAccountID: localAccountID,
                  tenants: tenants, authorityType: "MSSTS", claims: claims)
    }
}

/// A usable access token, with what a caller needs to send it: the counterpart of MSAL's
/// `MSALResult` / `MSQATokenResult`.
public struct TokenResult: Sendable, Hashable {
    /// The access token. A secret: never log it.
    public let accessToken: String
    /// The authentication scheme, for example `Bearer`.
    public let authenticationScheme: String
    /// When the access token expires.
    public let expiresOn: Date
    /// When the token should be refreshed proactively (`refresh_in`), if the server said so.
    public let refreshOn: Date?
    /// The tenant that issued the token, when known.
    public let tenantID: String?
    /// The scopes the token grants.
    public let scopes: [String]
    /// The account the token belongs to, when the cache has an account record for it.
    public let account: CachedAccount?
    /// When the token was cached.
    public let cachedAt: Date?
    /// The ID token issued with the access token, or the one cached for the account, app and
    /// tenant; nil when there is none. Personal data: never log it.
    public let idToken: String?
    /// Whether the access token came from the cache (true) or from the token endpoint just now.
    public let isFromCache: Bool

    /// The ID token's claims (name, username, object and tenant IDs), decoded without
    /// validation, as MSAL does for tokens it received directly from the token endpoint.
    public var idTokenClaims: IDTokenClaims? { idToken.flatMap { try? IDTokenClaims(jwt: $0) } }

    /// The value of an HTTP `Authorization` header, for example `Bearer eyJ…`.
    public var authorizationHeader: String { "\(authenticationScheme) \(accessToken)" }

    package init(accessToken: String, authenticationScheme: String, expiresOn: Date, refreshOn: Date?, tenantID: String?,
                 scopes: [String], account: CachedAccount?, cachedAt: Date?, idToken: String? = nil, isFromCache: Bool = true) {
        self.accessToken = accessToken
        self.authenticationScheme = authenticationScheme
        self.expiresOn = expiresOn
        self.refreshOn = refreshOn
        self.tenantID = tenantID
        self.scopes = scopes
        self.account = account
        self.cachedAt = cachedAt
        self.idToken = idToken
        self.isFromCache = isFromCache
    }

    /// The same token attributed to an account, with its ID token and origin.
    package func with(account: CachedAccount?, idToken: String? = nil, isFromCache: Bool? = nil) -> TokenResult {
        TokenResult(accessToken: accessToken, authenticationScheme: authenticationScheme, expiresOn: expiresOn,
                    refreshOn: refreshOn, tenantID: tenantID, scopes: scopes, account: account, cachedAt: cachedAt,
                    idToken: idToken ?? self.idToken, isFromCache: isFromCache ?? self.isFromCache)
    }

    /// Whether `refreshOn` has passed: the token still works, but should be refreshed.
    public func needsRefresh(now: Date = Date()) -> Bool {
        refreshOn.map { $0 <= now } ?? false
    }
}

/// What an import did: how many entries were stored, and what was skipped and why.
public struct ImportReport: Sendable, Hashable {
    /// An entry or section that was not imported.
    public struct Skipped: Sendable, Hashable {
        /// The section (`AccessToken`, …) the entry was in.
        public let section: String
        /// The entry's key, or nil for a whole section.
        public let key: String?
        /// Why it was skipped.
        public let reason: String
    }

    /// Entries imported, by kind.
    public internal(set) var imported: [EntityKind: Int] = [:]
    /// Entries and sections skipped.
    public internal(set) var skipped: [Skipped] = []
    /// Entries that were new or different from what the group held (0 when importing the same
    /// cache again).
    public internal(set) var changedCount = 0
    /// Entries not written because the group held the same entity written later (a newer
    /// refresh or access token of the same slot).
    public internal(set) var keptNewerCount = 0

    /// Total entries imported.
    public var importedCount: Int { imported.values.reduce(0, +) }
}
