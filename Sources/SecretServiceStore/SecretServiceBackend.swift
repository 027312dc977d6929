@_spi(Backend) import TokenCacheCore
import TokenCacheDBus
import TokenCachePlatform
import FoundationEssentials

/// The primary storage: each cache entry is one Secret Service item (GNOME Keyring, KWallet,
/// KeePassXC), the way MSAL keeps one keychain item per entity, and each group maps onto a
/// Secret Service collection.
///
/// - Mapping: by default every group lives in the `default` alias collection, its items tagged
///   with the group, so nothing ever prompts to create a keyring. A group can instead use the
///   in-memory `session` collection or a dedicated collection found by label.
/// - Items carry a versioned attribute schema (`org.swift-tokencache.Entry`, see
///   docs/SecretService.md) so single lookups are targeted searches; the secret is the entry's
///   MSAL JSON. Bulk reads use one search for paths and GetSecrets calls in batches.
///   Sessions are encrypted.
/// - Every D-Bus call is bounded in time. Errors are typed (no bus, no service, collection
///   missing, locked, prompt dismissed, timed out), and no error ever deletes or overwrites
///   an entry; a locked keyring is reported, never read as empty.
/// - Coherence: the backend listens to the collections' item signals, so another process's
///   change is seen on the next lookup while warm lookups stay in memory.
public final class SecretServiceBackend: @unchecked Sendable {
    // @unchecked: `connection` is immutable after init and GDBus's and libsecret's sync calls
    // are safe from any thread; mutable state is behind `Locked` values.

    /// Where a group's items live.
    public enum CollectionMapping: Sendable, Hashable {
        /// The `default` alias collection (usually "Login"), items tagged with the group.
        case defaultCollection
        /// The in-memory `session` collection: gone when the user logs out.
        case session
        /// A collection of its own, found by label; created only when `createIfMissing`
        /// (headless creation fails: GNOME Keyring must prompt for a new password).
        case dedicated(label: String, createIfMissing: Bool = false)
    }

    /// Options.
    public struct Options: Sendable {
        /// Mapping for groups not listed in `mappings`.
        public var defaultMapping: CollectionMapping = .defaultCollection
        /// Per-group mappings.
        public var mappings: [CacheGroup: CollectionMapping] = [:]
        /// Bound on each D-Bus call, in seconds.
        public var callTimeout: TimeInterval = 10
        /// Whether a prompt that needs the user (an unlock dialog, an access confirmation) may be
        /// shown and waited for, up to `unlockTimeout`. Without it a prompt is still run, but only
        /// for `silentPromptTimeout`: one that completes that fast needed nobody (KWallet's unlock
        /// of an open wallet, KeePassXC's writes); otherwise it is dismissed and the collection is
        /// reported `keyringLocked` (when its `Locked` is true) or the write `promptDismissed`.
        public var allowsUnlockPrompt = false
        /// Whether a missing `default` collection is created through the provider's prompt, as
        /// libsecret does ("Choose password for new keyring"; the prompt follows
        /// `allowsUnlockPrompt`). Off for looks that must change nothing (`tokencache doctor`).
        package var createsDefaultCollection = true
        /// Bound on waiting for a prompt the user may answer, in seconds.
        public var unlockTimeout: TimeInterval = 60
        /// Bound on a prompt run without `allowsUnlockPrompt`, in seconds (see there).
        public var silentPromptTimeout: TimeInterval = 2
        /// Items per GetSecrets call in a bulk read. gnome-keyring answers GetSecrets item by
        /// item, at a cost per item that grows with the collection, so one call for a whole large
        /// group grows with the square of its size (3.9 s for 10,003 items at 1,000 accounts x 3
        /// clients here) and can outlast `callTimeout`; each batch gets its own bound. (Internal:
        /// tests make it small.)
        var secretsPerCall = 500

        /// Default options: default collection, 10 s per call, no prompts.
        public init() {}
    }

    /// The schema name every item carries (`xdg:schema`).
    public static let schemaName = SecretItemSchema.name
    /// The version of the attribute schema.
    public static let schemaVersion = SecretItemSchema.version

    /// The Secret Service's well-known bus name.
    static let busName = "org.freedesktop.secrets"

    let options: Options
    /// Owns the client, the session and the signal counter.
    private let connection: Connection
    /// Every Secret Service call the backend makes goes through the client's typed API.
    var client: SecretServiceClient { connection.client }
    var signals: ItemSignalCounter { connection.signals }
    var session: SessionHeadStart { connection.session }
    /// Whether this backend took the connection ``connectInBackground(callTimeout:)`` made.
    package let connectedInBackground: Bool
    private let collectionPaths = Locked<[CollectionMapping: String]>([:])

