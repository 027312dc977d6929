import FoundationEssentials
@_spi(Backend) import TokenCacheCore

/// How a cache entry is stored as a Secret Service item: its attributes (schema
/// `org.swift-tokencache.Entry`, docs/SecretService.md), its label and its secret (the entry as
/// MSAL JSON). Shared by the Secret Service backend and the sandbox's file keyring, whose items
/// libsecret and oo7 read as the same items.
package enum SecretItemSchema {
    /// The schema name every item carries (`xdg:schema`).
    package static let name = "org.swift-tokencache.Entry"
    /// The version of the attribute schema.
    package static let version = "1"

    /// The item attributes a query matches: the group's, the kind's and the query's, normalized.
    package static func searchAttributes(_ query: CacheQuery, group: CacheGroup) -> [String: String] {
        var attributes = ["group": group.name]
        if let kind = query.kind { attributes["kind"] = kind.rawValue }
        for (attribute, value) in query.attributes {
            attributes[attribute.rawValue] = attribute.normalized(value)
        }
        return attributes
    }

    /// Attributes of an entry, as stored on its item.
    package static func attributes(of entry: CacheEntry, group: CacheGroup) -> [String: String] {
        var attributes = ["schema_version": version, "group": group.name, "kind": entry.kind.rawValue, "key": entry.key]
        for (attribute, value) in entry.queryableAttributes { attributes[attribute.rawValue] = value }
        return attributes
    }

    /// A label a person can read in a keyring browser (Seahorse, KeePassXC).
    /// - Parameter username: the account's username when known, else the home account ID is shown.
    package static func label(of entry: CacheEntry, username: String? = nil) -> String {
        let client = entry["client_id"] ?? ""
        let user = username ?? entry["home_account_id"] ?? ""
        switch entry.kind {
        case .accessToken: return "Access token · \(user) · \(client) · \(entry["target"] ?? "")"
        case .refreshToken:
            let family = entry["family_id"].map { " · family \($0)" } ?? ""
            return "Refresh token · \(user) · \(client)\(family)"
        case .idToken: return "ID token · \(user) · \(client)"
        case .account: return "Account · \(entry["username"] ?? "") · \(entry["realm"] ?? "")"
        case .appMetadata: return "App metadata · \(client)"
        case .accountMetadata: return "Sign-in state · \(user) · \(client) · \(entry["sign_in_state"] ?? "")"
        case .accountPhoto: return "Account photo · \(user)"
        case .unknownSection: return "Other SDK data · \(entry.key)"
        }
    }

    /// The secret of an item: the entry as a one-entity MSAL unified JSON cache,
    /// `{"AccessToken": {"<key>": {...}}}`, which MSAL Python can load as it is and which
    /// carries the entry's kind and key, so bulk reads need no per-item attribute calls. A
    /// top-level member this library does not know is an item of its own, `{"<name>": <value>}`.
    package static func secret(of entry: CacheEntry) -> JSONObject {
        MSALDocument.fragment(entry)
    }

    /// The entry in a decrypted secret; nil for a secret this backend cannot interpret. Reads the
    /// bytes in place: no copy of the plaintext is left unwiped.
    package static func entry(fromSecret plaintext: UnsafeRawBufferPointer) -> CacheEntry? {
        guard let base = plaintext.baseAddress else { return nil }
        return entry(fromSecret: Data(bytesNoCopy: UnsafeMutableRawPointer(mutating: base), count: plaintext.count, deallocator: .none))
    }

    package static func entry(fromSecret data: Data) -> CacheEntry? {
        guard let root = try? JSON.decodeObject(data), root.count == 1, let (section, value) = root.first else { return nil }
        guard let kind = EntityKind(section: section) else { return MSALDocument.unknownMember(section, value) }
        guard case .object(let items) = value, items.count == 1,
              let (key, item) = items.first, case .object(let fields) = item else { return nil }
        return CacheEntry(kind: kind, fields: fields, key: key)
    }
}
