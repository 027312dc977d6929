internal import CLibSecret
import Dispatch
import FoundationEssentials

/// Opens the encrypted transfer session in the background while the backend's first searches run.
///
/// Opening a session is a Diffie-Hellman exchange (dh-ietf1024-sha256-aes128-cbc-pkcs7): two
/// 1,024-bit modular exponentiations here and two in the daemon, about 7 ms of CPU each side,
/// a third of a cold `tokencache token`. Only moving secrets needs the session (GetSecrets,
/// CreateItem); resolving the collection and searching do not. So the exchange starts on its
/// own thread when the backend connects, and the first transfer waits for it.
///
/// Purely a head start: whatever the outcome, libsecret opens a session itself on the first
/// transfer when none exists, and that call's error is the one reported (typed, bounded).
final class SessionHeadStart: @unchecked Sendable {
    // @unchecked: `done` is a semaphore; `finished` is Locked.
    private let done = DispatchSemaphore(value: 0)
    private let finished = Locked(false)
    private let exchange: @Sendable () -> Void

    /// Starts opening the session for `service` (which the exchange keeps a reference to): on an
    /// idle Dispatch worker, or, with `onThisThreadLater`, when the creator calls ``run()`` on a
    /// background thread it already has (the early connection's: no hop to another thread).
    init(libsecret: LibSecret, service: UnsafeMutablePointer<SecretService>, timeout: TimeInterval, onThisThreadLater: Bool = false) {
        let reference = GObjectReference(service)
        let done = self.done
        exchange = {
            let deadline = Deadline(seconds: timeout)
            var error: UnsafeMutablePointer<GError>?
            if libsecret.secret_service_ensure_session_sync(reference.pointer, deadline.cancellable, &error) == 0 {
                if let error { g_error_free(error) }  // the transfer that opens it again reports it
            }
            withExtendedLifetime(reference) {}
            done.signal()
        }
        guard !onThisThreadLater else { return }
        // A private queue: Dispatch runs it on an idle worker when there is one (creating a
        // Thread delayed the exchange by about a millisecond on a cold start), and, unlike the
        // width-limited global queues that Swift tasks share, always gets a thread.
        DispatchQueue(label: "tokencache.secret-service-session").async(execute: exchange)
    }

    /// Runs the exchange on this thread (for `onThisThreadLater`).
    func run() { exchange() }

    /// Returns once the background attempt has finished (immediately after the first time).
    func wait() {
        finished.withLock { isFinished in
            guard !isFinished else { return }
            done.wait()
            isFinished = true
        }
    }
}
