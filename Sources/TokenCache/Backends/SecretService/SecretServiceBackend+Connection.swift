internal import CLibSecret
import Dispatch
import FoundationEssentials

extension SecretServiceBackend {
    /// Starts connecting to the Secret Service on a background thread (loading libsecret, the
    /// bus handshake, then the encrypted session's key exchange), so that the next
    /// ``init(options:)`` in this process finds the connection made.
    ///
    /// For command-line tools, whose every run pays the connection: call it first thing in
    /// `main`, and the connection is made while the command line is parsed. Nothing is read,
    /// and no prompt is shown. A failed attempt is forgotten: `init` then connects itself and
    /// reports what went wrong. Calls after the first, until `init` takes the connection, do
    /// nothing.
    public static func connectInBackground(callTimeout: TimeInterval = Options().callTimeout) {
        Connection.startEarly(callTimeout: callTimeout)
    }

    /// A connection to the Secret Service: the service proxy, the bus it is on, the transfer
    /// session being opened, and the item-signal counter. Owns the proxy.
    final class Connection: @unchecked Sendable {
        // @unchecked: immutable after init; libsecret's and GDBus's calls are thread-safe.
        let libsecret: LibSecret
        let service: UnsafeMutablePointer<SecretService>
        let bus: GDBusTarget
        let session: SessionHeadStart
        let signals: ItemSignalCounter

        /// Connects, and starts the session's key exchange and the signal subscription. With
        /// `exchangeOnThisThreadLater`, the caller runs the exchange (`session.run()`) on its own
        /// background thread once it has handed the connection over.
        init(callTimeout: TimeInterval, exchangeOnThisThreadLater: Bool = false) throws(TokenCacheError) {
            let libsecret = try LibSecret.shared()
            self.libsecret = libsecret
            let environment = ProcessInfo.processInfo.environment
            let busAddress = environment["DBUS_SESSION_BUS_ADDRESS"] ?? ""
            // With the variable unset, GDBus falls back to $XDG_RUNTIME_DIR/bus, then X11 autolaunch.
            let runtimeBus = environment["XDG_RUNTIME_DIR"].map { FileManager.default.fileExists(atPath: $0 + "/bus") } ?? false
            if busAddress.isEmpty && !runtimeBus && environment["DISPLAY"] == nil {
                throw TokenCacheError(.noSessionBus, "There is no D-Bus session bus (DBUS_SESSION_BUS_ADDRESS is not set).",
                                      hint: "Use the encrypted-file backend (--backend file), or run inside a desktop session")
            }
            let deadline = Deadline(seconds: callTimeout)
            var error: UnsafeMutablePointer<GError>?
            // No session yet: it opens in the background (SessionHeadStart).
            guard let service = libsecret.secret_service_open_sync(libsecret.secret_service_get_type(), nil, SECRET_SERVICE_NONE,
                                                                   deadline.cancellable, &error) else {
                throw SecretServiceBackend.map(error, deadline: deadline, action: "connect to the Secret Service")
            }
            // The proxy is created even when nobody owns the name (and activation failed).
            let proxy = UnsafeMutableRawPointer(service).assumingMemoryBound(to: GDBusProxy.self)
            let owner = g_dbus_proxy_get_name_owner(proxy)
            defer { g_free(owner) }
            guard owner != nil else {
                g_object_unref(UnsafeMutableRawPointer(service))
                throw SecretServiceBackend.noProvider
            }
            self.service = service
            let bus = GDBusTarget(proxy: proxy)
            self.bus = bus
            let timeout = SecretServiceBackend.milliseconds(callTimeout)
            session = SessionHeadStart(onThisThreadLater: exchangeOnThisThreadLater) { () throws(TokenCacheError) in
                try TransferSession.open(bus, timeoutMilliseconds: timeout)
            }
            signals = ItemSignalCounter(connection: g_dbus_proxy_get_connection(proxy)!)
        }

        deinit { g_object_unref(UnsafeMutableRawPointer(service)) }

        /// The attempt `connectInBackground` started, until `init` takes it.
        private static let early = Locked<EarlyAttempt?>(nil)

        static func startEarly(callTimeout: TimeInterval) {
            let attempt = EarlyAttempt()
            guard early.withLock({ slot in
                guard slot == nil else { return false }
                slot = attempt
                return true
            }) else { return }
            // A private queue always gets a thread of its own. Once the connection is handed over,
            // the same thread runs the session's key exchange: no hop to another thread first.
            DispatchQueue(label: "tokencache.secret-service-connect").async {
                let result = Result { () throws(TokenCacheError) in try Connection(callTimeout: callTimeout, exchangeOnThisThreadLater: true) }
                attempt.finish(result)
                if case .success(let connection) = result { connection.session.run() }
            }
        }

        /// The connection made in the background, if an attempt was started and succeeded
        /// within `seconds`; nil otherwise (the caller connects itself).
        static func takeEarly(waitingAtMost seconds: TimeInterval) -> Connection? {
            guard let attempt = early.withLock({ slot in defer { slot = nil }; return slot }) else { return nil }
            return attempt.wait(seconds: seconds)
        }
    }

    /// One background connection attempt and its outcome.
    private final class EarlyAttempt: Sendable {
        private let outcome = Locked<Result<Connection, TokenCacheError>?>(nil)
        private let done = DispatchSemaphore(value: 0)

        func finish(_ result: Result<Connection, TokenCacheError>) {
            outcome.withLock { $0 = result }
            done.signal()
        }

        func wait(seconds: TimeInterval) -> Connection? {
            guard done.wait(timeout: .now() + seconds) == .success else { return nil }
            return try? outcome.withLock { $0 }?.get()
        }
    }
}
