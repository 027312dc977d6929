/// The kinds of entity in an MSAL unified cache. The raw value is the top-level key of the
/// MSAL JSON format.
public enum EntityKind: String, Sendable, Hashable, CaseIterable, Codable {
    case accessToken = "AccessToken"
    case refreshToken = "RefreshToken"
    case idToken = "IdToken"
    case account = "Account"
    case appMetadata = "AppMetadata"
    /// Per-client sign-in state (`signed_in`/`signed_out`), as MSAL for iOS/macOS keeps it.
    /// MSAL Python and other SDKs keep this top-level section and ignore it.
    case accountMetadata = "AccountMetadata"
    /// The account's Microsoft Graph photo (``AccountPhotoRecord``), this library's own section:
    /// MSAL SDKs keep an unknown top-level section as they read it and ignore it, as they do
    /// ``accountMetadata``.
    case accountPhoto = "AccountPhoto"
    /// A top-level member of the document this library does not know (another SDK's section,
    /// such as `AccessToken_With_AuthScheme`, or a scalar), kept as it is so no data is lost:
    /// the entry's key and its `section` field are the member's name, its `value` field the
    /// member's value.
    case unknownSection = "UnknownSection"

    /// The kinds that are MSAL sections of their own name.
    package static let sections: [EntityKind] = [.accessToken, .refreshToken, .idToken, .account, .appMetadata, .accountMetadata, .accountPhoto]

    /// The kind stored under a top-level member of an MSAL document, or nil for an unknown one.
    package init?(section name: String) {
        guard let kind = EntityKind(rawValue: name), kind != .unknownSection else { return nil }
        self = kind
    }

    /// Hashes the case, not its raw string: entries are filed by kind on every load and lookup.
    public func hash(into hasher: inout Hasher) {
        let ordinal = switch self {
        case .accessToken: 0
        case .refreshToken: 1
        case .idToken: 2
        case .account: 3
        case .appMetadata: 4
        case .accountMetadata: 5
        case .unknownSection: 6
        case .accountPhoto: 7
        }
        hasher.combine(ordinal)
    }

    /// Whether entries of this kind carry a secret (token) in their `secret` field.
    package var isCredential: Bool {
        switch self {
        case .accessToken, .refreshToken, .idToken: true
        case .account, .appMetadata, .accountMetadata, .accountPhoto, .unknownSection: false
        }
    }
}

/// One entity of the cache: its kind, the key it is stored under, and its MSAL JSON fields.
///
/// The key is a hint: caches written by other SDKs use other key formats, so entries are
/// matched on their fields (see ``identity``), and the original key is kept on export.
///
/// Opaque to apps: the fields (a refresh token's secret among them) are read through the typed
/// views (``AccessToken``, ``IDToken``, ``AccountEntity``…), and neither its description nor
/// its mirror shows them.
public struct CacheEntry: Sendable, Hashable {
    /// Which kind of entity this is.
    public package(set) var kind: EntityKind
    /// The key the entry is stored under in MSAL JSON.
    public package(set) var key: String
    /// The entity's fields, including ones this library does not know.
    package var fields: JSONObject

    /// Creates an entry; without a key, the key MSAL Python would use is computed.
    package init(kind: EntityKind, fields: JSONObject, key: String? = nil) {
        self.kind = kind
        self.fields = fields
        self.key = key ?? CacheKeys.msalKey(kind: kind, fields: fields)
    }

    /// A string field, or nil when absent or not a string.
    package subscript(field: String) -> String? {
        fields[field]?.stringValue
    }

    /// The identity of the entity, computed from its fields only, independent of key formats:
    /// two entries with the same identity describe the same thing.
    public var identity: String {
        CacheKeys.identity(kind: kind, fields: fields)
    }
}

extension CacheEntry: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The kind and key only: `print`, string interpolation and `dump` never show a field.
    public var description: String { "CacheEntry(\(kind.rawValue), key: \(key))" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: ["kind": kind, "key": key], displayStyle: .struct) }
}

/// MSAL's cache-key rules, and the field-based identity used to match entries.
package enum CacheKeys {
    /// The key MSAL Python 1.39 computes for an entity (`TokenCache.key_makers`).
    /// `environment` and `target` replace the fields' values when given.
    package static func msalKey(kind: EntityKind, fields: JSONObject, environment: String? = nil, target: String? = nil) -> String {
        func field(_ name: String) -> String {
            switch name {
            case "environment": environment ?? fields[name]?.stringValue ?? ""
            case "target": target ?? fields[name]?.stringValue ?? ""
            default: fields[name]?.stringValue ?? ""
            }
        }
        switch kind {
        case .accessToken:
            var parts = [field("home_account_id"), field("environment"), "AccessToken",
                         field("client_id"), field("realm"), field("target")]
            if let ext = fields["ext_cache_key"]?.stringValue, !ext.isEmpty {
                parts[2] = "atext"
                parts.append(ext)
            }
            return parts.joined(separator: "-").lowercased()
        case .refreshToken:
            return [field("home_account_id"), field("environment"), "RefreshToken",
                    field("client_id"), "", field("target")].joined(separator: "-").lowercased()
        case .idToken:
            return [field("home_account_id"), field("environment"), "IdToken",
                    field("client_id"), field("realm"), ""].joined(separator: "-").lowercased()
        case .account:
            return [field("home_account_id"), field("environment"), field("realm")]
                .joined(separator: "-").lowercased()
        case .appMetadata:
            return "appmetadata-\(field("environment"))-\(field("client_id"))"
        case .accountMetadata:
            return "accountmetadata-\(field("home_account_id"))-\(field("client_id"))".lowercased()
        case .accountPhoto:
            return "accountphoto-\(field("home_account_id"))-\(field("environment"))".lowercased()
        case .unknownSection:
            return field("section")  // JSON member names are case-sensitive
        }
    }

    /// The MSAL key with the environment mapped to its alias group and the target
    /// normalised (sorted, lower-cased): SDKs differ in scope order and alias choice.
    package static func identity(kind: EntityKind, fields: JSONObject) -> String {
        let key = msalKey(kind: kind, fields: fields,
                          environment: fields["environment"]?.stringValue.map(Environment.canonical),
                          target: fields["target"]?.stringValue.map(Scopes.normalizedTarget))
        return kind == .appMetadata ? key.lowercased() : key  // the other keys are lower-cased already
    }
}
