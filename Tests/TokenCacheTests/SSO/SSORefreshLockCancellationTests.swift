import Foundation
import Testing
@testable import TokenCache
@testable import TokenCacheCore
@testable import TokenCachePlatform
import TokenCacheTestSupport

/// Waiting for another process's refresh (on the refreshing thread, as every refresh waits): it
/// ends when its caller cancels it, when the lock is released, or at the timeout. The wait's
/// pauses and timeout run on a manual clock the test advances, so no test here sleeps or bounds
/// wall-clock time.
@Suite("Refresh-lock cancellation", .harness)
struct SSORefreshLockCancellationTests {
    let root: URL
    let directory: URL
    let clock = ManualClock()

    init() throws {
        root = try TestEnvironment.temporaryDirectory()
        directory = root.appendingPathComponent("tokencache/locks")
    }

    /// Waits (on the manual clock, on a thread of its own) for the lock `held` elsewhere: flock
    /// locks belong to the open file, so this second open waits for the first. Setting
    /// `cancelled` is its caller cancelling it.
    func waiter(_ name: String, timeout: TimeInterval, cancelled: Locked<Bool> = Locked(false)) -> Task<Result<FileLock, TokenCacheError>, Never> {
        let (directory, clock) = (directory, clock)
        return Task { () async -> Result<FileLock, TokenCacheError> in
            do {
                return .success(try await offThePool {
                    try RefreshLock.acquireBlocking(name: name, timeout: timeout, directory: directory, clock: clock,
                                                    isCancelled: { cancelled.withLock { $0 } })
                })
            } catch {
                return .failure(error as! TokenCacheError)
            }
        }
    }

    /// The lock taken at once (nobody holds it).
    func take(_ name: String) throws -> FileLock {
        try RefreshLock.acquireBlocking(name: name, timeout: 1, directory: directory, isCancelled: { false })
    }

    @Test("A refresh wait its caller cancels returns cancelled during its pause, the clock never moving toward the timeout")
    func cancelledWaitReturnsAtOnce() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let held = try take("alice")
        defer { withExtendedLifetime(held) {} }
        let cancelled = Locked(false)
        let waiter = waiter("alice", timeout: 3600, cancelled: cancelled)
        await clock.sleeping()  // it tried once and pauses before the next round
        cancelled.withLock { $0 = true }
        let result = await waiter.value
        #expect(result.error?.code == .cancelled, "\(result)")
        #expect(clock.now.offset == .zero)
    }

    @Test("A lock held elsewhere is waited for up to the timeout, then the wait ends with timedOut")
    func uncancelledWaitTimesOut() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        let held = try take("bob")
        defer { withExtendedLifetime(held) {} }
        let waiter = waiter("bob", timeout: 60)
        await clock.sleeping()
        clock.advance(by: .milliseconds(59_990))
        await clock.sleeping()  // still held, not yet timed out: another round, another 15 ms pause
        clock.advance(by: .milliseconds(15))
        let result = await waiter.value
        #expect(result.error?.code == .timedOut, "\(result)")
        // The pauses between rounds are the lock's 15 ms.
        #expect(clock.sleeps.allSatisfy { $0 == .milliseconds(15) }, "\(clock.sleeps)")
    }

    @Test("A lock released during the wait is taken at the next round")
    func releasedLockIsTaken() async throws {
        defer { try? FileManager.default.removeItem(at: root) }
        var held: FileLock? = try take("carol")
        let waiter = waiter("carol", timeout: 60)
        await clock.sleeping()
        withExtendedLifetime(held) {}
        held = nil
        clock.advance(by: .milliseconds(15))
        let result = await waiter.value
        #expect((try? result.get()) != nil, "\(result)")
        #expect(clock.sleeps == [.milliseconds(15)])
    }
}
