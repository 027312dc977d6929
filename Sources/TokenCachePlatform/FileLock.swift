import SystemPackage
import TokenCacheCore
#if canImport(Glibc)
import Glibc
#endif

/// An exclusive `flock` on a lock file that is never deleted; released in deinit (and by the
/// kernel if the process dies).
package final class FileLock: Sendable {
    private let descriptor: Int32

    /// Opens (creating it, 0600) the lock file at `path` and waits for the lock in the kernel:
    /// for blocking threads only, never async code.
    package convenience init(path: String) throws(TokenCacheError) {
        let descriptor = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw FileIO.error("open lock file", path) }
        self.init(owning: descriptor)
        do { _ = try Self.lock(descriptor, waiting: true) } catch { throw FileIO.error("lock", path, error) }
    }

    /// Takes the lock on `descriptor` (an open lock file, owned from now on: closed on failure
    /// too), waiting as `wait` says while another process holds it, on the calling thread (for
    /// blocking threads only): the pauses sleep the thread, and `isCancelled` is asked at each round.
    /// - Throws: `timedOut()` or `cancelled()`; `fileSystem` when flock fails.
    package static func acquireBlocking(owning descriptor: Int32, path: String, wait: LockWait, timedOut: () -> TokenCacheError,
                                        isCancelled: () -> Bool, cancelled: () -> TokenCacheError) throws(TokenCacheError) -> FileLock {
        let lock = FileLock(owning: descriptor)
        return try wait.runBlocking({ () throws(TokenCacheError) -> FileLock? in
            do throws(Errno) { return try Self.lock(descriptor, waiting: false) ? lock : nil } catch { throw FileIO.error("lock", path, error) }
        }, timedOut: timedOut, isCancelled: isCancelled, cancelled: cancelled)
    }

    private init(owning descriptor: Int32) { self.descriptor = descriptor }

    deinit {
        flock(descriptor, LOCK_UN)
        close(descriptor)
    }

    /// One exclusive `flock` call, retried when a signal interrupts it: true when taken, false
    /// when another open file holds it and `waiting` is false.
    package static func lock(_ descriptor: Int32, waiting: Bool) throws(Errno) -> Bool {
        while flock(descriptor, waiting ? LOCK_EX : LOCK_EX | LOCK_NB) != 0 {
            switch errno {
            case EINTR: continue
            case EWOULDBLOCK where !waiting: return false
            default: throw Errno(rawValue: errno)
            }
        }
        return true
    }
}

/// Waiting for a lock another process holds, until a timeout: the one wait loop of every lock
/// that gives up (refresh locks, msal-extensions lock files). Each round tries once; the pauses
/// between rounds grow from `firstPause` to `longestPause`.
package struct LockWait: Sendable {
    package var timeout: Duration
    package var firstPause: Duration
    package var longestPause: Duration
    /// The clock of the pauses, which sleep the thread, and of the timeout (tests pass a manual one).
    package var clock: any ThreadSleepingClock

    package init(timeout: Duration, firstPause: Duration = .milliseconds(15), longestPause: Duration = .milliseconds(15),
                 clock: any ThreadSleepingClock = ContinuousClock()) {
        self.timeout = timeout
        self.firstPause = firstPause
        self.longestPause = longestPause
        self.clock = clock
    }

    /// Tries `attempt` (nil: still held) until it returns a value, pausing by sleeping the thread
    /// on ``clock``: for blocking threads only, never async code. `isCancelled` is asked before
    /// each round and during each pause: true ends the wait with `cancelled()`, whatever the timeout.
    /// - Throws: `timedOut()` when the lock is still held after the timeout, `cancelled()`, or what `attempt` throws.
    package func runBlocking<Value>(_ attempt: () throws(TokenCacheError) -> Value?, timedOut: () -> TokenCacheError,
                                    isCancelled: () -> Bool = { false },
                                    cancelled: () -> TokenCacheError = { TokenCacheError(.cancelled, "The wait was cancelled.") }) throws(TokenCacheError) -> Value {
        var rounds = Rounds(self, clock: self.clock)
        while true {
            if isCancelled() { throw cancelled() }
            switch try rounds.next(attempt, timedOut: timedOut) {
            case .done(let value): return value
            case .pause(let pause): guard self.clock.sleepThread(for: pause, isCancelled: isCancelled) else { throw cancelled() }
            }
        }
    }

    /// The rounds of one wait: each the attempt's value, or the pause before the next round.
    private struct Rounds {
        enum Step<Value> { case done(Value), pause(Duration) }
        let longestPause: Duration
        let isPast: () -> Bool
        var pause: Duration

        init(_ wait: LockWait, clock: any ThreadSleepingClock) {
            longestPause = wait.longestPause
            isPast = clock.deadline(after: wait.timeout)
            pause = wait.firstPause
        }

        mutating func next<Value>(_ attempt: () throws(TokenCacheError) -> Value?,
                                  timedOut: () -> TokenCacheError) throws(TokenCacheError) -> Step<Value> {
            if let value = try attempt() { return .done(value) }
            guard !isPast() else { throw timedOut() }
            defer { pause = min(pause * 2, longestPause) }
            return .pause(pause)
        }
    }
}
