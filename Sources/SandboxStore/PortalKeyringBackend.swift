import FoundationEssentials
@_spi(Backend) import TokenCacheCore
import TokenCacheDBus

/// The backend of sandboxed apps (Flatpak, Snap): each cache entry is one item of the app's
/// libsecret/oo7 file keyring (`$XDG_DATA_HOME/keyrings/default.keyring`, in Flatpak
/// `~/.var/app/<id>/data/keyrings/`), whose key is derived from the secret the Secret portal
/// keeps for the app. Items carry the Secret Service backend's schema, attributes and labels,
/// so libsecret (`secret-tool`) and oo7 code of the same app see the same items.
///
/// Nothing key-like is written to disk: the portal's secret stays in memory of its own.
public final class PortalKeyringBackend: @unchecked Sendable {
    // @unchecked: the keyring serializes its own state.
    let keyring: FileKeyring

    /// The keyring file.
    public var path: String { keyring.path }

    package init(keyring: FileKeyring) { self.keyring = keyring }

    /// Opens the app's file keyring with the secret the Secret portal gives this app.
    /// - Parameter path: the keyring file; by default libsecret's and oo7's (``FileKeyring/defaultPath(environment:)``).
    /// - Throws: `portalCancelled`, `portalFailed`, `noSessionBus` or `timedOut`.
    public convenience init(path: String? = nil, portalTimeout: Double = 60) throws(TokenCacheError) {
        let secret = try SecretPortal.retrieveSecret(timeoutSeconds: portalTimeout)
        self.init(keyring: FileKeyring(path: path ?? FileKeyring.defaultPath(), secret: UnsafeRawBufferPointer(secret.bytes)))
    }

    @_spi(Backend) public func location(of group: CacheGroup) -> String {
        "file keyring \(path) (libsecret/oo7 format, key from the Secret portal), items tagged group=\(group)"
    }

    /// The attributes every item of the group has.
    private static func groupAttributes(_ group: CacheGroup) -> [String: String] {
        ["xdg:schema": SecretItemSchema.name, "group": group.name]
    }

    private func entries(matching attributes: [String: String]) throws(TokenCacheError) -> [CacheEntry] {
        try keyring.items(matching: attributes).compactMap { item in
            var secret = item.secret
            defer { secret.resetBytes(in: secret.indices) }
            return SecretItemSchema.entry(fromSecret: secret)
        }
    }

    private static func revision(_ signature: FileKeyring.FileSignature?) -> CacheRevision {
        CacheRevision("keyring:" + (signature?.description ?? "none"))
    }

    @_spi(Backend) public func load(_ group: CacheGroup) throws(TokenCacheError) -> CacheSnapshot {
        let before = try keyring.signature()
        let entries = try entries(matching: Self.groupAttributes(group))
        // A write between the two looks is caught by the caller's next revision check.
        return CacheSnapshot(entries: entries, revision: try keyring.signature() == before ? Self.revision(before) : nil)
    }

    /// One attribute search per query over the keyring's hashed attributes; each entry once.
    @_spi(Backend) public func entries(matchingAny queries: [CacheQuery], in group: CacheGroup) throws(TokenCacheError) -> [CacheEntry] {
        var found: [CacheEntry] = [], seen: Set<String> = []
        for query in queries {
            var attributes = SecretItemSchema.searchAttributes(query, group: group)
            attributes["xdg:schema"] = SecretItemSchema.name
            for entry in try entries(matching: attributes) where seen.insert("\(entry.kind.rawValue)/\(entry.key)").inserted {
                found.append(entry)
            }
        }
        return found
    }

    @_spi(Backend) public func currentRevision(of group: CacheGroup) throws(TokenCacheError) -> CacheRevision? {
        Self.revision(try keyring.signature())
    }

    /// Applies the changes in one write of the file, under the keyring's lock.
    @_spi(Backend) public func apply(_ changes: [CacheChange], to group: CacheGroup,
                      expected: CacheRevision?) throws(TokenCacheError) -> CacheRevision? {
        // Labels name the user where the batch says who it is, as on the Secret Service.
        var usernames: [String: String] = [:]
        for case .upsert(let entry) in changes where entry.kind == .account {
            if let home = entry["home_account_id"], let username = entry["username"], !username.isEmpty { usernames[home] = username }
        }
        let (before, after) = try keyring.modify { (edit) throws(TokenCacheError) -> FileKeyring.FileSignature? in
            for change in changes {
                switch change {
                case .upsert(let entry):
                    var json: Data
                    do { json = try JSON.encode(SecretItemSchema.secret(of: entry)) } catch {
                        throw TokenCacheError(.invalidCacheData, "An entry could not be encoded as JSON.")
                    }
                    defer { json.resetBytes(in: json.indices) }
                    var attributes = SecretItemSchema.attributes(of: entry, group: group)
                    attributes["xdg:schema"] = SecretItemSchema.name
                    // Every older copy goes, also one whose other attributes (a username) changed.
                    try edit.remove(matching: Self.groupAttributes(group).merging(["kind": entry.kind.rawValue, "key": entry.key]) { $1 })
                    try edit.store(attributes: attributes,
                                   label: SecretItemSchema.label(of: entry, username: entry["home_account_id"].flatMap { usernames[$0] }),
                                   secret: json)
                case .remove(let kind, let key):
                    try edit.remove(matching: Self.groupAttributes(group).merging(["kind": kind.rawValue, "key": key]) { $1 })
                }
            }
            return edit.readSignature
        }
        guard let expected, expected == Self.revision(before) else { return nil }
        return Self.revision(after)
    }

    @_spi(Backend) public func removeAll(in group: CacheGroup) throws(TokenCacheError) {
        _ = try keyring.modify { (edit) throws(TokenCacheError) in try edit.remove(matching: Self.groupAttributes(group)) }
    }
}

// Implements the backend protocol, which only this package's modules, tests and benchmarks see.
@_spi(Backend) extension PortalKeyringBackend: CacheBackend {}

extension AccountStore {
    /// Opens the store for a group kept in the sandboxed app's own keyring file, unlocked through the desktop portal. Nothing is read until the first call.
    public convenience init(backend: PortalKeyringBackend, group: CacheGroup = .universalStorage, options: Options = Options()) {
        self.init(backend: backend as any CacheBackend, group: group, options: options)
    }
}
