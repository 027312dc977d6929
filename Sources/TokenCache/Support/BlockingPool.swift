#if canImport(Glibc)
import Glibc
#endif

/// A bounded set of threads for blocking work, in the manner of swift-nio's `NIOThreadPool`:
/// jobs run in the order they arrive on at most `threadLimit` threads, started as jobs need them
/// and then kept, parked on a condition variable. (Hand-written, not `NIOThreadPool` itself: that
/// lives in NIOPosix, which would bring swift-nio, swift-atomics and swift-collections into every
/// app and into libtokencache.so for these few lines.)
///
/// A job must never wait for another job of the same pool: with every thread waiting, the job
/// waited for would never start.
package final class BlockingPool: @unchecked Sendable {
    // @unchecked: `jobs`, `idle` and `threads` are only touched between lock and unlock of `mutex`.
    package typealias Job = @Sendable () -> Void

    /// The pool the library's blocking work runs on: D-Bus calls, file I/O, file locks, HTTP
    /// transfers. Its threads mostly wait (on a provider, a disk, a server), so more than cores.
    package static let shared = BlockingPool(threadLimit: 16)

    /// The most threads the pool runs at once.
    package let threadLimit: Int
    private var jobs: [Job] = []
    private var next = 0
    private var idle = 0
    private var threads = 0
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let wake: UnsafeMutablePointer<pthread_cond_t>

    package init(threadLimit: Int) {
        precondition(threadLimit > 0, "a pool needs a thread")
        self.threadLimit = threadLimit
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        wake = .allocate(capacity: 1)
        wake.initialize(to: pthread_cond_t())
        pthread_cond_init(wake, nil)
    }

    deinit {
        // Only reached when no thread was ever started: each started thread keeps the pool.
        pthread_cond_destroy(wake)
        wake.deallocate()
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Queues a job; a parked thread takes it, or a new one while the pool is below its limit.
    package func submit(_ job: @escaping Job) {
        pthread_mutex_lock(mutex)
        jobs.append(job)
        // More queued jobs than parked threads (some signalled but not yet awake): one more thread.
        let start = jobs.count - next > idle && threads < threadLimit
        if start { threads += 1 }
        pthread_cond_signal(wake)
        pthread_mutex_unlock(mutex)
        if start { startThread() }
    }

    /// Runs `work` on the pool and returns its result, without holding a cooperative thread meanwhile.
    package func run<T: Sendable, Failure: Error>(_ work: @escaping @Sendable () throws(Failure) -> T) async throws(Failure) -> T {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<T, Failure>, Never>) in
            submit {
                do throws(Failure) { continuation.resume(returning: .success(try work())) } catch {
                    continuation.resume(returning: .failure(error))
                }
            }
        }
        return try result.get()
    }

    private func startThread() {
        var thread = pthread_t()
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        let context = Unmanaged.passRetained(self).toOpaque()
        let status = pthread_create(&thread, &attributes, { context in
            Unmanaged<BlockingPool>.fromOpaque(context!).takeRetainedValue().work()
            return nil
        }, context)
        // Out of threads (RLIMIT_NPROC): the jobs wait for the threads the pool has. With none at
        // all, the job runs here rather than never.
        if status != 0 {
            Unmanaged<BlockingPool>.fromOpaque(context).release()
            pthread_mutex_lock(mutex)
            threads -= 1
            let alone = threads == 0
            pthread_mutex_unlock(mutex)
            if alone { while let job = take(waiting: false) { job() } }
        }
    }

    /// A thread's life: take the oldest job, run it, park when there is none.
    private func work() -> Never {
        while true { take(waiting: true)!() }
    }

    private func take(waiting: Bool) -> Job? {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while next == jobs.count {
            guard waiting else { return nil }
            idle += 1
            pthread_cond_wait(wake, mutex)
            idle -= 1
        }
        let job = jobs[next]
        next += 1
        // Compacted when drained (or long), so the array does not grow with every job ever run.
        if next == jobs.count {
            jobs.removeAll(keepingCapacity: true)
            next = 0
        } else if next >= 1024 {
            jobs.removeFirst(next)
            next = 0
        }
        return job
    }
}
