internal import CLibSecret
@_spi(Backend) import TokenCacheCore
import TokenCacheDBus
import TokenCachePlatform
import Dispatch
import FoundationEssentials
import Synchronization

/// Counts the Secret Service's item signals (ItemCreated, ItemChanged, ItemDeleted on any
/// collection) on a private GLib main loop thread. A group's revision is the number of signals
/// not caused by this process's own writes: it changes exactly when another process changed
/// something, which costs a warm lookup one atomic load instead of a D-Bus round trip.
final class ItemSignalCounter: @unchecked Sendable {
    // @unchecked: the counters are atomics, `cached` is Locked; `subscription` is written on
    // the signal thread before it signals `ready`, and read only after `awaitSubscription()`.
    private let tally = SignalTally()
    private let own = Atomic<Int64>(0)
    /// Writes made through this process's backend, so stores sharing the backend see each
    /// other's writes (their own signals are not counted as foreign).
    private let localWrites = Atomic<Int64>(0)
    private let connection: OpaquePointer
    private let subscription: Subscription
    /// Whether some thread has waited for `subscription.ready` (the fast path of `awaitSubscription`).
    private let hasSubscribed = Atomic<Bool>(false)
    /// Distinguishes this counter's revisions from any other instance's (or process's).
    private let token = String(UInt64.random(in: 1...UInt64.max), radix: 36)
    /// The last revision handed out, so a warm lookup allocates nothing.
    private let cached = Locked<(foreign: Int64, local: Int64, revision: CacheRevision)?>(nil)

    init(connection: OpaquePointer) {
        self.connection = connection
        g_object_ref(UnsafeMutableRawPointer(connection))
        subscription = Subscription(connection: connection)
        // The thread holds the tally and the subscription state, never `self`.
        let (tally, subscription) = (tally, subscription)
        // A private queue always gets its own thread; this one keeps it for the counter's life.
        DispatchQueue(label: "tokencache.secret-service-signals").async { Self.run(tally: tally, subscription: subscription) }
        // Not waited for here: the subscription's round trip to the bus overlaps the backend's
        // first calls (0.5 ms of a cold lookup), and every reader of the counts waits for it.
    }

    /// Waits until the subscription is in place (or failed), so no signal that follows a read
    /// is missed. Returns whether it is in place.
    @discardableResult
    private func awaitSubscription() -> Bool {
        if !hasSubscribed.load(ordering: .sequentiallyConsistent) {
            subscription.ready.wait()
            subscription.ready.signal()  // for the next waiter
            hasSubscribed.store(true, ordering: .sequentiallyConsistent)
        }
        return subscription.isActive
    }

    /// Runs on the signal thread: subscribes, makes sure the bus has the match rule, signals
    /// `ready`, then dispatches signals until the tally says stop.
    private static func run(tally: SignalTally, subscription: Subscription) {
        let connection = subscription.connection
        let context = g_main_context_new()
        g_main_context_push_thread_default(context)
        // The subscription owns a reference to the tally, released by GDBus once no callback
        // can run any more (the destroy notify), so a late signal never sees freed memory.
        subscription.id = g_dbus_connection_signal_subscribe(
            connection, nil, "org.freedesktop.Secret.Collection", nil, nil, nil, G_DBUS_SIGNAL_FLAGS_NONE,
            { _, _, _, _, member, _, userData in
                guard let userData, let member else { return }
                let name = String(cString: member)
                if name == "ItemCreated" || name == "ItemChanged" || name == "ItemDeleted" {
                    Unmanaged<SignalTally>.fromOpaque(userData).takeUnretainedValue().received()
                }
            }, Unmanaged.passRetained(tally).toOpaque(),
            { userData in if let userData { Unmanaged<SignalTally>.fromOpaque(userData).release() } })
        if subscription.id != 0 {
            // AddMatch is sent without waiting for a reply; a round trip to the bus on the same
            // connection guarantees it was processed, so no later foreign change is missed.
            var error: UnsafeMutablePointer<GError>?
            let reply = g_dbus_connection_call_sync(connection, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                                    "org.freedesktop.DBus", "GetId", nil, nil,
                                                    G_DBUS_CALL_FLAGS_NONE, 5_000, nil, &error).map(GVariantRef.init(taking:))
            if reply != nil { subscription.isActive = true }
            if let error { g_error_free(error) }
        }
        subscription.context = g_main_context_ref(context)
        subscription.ready.signal()
        while !tally.stop.load(ordering: .sequentiallyConsistent) {
            g_main_context_iteration(context, 1)
        }
        g_main_context_pop_thread_default(context)
        g_main_context_unref(context)
    }

