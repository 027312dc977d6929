internal import CLibSecret
import TokenCacheCore

// A GDBus server's parts, each an owning type, so that a server (the identity broker's) makes no
// GLib call itself: the objects it exports, the name it owns, the calls it answers, and who
// called (the bus daemon's credentials and the reply's fd list).

/// A method call an exported object received: its sender, names and string arguments. Answered
/// once (``reply(_:)``), from any thread (GDBus allows it); one never answered is refused with a
/// D-Bus error when it goes, which also gives GDBus back the invocation.
package final class DBusMethodCall: @unchecked Sendable {
    // @unchecked: the invocation is handed back to GDBus once, under `answered`'s lock.
    private let invocation: OpaquePointer
    private let answered = Locked(false)
    /// The caller's unique bus name (`:1.42`).
    package let sender: String
    /// The interface and method called.
    package let interface: String
    package let method: String
    /// The call's string arguments, in order (arguments of other types are left out).
    package let arguments: [String]

    /// Takes `invocation` (GDBus hands the handler its reference) and copies what it reads of
    /// `parameters` (borrowed for the callback: a reference of its own while read).
    fileprivate init(invocation: OpaquePointer, sender: String, interface: String, method: String, parameters: OpaquePointer?) {
        self.invocation = invocation
        (self.sender, self.interface, self.method) = (sender, interface, method)
        arguments = parameters.map { GVariantRef(sinking: $0).children.compactMap(\.string) } ?? []
    }

    /// Whether this is the first answer: only that one is sent.
    private func answering() -> Bool {
        answered.withLock { answered in
            defer { answered = true }
            return !answered
        }
    }

    /// Returns `(s)` to the caller; GDBus takes the invocation (and the floating tuple).
    package func reply(_ text: String) {
        guard answering() else { return }
        let value = GVariantRef.tuple([.string(text)])
        withExtendedLifetime(value) { g_dbus_method_invocation_return_value(invocation, value.pointer) }
    }

    deinit {
        if answering() {
            g_dbus_method_invocation_return_dbus_error(invocation, "org.freedesktop.DBus.Error.Failed", "The call was not answered.")
        }
    }
}

/// An interface of a node exported at a path on a connection, its calls handed to a closure on
/// the loop of the thread-default main context it was made under; unregistered when it goes.
package final class GDBusObjectRegistration: @unchecked Sendable {
    // @unchecked: made, used and released on the thread whose loop dispatches its calls.
    private let connection: GDBusConnectionRef
    /// The interface description is borrowed from the node: kept while exported.
    private let node: GDBusNodeInfoRef
    private let id: UInt32

    /// The closure calls go to; GDBus keeps it until unregistered and done with its calls.
    private final class Handler {
        let onCall: (DBusMethodCall) -> Void
        init(_ onCall: @escaping (DBusMethodCall) -> Void) { self.onCall = onCall }
    }

    /// Exports `interface` (described in `node`) at `path`.
    /// - Throws: the GLib failure (the node has no such interface, or the path and interface are taken).
    package init(on connection: GDBusConnectionRef, path: String, interface: String, of node: GDBusNodeInfoRef,
                 onCall: @escaping (DBusMethodCall) -> Void) throws(GLibFailure) {
        guard let description = node.interface(interface) else {
            throw GLibFailure(message: "the interface description has no \(interface)")
        }
        var vtable = GDBusInterfaceVTable()
        vtable.method_call = { _, sender, _, interface, method, parameters, invocation, data in
            guard let data, let invocation else { return }
            let call = DBusMethodCall(invocation: invocation, sender: sender.map { String(cString: $0) } ?? "",
                                      interface: interface.map { String(cString: $0) } ?? "",
                                      method: method.map { String(cString: $0) } ?? "", parameters: parameters)
            Unmanaged<Handler>.fromOpaque(data).takeUnretainedValue().onCall(call)
        }
        let handler = Unmanaged.passRetained(Handler(onCall)).toOpaque()
        var error: UnsafeMutablePointer<GError>?
        // GDBus copies the table, and releases the handler once unregistered (its destroy notify).
        let id = g_dbus_connection_register_object(connection.pointer, path, description, &vtable, handler,
                                                   { Unmanaged<Handler>.fromOpaque($0!).release() }, &error)
        // Refused, the handler is left alone: GLib versions differ on whether the notify then runs.
        guard id != 0 else { throw GLibFailure(taking: error) }
        (self.connection, self.node, self.id) = (connection, node, id)
    }

    deinit { g_dbus_connection_unregister_object(connection.pointer, id) }
}

