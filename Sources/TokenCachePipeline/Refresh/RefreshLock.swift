import FoundationEssentials
import TokenCacheCore
import TokenCachePlatform
#if canImport(Glibc)
import Glibc
#endif

/// A cross-process lock serialising refreshes of one account and client (or family, for apps
/// redeeming their family's refresh token), so two processes never redeem the same (rotating)
/// refresh token at once. It is a `FileLock` on a file that is never deleted: the kernel
/// releases it when a process dies, so a crash never leaves a stale lock.
package enum RefreshLock {
    /// Where lock files live: `$XDG_RUNTIME_DIR/tokencache/locks` (per-user tmpfs), else the cache dir.
    package static var directory: URL {
        let environment = ProcessInfo.processInfo.environment
        if let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty {
            return URL(fileURLWithPath: runtime).appendingPathComponent("tokencache/locks")
        }
        let cache = environment["XDG_CACHE_HOME"].flatMap { $0.isEmpty ? nil : $0 }
            ?? (FileIO.homeDirectory + "/.cache")
        return URL(fileURLWithPath: cache).appendingPathComponent("tokencache/locks")
    }

    /// Takes the lock for a name, waiting up to `timeout` seconds, on the calling thread (for
    /// blocking threads only): the wait sleeps the thread, and ends with `cancelled` within a
    /// pause once `isCancelled`.
    /// - Parameters:
    ///   - directory: where the lock file lives (tests pass their own; default ``directory``).
    ///   - clock: the clock of the wait's pauses and timeout (tests pass a manual one).
    /// - Throws: `unsafeFile` when the lock directory or its `tokencache` parent is a link, not
    ///   owned by this user or writable by others: whoever controls it could hold every lock and
    ///   block refreshes (the encrypted file's checks, `FileIO.ensureDirectory(_:purpose:)`).
    package static func acquireBlocking(name: String, timeout: TimeInterval, directory: URL = RefreshLock.directory,
                                        clock: any ThreadSleepingClock = ContinuousClock(),
                                        isCancelled: () -> Bool) throws(TokenCacheError) -> FileLock {
        let (descriptor, path) = try openLockFile(name: name, directory: directory)
        return try FileLock.acquireBlocking(owning: descriptor, path: path, wait: LockWait(timeout: .seconds(timeout), clock: clock),
                                            timedOut: { timedOut(after: timeout) }, isCancelled: isCancelled, cancelled: cancelled)
    }

    private static func timedOut(after timeout: TimeInterval) -> TokenCacheError {
        TokenCacheError(.timedOut, "Another process kept refreshing this account for more than \(Int(timeout)) s.",
                        hint: "Retry; if it persists, look for a hung process using the token cache")
    }

    private static func cancelled() -> TokenCacheError {
        TokenCacheError(.cancelled, "The refresh was cancelled while another process was refreshing this account; nothing was changed.",
                        hint: "Retry when the token is needed again")
    }

    /// The lock file of `name` in `directory` (both checked, the file created 0600), open.
    private static func openLockFile(name: String, directory: URL) throws(TokenCacheError) -> (descriptor: Int32, path: String) {
        try FileIO.ensureDirectory(directory.deletingLastPathComponent(), purpose: "lock directory's parent")
        try FileIO.ensureDirectory(directory, purpose: "lock directory")
        // Opened without following links and checked again by descriptor: the directory checked
        // above cannot be swapped for another before the lock file is created in it.
        let folder = open(directory.path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard folder >= 0 else { throw FileIO.error("open the lock directory", directory.path) }
        defer { close(folder) }
        var info = stat()
        guard fstat(folder, &info) == 0 else { throw FileIO.error("inspect", directory.path) }
        if let problem = FileIO.unsafeReason(info, expectFile: false) {
            throw TokenCacheError(.unsafeFile, "The lock directory \(directory.path) is unsafe: \(problem).",
                                  hint: "Remove it; swift-tokencache will create it")
        }
        // The file name is a hash: account IDs are personal data and stay out of file names.
        let file = "refresh-\(Self.hash(name)).lock"
        let path = directory.appendingPathComponent(file).path
        let descriptor = openat(folder, file, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw TokenCacheError(.fileSystem, "Cannot open the lock file \(path): \(String(cString: strerror(errno))).",
                                  hint: "Check the permissions of \(directory.path)")
        }
        return (descriptor, path)
    }

    /// FNV-1a, 64 bit: stable across processes and runs (Swift's Hasher is seeded per process).
    package static func hash(_ text: String) -> String {
        var value: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 {
            value ^= UInt64(byte)
            value = value &* 0x0000_0100_0000_01b3
        }
        return String(value, radix: 16)
    }
}