    deinit {
        awaitSubscription()  // the signal thread has set the subscription's id and context
        if subscription.id != 0 { g_dbus_connection_signal_unsubscribe(connection, subscription.id) }
        tally.stop.store(true, ordering: .sequentiallyConsistent)
        if let context = subscription.context {
            g_main_context_wakeup(context)
            g_main_context_unref(context)
        }
        g_object_unref(UnsafeMutableRawPointer(connection))
    }

    /// Signals received so far (counted from the subscription on).
    var receivedCount: Int64 {
        awaitSubscription()
        return tally.count.load(ordering: .sequentiallyConsistent)
    }

    /// Signals not caused by this process's writes.
    var foreignCount: Int64 {
        awaitSubscription()
        return tally.count.load(ordering: .sequentiallyConsistent) - own.load(ordering: .sequentiallyConsistent)
    }

    var localWriteCount: Int64 { localWrites.load(ordering: .sequentiallyConsistent) }

    /// The revision: foreign signals and local writes, plus this instance's token; nil when
    /// the subscription failed (callers then reload every time).
    var revision: CacheRevision? {
        guard awaitSubscription() else { return nil }
        return revision(foreign: foreignCount, local: localWriteCount)
    }

    func revision(foreign: Int64, local: Int64) -> CacheRevision {
        cached.withLock { cached in
            if let cached, cached.foreign == foreign, cached.local == local { return cached.revision }
            let revision = CacheRevision("\(token):\(foreign).\(local)")
            cached = (foreign, local, revision)
            return revision
        }
    }

    /// Counts a local write; returns its number.
    func beginLocalWrite() -> Int64 {
        localWrites.add(1, ordering: .sequentiallyConsistent).newValue
    }

    /// Records that this process made `count` changes, each of which produces one signal.
    func expectOwn(_ count: Int) {
        own.add(Int64(count), ordering: .sequentiallyConsistent)
    }

    /// Waits (briefly) until `target` signals have been received: asleep on a condition the
    /// signal thread broadcasts, not polling.
    @discardableResult
    func wait(until target: Int64, timeout: TimeInterval) -> Bool {
        tally.wait(until: target, timeout: timeout)
    }
}

/// The subscription's state, written by the signal thread before it signals `ready`.
private final class Subscription: @unchecked Sendable {
    // @unchecked: written once on the signal thread before `ready.signal()`, read after `ready.wait()`.
    let ready = DispatchSemaphore(value: 0)
    /// The bus connection (the counter holds the reference).
    let connection: OpaquePointer
    var id: guint = 0
    /// The signal thread's main context; the counter holds one reference, the thread another.
    var context: OpaquePointer?
    /// The match rule is known to be in place at the bus.
    var isActive = false

    init(connection: OpaquePointer) { self.connection = connection }
}

/// The received-signal counter, shared with the GDBus callback; waiters sleep on a condition
/// variable (pthread, as `Locked`: visible to ThreadSanitizer) that each signal broadcasts.
private final class SignalTally: @unchecked Sendable {
    // @unchecked: the mutex and condition are only used through pthread calls.
    let count = Atomic<Int64>(0)
    /// Tells the signal thread to finish.
    let stop = Atomic<Bool>(false)
    private let mutex: UnsafeMutablePointer<pthread_mutex_t> = .allocate(capacity: 1)
    private let condition: UnsafeMutablePointer<pthread_cond_t> = .allocate(capacity: 1)

    init() {
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        condition.initialize(to: pthread_cond_t())
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)  // deadlines immune to clock changes
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    /// Counts a signal and wakes the waiters.
    func received() {
        pthread_mutex_lock(mutex)
        count.add(1, ordering: .sequentiallyConsistent)
        pthread_cond_broadcast(condition)
        pthread_mutex_unlock(mutex)
    }

    /// Sleeps until `target` signals were counted or `timeout` seconds passed; whether they were.
    func wait(until target: Int64, timeout: TimeInterval) -> Bool {
        var deadline = timespec()
        clock_gettime(CLOCK_MONOTONIC, &deadline)
        let nanoseconds = Int(deadline.tv_nsec) + Int(timeout.truncatingRemainder(dividingBy: 1) * 1e9)
        deadline.tv_sec += Int(timeout) + nanoseconds / 1_000_000_000
        deadline.tv_nsec = nanoseconds % 1_000_000_000
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while count.load(ordering: .sequentiallyConsistent) < target {
            if pthread_cond_timedwait(condition, mutex, &deadline) == ETIMEDOUT {
                return count.load(ordering: .sequentiallyConsistent) >= target
            }
        }
        return true
    }
}
