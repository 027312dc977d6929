import Dispatch
import TokenCacheCore
import TokenCacheDBus
import TokenCachePlatform
import FoundationEssentials

/// Opens the encrypted transfer session (``TransferSession``) in the background while the
/// backend's first searches run.
///
/// Only moving secrets needs the session (GetSecrets, CreateItem); resolving the collection and
/// searching do not. Opening it is a Diffie-Hellman exchange whose larger half runs in the
/// daemon, so the exchange starts on its own thread when the backend connects, and the first
/// transfer waits for it.
///
/// Purely a head start: when the background attempt failed, the first transfer opens a session
/// itself, and that call's error is the one reported (typed, bounded).
final class SessionHeadStart: @unchecked Sendable {
    // @unchecked: `done` is a semaphore; `outcome` and `waited` are Locked.
    private let done = DispatchSemaphore(value: 0)
    private let waited = Locked(false)
    private let outcome = Locked<Result<TransferSession, TokenCacheError>?>(nil)
    private let open: @Sendable () throws(TokenCacheError) -> TransferSession

    /// Starts opening a session with `open`: on an idle Dispatch worker, or, with
    /// `onThisThreadLater`, when the creator calls ``run()`` on a background thread it already
    /// has (the early connection's: no hop to another thread).
    init(onThisThreadLater: Bool = false, open: @escaping @Sendable () throws(TokenCacheError) -> TransferSession) {
        self.open = open
        guard !onThisThreadLater else { return }
        // A private queue: Dispatch runs it on an idle worker when there is one (creating a
        // Thread delayed the exchange by about a millisecond on a cold start), and, unlike the
        // width-limited global queues that Swift tasks share, always gets a thread.
        DispatchQueue(label: "tokencache.secret-service-session").async { self.run() }
    }

    /// Runs the exchange on this thread (for `onThisThreadLater`).
    func run() {
        let result = Result { () throws(TokenCacheError) in try open() }
        outcome.withLock { $0 = result }
        done.signal()
    }

    /// The session: the background attempt's, once it has finished; when it failed, a session
    /// opened now (the same one on every later call once that succeeds).
    func session() throws(TokenCacheError) -> TransferSession {
        // Not under `outcome`'s lock: `run` takes it to store the outcome before signalling.
        waited.withLock { hasWaited in
            guard !hasWaited else { return }
            done.wait()
            hasWaited = true
        }
        return try outcome.withLock { (result) throws(TokenCacheError) -> TransferSession in
            if case .success(let session)? = result { return session }
            let retried = Result { () throws(TokenCacheError) in try open() }
            result = retried
            return try retried.get()
        }
    }

    /// Replaces `old` with a freshly opened session (a provider derived another key for it); the
    /// old one is closed once no longer used. When another caller replaced it already, that
    /// session is returned.
    func renew(replacing old: TransferSession) throws(TokenCacheError) -> TransferSession {
        _ = try? session()
        return try outcome.withLock { (result) throws(TokenCacheError) -> TransferSession in
            if case .success(let current)? = result, current !== old { return current }
            let fresh = Result { () throws(TokenCacheError) in try open() }
            result = fresh
            return try fresh.get()
        }
    }
}
