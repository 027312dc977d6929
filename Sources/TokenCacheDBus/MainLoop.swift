package import CLibSecret

/// A GLib or GDBus failure, converted (and the GError freed) right after the call that failed.
package struct GLibFailure: Error, Sendable {
    /// The error's domain (`g-dbus-error-quark`, `g-io-error-quark`).
    package var domain: String
    package var code: Int32
    package var message: String
    /// The remote D-Bus error name, when the bus or the peer answered with one.
    package var remote: String?

    /// Takes (and frees) `error`.
    package init(taking error: UnsafeMutablePointer<GError>?) {
        (domain, code, message, remote) = GLib.take(error)
    }

    /// A failure found before any GLib call (what a call needs is missing).
    package init(message: String) {
        (domain, code, self.message, remote) = ("", 0, message, nil)
    }
}

/// A main context of its own, for a thread that runs a loop apart from the process's default
/// context; unreferenced when it goes.
package final class GMainContextRef: @unchecked Sendable {
    // @unchecked: GMainContext is thread-safe, and the pointer is immutable.
    package let pointer: OpaquePointer
    package init() { pointer = g_main_context_new() }
    deinit { g_main_context_unref(pointer) }

    /// Runs `body` with this context as the calling thread's default: what GDBus starts there
    /// (calls, name ownership, exported objects) dispatches its callbacks here.
    package func asThreadDefault<T>(_ body: () throws -> T) rethrows -> T {
        g_main_context_push_thread_default(pointer)
        defer { g_main_context_pop_thread_default(pointer) }
        return try body()
    }

    /// Runs the callbacks already queued, without waiting (so that each releases what it holds).
    package func drain() { while g_main_context_iteration(pointer, 0) != 0 {} }

    /// Runs the callbacks queued, waiting for one when none is (a GDBus reply, say).
    package func iterate() { _ = g_main_context_iteration(pointer, 1) }
}

/// A main loop on a context, unreferenced when it goes.
package final class GMainLoopRef: @unchecked Sendable {
    // @unchecked: quit is thread-safe; run is called by the one thread that owns the loop.
    package let pointer: OpaquePointer
    package init(_ context: GMainContextRef) { pointer = g_main_loop_new(context.pointer, 0) }
    deinit { g_main_loop_unref(pointer) }

    /// Runs the loop on the calling thread until ``quit()``.
    package func run() { g_main_loop_run(pointer) }
    /// Makes ``run()`` return (from any thread).
    package func quit() { g_main_loop_quit(pointer) }
}

/// A GDBus connection, released when it goes.
package final class GDBusConnectionRef: @unchecked Sendable {
    // @unchecked: GDBus connections are thread-safe, and the pointer is immutable.
    package let pointer: OpaquePointer
    private init(taking pointer: OpaquePointer) { self.pointer = pointer }
    deinit { g_object_unref(UnsafeMutableRawPointer(pointer)) }

    /// The process's shared session-bus connection.
    package static func session() throws(GLibFailure) -> GDBusConnectionRef {
        var error: UnsafeMutablePointer<GError>?
        guard let raw = g_bus_get_sync(G_BUS_TYPE_SESSION, nil, &error) else { throw GLibFailure(taking: error) }
        return GDBusConnectionRef(taking: raw)
    }

    /// A connection of its own to the session bus (a server's: its name and objects go with it),
    /// which does not end the process when the bus closes it.
    package static func privateSession() throws(GLibFailure) -> GDBusConnectionRef {
        var error: UnsafeMutablePointer<GError>?
        guard let address = g_dbus_address_get_for_bus_sync(G_BUS_TYPE_SESSION, nil, &error) else { throw GLibFailure(taking: error) }
        defer { g_free(address) }
        let flags = GDBusConnectionFlags(rawValue: G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT.rawValue | G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION.rawValue)
        guard let raw = g_dbus_connection_new_for_address_sync(address, flags, nil, nil, &error) else { throw GLibFailure(taking: error) }
        g_dbus_connection_set_exit_on_close(raw, 0)
        return GDBusConnectionRef(taking: raw)
    }

    /// One method call, waiting at most `timeoutMilliseconds`; the reply tuple.
    package func call(_ method: String, on path: String, interface: String, of destination: String, arguments: GVariantRef?,
                      timeoutMilliseconds: Int32) throws(GLibFailure) -> GVariantRef {
        var error: UnsafeMutablePointer<GError>?
        let reply = withExtendedLifetime(arguments) {
            g_dbus_connection_call_sync(pointer, destination, path, interface, method, arguments?.pointer, nil,
                                        G_DBUS_CALL_FLAGS_NONE, timeoutMilliseconds, nil, &error)
        }
        guard let reply else { throw GLibFailure(taking: error) }
        return GVariantRef(taking: reply)
    }

    /// Sends what is queued, waiting for it to leave.
    package func flush() { g_dbus_connection_flush_sync(pointer, nil, nil) }
}

/// Parsed introspection XML (the interfaces a server exports), unreferenced when it goes.
package final class GDBusNodeInfoRef: @unchecked Sendable {
    // @unchecked: immutable once parsed.
    package let pointer: UnsafeMutablePointer<GDBusNodeInfo>

    package init(xml: String) throws(GLibFailure) {
        var error: UnsafeMutablePointer<GError>?
        guard let info = g_dbus_node_info_new_for_xml(xml, &error) else { throw GLibFailure(taking: error) }
        pointer = info
    }
    deinit { g_dbus_node_info_unref(pointer) }

    /// The description of `name`, borrowed from this node (valid while it lives).
    package func interface(_ name: String) -> UnsafeMutablePointer<GDBusInterfaceInfo>? { g_dbus_node_info_lookup_interface(pointer, name) }
}
