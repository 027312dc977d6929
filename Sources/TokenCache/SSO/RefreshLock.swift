import FoundationEssentials
import EncryptedFileStore
import SecretServiceStore
import TokenCacheCore
import TokenCachePlatform
#if canImport(Glibc)
import Glibc
#endif

/// A cross-process lock serialising refreshes of one account and client (or family, for apps
/// redeeming their family's refresh token), so two processes never redeem the same (rotating)
/// refresh token at once. It is an `flock` on a file that is never
/// deleted: the kernel releases it when a process dies, so a crash never leaves a stale lock.
final class RefreshLock: Sendable {
    private let descriptor: Int32

    /// Where lock files live: `$XDG_RUNTIME_DIR/tokencache/locks` (per-user tmpfs), else the cache dir.
    static var directory: URL {
        let environment = ProcessInfo.processInfo.environment
        if let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty {
            return URL(fileURLWithPath: runtime).appendingPathComponent("tokencache/locks")
        }
        let cache = environment["XDG_CACHE_HOME"].flatMap { $0.isEmpty ? nil : $0 }
            ?? (FileIO.homeDirectory + "/.cache")
        return URL(fileURLWithPath: cache).appendingPathComponent("tokencache/locks")
    }

    /// Takes the lock for a name, waiting up to `timeout` seconds.
    static func acquire(name: String, timeout: TimeInterval) async throws(TokenCacheError) -> RefreshLock {
        let directory = Self.directory
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        } catch {
            throw TokenCacheError(.fileSystem, "Cannot create the lock directory \(directory.path).",
                                  hint: "Check that the directory is writable by you")
        }
        // The file name is a hash: account IDs are personal data and stay out of file names.
        let path = directory.appendingPathComponent("refresh-\(Self.hash(name)).lock").path
        let descriptor = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw TokenCacheError(.fileSystem, "Cannot open the lock file \(path): \(String(cString: strerror(errno))).",
                                  hint: "Check the permissions of \(directory.path)")
        }
        let deadline = Date().addingTimeInterval(timeout)
        while flock(descriptor, LOCK_EX | LOCK_NB) != 0 {
            guard errno == EWOULDBLOCK || errno == EINTR else {
                close(descriptor)
                throw TokenCacheError(.fileSystem, "Cannot lock \(path): \(String(cString: strerror(errno))).")
            }
            guard Date() < deadline else {
                close(descriptor)
                throw TokenCacheError(.timedOut, "Another process kept refreshing this account for more than \(Int(timeout)) s.",
                                      hint: "Retry; if it persists, look for a hung process using the token cache")
            }
            try? await Task.sleep(for: .milliseconds(15))
        }
        return RefreshLock(descriptor: descriptor)
    }

    private init(descriptor: Int32) { self.descriptor = descriptor }

    deinit {
        flock(descriptor, LOCK_UN)
        close(descriptor)
    }

    /// FNV-1a, 64 bit: stable across processes and runs (Swift's Hasher is seeded per process).
    static func hash(_ text: String) -> String {
        var value: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 {
            value ^= UInt64(byte)
            value = value &* 0x0000_0100_0000_01b3
        }
        return String(value, radix: 16)
    }
}