/// A well-known name owned on a connection, never queued behind another owner: `acquired` or
/// `lost` run on the loop of the thread-default main context it was asked under. Given up when it goes.
package final class GBusNameOwnership: @unchecked Sendable {
    // @unchecked: the id is immutable; GDBus is thread-safe.
    private let id: UInt32

    /// What to call when the name is owned or lost; GDBus keeps it until the name is given up.
    private final class Handlers {
        let acquired: () -> Void
        let lost: () -> Void
        init(acquired: @escaping () -> Void, lost: @escaping () -> Void) { (self.acquired, self.lost) = (acquired, lost) }
    }

    /// Asks for `name` on `connection`: `lost` runs when another process owns it, and when it is
    /// taken away (or the connection closes) after `acquired`.
    package init(_ name: String, on connection: GDBusConnectionRef, acquired: @escaping () -> Void, lost: @escaping () -> Void) {
        let handlers = Unmanaged.passRetained(Handlers(acquired: acquired, lost: lost)).toOpaque()
        id = g_bus_own_name_on_connection(connection.pointer, name, G_BUS_NAME_OWNER_FLAGS_DO_NOT_QUEUE, { _, _, data in
            Unmanaged<Handlers>.fromOpaque(data!).takeUnretainedValue().acquired()
        }, { _, _, data in
            Unmanaged<Handlers>.fromOpaque(data!).takeUnretainedValue().lost()
        }, handlers, { Unmanaged<Handlers>.fromOpaque($0!).release() })
    }

    deinit { g_bus_unown_name(id) }
}

/// The file descriptors a D-Bus reply carried, unreferenced (and closed) when it goes.
package final class GUnixFDListRef: @unchecked Sendable {
    // @unchecked: read once, on the thread the reply arrived on.
    private let pointer: UnsafeMutablePointer<GUnixFDList>
    fileprivate init(taking pointer: UnsafeMutablePointer<GUnixFDList>) { self.pointer = pointer }
    deinit { g_object_unref(UnsafeMutableRawPointer(pointer)) }

    /// A duplicate of the descriptor a handle value (`h`) names, which the caller closes; nil
    /// for a value of another type or a handle the list does not hold.
    package func duplicate(_ handle: GVariantRef) -> Int32? {
        guard handle.typeString == "h" else { return nil }
        var error: UnsafeMutablePointer<GError>?
        let fd = withExtendedLifetime(handle) { g_unix_fd_list_get(pointer, g_variant_get_handle(handle.pointer), &error) }
        if fd < 0 { _ = GLibFailure(taking: error); return nil }
        return fd
    }
}

extension GDBusConnectionRef {
    /// The closure a credentials query answers; GDBus holds it until the reply.
    private final class CredentialsReply {
        let done: (GVariantRef?, GUnixFDListRef?) -> Void
        init(_ done: @escaping (GVariantRef?, GUnixFDListRef?) -> Void) { self.done = done }
    }

    /// Asks the bus daemon who `sender` is (`GetConnectionCredentials`) without blocking the loop:
    /// `done` runs on the loop of the thread-default main context with the reply tuple (nil when
    /// the bus refused) and its fd list (a bus that gives the caller's pidfd, `ProcessFD`:
    /// dbus-daemon 1.15.7+, dbus-broker, sends it there).
    package func connectionCredentials(of sender: String, _ done: @escaping (GVariantRef?, GUnixFDListRef?) -> Void) {
        let query = GVariantRef.tuple([.string(sender)])
        let reply = Unmanaged.passRetained(CredentialsReply(done)).toOpaque()
        // GDBus takes its own reference to the query.
        withExtendedLifetime(query) {
            g_dbus_connection_call_with_unix_fd_list(pointer, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                                     "GetConnectionCredentials", query.pointer, nil, G_DBUS_CALL_FLAGS_NONE, -1, nil, nil, { source, result, data in
                let reply = Unmanaged<CredentialsReply>.fromOpaque(data!).takeRetainedValue()
                var error: UnsafeMutablePointer<GError>?
                var fds: UnsafeMutablePointer<GUnixFDList>?
                let value = g_dbus_connection_call_with_unix_fd_list_finish(OpaquePointer(source), &fds, result, &error).map(GVariantRef.init(taking:))
                if value == nil { _ = GLibFailure(taking: error) }
                reply.done(value, fds.map(GUnixFDListRef.init(taking:)))
            }, reply)
        }
    }
}
