import Foundation
import Testing
@_spi(Backend) @testable import TokenCacheCore
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

    @Test("An app migrates between two stores of the same group; stores of different groups are refused and nothing moves")
    func migratesBetweenStores() throws {
        let source = AccountStore(backend: InMemoryBackend()), destination = AccountStore(backend: InMemoryBackend())
        try source.save(Fixtures.tokenResponse(Fixtures.response(for: Fixtures.alice)), clientID: Fixtures.appOne,
                        authority: Fixtures.authority(), scopes: [])
        let before = try source.exportMSALJSON()
        let elsewhere = AccountStore(backend: InMemoryBackend(), group: try CacheGroup("com.example.other"))
        let refused = #expect(throws: TokenCacheError.self) { try CacheMigration.migrate(from: source, to: elsewhere) }
        #expect(refused?.code == .invalidArgument)
        #expect(try source.exportMSALJSON() == before && elsewhere.allAccounts().isEmpty)

        let report = try CacheMigration.migrate(from: source, to: destination)
        #expect(report.copied == 6 && report.removedFromSource == 6)
        #expect(try source.allAccounts().isEmpty)
        #expect(try destination.exportMSALJSON() == before)
        #expect(destination.location == "in-memory group '\(CacheGroup.universalStorage)'")
    }
}
