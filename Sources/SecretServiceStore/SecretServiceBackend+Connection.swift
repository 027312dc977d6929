internal import CLibSecret
import TokenCacheCore
import TokenCacheCrypto
import TokenCacheDBus
import TokenCachePlatform
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
    package static func connectInBackground(callTimeout: TimeInterval = Options().callTimeout) {
        Connection.startEarly(callTimeout: callTimeout)
    }

    /// A connection to the Secret Service: the typed client on the bus, the transfer session
    /// being opened, and the item-signal counter.
    final class Connection: Sendable {
        let client: SecretServiceClient
        let session: SessionHeadStart
        let signals: ItemSignalCounter

        /// Connects, checks that a provider is there (or can be started), and starts the session's
        /// key exchange and the signal subscription. With `exchangeOnThisThreadLater`, the caller
        /// runs the exchange (`session.run()`) on its own background thread once it has handed the
        /// connection over.
        init(callTimeout: TimeInterval, exchangeOnThisThreadLater: Bool = false) throws(TokenCacheError) {
            // Loaded first, though only the session's key exchange uses it: a machine without it
            // gets the encrypted file from automatic selection rather than a failing first read.
            _ = try Gcrypt.shared()
            // Without an address GDBus falls back to X11 autolaunch: allowed here where there is a display.
            if !GLib.sessionBusIsAddressed && ProcessInfo.processInfo.environment["DISPLAY"] == nil {
                throw TokenCacheError(.noSessionBus, "There is no D-Bus session bus (DBUS_SESSION_BUS_ADDRESS is not set).",
                                      hint: "Use the encrypted-file backend (--backend file), or run inside a desktop session")
            }
            let deadline = Deadline(seconds: callTimeout)
            var error: UnsafeMutablePointer<GError>?
            guard let connection = g_bus_get_sync(G_BUS_TYPE_SESSION, deadline.cancellable, &error) else {
                throw SecretServiceErrors.connectionFailure(error, deadline: deadline)
            }
            defer { g_object_unref(UnsafeMutableRawPointer(connection)) }
            // No StartServiceByName first: the first call to the provider starts it if the bus can
            // (D-Bus activation), and with none there every call fails with ServiceUnknown, which
            // reads as `noSecretService`. Asking first cost a round trip on the way to the
            // session's key exchange: cold `tokencache token` 12.38 -> 12.12 ms (100 interleaved runs).
            let client = SecretServiceClient(bus: GDBusTarget(connection: connection, name: SecretServiceBackend.busName),
                                             callTimeout: callTimeout)
            self.client = client
            session = SessionHeadStart(onThisThreadLater: exchangeOnThisThreadLater) { () throws(TokenCacheError) in
                try client.openSession()
            }
            signals = ItemSignalCounter(connection: connection)
        }

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
