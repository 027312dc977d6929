import Foundation
import Testing
@testable import TokenCache

@Suite("Process memory tuning")
struct ProcessMemoryTests {
    @Test("tokencache's malloc tuning asks for huge pages in the main heap and in the heap of the thread that parses half a large cache")
    func hugePagesForLargeCaches() throws {
        let temporary = try TestEnvironment.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: temporary) }
        let directory = temporary.appendingPathComponent("cache")
        let group = try CacheGroup("org.swift-tokencache.huge-pages")
        // 400 accounts: about 1.3 MB, a document parsed in two halves.
        _ = try EncryptedFileBackend(directory: directory).apply(try Fixtures.largeCache(group: group).map { .upsert($0) },
                                                                 to: group, expected: nil)

        let helper = TestEnvironment.binDirectory.appendingPathComponent("TokenCacheTestHelper").path
        let output = try runProcess(helper, ["file-list-huge-pages", directory.path, group.name])
        try #require(output.status == 0, "\(output.stderr)")
        let advised = output.stdout.split(separator: "\n").map { line -> (start: UInt, end: UInt, label: String) in
            let parts = line.split(separator: " ", maxSplits: 1)
            let bounds = parts[0].split(separator: "-").map { UInt($0, radix: 16) ?? 0 }
            return (bounds[0], bounds[1], parts.count > 1 ? String(parts[1]) : "")
        }
        guard FileManager.default.fileExists(atPath: "/sys/kernel/mm/transparent_hugepage/enabled") else {
            // A kernel without transparent huge pages refuses the advice; the listing works all the same.
            #expect(advised.isEmpty)
            return
        }
        // The main heap: 30 MB grown for it, plus the 16 MB top pad, less the first 2 MiB kept small.
        let heap = advised.filter { $0.label == "[heap]" }.reduce(0) { $0 + $1.end - $1.start }
        #expect(heap >= 40 << 20, "\(output.stdout)")
        // The parsing thread's arena heap: mapped at a multiple of 64 MiB, and advised from there.
        if onlineCPUCount() > 1 {
            #expect(advised.contains { $0.label.isEmpty && $0.start % (64 << 20) == 0 }, "\(output.stdout)")
        }
    }
}
