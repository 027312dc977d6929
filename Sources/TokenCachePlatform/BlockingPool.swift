#if canImport(Glibc)
import Glibc
#endif
import Logging
import TokenCacheCore

/// Threads for blocking work — keyring calls, file I/O, file locks, HTTP transfers, the loops
/// that serve sockets — so async code never holds one of Swift's cooperative threads while it
/// waits (there is one per core; a blocked one stalls every other task of the app).
///
/// A job never waits in a queue: it runs at once on a parked thread, or on a new one, up to the
/// pool's `ceiling`, as Dispatch's overcommit queues grow. A job may therefore wait for a lock,
/// a prompt or another job without starving anything, and no timeout counts time spent queued.
/// Threads parked longer than `idleLifetime` end, so the pool shrinks back after a burst. At the
/// ceiling a job is refused with `overloaded` (reason ``TokenCacheError/Reason/threadCeilingReached``),
/// which names the pool and its limit, rather than queued behind work of unknown length.
///
/// Hand-written, not Dispatch (whose Linux global queues add a thread only about once a second
/// when all of theirs block, measured in docs/ARCHITECTURE.md) nor NIOThreadPool (fixed size,
/// FIFO queue: the starvation this pool removes).
package final class BlockingPool: @unchecked Sendable {
    // @unchecked: every stored var is only touched between lock and unlock of `mutex`.
    package typealias Job = @Sendable () -> Void

    /// Keyring calls, file I/O, file locks, browser commands and the loops serving sockets.
    package static let shared = BlockingPool(name: "blocking", ceiling: 256)
    /// Async HTTP transfers (``CurlTransport``'s `send`): a lane of their own, so store work can
    /// never use up the threads they need. A silent refresh's transfer runs in its own job instead,
    /// on the thread the job holds already.
    package static let transfers = BlockingPool(name: "transfers", ceiling: 64)

    /// The pool's name, in errors and diagnostics.
    package let name: String
    /// The most threads the pool runs at once.
    package let ceiling: Int
    /// How long a parked thread waits for a job before it ends.
    package let idleLifetime: Duration

    private struct Pending { let job: Job; let label: String }
    private var pending: [Pending] = []
    private var idle = 0
    private var threads = 0
    private var nextThread = 0
    /// What each thread runs and since when: the report when the ceiling is reached.
    private var running: [Int: (label: String, since: ContinuousClock.Instant)] = [:]
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let wake: UnsafeMutablePointer<pthread_cond_t>
    private static let diagnostics = Logger(label: "tokencache.pool")

    package init(name: String, ceiling: Int, idleLifetime: Duration = .seconds(10)) {
        precondition(ceiling > 0, "a pool needs a thread")
        self.name = name
        self.ceiling = ceiling
        self.idleLifetime = idleLifetime
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        wake = .allocate(capacity: 1)
        wake.initialize(to: pthread_cond_t())
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)  // parked threads' lifetime ignores clock changes
        pthread_cond_init(wake, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        // Only reached when no thread is alive: each thread keeps the pool.
        pthread_cond_destroy(wake)
        wake.deallocate()
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `job` on a parked thread, or on a new one.
    /// - Parameter label: what the job is, for the report when the ceiling is reached.
    /// - Throws: `overloaded` when the pool already runs `ceiling` jobs; the job is not run.
    package func submit(_ label: String, _ job: @escaping Job) throws(TokenCacheError) {
        pthread_mutex_lock(mutex)
        // Each pending job has a parked thread of its own that was woken for it.
        let start = pending.count >= idle
        if start && threads >= ceiling {
            let report = runningReport()
            pthread_mutex_unlock(mutex)
            Self.diagnostics.debug("Blocking pool at its ceiling: a job was refused", metadata: [
                "pool": .string(name), "ceiling": .stringConvertible(ceiling), "job": .string(label), "threads": .string(report)])
            throw TokenCacheError(.overloaded, "The process runs \(ceiling) blocking calls at once in swift-tokencache's \(name) pool, its ceiling; this one was not started.",
                                  hint: "Make fewer calls at once (a keyring, lock or server is holding the others), then retry",
                                  reason: .threadCeilingReached(pool: name, limit: ceiling))
        }
        pending.append(Pending(job: job, label: label))
        if start { threads += 1 } else { pthread_cond_signal(wake) }
        pthread_mutex_unlock(mutex)
        if start { startThread() }
    }

    /// Runs `work` on the pool and returns its result, without holding a cooperative thread meanwhile.
    ///
    /// Cancellable as `NIOThreadPool.runIfActive`: when the task is cancelled before the job
    /// starts, the job never runs and `cancelled` is thrown at once; a job that started runs to
    /// its end (blocking work cannot be interrupted safely) and its result is returned.
    /// With `cancellable` false the job runs even for a cancelled task: for work that must not
    /// be lost, such as saving tokens a server already issued.
    /// - Throws: what `work` throws, `cancelled`, or `overloaded` (``submit(_:_:)``).
    package func run<T: Sendable>(_ label: String, cancellable: Bool = true,
                                  _ work: @escaping @Sendable () throws(TokenCacheError) -> T) async throws(TokenCacheError) -> T {
        let job = CancellableJob<T>()
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<T, TokenCacheError>, Never>) in
                guard job.wait(continuation, cancellable: cancellable) else { return }
                do throws(TokenCacheError) {
                    try submit(label) {
                        guard job.start() else { return }
                        do throws(TokenCacheError) { job.finish(.success(try work())) } catch { job.finish(.failure(error)) }
                    }
                } catch {
                    job.finish(.failure(error))
                }
            }
        } onCancel: {
            if cancellable { job.cancel(label) }
        }
        return try result.get()
    }

    /// The pool job running on the calling thread (a number unique in the process), nil on any
    /// other thread: how a test counts the thread hops of a call (tests, diagnostics).
    package static var currentJob: Int? {
        pthread_getspecific(jobKey).map { Int(bitPattern: $0) }
    }
    private static let jobKey: pthread_key_t = {
        var key = pthread_key_t()
        precondition(pthread_key_create(&key, nil) == 0, "no thread-specific key left")
        return key
    }()
    /// The last job number given out, under `jobNumbers`'s lock.
    private static let jobNumbers = Locked(0)

    /// How many threads the pool has now (running or parked).
    package var threadCount: Int {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return threads
    }

    /// What each thread runs now and for how long, longest first (diagnostics, tests).
    package func activity() -> [(label: String, running: Duration)] {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        let now = ContinuousClock.now
        return running.values.map { ($0.label, now - $0.since) }.sorted { $0.running > $1.running }
    }

    /// `activity()` as one line; the mutex is held.
    private func runningReport() -> String {
        let now = ContinuousClock.now
        var counts: [String: (count: Int, longest: Duration)] = [:]
        for job in running.values {
            let entry = counts[job.label, default: (0, .zero)]
            counts[job.label] = (entry.count + 1, max(entry.longest, now - job.since))
        }
        return counts.sorted { $0.value.count > $1.value.count }
            .map { "\($0.value.count) x \($0.key) (longest \($0.value.longest))" }.joined(separator: "; ")
    }

    private func startThread() {
        var thread = pthread_t()
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        let context = Unmanaged.passRetained(self).toOpaque()
        let status = pthread_create(&thread, &attributes, { context in
            let pool = Unmanaged<BlockingPool>.fromOpaque(context!).takeRetainedValue()
            pool.work()
            return nil
        }, context)
        // Out of threads (RLIMIT_NPROC): the job runs on this thread rather than never.
        if status != 0 {
            Unmanaged<BlockingPool>.fromOpaque(context).release()
            pthread_mutex_lock(mutex)
            threads -= 1
            let job = pending.popLast()
            pthread_mutex_unlock(mutex)
            job?.job()
        }
    }

    /// A thread's life: run the job it was started or woken for, park, end after `idleLifetime` parked.
    private func work() {
        pthread_mutex_lock(mutex)
        let thread = nextThread
        nextThread += 1
        while true {
            while pending.isEmpty {
                idle += 1
                let timedOut = park()
                idle -= 1
                if timedOut && pending.isEmpty {
                    threads -= 1
                    pthread_mutex_unlock(mutex)
                    return
                }
            }
            let next = pending.removeFirst()
            running[thread] = (next.label, .now)
            pthread_mutex_unlock(mutex)
            let number = Self.jobNumbers.withLock { $0 += 1; return $0 }
            pthread_setspecific(Self.jobKey, UnsafeRawPointer(bitPattern: number))
            next.job()
            pthread_setspecific(Self.jobKey, nil)
            pthread_mutex_lock(mutex)
            running[thread] = nil
        }
    }

    /// Waits on `wake` for at most `idleLifetime`; true when the time ran out. The mutex is held.
    private func park() -> Bool {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let (seconds, attoseconds) = idleLifetime.components
        var nanoseconds = Int(now.tv_nsec) + Int(attoseconds / 1_000_000_000)
        var deadline = timespec(tv_sec: now.tv_sec + Int(seconds) + nanoseconds / 1_000_000_000, tv_nsec: 0)
        nanoseconds %= 1_000_000_000
        deadline.tv_nsec = nanoseconds
        return pthread_cond_timedwait(wake, mutex, &deadline) == ETIMEDOUT
    }
}

