import CLibSecret
import Dispatch
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import Synchronization
import TokenCache
import TokenCacheAgent
import TokenCacheCore

/// The identity broker on the session bus: owns `com.microsoft.identity.broker1` (refusing to
/// queue behind another owner), exports ``BrokerProtocol/interfaceName`` at
/// ``BrokerProtocol/objectPath`` and runs GLib's main loop on a thread of its own. Each call is
/// answered by a ``BrokerService`` task once the bus daemon has said who the caller is
/// (`GetConnectionCredentials`, asked without blocking the loop).
package final class BrokerBus: @unchecked Sendable {
    // @unchecked: the GLib handles are touched by the loop's thread, and by start/stop after it is joined.
    private let service: BrokerService
    private let context = MainContext()
    private var loop: MainLoop?
    private var connection: GObject?
    private var node: NodeInfo?
    private var registration: guint = 0
    private var ownership: guint = 0
    /// The loop's thread (a pthread: Foundation's `Thread` links the whole of Foundation into
    /// the executable, whose start-up then initialises CoreFoundation and ICU for every command).
    private var thread: pthread_t?
    /// The name's fate, once known: owned, or the reason it is not.
    private let outcome = Mutex<Result<Void, TokenCacheError>?>(nil)
    /// Whether ``stop()`` ended the serving, and what to call when the bus ends it instead.
    private let ending = Mutex<(stopping: Bool, endedByBus: Bool, whenEnded: (@Sendable () -> Void)?)>((false, false, nil))

    /// Whether serving ended without ``stop()``: the bus closed the connection or took the name.
    package var endedByBus: Bool { ending.withLock { $0.endedByBus } }
    private let decided = DispatchSemaphore(value: 0)

    /// The tokencache interface beside Microsoft's: the request log, for `tokencache broker --list-requests`.
    package static let adminInterface = "org.swift_tokencache.Broker"

    static let introspection = """
        <node>
          <interface name="\(BrokerWire.interfaceName)">
        \(BrokerWire.Method.allCases.map { """
            <method name="\($0.rawValue)">
              <arg type="s" name="protocolVersion" direction="in"/>
              <arg type="s" name="correlationId" direction="in"/>
              <arg type="s" name="requestJson" direction="in"/>
              <arg type="s" name="result" direction="out"/>
            </method>
        """ }.joined(separator: "\n"))
          </interface>
          <interface name="\(adminInterface)">
            <method name="ListRequests">
              <arg type="s" name="requestsJson" direction="out"/>
            </method>
          </interface>
        </node>
        """

    package init(service: BrokerService) { self.service = service }

    /// Connects to the session bus, exports the object and owns the name; returns once the name
    /// is owned. Throws `backendUnavailable` when another process owns it (or the bus refuses).
    /// - Parameter whenEnded: called (on the loop's thread) when serving ends without ``stop()``:
    ///   the bus closed the connection (the session ended) or the name was taken away, after
    ///   which the broker can never be reached again.
    package func start(whenEnded: (@Sendable () -> Void)? = nil) throws(TokenCacheError) {
        ending.withLock { $0.whenEnded = whenEnded }
        var started = pthread_t()
        let context = Unmanaged.passRetained(self).toOpaque()
        guard pthread_create(&started, nil, { context in
            Unmanaged<BrokerBus>.fromOpaque(context!).takeRetainedValue().runLoop()
            return nil
        }, context) == 0 else {
            Unmanaged<BrokerBus>.fromOpaque(context).release()
            throw TokenCacheError(.backendUnavailable, "The broker could not start a thread for the session bus.", hint: "Check the process and thread limits (ulimit -u)")
        }
        thread = started
        decided.wait()
        let result = outcome.withLock { $0 } ?? .failure(TokenCacheError(.backendUnavailable, "The broker did not start."))
        if case .failure(let error) = result {
            stop()
            throw error
        }
    }

    /// Gives the name up and stops the loop.
    package func stop() {
        ending.withLock { $0.stopping = true }
        if let loop { g_main_loop_quit(loop.pointer) }
        // The thread ends once its loop is quit, or has ended when it failed to start serving.
        if let thread { pthread_join(thread, nil) }
        thread = nil
    }

    private func decide(_ result: Result<Void, TokenCacheError>) {
        let first = outcome.withLock { outcome -> Bool in
            guard outcome == nil else { return false }
            outcome = result
            return true
        }
        if first { decided.signal() }
    }

    /// The loop thread: everything GLib is made, used and freed here.
    private func runLoop() {
        g_main_context_push_thread_default(context.pointer)
        defer { g_main_context_pop_thread_default(context.pointer) }
        let loop = MainLoop(context)
        self.loop = loop
        do throws(TokenCacheError) {
            try connect()
        } catch {
            self.loop = nil
            return decide(.failure(error))
        }
        g_main_loop_run(loop.pointer)
        let whenEnded = ending.withLock { ending in
            ending.endedByBus = !ending.stopping
            return ending.endedByBus ? ending.whenEnded : nil
        }
        whenEnded?()
        if ownership != 0 { g_bus_unown_name(ownership) }
        for id in [registration, adminRegistration] where id != 0 {
            if let connection { g_dbus_connection_unregister_object(OpaquePointer(connection.pointer), id) }
        }
        if let connection { g_dbus_connection_flush_sync(OpaquePointer(connection.pointer), nil, nil) }
        // Callbacks already queued run (and release their boxes) before the context goes.
        while g_main_context_iteration(context.pointer, 0) != 0 {}
        (ownership, registration, adminRegistration) = (0, 0, 0)
        self.connection = nil
        self.node = nil
        self.loop = nil
    }

    private func connect() throws(TokenCacheError) {
        var error: UnsafeMutablePointer<GError>?
        guard let address = g_dbus_address_get_for_bus_sync(G_BUS_TYPE_SESSION, nil, &error) else {
            throw TokenCacheError(.noSessionBus, "No session bus to serve on: \(Self.consume(&error)).", hint: "Run it in a desktop session (DBUS_SESSION_BUS_ADDRESS)")
        }
        defer { g_free(address) }
        let flags = GDBusConnectionFlags(rawValue: G_DBUS_CONNECTION_FLAGS_AUTHENTICATION_CLIENT.rawValue | G_DBUS_CONNECTION_FLAGS_MESSAGE_BUS_CONNECTION.rawValue)
        guard let raw = g_dbus_connection_new_for_address_sync(address, flags, nil, nil, &error) else {
            throw TokenCacheError(.noSessionBus, "Could not connect to the session bus: \(Self.consume(&error)).")
        }
        let connection = GObject(UnsafeMutableRawPointer(raw))
        self.connection = connection
        g_dbus_connection_set_exit_on_close(raw, 0)
        guard let info = g_dbus_node_info_new_for_xml(Self.introspection, &error) else {
            throw TokenCacheError(.backendUnavailable, "The broker's interface description is invalid: \(Self.consume(&error)).")
        }
        node = NodeInfo(info)
        let this = Unmanaged.passUnretained(self).toOpaque()
        for (index, interface) in [BrokerWire.interfaceName, Self.adminInterface].enumerated() {
            guard let description = g_dbus_node_info_lookup_interface(info, interface) else { continue }
            // GDBus copies the table.
            var vtable = Self.vtable()
            let id = g_dbus_connection_register_object(raw, BrokerWire.objectPath, description, &vtable, this, nil, &error)
            guard id != 0 else {
                throw TokenCacheError(.backendUnavailable, "Could not export the broker's object: \(Self.consume(&error)).")
            }
            if index == 0 { registration = id } else { adminRegistration = id }
        }
        ownership = g_bus_own_name_on_connection(raw, BrokerWire.busName, G_BUS_NAME_OWNER_FLAGS_DO_NOT_QUEUE, { _, _, data in
            Unmanaged<BrokerBus>.fromOpaque(data!).takeUnretainedValue().decide(.success(()))
        }, { _, _, data in
            let bus = Unmanaged<BrokerBus>.fromOpaque(data!).takeUnretainedValue()
            bus.decide(.failure(TokenCacheError(.backendUnavailable, "Another process owns \(BrokerWire.busName) on this session bus (Microsoft's identity broker, or another tokencache broker).",
                                                hint: "`gdbus call --session --dest org.freedesktop.DBus --object-path /org/freedesktop/DBus --method org.freedesktop.DBus.GetConnectionUnixProcessID \(BrokerWire.busName)` names its pid")))
            // Lost after being owned (or never owned): stop serving.
            if let loop = bus.loop { g_main_loop_quit(loop.pointer) }
        }, this, nil)
    }

    private var adminRegistration: guint = 0

    private static func vtable() -> GDBusInterfaceVTable {
        var table = GDBusInterfaceVTable()
        table.method_call = { connection, sender, _, interface, method, parameters, invocation, data in
            guard let data, let invocation, let connection else { return }
            let bus = Unmanaged<BrokerBus>.fromOpaque(data).takeUnretainedValue()
            bus.received(connection: connection, sender: sender.map { String(cString: $0) } ?? "",
                         interface: interface.map { String(cString: $0) } ?? "", method: method.map { String(cString: $0) } ?? "",
                         parameters: parameters, invocation: invocation)
        }
        return table
    }

    /// A call arrived (on the loop's thread): its arguments are copied, then the caller's
    /// credentials are asked for; the answer is given from ``credentialsArrived(_:)``.
    private func received(connection: OpaquePointer, sender: String, interface: String, method: String,
                          parameters: OpaquePointer?, invocation: OpaquePointer) {
        var arguments: [String] = []
        if let parameters {
            for index in 0..<g_variant_n_children(parameters) {
                guard let child = g_variant_get_child_value(parameters, index) else { continue }
                arguments.append(String(cString: g_variant_get_string(child, nil)))
                g_variant_unref(child)
            }
        }
        let call = PendingCall(bus: self, invocation: invocation, interface: interface, method: method, arguments: arguments, sender: sender)
        let senderVariant = g_variant_new_string(sender)
        var children: [OpaquePointer?] = [senderVariant]
        let tuple = g_variant_new_tuple(&children, 1)
        // With the fd list: a bus that gives the caller's pidfd (ProcessFD, dbus-daemon 1.15.7+,
        // dbus-broker) sends it in the reply's fd list.
        g_dbus_connection_call_with_unix_fd_list(connection, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                                 "GetConnectionCredentials", tuple, nil, G_DBUS_CALL_FLAGS_NONE, -1, nil, nil, { source, result, data in
            let call = Unmanaged<PendingCall>.fromOpaque(data!).takeRetainedValue()
            var error: UnsafeMutablePointer<GError>?
            var fds: UnsafeMutablePointer<GUnixFDList>?
            let reply = g_dbus_connection_call_with_unix_fd_list_finish(OpaquePointer(source), &fds, result, &error)
            var caller = BrokerCaller(sender: call.sender, pid: nil, uid: nil)
            var pidfd: Int32?
            if let reply {
                if let dictionary = g_variant_get_child_value(reply, 0) {
                    caller.uid = BrokerBus.uint32(dictionary, "UnixUserID")
                    caller.pid = BrokerBus.uint32(dictionary, "ProcessID")
                    pidfd = BrokerBus.processFD(dictionary, fds)
                    g_variant_unref(dictionary)
                }
                g_variant_unref(reply)
            } else {
                _ = BrokerBus.consume(&error)
            }
            if let fds { g_object_unref(fds) }
            call.bus.answer(call, caller: caller, pidfd: pidfd)
        }, Unmanaged.passRetained(call).toOpaque())
    }

    /// The caller's pidfd (`ProcessFD`, a handle into the reply's fd list), duplicated: the caller closes it.
    private static func processFD(_ dictionary: OpaquePointer, _ fds: UnsafeMutablePointer<GUnixFDList>?) -> Int32? {
        guard let fds, let value = g_variant_lookup_value(dictionary, "ProcessFD", nil) else { return nil }
        defer { g_variant_unref(value) }
        guard String(cString: g_variant_get_type_string(value)) == "h" else { return nil }
        var error: UnsafeMutablePointer<GError>?
        let fd = g_unix_fd_list_get(fds, g_variant_get_handle(value), &error)
        if fd < 0 { _ = consume(&error); return nil }
        return fd
    }

    private static func uint32(_ dictionary: OpaquePointer, _ key: String) -> UInt32? {
        guard let value = g_variant_lookup_value(dictionary, key, nil) else { return nil }
        defer { g_variant_unref(value) }
        guard String(cString: g_variant_get_type_string(value)) == "u" else { return nil }
        return g_variant_get_uint32(value)
    }

    /// Answers in a task; the invocation is completed from there (GDBus allows any thread).
    /// The caller is identified (``CallerIdentity``, through its pidfd) in the task, off the loop's thread.
    private func answer(_ call: PendingCall, caller given: BrokerCaller, pidfd: Int32?) {
        let service = self.service
        let method = BrokerWire.Method(rawValue: call.method)
        guard call.interface == Self.adminInterface || (method != nil && call.arguments.count == 3) else {
            if let pidfd { close(pidfd) }
            return call.reply(BrokerWire.errorReply(.apiContractViolation, code: "invalidRequest", context: "Unknown method \(call.method)."))
        }
        let arguments = call.arguments
        Task {
            var caller = given
            caller.identity = CallerIdentity.identify(pid: caller.pid, pidfd: pidfd)
            if let pidfd { close(pidfd) }
            guard let method else {
                // The request log names every app's calls: for host callers of this user only.
                guard caller.uid == getuid(), case .host = caller.identity else { return call.reply("[]") }
                let log = (try? JSONEncoder().encode(service.requests)).map { String(decoding: $0, as: UTF8.self) } ?? "[]"
                return call.reply(log)
            }
            let reply = await service.handle(method, protocolVersion: arguments[0], correlationID: arguments[1], json: arguments[2], caller: caller)
            call.reply(reply)
        }
    }

    static func consume(_ error: inout UnsafeMutablePointer<GError>?) -> String {
        guard let pointer = error else { return "unknown error" }
        defer { g_error_free(pointer); error = nil }
        return pointer.pointee.message.map { String(cString: $0) } ?? "unknown error"
    }

    // MARK: Asking a running broker

    /// Whether some process owns the broker's name on this session bus now.
    package static func nameHasOwner() throws(TokenCacheError) -> Bool {
        var error: UnsafeMutablePointer<GError>?
        guard let raw = g_bus_get_sync(G_BUS_TYPE_SESSION, nil, &error) else {
            throw TokenCacheError(.noSessionBus, "No session bus: \(consume(&error)).", hint: "Run it in a desktop session (DBUS_SESSION_BUS_ADDRESS)")
        }
        let connection = GObject(UnsafeMutableRawPointer(raw))
        var children: [OpaquePointer?] = [g_variant_new_string(BrokerWire.busName)]
        guard let reply = g_dbus_connection_call_sync(OpaquePointer(connection.pointer), "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                                      "NameHasOwner", g_variant_new_tuple(&children, 1), nil, G_DBUS_CALL_FLAGS_NONE, 10_000, nil, &error) else {
            throw TokenCacheError(.noSessionBus, "The session bus did not answer: \(consume(&error)).")
        }
        defer { g_variant_unref(reply) }
        guard let child = g_variant_get_child_value(reply, 0) else { return false }
        defer { g_variant_unref(child) }
        return g_variant_get_boolean(child) != 0
    }

    /// The request log of the broker on this session bus (`--list-requests`).
    package static func requests() throws(TokenCacheError) -> [AgentProtocol.LoggedRequest] {
        var error: UnsafeMutablePointer<GError>?
        guard let raw = g_bus_get_sync(G_BUS_TYPE_SESSION, nil, &error) else {
            throw TokenCacheError(.noSessionBus, "No session bus: \(consume(&error)).")
        }
        let connection = GObject(UnsafeMutableRawPointer(raw))
        guard let reply = g_dbus_connection_call_sync(OpaquePointer(connection.pointer), BrokerWire.busName, BrokerWire.objectPath, adminInterface,
                                                      "ListRequests", nil, nil, G_DBUS_CALL_FLAGS_NONE, 10_000, nil, &error) else {
            throw TokenCacheError(.agentUnavailable, "No tokencache broker answers on this session bus: \(consume(&error)).",
                                  hint: "Start it with `tokencache broker`")
        }
        defer { g_variant_unref(reply) }
        guard let child = g_variant_get_child_value(reply, 0) else { return [] }
        defer { g_variant_unref(child) }
        let text = String(cString: g_variant_get_string(child, nil))
        do {
            return try JSONDecoder().decode([AgentProtocol.LoggedRequest].self, from: Data(text.utf8))
        } catch {
            throw TokenCacheError(.invalidArgument, "The broker's request log could not be read.")
        }
    }
}

