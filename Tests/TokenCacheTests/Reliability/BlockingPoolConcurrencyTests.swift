import Foundation
import Testing
@testable import TokenCache
@_spi(Backend) @testable import TokenCacheCore
@testable import TokenCachePlatform
import TokenCacheTestSupport

/// The pools blocking work runs on (run under ThreadSanitizer in CI with the other Concurrency tests).
@Suite("Blocking pool", .harness)
struct BlockingPoolConcurrencyTests {
    /// Jobs that wait until `target` of them run at once (or 30 s passed, for a pool that never
    /// gets there) and note the most that ran together.
    final class Gauge: Sendable {
        // Locked, not Mutex: TSan cannot see Mutex's futex and would report its accesses as races.
        private let counts = Locked((active: 0, peak: 0, finished: 0))
        private let deadline = ContinuousClock.now + .seconds(30)
        func job(target: Int) {
            counts.withLock { $0.active += 1; $0.peak = max($0.peak, $0.active) }
            while counts.withLock({ $0.peak }) < target && ContinuousClock.now < deadline { usleep(1000) }
            counts.withLock { $0.active -= 1; $0.finished += 1 }
        }
        var peak: Int { counts.withLock { $0.peak } }
        var finished: Int { counts.withLock { $0.finished } }
    }

    /// Submits `count` jobs at once, then waits (off the test threads) until all have run.
    static func runAll(_ count: Int, on pool: BlockingPool, _ job: @escaping @Sendable () -> Void) async throws {
        let done = DispatchSemaphore(value: 0)
        for _ in 0..<count { try pool.submit("gauge") { job(); done.signal() } }
        try await offThePool { for _ in 0..<count { done.wait() } }
    }

    @Test("Every job starts at once, even when each waits for all the others (a fixed pool of 16 would run 16 and let the rest queue)")
    func jobsNeverQueue() async throws {
        let pool = BlockingPool(name: "test", ceiling: 64)
        let gauge = Gauge()
        // Submitted from this thread, not from child tasks: those would need a test thread each
        // to start, and on a loaded machine every test thread may be busy with another test.
        try await Self.runAll(40, on: pool) { gauge.job(target: 40) }
        #expect(gauge.peak == 40)
        #expect(gauge.finished == 40)
    }

    @Test("At its ceiling the pool refuses a job with overloaded, naming the pool and its limit; running jobs go on, and a freed thread is used again")
    func ceilingRefusesWithTypedError() async throws {
        // Parked threads live an hour here: on however slow a machine, the one freed below is still there to reuse.
        let pool = BlockingPool(name: "test", ceiling: 3, idleLifetime: .seconds(3600))
        let release = DispatchSemaphore(value: 0)
        let started = DispatchSemaphore(value: 0)
        for _ in 0..<3 { try pool.submit("held") { started.signal(); release.wait() } }
        for _ in 0..<3 { started.wait() }
        let error = #expect(throws: TokenCacheError.self) { try pool.submit("one too many") {} }
        #expect(error?.code == .overloaded)
        #expect(error?.reason == .threadCeilingReached(pool: "test", limit: 3))
        #expect(error?.message.contains("3") == true)
        #expect(pool.activity().map(\.label) == ["held", "held", "held"])
        release.signal()
        // The thread that finished parks (polled: a thread's return takes however long the machine does), then takes the next job.
        let giveUp = ContinuousClock.now + .seconds(60)
        while pool.activity().count == 3 && ContinuousClock.now < giveUp { try await Task.sleep(for: .milliseconds(5)) }
        #expect(try await pool.run("after") { 42 } == 42)
        #expect(pool.threadCount == 3)
        release.signal()
        release.signal()
    }

    @Test("Parked threads end after their idle lifetime, so the pool shrinks back after a burst")
    func idleThreadsEnd() async throws {
        let pool = BlockingPool(name: "test", ceiling: 16, idleLifetime: .milliseconds(50))
        let gauge = Gauge()
        try await Self.runAll(8, on: pool) { gauge.job(target: 8) }
        #expect(gauge.peak == 8)
        // Polled, not timed: the threads end 50 ms after their last job, on however loaded a machine.
        let giveUp = ContinuousClock.now + .seconds(60)
        while pool.threadCount > 0 && ContinuousClock.now < giveUp { try await Task.sleep(for: .milliseconds(20)) }
        #expect(pool.threadCount == 0)
        #expect(try await pool.run("again") { 7 } == 7)
    }

    @Test("HTTP transfers have a pool of their own, apart from the store work's")
    func transfersHaveTheirOwnLane() {
        #expect(BlockingPool.transfers !== BlockingPool.shared)
        #expect(BlockingPool.transfers.name != BlockingPool.shared.name)
    }

    @Test("A job's error and value come back to the awaiting task")
    func runReturnsOutcome() async throws {
        let pool = BlockingPool(name: "test", ceiling: 1)
        #expect(try await pool.run("sum") { 41 + 1 } == 42)
        await #expect(throws: TokenCacheError.self) {
            try await pool.run("fails") { () throws(TokenCacheError) -> Int in throw .invalidArgument("x", "is bad") }
        }
    }

    @Test("A task cancelled before its job starts gets cancelled at once and the job never runs: no thread is even started")
    func cancelledTaskJobNeverRuns() async throws {
        let pool = BlockingPool(name: "test", ceiling: 4)
        let ran = Locked(false)
        let task = Task { () async -> TokenCacheError? in
            withUnsafeCurrentTask { $0?.cancel() }  // cancelled here, before run: no race with the test
            do throws(TokenCacheError) {
                try await pool.run("never") { ran.withLock { $0 = true } }
                return nil
            } catch {
                return error
            }
        }
        let error = await task.value
        #expect(error?.code == .cancelled)
        #expect(error?.message.contains("never") == true)
        #expect(pool.threadCount == 0, "a thread was started for the cancelled job")
        #expect(ran.withLock { $0 } == false)
    }

    @Test("A job that started runs to its end when its task is cancelled, and its value comes back")
    func startedJobRunsToItsEnd() async throws {
        let pool = BlockingPool(name: "test", ceiling: 4)
        let release = DispatchSemaphore(value: 0)
        let (started, signalStart) = AsyncStream<Void>.makeStream()
        let task = Task { () async -> Result<Int, TokenCacheError> in
            do throws(TokenCacheError) {
                return .success(try await pool.run("held") { signalStart.yield(); release.wait(); return 42 })
            } catch {
                return .failure(error)
            }
        }
        var starts = started.makeAsyncIterator()
        _ = await starts.next()
        task.cancel()
        release.signal()
        #expect(try await task.value.get() == 42)
    }

    @Test("A job run with cancellable: false (saving what a server issued) runs for a cancelled task too")
    func uncancellableJobRuns() async throws {
        let pool = BlockingPool(name: "test", ceiling: 4)
        let task = Task { () async -> Result<Int, TokenCacheError> in
            withUnsafeCurrentTask { $0?.cancel() }
            do throws(TokenCacheError) {
                return .success(try await pool.run("save", cancellable: false) { 7 })
            } catch {
                return .failure(error)
            }
        }
        #expect(try await task.value.get() == 7)
    }
}
