import Dispatch
import Synchronization
import TokenCacheCore

/// A clock that moves only when the test advances it, so a test of logic waits on virtual time
/// and never sleeps (as NIOEmbedded's `EmbeddedEventLoop.advanceTime(by:)`).
///
/// Written here rather than taken from swift-clocks: its `TestClock` brings two more packages
/// into the test build and lets an `advance` run before the code under test reached its sleep
/// (it yields a number of times and hopes); ``sleeping(_:)`` waits for that moment instead.
package final class ManualClock: ThreadSleepingClock, Sendable {
    package struct Instant: InstantProtocol, CustomStringConvertible {
        /// Time since the clock was made.
        package var offset: Duration

        package func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        package func duration(to other: Instant) -> Duration { other.offset - offset }
        package static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
        package var description: String { "\(offset)" }
    }

    private struct Sleeper {
        let id: Int
        let deadline: Instant
        /// Ends the sleep (true: cancelled): resumes its task, or wakes its thread (``sleepThread(for:isCancelled:)``).
        let wake: @Sendable (_ cancelled: Bool) -> Void
    }

    private struct State {
        var now = Instant(offset: .zero)
        var nextID = 0
        var sleepers: [Sleeper] = []
        /// Tests waiting in ``sleeping(_:)`` for that many sleepers.
        var watchers: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
        var sleeps: [Duration] = []
        /// How many of ``sleeps`` slept a thread (``sleepThread(for:isCancelled:)``).
        var threadSleeps = 0

        /// The watchers whose count of sleepers is reached, removed from the list.
        mutating func satisfiedWatchers() -> [CheckedContinuation<Void, Never>] {
            let ready = watchers.filter { $0.count <= sleepers.count }.map(\.continuation)
            watchers.removeAll { $0.count <= sleepers.count }
            return ready
        }
    }

    private let state = Mutex(State())
    private let isImmediate: Bool

    /// - Parameter immediate: each sleep moves the clock to its end and returns at once (as
    ///   swift-clocks' `ImmediateClock`), for tests that check which waits happen, not when.
    package init(immediate: Bool = false) { isImmediate = immediate }

    package var now: Instant { state.withLock { $0.now } }
    package var minimumResolution: Duration { .zero }

    /// Every sleep asked of this clock so far, as the duration from the moment it was asked.
    package var sleeps: [Duration] { state.withLock { $0.sleeps } }

    /// How many of ``sleeps`` slept a thread rather than suspended a task.
    package var threadSleeps: Int { state.withLock { $0.threadSleeps } }

    /// Suspends until ``advance(by:)`` reaches `deadline`; cancelling the task ends it at once
    /// with `CancellationError`, as `ContinuousClock`'s sleep.
    package func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        let id = state.withLock { state in
            defer { state.nextID += 1 }
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let watchers = state.withLock { state -> [CheckedContinuation<Void, Never>]? in
                    state.sleeps.append(state.now.duration(to: deadline))
                    // Checked under the lock, so a cancellation handled before this point is not missed.
                    if Task.isCancelled {
                        continuation.resume(throwing: CancellationError())
                        return nil
                    }
                    if isImmediate { state.now = max(state.now, deadline) }
                    if deadline <= state.now {
                        continuation.resume()
                        return nil
                    }
                    state.sleepers.append(Sleeper(id: id, deadline: deadline, wake: { cancelled in
                        if cancelled { continuation.resume(throwing: CancellationError()) } else { continuation.resume() }
                    }))
                    return state.satisfiedWatchers()
                }
                watchers?.forEach { $0.resume() }
            }
        } onCancel: {
            let sleeper = state.withLock { state -> Sleeper? in
                guard let index = state.sleepers.firstIndex(where: { $0.id == id }) else { return nil }
                return state.sleepers.remove(at: index)
            }
            sleeper?.wake(true)
        }
    }

    /// Sleeps the calling thread until ``advance(by:)`` moves the clock `duration` on; as a
    /// task's sleep, it counts for ``sleeping(_:)`` and ``sleeps``. Returns false once
    /// `isCancelled` says so (asked every 20 ms of real time while it waits: no time is measured).
    package func sleepThread(for duration: Duration, isCancelled: () -> Bool) -> Bool {
        if isCancelled() { return false }
        let woken = DispatchSemaphore(value: 0)
        let registered = state.withLock { state -> (id: Int, watchers: [CheckedContinuation<Void, Never>])? in
            state.sleeps.append(duration)
            state.threadSleeps += 1
            let deadline = state.now.advanced(by: duration)
            if isImmediate { state.now = max(state.now, deadline) }
            guard deadline > state.now else { return nil }
            defer { state.nextID += 1 }
            state.sleepers.append(Sleeper(id: state.nextID, deadline: deadline, wake: { _ in woken.signal() }))
            return (state.nextID, state.satisfiedWatchers())
        }
        guard let registered else { return true }
        registered.watchers.forEach { $0.resume() }
        while woken.wait(timeout: .now() + .milliseconds(20)) == .timedOut {
            guard isCancelled() else { continue }
            let removed = state.withLock { state -> Bool in
                guard let index = state.sleepers.firstIndex(where: { $0.id == registered.id }) else { return false }
                state.sleepers.remove(at: index)
                return true
            }
            // Not found: the clock reached it first, and its signal is on the way.
            if removed { return false }
            woken.wait()
            return true
        }
        return true
    }

    /// Moves the clock on by `duration` and wakes every sleeper whose deadline it reached (in
    /// the order of their deadlines).
    package func advance(by duration: Duration) {
        let woken = state.withLock { state -> [Sleeper] in
            state.now = state.now.advanced(by: duration)
            let now = state.now
            let due = state.sleepers.filter { $0.deadline <= now }.sorted { $0.deadline < $1.deadline }
            state.sleepers.removeAll { $0.deadline <= now }
            return due
        }
        woken.forEach { $0.wake(false) }
    }

    /// Returns once at least `count` tasks are asleep on this clock: the code under test reached
    /// the wait the test is about to move past. Waits on the clock itself, never on time.
    package func sleeping(_ count: Int = 1) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = state.withLock { state -> Bool in
                if state.sleepers.count >= count { return true }
                state.watchers.append((count, continuation))
                return false
            }
            if ready { continuation.resume() }
        }
    }
}

extension Result {
    /// The failure, if any (for a task's result).
    package var error: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
