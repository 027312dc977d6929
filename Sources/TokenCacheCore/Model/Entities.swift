import FoundationEssentials

/// Typed, read-only views over cache entries. Each keeps the whole ``CacheEntry`` so that no
/// field is lost when the entity is written back.
public protocol CacheEntityView: Sendable, Hashable {
    /// The kind of entry this view reads.
    static var kind: EntityKind { get }
    /// The entry behind the view.
    var entry: CacheEntry { get }
    /// Wraps an entry of the right kind.
    init(entry: CacheEntry)
}

extension CacheEntityView {
    /// `home_account_id`: `<uid>.<utid>` from client_info, or the ID token's `sub` for ADFS.
    public var homeAccountID: String { entry["home_account_id"] ?? "" }
    /// `environment`: the authority host, for example `login.microsoftonline.com`.
    public var environment: String { entry["environment"] ?? "" }

    package func date(_ field: String) -> Date? {
        entry.fields[field]?.secondsValue.map { Date(timeIntervalSince1970: $0) }
    }
}

/// An access token entity.
public struct AccessToken: CacheEntityView {
    public static let kind = EntityKind.accessToken
    public let entry: CacheEntry
    public init(entry: CacheEntry) { self.entry = entry }

    /// The token itself. Treat as a secret.
    public var secret: String { entry["secret"] ?? "" }
    /// The client ID of the app the token was issued to.
    public var clientID: String { entry["client_id"] ?? "" }
    /// The tenant the token was issued by.
    public var realm: String { entry["realm"] ?? "" }
    /// The scopes the token grants.
    public var scopes: [String] { Scopes.split(entry["target"] ?? "") }
    /// `token_type` (MSAL Node writes `tokenType`), `Bearer` when absent.
    public var tokenType: String { entry["token_type"] ?? entry["tokenType"] ?? "Bearer" }
    /// Whether this is a plain bearer token, the only kind returned for a plain request: not a
    /// proof-of-possession or other auth-scheme token (`credential_type`
    /// `AccessToken_With_AuthScheme`, a `token_type` or `tokenType` other than Bearer in any
    /// case) and not bound to extra request parameters (`ext_cache_key`).
    public var isPlainBearer: Bool {
        ASCII.equalsIgnoringCase(entry["credential_type"] ?? "AccessToken", "AccessToken")
            && ASCII.equalsIgnoringCase(entry["token_type"] ?? "Bearer", "Bearer")
            && ASCII.equalsIgnoringCase(entry["tokenType"] ?? "Bearer", "Bearer")
            && entry.fields["ext_cache_key"] == nil
    }
    /// When the token stops being valid.
    public var expiresOn: Date? { date("expires_on") }
    /// When the token should be refreshed proactively, if the server said so.
    public var refreshOn: Date? { date("refresh_on") }
    /// When the token was cached.
    public var cachedAt: Date? { date("cached_at") }
}

/// A refresh token entity.
public struct RefreshToken: CacheEntityView {
    public static let kind = EntityKind.refreshToken
    public let entry: CacheEntry
    public init(entry: CacheEntry) { self.entry = entry }

    /// The token itself: never handed to apps (MSAL does not either); redeemed only here.
    package var secret: String { entry["secret"] ?? "" }
    /// The client ID of the app that obtained the token.
    public var clientID: String { entry["client_id"] ?? "" }
    /// The family (FOCI) the token belongs to, usually `"1"`; nil for an app's own token.
    public var familyID: String? { entry["family_id"].flatMap { $0.isEmpty ? nil : $0 } }
    /// When the token was last written.
    public var lastModified: Date? { date("last_modification_time") }
}

/// An ID token entity.
public struct IDToken: CacheEntityView {
    public static let kind = EntityKind.idToken
    public let entry: CacheEntry
    public init(entry: CacheEntry) { self.entry = entry }

    /// The raw JWT. Treat as a secret.
    public var secret: String { entry["secret"] ?? "" }
    /// The client ID the token was issued to.
    public var clientID: String { entry["client_id"] ?? "" }
    /// The tenant that issued it.
    public var realm: String { entry["realm"] ?? "" }
    /// The decoded claims, or nil when the JWT cannot be decoded.
    public var claims: IDTokenClaims? { try? IDTokenClaims(jwt: secret) }
}

/// An account entity: one per account, environment and tenant.
public struct AccountEntity: CacheEntityView {
    public static let kind = EntityKind.account
    public let entry: CacheEntry
    public init(entry: CacheEntry) { self.entry = entry }

    /// The tenant of this account record.
    public var realm: String { entry["realm"] ?? "" }
    /// `preferred_username` or `upn`.
    public var username: String { entry["username"] ?? "" }
    /// The object ID (`oid`) or `sub` in the tenant.
    public var localAccountID: String { entry["local_account_id"] ?? "" }
    /// `MSSTS` or `ADFS`.
    public var authorityType: String { entry["authority_type"] ?? "MSSTS" }
}

/// App metadata: which family, if any, a client belongs to.
public struct AppMetadata: CacheEntityView {
    public static let kind = EntityKind.appMetadata
    public let entry: CacheEntry
    public init(entry: CacheEntry) { self.entry = entry }

    /// The client ID.
    public var clientID: String { entry["client_id"] ?? "" }
    /// The family ID, when the app was seen in a family.
    public var familyID: String? { entry["family_id"].flatMap { $0.isEmpty ? nil : $0 } }
    /// A display name the app registered (an extra field other SDKs keep and ignore).
    public var displayName: String? { entry["display_name"] }
}

/// Whether an app is signed in to an account.
public enum SignInState: String, Sendable, Hashable, Codable {
    case signedIn = "signed_in"
    case signedOut = "signed_out"
}

/// Per-client account metadata: the app's sign-in state for an account.
public struct AccountMetadata: CacheEntityView {
    public static let kind = EntityKind.accountMetadata
    public let entry: CacheEntry
    public init(entry: CacheEntry) { self.entry = entry }

    /// The client ID.
    public var clientID: String { entry["client_id"] ?? "" }
    /// The sign-in state, `signedIn` unless recorded otherwise.
    public var signInState: SignInState { entry["sign_in_state"].flatMap(SignInState.init) ?? .signedIn }
}
