internal import CLibSecret
import Foundation
import Synchronization

/// Counts the Secret Service's item signals (ItemCreated, ItemChanged, ItemDeleted on any
/// collection) on a private GLib main loop thread. A group's revision is the number of signals
/// not caused by this process's own writes: it changes exactly when another process changed
/// something, which costs a warm lookup one atomic load instead of a D-Bus round trip.
final class ItemSignalCounter: @unchecked Sendable {
    // @unchecked: `received` and `own` are atomics; the C handles are set up before the thread
    // starts and only torn down in deinit.
    private let received = Atomic<Int64>(0)
    private let own = Atomic<Int64>(0)
    /// Writes made through this process's backend, so stores sharing the backend see each
    /// other's writes (their own signals are not counted as foreign).
    private let localWrites = Atomic<Int64>(0)
    private let connection: OpaquePointer
    private var subscription: guint = 0
    private var loop: OpaquePointer?
    private let ready = DispatchSemaphore(value: 0)

    init(connection: OpaquePointer) {
        self.connection = connection
        g_object_ref(UnsafeMutableRawPointer(connection))
        let unmanaged = Unmanaged.passUnretained(self)
        let thread = Thread { unmanaged.takeUnretainedValue().run() }
        thread.name = "tokencache.secret-service-signals"
        thread.start()
        ready.wait()
    }

    private func run() {
        let context = g_main_context_new()
        g_main_context_push_thread_default(context)
        subscription = g_dbus_connection_signal_subscribe(
            connection, nil, "org.freedesktop.Secret.Collection", nil, nil, nil, G_DBUS_SIGNAL_FLAGS_NONE,
            { _, _, _, _, member, _, userData in
                guard let userData, let member else { return }
                let name = String(cString: member)
                if name == "ItemCreated" || name == "ItemChanged" || name == "ItemDeleted" {
                    Unmanaged<ItemSignalCounter>.fromOpaque(userData).takeUnretainedValue().received.add(1, ordering: .sequentiallyConsistent)
                }
            }, Unmanaged.passUnretained(self).toOpaque(), nil)
        loop = g_main_loop_new(context, 0)
        ready.signal()
        g_main_loop_run(loop)
        g_main_context_pop_thread_default(context)
        g_main_loop_unref(loop)
        g_main_context_unref(context)
    }

    deinit {
        g_dbus_connection_signal_unsubscribe(connection, subscription)
        if let loop { g_main_loop_quit(loop) }
        g_object_unref(UnsafeMutableRawPointer(connection))
    }

    /// Signals received so far.
    var receivedCount: Int64 { received.load(ordering: .sequentiallyConsistent) }

    /// Signals not caused by this process's writes.
    var foreignCount: Int64 {
        received.load(ordering: .sequentiallyConsistent) - own.load(ordering: .sequentiallyConsistent)
    }

    var localWriteCount: Int64 { localWrites.load(ordering: .sequentiallyConsistent) }

    /// The revision: foreign signals and local writes.
    var revision: CacheRevision { Self.revision(foreign: foreignCount, local: localWriteCount) }

    static func revision(foreign: Int64, local: Int64) -> CacheRevision { CacheRevision("\(foreign).\(local)") }

    /// Counts a local write; returns its number.
    func beginLocalWrite() -> Int64 {
        localWrites.add(1, ordering: .sequentiallyConsistent).newValue
    }

    /// Records that this process made `count` changes, each of which produces one signal.
    func expectOwn(_ count: Int) {
        own.add(Int64(count), ordering: .sequentiallyConsistent)
    }

    /// Waits (briefly) until `target` signals have been received.
    @discardableResult
    func wait(until target: Int64, timeout: TimeInterval) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while receivedCount < target {
            if Date() > deadline { return false }
            usleep(200)
        }
        return true
    }
}
