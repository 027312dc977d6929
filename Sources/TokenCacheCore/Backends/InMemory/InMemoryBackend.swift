
/// A backend that keeps groups in process memory: for tests and for apps that want no
/// persistence. Instances share nothing; share one instance to share a cache.
public final class InMemoryBackend {
    private struct Group {
        package var entries: [EntityKind: [String: CacheEntry]] = [:]
        package var generation: UInt64 = 0
        package var revision: CacheRevision { CacheRevision(String(generation)) }
    }

    private let groups = Locked<[CacheGroup: Group]>([:])

    /// Creates an empty in-memory store.
    public init() {}

    /// A store whose `group` holds `entries` as they are, keys included (another tool's blob
    /// loaded for reading and writing back, without the work of an import).
    package init(group: CacheGroup, entries: [CacheEntry]) {
        var stored = Group()
        for entry in entries { stored.entries[entry.kind, default: [:]][entry.key] = entry }
        groups.withLock { $0[group] = stored }
    }

    @_spi(Backend) public func location(of group: CacheGroup) -> String { "in-memory group '\(group)'" }

    @_spi(Backend) public func load(_ group: CacheGroup) throws(TokenCacheError) -> CacheSnapshot {
        groups.withLock { groups in
            let stored = groups[group] ?? Group()
            return CacheSnapshot(entries: stored.entries.values.flatMap(\.values), revision: stored.revision)
        }
    }

    @_spi(Backend) public func apply(_ changes: [CacheChange], to group: CacheGroup,
                      expected: CacheRevision?) throws(TokenCacheError) -> CacheRevision? {
        groups.withLock { groups in
            var stored = groups[group] ?? Group()
            let wasExpected = expected == stored.revision
            for change in changes {
                switch change {
                case .upsert(let entry): stored.entries[entry.kind, default: [:]][entry.key] = entry
                case .remove(let kind, let key): stored.entries[kind]?[key] = nil
                }
            }
            stored.generation += 1
            groups[group] = stored
            return wasExpected ? stored.revision : nil
        }
    }

    @_spi(Backend) public func currentRevision(of group: CacheGroup) throws(TokenCacheError) -> CacheRevision? {
        groups.withLock { ($0[group] ?? Group()).revision }
    }

    @_spi(Backend) public func removeAll(in group: CacheGroup) throws(TokenCacheError) {
        groups.withLock { groups in
            var stored = groups[group] ?? Group()
            stored.entries = [:]
            stored.generation += 1
            groups[group] = stored
        }
    }
}

// Implements the backend protocol, which only this package's modules, tests and benchmarks see.
@_spi(Backend) extension InMemoryBackend: CacheBackend {}
