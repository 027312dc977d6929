/// A change to one entry of a group.
@_spi(Backend) public enum CacheChange: Sendable, Hashable {
    /// Insert the entry, or replace the entry stored under the same kind and key.
    case upsert(CacheEntry)
    /// Remove the entry stored under this kind and key, if any.
    case remove(EntityKind, key: String)
}

/// An opaque marker of a group's state: it changes whenever any process changes the group.
@_spi(Backend) public struct CacheRevision: Sendable, Hashable {
    package let value: String
    /// Creates a revision from a backend-specific value.
    package init(_ value: String) { self.value = value }
}

/// The contents of a group as read from a backend.
@_spi(Backend) public struct CacheSnapshot: Sendable {
    /// Every entry in the group.
    public var entries: [CacheEntry]
    /// The revision the entries were read at, when the backend can tell.
    public var revision: CacheRevision?

    /// Creates a snapshot.
    public init(entries: [CacheEntry], revision: CacheRevision?) {
        self.entries = entries
        self.revision = revision
    }
}

/// Attributes an entry can be queried by, as a keychain or Secret Service item would be.
@_spi(Backend) public enum CacheAttribute: String, Sendable, Hashable, CaseIterable {
    case homeAccountID = "home_account_id"
    case environment
    case clientID = "client_id"
    case realm
    case familyID = "family_id"
    /// An account record's username, matched case-insensitively (stored lowercased).
    case username

    /// A value as stored and compared: usernames lower-cased, everything else as given.
    package func normalized(_ value: String) -> String {
        self == .username ? value.lowercased() : value
    }
}

/// A targeted query: entries of one kind, or of every kind when `kind` is nil, whose attributes
/// equal the given values.
@_spi(Backend) public struct CacheQuery: Sendable, Hashable {
    /// The kind of entry, or nil for every kind.
    public var kind: EntityKind?
    /// Attribute values every match has.
    public var attributes: [CacheAttribute: String]

    /// Creates a query.
    public init(kind: EntityKind? = nil, attributes: [CacheAttribute: String] = [:]) {
        self.kind = kind
        self.attributes = attributes
    }

    package func matches(_ entry: CacheEntry) -> Bool {
        (kind == nil || entry.kind == kind) && attributes.allSatisfy { attribute, value in
            entry[attribute.rawValue].map(attribute.normalized) == attribute.normalized(value)
        }
    }
}

/// A keychain-like store of cache entries inside groups. The account store is written against
/// this protocol only; the Secret Service, encrypted-file, portal keyring and in-memory backends
/// implement it. `@_spi(Backend)`: entries are built by this package only (`CacheEntry.init` is
/// `package`), so no other module can implement a backend; tests and benchmarks import the SPI to
/// read a group or choose a backend at run time, apps pass a concrete backend to ``AccountStore``.
///
/// Backends store either one item per entry (Secret Service, like MSAL's one keychain item per
/// entity) or the whole group as one blob (encrypted file); both fit because changes are sent
/// as per-entry upserts and removals that a blob backend applies under its own lock.
@_spi(Backend) public protocol CacheBackend: Sendable {
    /// A short description of where data lives, for people: "Secret Service collection
    /// 'Login' (alias default)", "encrypted file ~/.local/share/tokencache/…".
    func location(of group: CacheGroup) -> String

    /// Reads every entry of a group. An unreadable store throws; it is never read as empty.
    func load(_ group: CacheGroup) throws(TokenCacheError) -> CacheSnapshot

    /// Reads every entry of a group for a listing, which shows no token: access and refresh
    /// tokens may come without their `secret` field. A backend that keeps the group in one
    /// encrypted document (the encrypted file) then leaves those secrets in the decrypted
    /// document, which it wipes, instead of copying them out; the default reads everything.
    func loadForListing(_ group: CacheGroup) throws(TokenCacheError) -> CacheSnapshot

    /// Entries of one kind whose attributes equal the given values.
    func entries(of kind: EntityKind, matching attributes: [CacheAttribute: String],
                 in group: CacheGroup) throws(TokenCacheError) -> [CacheEntry]

    /// Entries that match any of the queries, each once. A backend with one item per entry
    /// answers with one search per query and a single read of all the matches.
    func entries(matchingAny queries: [CacheQuery], in group: CacheGroup) throws(TokenCacheError) -> [CacheEntry]

    /// The queryable attributes (as stored: usernames lowercased) of the entries of one kind
    /// whose attributes equal the given values. A backend that keeps attributes apart from
    /// secrets answers without reading any secret (the Secret Service: no session needed).
    func attributes(of kind: EntityKind, matching attributes: [CacheAttribute: String],
                    in group: CacheGroup) throws(TokenCacheError) -> [[CacheAttribute: String]]

    /// Applies changes in order. Entries not named in `changes` are left as they are, including
    /// ones other processes wrote meanwhile.
    ///
    /// - Parameter expected: the revision the caller last read.
    /// - Returns: the group's new revision if the group was still at `expected` before the
    ///   change (so the caller's view plus its changes is the whole truth), otherwise nil.
    func apply(_ changes: [CacheChange], to group: CacheGroup,
               expected: CacheRevision?) throws(TokenCacheError) -> CacheRevision?

    /// The group's current revision, cheaply; nil when the backend cannot tell (callers reload).
    func currentRevision(of group: CacheGroup) throws(TokenCacheError) -> CacheRevision?

    /// Removes every entry of the group.
    func removeAll(in group: CacheGroup) throws(TokenCacheError)
}

@_spi(Backend) extension CacheBackend {
    public func loadForListing(_ group: CacheGroup) throws(TokenCacheError) -> CacheSnapshot {
        try load(group)
    }

    public func entries(of kind: EntityKind, matching attributes: [CacheAttribute: String],
                        in group: CacheGroup) throws(TokenCacheError) -> [CacheEntry] {
        try entries(matchingAny: [CacheQuery(kind: kind, attributes: attributes)], in: group)
    }

    public func entries(matchingAny queries: [CacheQuery], in group: CacheGroup) throws(TokenCacheError) -> [CacheEntry] {
        try load(group).entries.filter { entry in queries.contains { $0.matches(entry) } }
    }

    public func attributes(of kind: EntityKind, matching attributes: [CacheAttribute: String],
                           in group: CacheGroup) throws(TokenCacheError) -> [[CacheAttribute: String]] {
        try entries(of: kind, matching: attributes, in: group).map(\.queryableAttributes)
    }
}

extension CacheEntry {
    /// The entry's attributes as stored and compared (usernames lowercased), empty ones left out.
    package var queryableAttributes: [CacheAttribute: String] {
        var attributes: [CacheAttribute: String] = [:]
        for attribute in CacheAttribute.allCases {
            if let value = self[attribute.rawValue], !value.isEmpty { attributes[attribute] = attribute.normalized(value) }
        }
        return attributes
    }
}
