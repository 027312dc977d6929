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
import TokenCacheDBus

/// The identity broker on the session bus: owns `com.microsoft.identity.broker1` (refusing to
/// queue behind another owner), exports ``BrokerProtocol/interfaceName`` at
/// ``BrokerProtocol/objectPath`` and runs GLib's main loop on a thread of its own. Each call is
/// answered by a ``BrokerService`` task once the bus daemon has said who the caller is
/// (`GetConnectionCredentials`, asked without blocking the loop).
package final class BrokerBus: @unchecked Sendable {
    // @unchecked: the GLib handles are touched by the loop's thread, and by start/stop after it is joined.
    private let service: BrokerService
    private let context = GMainContextRef()
    private var loop: GMainLoopRef?
    private var connection: GDBusConnectionRef?
    private var node: GDBusNodeInfoRef?
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
        loop?.quit()
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
        context.asThreadDefault {
            let loop = GMainLoopRef(context)
            self.loop = loop
            do throws(TokenCacheError) {
                try connect()
            } catch {
                self.loop = nil
                return decide(.failure(error))
            }
            loop.run()
            let whenEnded = ending.withLock { ending in
                ending.endedByBus = !ending.stopping
                return ending.endedByBus ? ending.whenEnded : nil
            }
            whenEnded?()
            if ownership != 0 { g_bus_unown_name(ownership) }
            for id in [registration, adminRegistration] where id != 0 {
                if let connection { g_dbus_connection_unregister_object(connection.pointer, id) }
            }
            connection?.flush()
            // Callbacks already queued run (and release their boxes) before the context goes.
            context.drain()
            (ownership, registration, adminRegistration) = (0, 0, 0)
            self.connection = nil
            self.node = nil
            self.loop = nil
        }
    }

    private func connect() throws(TokenCacheError) {
        let connection: GDBusConnectionRef
        do { connection = try GDBusConnectionRef.privateSession() } catch {
            throw TokenCacheError(.noSessionBus, "Could not connect to the session bus: \(error.message).", hint: "Run it in a desktop session (DBUS_SESSION_BUS_ADDRESS)")
        }
        self.connection = connection
        let node: GDBusNodeInfoRef
        do { node = try GDBusNodeInfoRef(xml: Self.introspection) } catch {
            throw TokenCacheError(.backendUnavailable, "The broker's interface description is invalid: \(error.message).")
        }
        self.node = node
        let this = Unmanaged.passUnretained(self).toOpaque()
        for (index, interface) in [BrokerWire.interfaceName, Self.adminInterface].enumerated() {
            guard let description = node.interface(interface) else { continue }
            // GDBus copies the table.
            var vtable = Self.vtable()
            var error: UnsafeMutablePointer<GError>?
            let id = g_dbus_connection_register_object(connection.pointer, BrokerWire.objectPath, description, &vtable, this, nil, &error)
            guard id != 0 else {
                throw TokenCacheError(.backendUnavailable, "Could not export the broker's object: \(GLibFailure(taking: error).message).")
            }
            if index == 0 { registration = id } else { adminRegistration = id }
        }
        ownership = g_bus_own_name_on_connection(connection.pointer, BrokerWire.busName, G_BUS_NAME_OWNER_FLAGS_DO_NOT_QUEUE, { _, _, data in
            Unmanaged<BrokerBus>.fromOpaque(data!).takeUnretainedValue().decide(.success(()))
        }, { _, _, data in
            let bus = Unmanaged<BrokerBus>.fromOpaque(data!).takeUnretainedValue()
            bus.decide(.failure(TokenCacheError(.backendUnavailable, "Another process owns \(BrokerWire.busName) on this session bus (Microsoft's identity broker, or another tokencache broker).",
                                                hint: "`gdbus call --session --dest org.freedesktop.DBus --object-path /org/freedesktop/DBus --method org.freedesktop.DBus.GetConnectionUnixProcessID \(BrokerWire.busName)` names its pid")))
            // Lost after being owned (or never owned): stop serving.
            bus.loop?.quit()
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
        // Borrowed from GDBus for this callback: a reference of our own while it is read.
        let arguments = parameters.map { GVariantRef(sinking: $0).children.compactMap(\.string) } ?? []
        let call = PendingCall(bus: self, invocation: invocation, interface: interface, method: method, arguments: arguments, sender: sender)
        let query = GVariantRef.tuple([.string(sender)])
        // With the fd list: a bus that gives the caller's pidfd (ProcessFD, dbus-daemon 1.15.7+,
        // dbus-broker) sends it in the reply's fd list.
        // GDBus takes its own reference to the query.
        withExtendedLifetime(query) {
            g_dbus_connection_call_with_unix_fd_list(connection, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                                     "GetConnectionCredentials", query.pointer, nil, G_DBUS_CALL_FLAGS_NONE, -1, nil, nil, { source, result, data in
                let call = Unmanaged<PendingCall>.fromOpaque(data!).takeRetainedValue()
                var error: UnsafeMutablePointer<GError>?
                var fds: UnsafeMutablePointer<GUnixFDList>?
                let reply = g_dbus_connection_call_with_unix_fd_list_finish(OpaquePointer(source), &fds, result, &error).map(GVariantRef.init(taking:))
                if reply == nil { _ = GLibFailure(taking: error) }
                defer { if let fds { g_object_unref(fds) } }
                var caller = BrokerCaller(sender: call.sender, pid: nil, uid: nil)
                var pidfd: Int32?
                if let reply, reply.count == 1 {
                    let credentials = reply[0]
                    caller.uid = credentials.value(forKey: "UnixUserID").flatMap { $0.typeString == "u" ? $0.uint32 : nil }
                    caller.pid = credentials.value(forKey: "ProcessID").flatMap { $0.typeString == "u" ? $0.uint32 : nil }
                    pidfd = BrokerBus.processFD(credentials, fds)
                }
                call.bus.answer(call, caller: caller, pidfd: pidfd)
            }, Unmanaged.passRetained(call).toOpaque())
        }
    }

    /// The caller's pidfd (`ProcessFD`, a handle into the reply's fd list), duplicated: the caller closes it.
    private static func processFD(_ credentials: GVariantRef, _ fds: UnsafeMutablePointer<GUnixFDList>?) -> Int32? {
        guard let fds, let value = credentials.value(forKey: "ProcessFD"), value.typeString == "h" else { return nil }
        var error: UnsafeMutablePointer<GError>?
        let fd = withExtendedLifetime(value) { g_unix_fd_list_get(fds, g_variant_get_handle(value.pointer), &error) }
        if fd < 0 { _ = GLibFailure(taking: error); return nil }
        return fd
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

    // MARK: Asking a running broker

    /// Whether some process owns the broker's name on this session bus now.
    package static func nameHasOwner() throws(TokenCacheError) -> Bool {
        let reply: GVariantRef
        do {
            let connection = try GDBusConnectionRef.session()
            reply = try connection.call("NameHasOwner", on: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus", of: "org.freedesktop.DBus",
                                        arguments: .tuple([.string(BrokerWire.busName)]), timeoutMilliseconds: 10_000)
        } catch {
            throw TokenCacheError(.noSessionBus, "The session bus did not answer: \(error.message).", hint: "Run it in a desktop session (DBUS_SESSION_BUS_ADDRESS)")
        }
        return reply.count == 1 && reply[0].bool == true
    }

    /// The request log of the broker on this session bus (`--list-requests`).
    package static func requests() throws(TokenCacheError) -> [AgentProtocol.LoggedRequest] {
        let connection: GDBusConnectionRef
        do { connection = try GDBusConnectionRef.session() } catch {
            throw TokenCacheError(.noSessionBus, "No session bus: \(error.message).")
        }
        let reply: GVariantRef
        do {
            reply = try connection.call("ListRequests", on: BrokerWire.objectPath, interface: adminInterface, of: BrokerWire.busName,
                                        arguments: nil, timeoutMilliseconds: 10_000)
        } catch {
            throw TokenCacheError(.agentUnavailable, "No tokencache broker answers on this session bus: \(error.message).",
                                  hint: "Start it with `tokencache broker`")
        }
        guard reply.count == 1, let text = reply[0].string else { return [] }
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
        let value = GVariantRef.tuple([.string(text)])
        withExtendedLifetime(value) { g_dbus_method_invocation_return_value(invocation, value.pointer) }
    }
}
