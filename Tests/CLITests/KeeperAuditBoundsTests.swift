import Foundation
import Testing
import TokenCacheCore
// The CLI's module links the keeper (the only one: scripts/check-module-graph.sh); its package API is visible here.
import TokenCacheKeeper
import TokenCacheTestSupport

/// The audit log's bounds, in process (no users needed).
@Suite("Token keeper audit log", .harness)
struct KeeperAuditBoundsTests {
    @Test("A caller's field is kept printable and bounded (no line forged, no log filled by one request), and a trim whose newest line is longer than half the cap keeps that line instead of emptying the log")
    func oneRequestCannotWipeTheLog() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let forged = "app\nJan 01 00:00:00 host tokencache[1]: granted " + String(repeating: "x", count: 100_000)
        let clean = KeeperAudit.printable(forged)
        #expect(!clean.contains("\n") && clean.contains("\\u{a}") && clean.unicodeScalars.count <= KeeperAudit.maximumFieldLength + 1)

        let audit = KeeperAudit(directory: directory.path, capBytes: 1_000)
        func entry(_ client: String) -> KeeperAudit.Entry {
            KeeperAudit.Entry(time: "2026-12-02T00:00:00Z", app: "/usr/bin/app", uid: 4242, pid: 1, op: "token", group: "g",
                              client: client, account: nil, scopes: [], outcome: "granted")
        }
        for index in 0..<5 { try audit.append(entry("small-\(index)")) }
        // One entry longer than half the cap (600 bytes of client): the trim keeps it, whole.
        let long = String(repeating: "c", count: 600)
        try audit.append(entry(long))
        let kept = try audit.entries(uid: 4242, last: 100)
        #expect(kept.last?.client == long, "the newest entry was lost: \(kept.map { $0.client ?? "-" })")
        let size = try #require(try FileManager.default.attributesOfItem(atPath: audit.path(uid: 4242))[.size] as? Int)
        #expect(size <= 1_000, "the log was not trimmed: \(size) bytes")
    }
}