/// One call waiting for its caller's credentials and its answer; replies exactly once.
private final class PendingCall: @unchecked Sendable {
    // @unchecked: the invocation is handed to GDBus once, from whichever thread answers.
    let bus: BrokerBus
    let invocation: OpaquePointer
    let interface: String
    let method: String
    let arguments: [String]
    let sender: String

    init(bus: BrokerBus, invocation: OpaquePointer, interface: String, method: String, arguments: [String], sender: String) {
        (self.bus, self.invocation, self.interface, self.method, self.arguments, self.sender) = (bus, invocation, interface, method, arguments, sender)
    }

    /// Returns `(s)`; GDBus takes the invocation (and the floating tuple).
    func reply(_ text: String) {
        var children: [OpaquePointer?] = [g_variant_new_string(text)]
        g_dbus_method_invocation_return_value(invocation, g_variant_new_tuple(&children, 1))
    }
}

/// A GMainContext, unreferenced when it goes.
private final class MainContext: @unchecked Sendable {
    let pointer: OpaquePointer
    init() { pointer = g_main_context_new() }
    deinit { g_main_context_unref(pointer) }
}

/// A GMainLoop on a context, unreferenced when it goes.
private final class MainLoop {
    let pointer: OpaquePointer
    init(_ context: MainContext) { pointer = g_main_loop_new(context.pointer, 0) }
    deinit { g_main_loop_unref(pointer) }
}

/// A GObject reference (a connection), released when it goes.
private final class GObject {
    let pointer: UnsafeMutableRawPointer
    init(_ pointer: UnsafeMutableRawPointer) { self.pointer = pointer }
    deinit { g_object_unref(pointer) }
}

/// Parsed introspection data, unreferenced when it goes.
private final class NodeInfo {
    let pointer: UnsafeMutablePointer<GDBusNodeInfo>
    init(_ pointer: UnsafeMutablePointer<GDBusNodeInfo>) { self.pointer = pointer }
    deinit { g_dbus_node_info_unref(pointer) }
}
