package import CLibSecret
import TokenCacheCore
import TokenCachePlatform
import Dispatch
import FoundationEssentials

/// GError handling for the Secret Service client.
package enum GLib {
    /// Whether the session bus has an address: DBUS_SESSION_BUS_ADDRESS is set, or
    /// $XDG_RUNTIME_DIR/bus exists. Without either GDBus would try X11 autolaunch, which can start
    /// a bus of its own: callers ask only a bus that exists.
    package static var sessionBusIsAddressed: Bool {
        let environment = ProcessInfo.processInfo.environment
        if !(environment["DBUS_SESSION_BUS_ADDRESS"] ?? "").isEmpty { return true }
        return environment["XDG_RUNTIME_DIR"].map { FileManager.default.fileExists(atPath: $0 + "/bus") } ?? false
    }

    /// Converts and frees a GError right after the failed call.
    package static func take(_ error: UnsafeMutablePointer<GError>?) -> (domain: String, code: Int32, message: String, remote: String?) {
        guard let error else { return ("", 0, "unknown error", nil) }
        defer { g_error_free(error) }
        let message = error.pointee.message.map { String(cString: $0) } ?? "unknown error"
        let domain = String(cString: g_quark_to_string(error.pointee.domain))
        var remote: String?
        if g_dbus_error_is_remote_error(error) != 0, let name = g_dbus_error_get_remote_error(error) {
            remote = String(cString: name)
            g_free(name)
        }
        return (domain, error.pointee.code, message, remote)
    }
}

/// A GCancellable cancelled after a deadline, so no D-Bus call waits longer than its bound
/// (GDBus's own default is 25 s, and prompts can wait for as long as the user does).
package final class Deadline: @unchecked Sendable {
    // @unchecked: g_cancellable_cancel is thread-safe, and the pointer is immutable.
    package let cancellable: UnsafeMutablePointer<GCancellable>
    private let timer: DispatchWorkItem

    package init(seconds: TimeInterval) {
        let cancellable = g_cancellable_new()!
        self.cancellable = cancellable
        let box = GObjectReference(cancellable)
        timer = DispatchWorkItem { g_cancellable_cancel(box.pointer) }
        DispatchQueue.global().asyncAfter(deadline: .now() + seconds, execute: timer)
    }

    package var isExpired: Bool { g_cancellable_is_cancelled(cancellable) != 0 }

    deinit {
        timer.cancel()
        g_object_unref(UnsafeMutableRawPointer(cancellable))
    }
}

/// A strong reference to a GObject (a GCancellable, the service proxy) for closures and threads
/// that outlive the call that made them.
package final class GObjectReference<Object>: @unchecked Sendable {
    // @unchecked: only handed to thread-safe GLib and libsecret calls.
    package let pointer: UnsafeMutablePointer<Object>
    package init(_ pointer: UnsafeMutablePointer<Object>) {
        self.pointer = pointer
        g_object_ref(UnsafeMutableRawPointer(pointer))
    }
    deinit { g_object_unref(UnsafeMutableRawPointer(pointer)) }
}

/// The Secret Service's bus name on a GDBus connection, for plain method calls (libsecret's
/// proxies load properties and item lists the backend does not need). Keeps the connection alive.
package final class GDBusTarget: @unchecked Sendable {
    // @unchecked: immutable; GDBus connections are thread-safe.
    private let connection: OpaquePointer
    /// The bus name called.
    package let name: String

    /// Calls to `name` on `connection` (which this keeps a reference to).
    package init(connection: OpaquePointer, name: String) {
        self.connection = connection
        g_object_ref(UnsafeMutableRawPointer(connection))
        self.name = name
    }

    /// The bus connection, for calls this type does not make (asynchronous ones, signals).
    package var unownedConnection: OpaquePointer { connection }

    deinit { g_object_unref(UnsafeMutableRawPointer(connection)) }

    /// One method call, bounded by `timeoutMilliseconds` (GDBus's own timeout). GDBus checks the
    /// reply against `replyType`, so a malformed answer is an error, never a crash in `read`.
    /// `arguments` are floating references, consumed by the call.
    package func call<Value>(_ method: String, on path: String, interface: String, arguments: [OpaquePointer?], replyType: String,
                     timeoutMilliseconds: Int32, action: String,
                     read: (OpaquePointer) throws(TokenCacheError) -> Value) throws(TokenCacheError) -> Value {
        var error: UnsafeMutablePointer<GError>?
        let type = g_variant_type_new(replyType)
        defer { g_variant_type_free(type) }
        let reply = arguments.withUnsafeBufferPointer { pointers in
            g_dbus_connection_call_sync(connection, name, path, interface, method,
                                        g_variant_new_tuple(pointers.baseAddress, gsize(pointers.count)),
                                        type, G_DBUS_CALL_FLAGS_NONE, timeoutMilliseconds, nil, &error)
        }
        guard let reply = reply.map(GVariantRef.init(taking:)) else { throw SecretServiceErrors.map(error, action: action, object: path) }
        return try withExtendedLifetime(reply) { () throws(TokenCacheError) -> Value in try read(reply.pointer) }
    }

    /// A method call whose answer nobody waits for (such as closing a session).
    package func send(_ method: String, on path: String, interface: String, arguments: [OpaquePointer?]) {
        arguments.withUnsafeBufferPointer { pointers in
            g_dbus_connection_call(connection, name, path, interface, method,
                                   g_variant_new_tuple(pointers.baseAddress, gsize(pointers.count)),
                                   nil, G_DBUS_CALL_FLAGS_NO_AUTO_START, -1, nil, nil, nil)
        }
    }
}

/// GVariant values the Secret Service calls take and give.
package enum GVariants {
    /// Bytes as an `ay` value (copied; a floating reference).
    package static func bytes(_ bytes: UnsafeRawBufferPointer) -> OpaquePointer {
        let type = g_variant_type_new("y")
        defer { g_variant_type_free(type) }
        return g_variant_new_fixed_array(type, bytes.baseAddress, gsize(bytes.count), 1)
    }

    /// The bytes of an `ay` value; nil for another type.
    package static func byteArray(_ value: OpaquePointer) -> [UInt8]? {
        guard String(cString: g_variant_get_type_string(value)) == "ay" else { return nil }
        var count: gsize = 0
        guard let bytes = g_variant_get_fixed_array(value, &count, 1), count > 0 else { return [] }
        return Array(UnsafeRawBufferPointer(start: bytes, count: Int(count)).bindMemory(to: UInt8.self))
    }
}