    func cachedCollectionPath(_ mapping: CollectionMapping) -> String? { collectionPaths.withLock { $0[mapping] } }
    func rememberCollectionPath(_ mapping: CollectionMapping, _ path: String) { collectionPaths.withLock { $0[mapping] = path } }

    /// Connects to the Secret Service on the session bus, loading libgcrypt on first use; takes
    /// the connection ``connectInBackground(callTimeout:)`` made, when it is ready in time.
    /// - Throws: ``TokenCacheError`` `libgcryptMissing`, `noSessionBus` or `timedOut`. A bus with
    ///   no Secret Service provider (none running, none to start) is reported by the first call,
    ///   as `noSecretService` (``BackendSelection`` makes one before choosing this backend).
    public init(options: Options = Options()) throws(TokenCacheError) {
        self.options = options
        let early = Connection.takeEarly(waitingAtMost: options.callTimeout)
        connectedInBackground = early != nil
        if let early {
            connection = early
        } else {
            connection = try Connection(callTimeout: options.callTimeout)
        }
    }

    func mapping(for group: CacheGroup) -> CollectionMapping {
        options.mappings[group] ?? options.defaultMapping
    }

    /// Where the group's items live, for people.
    @_spi(Backend) public func location(of group: CacheGroup) -> String {
        switch mapping(for: group) {
        case .defaultCollection: "Secret Service, collection alias 'default', items tagged group=\(group)"
        case .session: "Secret Service, in-memory collection alias 'session', items tagged group=\(group)"
        case .dedicated(let label, _): "Secret Service, collection '\(label)', items tagged group=\(group)"
        }
    }

    // MARK: CacheBackend

    /// Reads every item of the group: one search for paths, then GetSecrets in batches (`Options.secretsPerCall`).
    /// - Throws: `keyringLocked` when any matching item is locked (never an empty read).
    @_spi(Backend) public func load(_ group: CacheGroup) throws(TokenCacheError) -> CacheSnapshot {
        let revision = signals.revision
        let collection = try collectionPath(for: group)
        let entries = try items(at: searchPaths(["group": group.name], collection: collection), in: collection)
        return CacheSnapshot(entries: entries, revision: revision)
    }

    /// A targeted attribute search (group, kind and `attributes`).
    @_spi(Backend) public func entries(of kind: EntityKind, matching attributes: [CacheAttribute: String],
                        in group: CacheGroup) throws(TokenCacheError) -> [CacheEntry] {
        try entries(matchingAny: [CacheQuery(kind: kind, attributes: attributes)], in: group)
    }

    /// One attribute search per query, then one bulk read of every match (each item once).
    @_spi(Backend) public func entries(matchingAny queries: [CacheQuery], in group: CacheGroup) throws(TokenCacheError) -> [CacheEntry] {
        let collection = try collectionPath(for: group)
        var paths: [String] = [], seen: Set<String> = []
        for matches in try searchPaths(queries.map { SecretItemSchema.searchAttributes($0, group: group) }, collection: collection) {
            for path in matches where seen.insert(path).inserted { paths.append(path) }
        }
        return try items(at: paths, in: collection)
    }

    /// The attributes of the matching entries, read from their items' Attributes property: no
    /// secret is transferred, so this needs no session and does not wait for its key exchange.
    @_spi(Backend) public func attributes(of kind: EntityKind, matching attributes: [CacheAttribute: String],
                           in group: CacheGroup) throws(TokenCacheError) -> [[CacheAttribute: String]] {
        let paths = try searchPaths(CacheQuery(kind: kind, attributes: attributes), in: group)
        return try client.attributes(ofItems: paths).map { stored in
            var attributes: [CacheAttribute: String] = [:]
            for (name, value) in stored {
                if let attribute = CacheAttribute(rawValue: name) { attributes[attribute] = value }
            }
            return attributes
        }
    }

    /// The paths of the query's matches in the group's collection.
    func searchPaths(_ query: CacheQuery, in group: CacheGroup) throws(TokenCacheError) -> [String] {
        try searchPaths(SecretItemSchema.searchAttributes(query, group: group), collection: try collectionPath(for: group))
    }

    /// The item-signal revision: an atomic load, no D-Bus traffic; nil when not subscribed.
    @_spi(Backend) public func currentRevision(of group: CacheGroup) throws(TokenCacheError) -> CacheRevision? {
        signals.revision
    }

