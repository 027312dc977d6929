import Foundation
import Synchronization
import Testing
@testable import TokenCache
@testable import TokenCacheCore
import TokenCacheTestSupport

/// Waiting for another process's refresh ends when the waiting task is cancelled.
@Suite("Refresh-lock cancellation", .harness)
struct SSORefreshLockCancellationTests {
    @Test("A refresh wait whose task is cancelled returns cancelled within a second, long before the lock's timeout")
    func cancelledWaitReturnsWithinASecond() async throws {
        let root = try TestEnvironment.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let directory = root.appendingPathComponent("tokencache/locks")
        // Held here: flock locks belong to the open file, so the second open below waits for it.
        let held = try await RefreshLock.acquire(name: "alice", timeout: 1, directory: directory)
        // The wait runs on a thread of its own and notes when it returns, so the measure is the
        // library's latency, not how long other suites keep the shared concurrency pool busy.
        let thread = ThreadExecutor()
        defer { thread.stop() }
        let returned = Mutex<ContinuousClock.Instant?>(nil)
        let waiter = Task(executorPreference: thread) { () async -> TokenCacheError? in
            defer { returned.withLock { $0 = .now } }
            do throws(TokenCacheError) {
                // An hour: whenever this test gets to cancel, the wait has not timed out.
                _ = try await RefreshLock.acquire(name: "alice", timeout: 3600, directory: directory)
                return nil
            } catch {
                return error
            }
        }
        try await Task.sleep(for: .milliseconds(200))
        let cancelled = ContinuousClock.now
        waiter.cancel()
        let error = await waiter.value
        let elapsed = try #require(returned.withLock { $0 }) - cancelled
        withExtendedLifetime(held) {}
        #expect(error?.code == .cancelled, "\(String(describing: error))")
        #expect(elapsed < .seconds(1), "returned \(elapsed) after the cancellation")
        // Written only with `swift test --attachments-path DIR`: the distribution over runs.
        Attachment.record("\(elapsed)\n", named: "cancel-latency.txt")
    }

    @Test("A lock held elsewhere still times out with timedOut when the task is not cancelled")
    func uncancelledWaitTimesOut() async throws {
        let root = try TestEnvironment.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let directory = root.appendingPathComponent("tokencache/locks")
        let held = try await RefreshLock.acquire(name: "bob", timeout: 1, directory: directory)
        defer { withExtendedLifetime(held) {} }
        let error = await #expect(throws: TokenCacheError.self) {
            _ = try await RefreshLock.acquire(name: "bob", timeout: 0.3, directory: directory)
        }
        #expect(error?.code == .timedOut)
    }
}

/// A task executor with one thread of its own, apart from the shared concurrency pool.
private final class ThreadExecutor: TaskExecutor, @unchecked Sendable {
    // @unchecked: `jobs` and `stopped` are only touched with `condition` locked.
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var stopped = false

    init() {
        Thread { [self] in
            while let job = next() { job.runSynchronously(on: asUnownedTaskExecutor()) }
        }.start()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.withLock { jobs.append(job); condition.signal() }
    }

    func stop() {
        condition.withLock { stopped = true; condition.signal() }
    }

    private func next() -> UnownedJob? {
        condition.withLock {
            while jobs.isEmpty && !stopped { condition.wait() }
            return jobs.isEmpty ? nil : jobs.removeFirst()
        }
    }
}
