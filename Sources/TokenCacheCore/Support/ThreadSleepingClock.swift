#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A clock whose sleep can block the calling thread instead of suspending a task: for code that
/// runs to its end on one thread (C's, the command line's, a server connection's, one pool job),
/// which must still wait on the clock a test moves. `ContinuousClock` sleeps the thread; a test's
/// manual clock waits for the test to advance it.
package protocol ThreadSleepingClock: Clock, Sendable where Duration == Swift.Duration {
    /// Sleeps the calling thread for `duration` on this clock. Returns false, early, once
    /// `isCancelled` says so (asked at least every ``ThreadSleep/cancellationCheck`` of real time).
    func sleepThread(for duration: Duration, isCancelled: () -> Bool) -> Bool
}

/// How often a thread's sleep asks whether it was cancelled.
package enum ThreadSleep {
    package static let cancellationCheck: Duration = .milliseconds(20)
}

extension ContinuousClock: ThreadSleepingClock {
    package func sleepThread(for duration: Duration, isCancelled: () -> Bool) -> Bool {
        let end = now.advanced(by: duration)
        while true {
            if isCancelled() { return false }
            let left = now.duration(to: end)
            guard left > .zero else { return true }
            // Whole slices: a sleep of hours still hears its cancellation within one.
            let slice = min(left, ThreadSleep.cancellationCheck)
            usleep(UInt32(max(slice / .microseconds(1), 1)))
        }
    }
}