    /// Upserts (store with the full attribute set: atomic replace) and removals, in order.
    /// Returns a revision only when no foreign change can have happened since `expected`.
    @_spi(Backend) public func apply(_ changes: [CacheChange], to group: CacheGroup,
                      expected: CacheRevision?) throws(TokenCacheError) -> CacheRevision? {
        let before = signals.revision
        let foreignBefore = signals.foreignCount
        let receivedBefore = signals.receivedCount
        let collection = try collectionPath(for: group)
        let write = signals.beginLocalWrite()
        // No other write of this process slipped in between reading `before` and now.
        let exclusive = before != nil && before == signals.revision(foreign: foreignBefore, local: write - 1)
        var operations = 0
        // Account for our own signals even when a later change fails.
        defer { signals.expectOwn(operations) }
        // Labels name the user where the batch says who it is (a saved response carries its account).
        var usernames: [String: String] = [:]
        for case .upsert(let entry) in changes where entry.kind == .account {
            if let home = entry["home_account_id"], let username = entry["username"], !username.isEmpty { usernames[home] = username }
        }
        for change in changes {
            switch change {
            case .upsert(let entry):
                try store(entry, group: group, collection: collection,
                          label: SecretItemSchema.label(of: entry, username: entry["home_account_id"].flatMap { usernames[$0] }))
                operations += 1
                if entry.kind == .account {
                    operations += try removeStaleCopies(of: entry, group: group, collection: collection)
                }
            case .remove(let kind, let key):
                for path in try searchPaths(["group": group.name, "kind": kind.rawValue, "key": key], collection: collection) {
                    try delete(path, in: collection)
                    operations += 1
                }
            }
        }
        // Our own signals arrive within milliseconds; any extra one came from another process.
        // Conservative: when unsure (late signals, extra signals, no subscription), return nil.
        let settled = signals.wait(until: receivedBefore + Int64(operations), timeout: 1)
        let foreign = signals.receivedCount - receivedBefore != Int64(operations)
        guard let expected, before == expected, exclusive, settled, !foreign else { return nil }
        return signals.revision(foreign: foreignBefore, local: write)
    }

    /// Deletes every item of the group (items of other groups in the collection stay).
    @_spi(Backend) public func removeAll(in group: CacheGroup) throws(TokenCacheError) {
        let collection = try collectionPath(for: group)
        let receivedBefore = signals.receivedCount
        _ = signals.beginLocalWrite()
        var deleted = 0
        defer { signals.expectOwn(deleted) }
        for path in try searchPaths(["group": group.name], collection: collection) {
            try delete(path, in: collection)
            deleted += 1
        }
        signals.wait(until: receivedBefore + Int64(deleted), timeout: 1)
    }

    // MARK: Items

    /// One CreateItem call with `replace`: an atomic upsert of the item with exactly these
    /// attributes (``write(in:_:)`` handles a prompt).
    private func store(_ entry: CacheEntry, group: CacheGroup, collection: String, label: String) throws(TokenCacheError) {
        var json: Data
        do { json = try JSON.encode(SecretItemSchema.secret(of: entry)) } catch {
            throw TokenCacheError(.invalidCacheData, "An entry could not be encoded as JSON.")
        }
        defer { json.resetBytes(in: json.indices) }
        var attributes = SecretItemSchema.attributes(of: entry, group: group)
        attributes["xdg:schema"] = SecretItemSchema.name  // as libsecret's own stores do
        let current = try session.session()
        func create(in transfer: TransferSession) throws(TokenCacheError) {
            let sealed = GVariantRef(sinking: try transfer.secretStruct(json, contentType: "application/json"))
            try write(in: collection) { () throws(TokenCacheError) in
                try client.createItem(in: collection, label: label, attributes: attributes, secret: sealed, replace: true).prompt
            }
        }
        do {
            try create(in: current)
        } catch where error.reason == .secretServiceSessionLost {
            // kwalletd5 sometimes no longer knows a session it opened: once more, in a fresh one.
            try create(in: try session.renew(replacing: current))
        }
    }

    /// How long a prompt is waited for: `unlockTimeout` when prompts are allowed, else the short
    /// `silentPromptTimeout` (a prompt that completes within it needed no user).
    var promptTimeout: TimeInterval { options.allowsUnlockPrompt ? options.unlockTimeout : options.silentPromptTimeout }

