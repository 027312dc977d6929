import Foundation
import Testing
@testable import TokenCache
@testable import TokenCacheCore
import TokenCacheTestSupport

/// The one pool blocking work runs on (run under ThreadSanitizer in CI with the other Concurrency tests).
@Suite("Blocking pool")
struct BlockingPoolConcurrencyTests {
    /// Jobs that count how many of them run at once; each waits (until 10 s after the gauge was
    /// made) until `target` run together, so a pool that does reach its limit shows it even on a
    /// loaded machine.
    final class Gauge: Sendable {
        // Locked, not Mutex: TSan cannot see Mutex's futex and would report its accesses as races.
        private let counts = Locked((active: 0, peak: 0, finished: 0))
        private let deadline = ContinuousClock.now + .seconds(10)
        func job(target: Int) {
            counts.withLock { $0.active += 1; $0.peak = max($0.peak, $0.active) }
            while counts.withLock({ $0.peak }) < target && ContinuousClock.now < deadline { usleep(1000) }
            usleep(20_000)
            counts.withLock { $0.active -= 1; $0.finished += 1 }
        }
        var peak: Int { counts.withLock { $0.peak } }
        var finished: Int { counts.withLock { $0.finished } }
    }

    @Test("A pool of 3 threads runs 12 jobs submitted at once 3 at a time, and every job")
    func poolBoundsConcurrency() async {
        let pool = BlockingPool(threadLimit: 3)
        let gauge = Gauge()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<12 { group.addTask { await pool.run { gauge.job(target: 3) } } }
        }
        #expect(gauge.peak == 3)
        #expect(gauge.finished == 12)
    }

    @Test("The library's blocking work (BlockingWork.run) never runs more jobs at once than the shared pool's limit")
    func sharedPoolIsBounded() async throws {
        let limit = BlockingPool.shared.threadLimit
        #expect(limit == 16)
        let gauge = Gauge()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<(limit * 3) {
                group.addTask { try await BlockingWork.run { () throws(TokenCacheError) in gauge.job(target: limit) } }
            }
            try await group.waitForAll()
        }
        // Other suites' work shares the pool, so the peak may stay below the limit; never above.
        #expect(gauge.peak <= limit && gauge.peak > 1, "peak \(gauge.peak)")
        #expect(gauge.finished == limit * 3)
    }

    @Test("A job's error and value come back to the awaiting task")
    func runReturnsOutcome() async {
        let pool = BlockingPool(threadLimit: 1)
        #expect(await pool.run { 41 + 1 } == 42)
        await #expect(throws: TokenCacheError.self) {
            try await pool.run { () throws(TokenCacheError) -> Int in throw .invalidArgument("x", "is bad") }
        }
    }
}
