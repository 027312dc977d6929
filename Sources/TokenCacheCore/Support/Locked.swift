import Glibc

/// A value guarded by a `pthread_mutex_t`: what `Synchronization.Mutex` does, in a form
/// ThreadSanitizer understands. `Mutex`'s contended path on Linux (a raw futex) is invisible to
/// TSan, which then reports every access inside `withLock` as a race (reproduced in five lines,
/// see RELIABILITY.md); pthread mutexes are intercepted, so a TSan run reports only real races.
package final class Locked<Value> {
    private var value: Value
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    package init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with exclusive access to the value.
    package func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}

// @unchecked: `value` is only touched between lock and unlock of `mutex`; sendable only when the
// value is, so a lock never carries a non-Sendable value to another thread.
extension Locked: @unchecked Sendable where Value: Sendable {}