    /// Makes a write (CreateItem, Delete) in `collection`. A prompt the provider answers with is
    /// run as the specification says (Prompt, then its Completed signal, within
    /// ``promptTimeout``): KeePassXC answers every write with one that completes at once, and
    /// its completion is the write. A prompt not completed in time is dismissed; then, only when
    /// the collection's `Locked` is true, it is unlocked the usual way and the write made once
    /// more (else `keyringLocked`); an unlocked collection's unanswered prompt is
    /// `promptDismissed`. A failed write into a locked collection is `keyringLocked`.
    func write(in collection: String, _ attempt: () throws(TokenCacheError) -> ObjectPath?) throws(TokenCacheError) {
        for afterUnlocking in [false, true] {
            let prompt: ObjectPath?
            do { prompt = try attempt() } catch { throw writeFailure(error, in: collection) }
            guard let prompt else { return }
            if case .completed = try client.complete(prompt, timeout: promptTimeout, action: "confirm a write to \(collection)") { return }
            let unconfirmed = Self.writeNotConfirmed(collection, timeout: promptTimeout, allowed: options.allowsUnlockPrompt)
            if afterUnlocking { throw try client.isLocked(collection) ? Self.locked(collection) : unconfirmed }
            // Locked: unlocked now (or `keyringLocked`), then written once more.
            guard try checkUnlocked(collection) else { throw unconfirmed }
        }
        throw Self.locked(collection)
    }

    static func writeNotConfirmed(_ collection: String, timeout: TimeInterval, allowed: Bool) -> TokenCacheError {
        TokenCacheError(.promptDismissed,
                        "The Secret Service asked to confirm a write to \(collection), and the prompt was dismissed or not answered within \(Int(timeout.rounded(.up))) s.",
                        hint: allowed
                            ? "Confirm the provider's dialog, or turn off its access confirmation (KeePassXC: Settings, Secret Service Integration); nothing was changed"
                            : "Allow the prompt (--allow-prompt), or turn off the provider's access confirmation (KeePassXC: Settings, Secret Service Integration); nothing was changed")
    }

    /// Store replaces only an item with exactly the same attributes, and an account record's
    /// attributes can change under one key (a renamed username; records written before the
    /// `username` attribute existed). Deletes the other items with this key, keeping the one
    /// just stored. Returns how many were deleted.
    private func removeStaleCopies(of entry: CacheEntry, group: CacheGroup, collection: String) throws(TokenCacheError) -> Int {
        let sameKey = try searchPaths(["group": group.name, "kind": entry.kind.rawValue, "key": entry.key], collection: collection)
        guard sameKey.count > 1 else { return 0 }
        let current = Set(try searchPaths(SecretItemSchema.attributes(of: entry, group: group), collection: collection))
        guard !current.isEmpty else { return 0 }  // never delete without the new item in sight
        var deleted = 0
        for path in sameKey where !current.contains(path) {
            try delete(path, in: collection)
            deleted += 1
        }
        return deleted
    }

    /// One Item.Delete call (``write(in:_:)`` handles a prompt).
    private func delete(_ path: String, in collection: String) throws(TokenCacheError) {
        try write(in: collection) { () throws(TokenCacheError) in try client.delete(path) }
    }

    /// Paths of this schema's items matching `query` in the collection. An empty answer from a
    /// locked collection (a provider may hide a locked collection's items) is `keyringLocked`,
    /// never an empty read.
    func searchPaths(_ query: [String: String], collection: String) throws(TokenCacheError) -> [String] {
        try searchPaths([query], collection: collection)[0]
    }

    /// The same for several queries, their searches sent together (``collectionSearches(_:in:)``).
    func searchPaths(_ queries: [[String: String]], collection: String) throws(TokenCacheError) -> [[String]] {
        let searches = queries.map { query in
            var attributes = query
            attributes["xdg:schema"] = SecretItemSchema.name  // as libsecret's own searches do
            return attributes
        }
        return try zip(searches, try client.searchItems(in: collection, eachOf: searches)).map { (search, paths) throws(TokenCacheError) -> [String] in
            // Unlocked by a prompt just now: search again, the provider may have hidden its items.
            if paths.isEmpty, try checkUnlocked(collection) { return try client.searchItems(in: collection, search) }
            return paths
        }
    }

    /// Paths of this schema's items matching `query` in every collection, split by lock state
    /// (Service.SearchItems; for diagnostics).
    func searchAllPaths(_ query: [String: String]) throws(TokenCacheError) -> (unlocked: [String], locked: [String]) {
        var attributes = query
        attributes["xdg:schema"] = SecretItemSchema.name
        return try client.searchItems(attributes)
    }