/// One ``BlockingPool/run(_:cancellable:_:)`` job's state: waiting for its thread, started, or
/// over (cancelled or finished); the continuation is resumed exactly once, by whoever ends it.
private final class CancellableJob<T: Sendable>: Sendable {
    private enum State: Sendable {
        case created
        case waiting(CheckedContinuation<Result<T, TokenCacheError>, Never>)
        case started(CheckedContinuation<Result<T, TokenCacheError>, Never>)
        case cancelled(label: String)
        case over
    }
    private let state = Locked<State>(.created)

    /// Keeps the continuation; false when the task was cancelled already (then it is resumed here).
    func wait(_ continuation: CheckedContinuation<Result<T, TokenCacheError>, Never>, cancellable: Bool) -> Bool {
        let cancelledAs: String? = state.withLock { state in
            if case .cancelled(let label) = state {
                state = .over
                return label
            }
            state = .waiting(continuation)
            return nil
        }
        guard let cancelledAs else { return true }
        continuation.resume(returning: .failure(Self.cancelled(cancelledAs)))
        return false
    }

    /// Marks the job started on its thread; false when it was cancelled first (then it does not run).
    func start() -> Bool {
        state.withLock { state in
            guard case .waiting(let continuation) = state else { return false }
            state = .started(continuation)
            return true
        }
    }

    /// Ends a job that started, or one the pool refused.
    func finish(_ result: Result<T, TokenCacheError>) {
        let continuation: CheckedContinuation<Result<T, TokenCacheError>, Never>? = state.withLock { state in
            switch state {
            case .waiting(let continuation), .started(let continuation):
                state = .over
                return continuation
            case .created, .cancelled, .over: return nil
            }
        }
        continuation?.resume(returning: result)
    }

    /// The task was cancelled: a job not started yet is dropped and its caller answered now.
    func cancel(_ label: String) {
        let continuation: CheckedContinuation<Result<T, TokenCacheError>, Never>? = state.withLock { state in
            switch state {
            case .created:
                state = .cancelled(label: label)
                return nil
            case .waiting(let continuation):
                state = .over
                return continuation
            case .started, .cancelled, .over: return nil
            }
        }
        continuation?.resume(returning: .failure(Self.cancelled(label)))
    }

    static func cancelled(_ label: String) -> TokenCacheError {
        TokenCacheError(.cancelled, "The task was cancelled before its blocking work (\(label)) started; nothing of it was done.",
                        hint: "Retry the call if its result is still needed")
    }
}
