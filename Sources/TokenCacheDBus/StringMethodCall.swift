internal import CLibSecret
import FoundationEssentials

/// A method call on the session bus that takes strings and answers one string, the shape of the
/// identity broker's methods (`(sss) -> (s)`); the caller maps a failure to its own typed error.
/// Holds a reference to the session bus connection, released in `deinit`.
package final class SessionBusStrings: @unchecked Sendable {
    // @unchecked: GDBusConnection is thread-safe; the pointer never changes.
    private let connection: OpaquePointer

    /// Why a call failed: GDBus's message, and the remote error's name when the bus or the peer
    /// answered one (`org.freedesktop.DBus.Error.ServiceUnknown`).
    package struct Failure: Error, Sendable {
        package let message: String
        package let remote: String?
    }

    /// The session bus, when there is one (``GLib/sessionBusIsAddressed``).
    package static func connect() throws(Failure) -> SessionBusStrings {
        guard GLib.sessionBusIsAddressed else {
            throw Failure(message: "no D-Bus session bus", remote: nil)
        }
        var error: UnsafeMutablePointer<GError>?
        guard let bus = g_bus_get_sync(G_BUS_TYPE_SESSION, nil, &error) else { throw Self.failure(error) }
        return SessionBusStrings(bus)
    }

    private init(_ connection: OpaquePointer) { self.connection = connection }
    deinit { g_object_unref(UnsafeMutableRawPointer(connection)) }

    /// Calls `method` with `strings` and returns the reply's one string, within `timeoutMilliseconds`.
    package func call(busName: String, path: String, interface: String, method: String, strings: [String],
                      timeoutMilliseconds: Int32) throws(Failure) -> String {
        let arguments: [OpaquePointer?] = strings.map { g_variant_new_string($0) }
        let replyType = g_variant_type_new("(s)")
        defer { g_variant_type_free(replyType) }
        var error: UnsafeMutablePointer<GError>?
        let reply = arguments.withUnsafeBufferPointer { pointers in
            g_dbus_connection_call_sync(connection, busName, path, interface, method,
                                        g_variant_new_tuple(pointers.baseAddress, gsize(pointers.count)),
                                        replyType, G_DBUS_CALL_FLAGS_NONE, timeoutMilliseconds, nil, &error)
        }
        guard let reply else { throw Self.failure(error) }
        defer { g_variant_unref(reply) }
        let child = g_variant_get_child_value(reply, 0)!
        defer { g_variant_unref(child) }
        return String(cString: g_variant_get_string(child, nil))
    }

    private static func failure(_ error: UnsafeMutablePointer<GError>?) -> Failure {
        let taken = GLib.take(error)
        return Failure(message: taken.message, remote: taken.remote)
    }
}