    /// The entries stored at `paths` in `collection`, read with GetSecrets in batches
    /// (`Options.secretsPerCall`).
    ///
    /// An item counts as read only when its secret decrypts and parses. gnome-keyring leaves
    /// locked items out of GetSecrets' answer without an error; KWallet, once locked, answers
    /// every item with an empty secret. So any item not read leads to one Locked check (then an
    /// unlock, under the prompt rule of `Options.allowsUnlockPrompt`, and a second read). When
    /// no secret of an answer decrypts and parses in an unlocked collection, the session's key
    /// may be wrong (``TransferSession`` avoids the sessions kwalletd5 is known to get wrong): the session
    /// is replaced by a fresh one and the read made once more.
    /// - Throws: `keyringLocked` when the collection is locked (never an empty read);
    ///   `secretServiceFailure` when a fresh session still decrypts none of an answer's secrets.
    private func items(at paths: [String], in collection: String, afterUnlocking: Bool = false,
                       afterNewSession: Bool = false) throws(TokenCacheError) -> [CacheEntry] {
        guard !paths.isEmpty else { return [] }
        let session = try session.session()
        var entries: [CacheEntry] = []
        entries.reserveCapacity(paths.count)
        var unread = 0, undecryptableAnswers = 0, unreadableAnswers = 0
        for start in stride(from: 0, to: paths.count, by: options.secretsPerCall) {
            let batch = paths[start..<min(start + options.secretsPerCall, paths.count)]
            var decrypted = 0, read = 0
            let answered = try client.getSecrets(batch, session: session) { _, plaintext in
                decrypted += 1
                if let entry = SecretItemSchema.entry(fromSecret: plaintext) { entries.append(entry); read += 1 }
            }
            // Not read: locked, deleted since the search, an empty or undecryptable secret, or one
            // this backend cannot interpret.
            unread += batch.count - read
            if answered > 0, decrypted == 0 { undecryptableAnswers += 1 }
            // With a wrong key a secret still "decrypts" when its garbage happens to end in valid
            // padding (1 in 256 each): an answer of which nothing parses is a wrong key too.
            if answered > 0, read == 0 { unreadableAnswers += 1 }
        }
        guard unread > 0 else { return entries }
        // Unlocked just now: read every item again (once).
        if !afterUnlocking, try checkUnlocked(collection) {
            return try items(at: paths, in: collection, afterUnlocking: true, afterNewSession: afterNewSession)
        }
        guard unreadableAnswers > 0 else { return entries }
        if afterUnlocking, try client.isLocked(collection) { throw Self.locked(collection) }
        // In a fresh session, secrets that decrypt but do not parse are items this backend cannot
        // interpret (skipped, as always); only secrets that decrypt to nothing mean a bad session.
        if afterNewSession, undecryptableAnswers == 0 { return entries }
        guard !afterNewSession else {
            throw TokenCacheError(.secretServiceFailure,
                                  "The Secret Service answered with secrets that do not decrypt, even in a fresh encrypted session.",
                                  hint: "Restart the keyring daemon and retry (tokencache doctor names it); nothing was deleted or overwritten")
        }
        _ = try self.session.renew(replacing: session)
        return try items(at: paths, in: collection, afterUnlocking: afterUnlocking, afterNewSession: true)
    }

    /// The entries in a GetSecrets reply, and how many items it answered for. A secret this
    /// backend cannot interpret is skipped: never deleted, never guessed at.
    /// - Throws: `secretServiceFailure` when a secret belongs to another session.
    static func entries(fromGetSecrets reply: GVariantRef, session: TransferSession) throws(TokenCacheError) -> (entries: [CacheEntry], answered: Int) {
        var entries: [CacheEntry] = []
        let answered = try SecretServiceClient.secrets(inGetSecretsReply: reply, session: session) { _, plaintext in
            if let entry = SecretItemSchema.entry(fromSecret: plaintext) { entries.append(entry) }
        }
        return (entries, answered)
    }
}

// Implements the backend protocol, which only this package's modules, tests and benchmarks see.
@_spi(Backend) extension SecretServiceBackend: CacheBackend {}

extension AccountStore {
    /// Opens the store for a group kept in the Secret Service (the desktop keyring). Nothing is read until the first call.
    public convenience init(backend: SecretServiceBackend, group: CacheGroup = .universalStorage, options: Options = Options()) {
        self.init(backend: backend as any CacheBackend, group: group, options: options)
    }
}
