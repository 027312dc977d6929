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

    /// Migrates `group` from `source` to `destination`.
    /// - Throws: ``TokenCacheError``; when verification fails the source is left untouched.
    @discardableResult
    public static func migrate(_ group: CacheGroup, from source: any CacheBackend,
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
