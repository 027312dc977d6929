import Foundation
import Testing
@testable import TokenCacheCore
import TokenCacheTestSupport

@Suite("Migration between backends", .harness)
struct MigrationTests {
    @Test("Migration copies every entry, verifies, then empties the source")
    func migratesEverything() throws {
        let source = InMemoryBackend(), destination = InMemoryBackend()
        let store = AccountStore(backend: source)
        try store.save(Fixtures.tokenResponse(Fixtures.response(for: Fixtures.alice)), clientID: Fixtures.appOne,
                       authority: Fixtures.authority(), scopes: [])
        let before = try store.exportMSALJSON()
        let report = try CacheMigration.migrate(.universalStorage, from: source, to: destination)
        #expect(report.copied == 6 && report.removedFromSource == 6)
        #expect(try source.load(.universalStorage).entries.isEmpty)
        #expect(try AccountStore(backend: destination).exportMSALJSON() == before)
    }

    @Test("Running a migration again after an interruption loses nothing and duplicates nothing")
    func rerunAfterInterruption() throws {
        let source = InMemoryBackend(), destination = InMemoryBackend()
        let store = AccountStore(backend: source)
        try store.save(Fixtures.tokenResponse(Fixtures.response(for: Fixtures.alice)), clientID: Fixtures.appOne,
                       authority: Fixtures.authority(), scopes: [])
        // Interrupted after the copy: both hold the entries.
        _ = try destination.apply(try source.load(.universalStorage).entries.map(CacheChange.upsert), to: .universalStorage, expected: nil)
        try CacheMigration.migrate(.universalStorage, from: source, to: destination)
        #expect(try destination.load(.universalStorage).entries.count == 6)
        #expect(try source.load(.universalStorage).entries.isEmpty)
    }
}
