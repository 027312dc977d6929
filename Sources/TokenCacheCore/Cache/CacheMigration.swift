import FoundationEssentials

/// Moves a group from one backend to another without losing anything if interrupted:
/// copy every entry, read the destination back and verify it, and only then remove from the
/// source exactly the entries that were copied. Running it again after an interruption
/// finishes the job; entries written to the source meanwhile stay there.
public enum CacheMigration {
    /// What a migration did.
    public struct Report: Sendable, Hashable {
        /// Entries copied to the destination (including ones already there).
        public var copied: Int
        /// Entries removed from the source after verification.
        public var removedFromSource: Int
    }

    /// Migrates the group of `source` to the backend of `destination`, which must open the same
    /// group (a sandboxed app moving its cache from the host's keyring to its own).
    /// - Throws: ``TokenCacheError`` `invalidArgument` when the stores' groups differ; when
    ///   verification fails the source is left untouched.
    @discardableResult
    public static func migrate(from source: AccountStore, to destination: AccountStore) throws(TokenCacheError) -> Report {
        guard source.group == destination.group else {
            throw TokenCacheError.invalidArgument("destination", "opens group \(destination.group), not \(source.group)",
                                                  hint: "Open both stores on the group to move")
        }
        return try migrate(source.group, from: source.backend, to: destination.backend)
    }

    /// Migrates `group` from `source` to `destination`.
    /// - Throws: ``TokenCacheError``; when verification fails the source is left untouched.
    @discardableResult
    @_spi(Backend) public static func migrate(_ group: CacheGroup, from source: any CacheBackend,
                               to destination: any CacheBackend) throws(TokenCacheError) -> Report {
        let entries = try source.load(group).entries
        guard !entries.isEmpty else { return Report(copied: 0, removedFromSource: 0) }
        _ = try destination.apply(entries.map(CacheChange.upsert), to: group, expected: nil)

        let copied = Dictionary(try destination.load(group).entries.map { ("\($0.kind.rawValue)/\($0.key)", $0) },
                                uniquingKeysWith: { first, _ in first })
        for entry in entries where copied["\(entry.kind.rawValue)/\(entry.key)"]?.fields != entry.fields {
            throw TokenCacheError(.migrationNotVerified,
                                  "Migration of group \(group) could not be verified: an entry read back from \(destination.location(of: group)) differs.",
                                  hint: "Nothing was removed from \(source.location(of: group)); run the migration again")
        }
        _ = try source.apply(entries.map { .remove($0.kind, key: $0.key) }, to: group, expected: nil)
        return Report(copied: entries.count, removedFromSource: entries.count)
    }
}

extension CacheMigration {
    /// Copies an MSAL JSON cache another tool keeps into `store`'s group through the import
    /// path (unknown fields and sections are kept), then reads the group back from its backend
    /// and verifies that every entry of the cache is there with equal fields, but those the
    /// group held written later (kept, as an import keeps them). Nothing is removed from the
    /// group, so its other entries stay. Returns how many entries were copied.
    /// - Throws: `invalidCacheData` when the cache holds entries that could not be copied (then
    ///   nothing is written); `migrationNotVerified`; backend errors.
    public static func copy(msalJSON json: Data, into store: AccountStore) throws(TokenCacheError) -> Int {
        let entries = try copyableEntries(json)
        let kept = Set(try store.merge(entries).keptNewer.map { "\($0.kind.rawValue)/\($0.key)" })
        // Read back from the backend itself, not through the store's view of it.
        try verify(entries.filter { !kept.contains("\($0.kind.rawValue)/\($0.key)") }, in: try store.backend.load(store.group).entries,
                   destination: "group \(store.group) on \(store.backend.location(of: store.group))")
        return entries.count
    }

    /// Writes `entries` into `store`, except where the store already holds the same entity
    /// written later (``AccountStore/merge(_:)``), which is kept. Returns how many entries
    /// changed and the entries not written because the store's were newer.
    package static func merge(_ entries: [CacheEntry], into store: AccountStore) throws(TokenCacheError) -> (changed: Int, keptNewer: [CacheEntry]) {
        try store.merge(entries)
    }

    /// The entries of an MSAL JSON cache, when every one can be copied.
    /// - Throws: `invalidCacheData` when some are not JSON objects (nothing is to be written).
    package static func copyableEntries(_ json: Data) throws(TokenCacheError) -> [CacheEntry] {
        let (entries, report) = try AccountStore.parseMSALJSON(json)
        guard report.skipped.isEmpty else {
            throw TokenCacheError(.invalidCacheData, "The cache holds \(report.skipped.count) entries that are not JSON objects; nothing was copied, so that nothing of them is lost.",
                                  hint: "Let its owner rewrite the cache (sign in again there)")
        }
        return entries
    }

    /// Checks that every copied entry was read back from the destination with equal fields.
    /// - Throws: `migrationNotVerified` naming the destination.
    package static func verify(_ entries: [CacheEntry], in stored: [CacheEntry], destination: String) throws(TokenCacheError) {
        let byKey = Dictionary(stored.map { ("\($0.kind.rawValue)/\($0.key)", $0) }, uniquingKeysWith: { first, _ in first })
        for entry in entries where byKey["\(entry.kind.rawValue)/\(entry.key)"]?.fields != entry.fields {
            // The import keeps an equal entry already there under its own key.
            guard stored.contains(where: { $0.kind == entry.kind && $0.fields == entry.fields }) else {
                throw TokenCacheError(.migrationNotVerified,
                                      "The copy into \(destination) could not be verified: an entry read back differs.",
                                      hint: "The source was not changed; run the migration again")
            }
        }
    }
}
