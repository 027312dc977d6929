import Foundation
import Testing
@testable import TokenCache
@testable import TokenCacheCore
import TokenCacheTestSupport

/// Waiting for another process's refresh ends when the waiting task is cancelled.
@Suite("Refresh-lock cancellation")
struct SSORefreshLockCancellationTests {
    @Test("A refresh wait whose task is cancelled returns cancelled at once, not at the lock's 60 s timeout")
    func cancelledWaitReturnsPromptly() async throws {
        let root = try TestEnvironment.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let directory = root.appendingPathComponent("tokencache/locks")
        // Held here: flock locks belong to the open file, so the second open below waits for it.
        let held = try await RefreshLock.acquire(name: "alice", timeout: 1, directory: directory)
        let waiter = Task { () async -> TokenCacheError? in
            do throws(TokenCacheError) {
                _ = try await RefreshLock.acquire(name: "alice", timeout: 60, directory: directory)
                return nil
            } catch {
                return error
            }
        }
        try await Task.sleep(for: .milliseconds(200))
        let cancelled = ContinuousClock.now
        waiter.cancel()
        let error = await waiter.value
        let elapsed = ContinuousClock.now - cancelled
        withExtendedLifetime(held) {}
        #expect(error?.code == .cancelled, "\(String(describing: error))")
        // Half the 60 s timeout that the wait lasted without the fix: a loaded CI machine took 6 s.
        #expect(elapsed < .seconds(30), "returned \(elapsed) after the cancellation")
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
