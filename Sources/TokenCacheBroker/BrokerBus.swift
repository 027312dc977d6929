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
import TokenCachePlatform

/// The identity broker on the session bus: owns `com.microsoft.identity.broker1` (refusing to
/// queue behind another owner), exports ``BrokerProtocol/interfaceName`` at
/// ``BrokerProtocol/objectPath`` and runs GLib's main loop on a thread of its own. Each call is
/// answered by a ``BrokerService`` task once the bus daemon has said who the caller is
/// (`GetConnectionCredentials`, asked without blocking the loop). Every GLib handle is one of
/// `TokenCacheDBus`'s owning types: this server makes no GLib call itself.
package final class BrokerBus: @unchecked Sendable {
    // @unchecked: the GLib handles are touched by the loop's thread, and by start/stop after it is joined.
    private let service: BrokerService
    private let context: GMainContextRef
    /// Made with the broker and never released before it: ``stop()`` quits it from any thread
    /// while the loop's thread may be releasing the rest.
    private let loop: GMainLoopRef
    private var connection: GDBusConnectionRef?
    private var node: GDBusNodeInfoRef?
    /// The two interfaces exported (Microsoft's and the admin one): unregistered when released.
    private var registrations: [GDBusObjectRegistration] = []
    /// The bus name: given up when released.
    private var ownership: GBusNameOwnership?
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
    /// Calls received whose callers' credentials the bus daemon has not given yet (the loop's thread only).
    private var awaitingCredentials = 0
    /// Calls being answered in a task: the connection is kept until they are (``release()``).
    private let answering = DispatchGroup()
    /// How long stopping waits for calls being answered (an interactive sign-in can take longer).
    private static let answeringGrace = DispatchTimeInterval.seconds(30)

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

    package init(service: BrokerService) {
        self.service = service
        let context = GMainContextRef()
        self.context = context
        self.loop = GMainLoopRef(context)
    }

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

    /// Gives the name up and stops the loop. Blocks while ``release()`` answers what was received:
    /// about 25 s at most for callers' credentials (GDBus's call timeout), then up to 30 s for
    /// calls being answered (a pending confirmation among them).
    package func stop() {
        ending.withLock { $0.stopping = true }
        loop.quit()
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
            do throws(TokenCacheError) {
                try connect()
            } catch {
                // What was made before the failure (the connection, an exported object) is given up.
                release()
                return decide(.failure(error))
            }
            loop.run()
            let whenEnded = ending.withLock { ending in
                ending.endedByBus = !ending.stopping
                return ending.endedByBus ? ending.whenEnded : nil
            }
            whenEnded?()
            release()
        }
    }

    /// Gives up what ``connect()`` made (on the loop's thread): the name, then the objects, so that
    /// no call arrives any more; then it answers the calls received before the connection goes.
    private func release() {
        ownership = nil
        registrations = []
        // The bus daemon answers each credentials request, at the latest with its 25 s call timeout.
        while awaitingCredentials > 0 { context.iterate() }
        _ = answering.wait(timeout: .now() + Self.answeringGrace)
        connection?.flush()
        // Callbacks already queued run (and release their boxes) before the context goes.
        context.drain()
        connection = nil
        node = nil
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
        for interface in [BrokerWire.interfaceName, Self.adminInterface] {
            do {
                // Weakly: the registration's handler is released by GDBus only after the loop drained.
                registrations.append(try GDBusObjectRegistration(on: connection, path: BrokerWire.objectPath, interface: interface, of: node) {
                    [weak self] call in self?.received(call)
                })
            } catch {
                throw TokenCacheError(.backendUnavailable, "Could not export the broker's object: \(error.message).")
            }
        }
        ownership = GBusNameOwnership(BrokerWire.busName, on: connection, acquired: { [weak self] in
            self?.decide(.success(()))
        }, lost: { [weak self] in
            guard let bus = self else { return }
            bus.decide(.failure(TokenCacheError(.backendUnavailable, "Another process owns \(BrokerWire.busName) on this session bus (Microsoft's identity broker, or another tokencache broker).",
                                                hint: "`gdbus call --session --dest org.freedesktop.DBus --object-path /org/freedesktop/DBus --method org.freedesktop.DBus.GetConnectionUnixProcessID \(BrokerWire.busName)` names its pid")))
            // Lost after being owned (or never owned): stop serving.
            bus.loop.quit()
        })
    }

    /// A call arrived (on the loop's thread), its arguments copied: the caller's credentials are
    /// asked for, and the answer is given once they arrive (``answer(_:caller:pidfd:)``).
    private func received(_ call: DBusMethodCall) {
        // Not connected any more: the call, released, is refused with a D-Bus error.
        guard let connection else { return }
        awaitingCredentials += 1
        // Weakly: GDBus holds the callback until the daemon answers, which may be after the bus went.
        connection.connectionCredentials(of: call.sender) { [weak self] reply, fds in
            guard let self else { return }
            self.awaitingCredentials -= 1
            var caller = BrokerCaller(sender: call.sender, pid: nil, uid: nil)
            var pidfd: Int32?
            if let reply, reply.count == 1 {
                let credentials = reply[0]
                caller.uid = credentials.value(forKey: "UnixUserID").flatMap { $0.typeString == "u" ? $0.uint32 : nil }
                caller.pid = credentials.value(forKey: "ProcessID").flatMap { $0.typeString == "u" ? $0.uint32 : nil }
                // The caller's pidfd (`ProcessFD`, a handle into the reply's fd list), duplicated: closed below.
                pidfd = fds.flatMap { fds in credentials.value(forKey: "ProcessFD").flatMap(fds.duplicate) }
            }
            self.answer(call, caller: caller, pidfd: pidfd)
        }
    }

    /// Answers in a task; the invocation is completed from there (GDBus allows any thread).
    /// The caller is identified (``CallerIdentity``, through its pidfd) in the task, off the loop's thread.
    private func answer(_ call: DBusMethodCall, caller given: BrokerCaller, pidfd: Int32?) {
        let service = self.service
        let method = BrokerWire.Method(rawValue: call.method)
        guard call.interface == Self.adminInterface || (method != nil && call.arguments.count == 3) else {
            if let pidfd { close(pidfd) }
            return call.reply(BrokerWire.errorReply(.apiContractViolation, code: "invalidRequest", context: "Unknown method \(call.method)."))
        }
        let arguments = call.arguments
        let answering = self.answering
        answering.enter()
        Task {
            defer { answering.leave() }
            // /proc is read on the blocking pool, not a cooperative thread (inline only when the pool refuses work).
            let identify: @Sendable () -> BrokerCaller = { Self.identified(given, pidfd: pidfd) }
            let caller = (try? await BlockingWork.run(cancellable: false) { () throws(TokenCacheError) in identify() }) ?? identify()
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

    /// `caller` with its identity and start time, read while one pidfd pins the process: the
    /// bus's (`pidfd`, closed here), else one opened here from the pid the bus named.
    private static func identified(_ given: BrokerCaller, pidfd: Int32?) -> BrokerCaller {
        var caller = given
        let pinned = pidfd ?? caller.pid.flatMap { $0 <= UInt32(Int32.max) ? ProcessDescriptor.open(pid: Int32($0)) : nil }.flatMap { $0 >= 0 ? $0 : nil }
        caller.identity = CallerIdentity.identify(pid: caller.pid, pidfd: pinned)
        if let pinned {
            if let pid = caller.pid { caller.started = CallerIdentity.startTime(pid: pid, pidfd: pinned) }
            close(pinned)
        }
        return caller
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
