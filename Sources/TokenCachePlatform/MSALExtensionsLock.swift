import FoundationEssentials
import Logging
import TokenCacheCore
#if canImport(Glibc)
import Glibc
#endif

/// The cross-process lock msal-extensions peers take on `<location>.lockfile`, taken so that it
/// excludes all of them at once (docs/EXTERNAL-STORES.md §3 and §6): the file is created with
/// O_EXCL (Python's filelock, Java and Node wait on its existence) and flocked (.NET and
/// Python's portalocker wait on the flock), and the flocked inode is checked to still be the
/// one at the path. A leftover lock (its content a pid line) whose writer is dead and which is
/// older than ``staleAge`` is removed and the lock taken afresh; a file of any other content is
/// never removed (`unsafeFile`). Release unlinks first, then unlocks
/// (the .NET order, so no waiter locks an inode that is about to vanish).
package final class MSALExtensionsLock {
    /// A lock file this old whose pid is not alive is stale (Python peers wait 5 s themselves).
    package static let staleAge: Double = 5
    /// How long a live holder is waited for: the .NET default (600 × 100 ms).
    package static let defaultTimeout: Double = 60

    package let path: String
    private var descriptor: Int32

    private init(path: String, descriptor: Int32) {
        self.path = path
        self.descriptor = descriptor
    }

    deinit { release() }

    /// Takes the lock at `path`, waiting for a live holder up to `timeout` seconds.
    /// - Throws: `timedOut` naming the file and its holder; `unsafeFile` when an old file there is
    ///   not a lock (it is left as it is); `fileSystem` when the file or its directory cannot be created.
    package static func acquire(_ path: String, timeout: Double = defaultTimeout,
                                logger: Logger? = nil) throws(TokenCacheError) -> MSALExtensionsLock {
        try ensureParent(of: path)
        var holder = ""
        let wait = LockWait(timeout: .seconds(timeout), firstPause: .milliseconds(20), longestPause: .milliseconds(100))
        let descriptor = try wait.runBlocking({ () throws(TokenCacheError) -> Int32? in
            while true {
                switch try attempt(path, logger: logger) {
                case .acquired(let descriptor): return descriptor
                case .retryNow: continue
                case .held(let description): holder = description; return nil
                }
            }
        }, timedOut: {
            TokenCacheError(.timedOut, "The lock file \(path) was held by \(holder.isEmpty ? "another process" : holder) for more than \(Int(timeout)) s.",
                            hint: "Wait for that tool to finish, or end it; nothing was read or changed")
        })
        return MSALExtensionsLock(path: path, descriptor: descriptor)
    }

    /// Unlinks the lock file (when it is still ours), unlocks and closes. Idempotent.
    package func release() {
        guard descriptor >= 0 else { return }
        if Self.isSameFile(descriptor, path) { unlink(path) }
        flock(descriptor, LOCK_UN)
        close(descriptor)
        descriptor = -1
    }

    private enum Attempt {
        case acquired(Int32)
        case retryNow
        case held(String)
    }

    private static func attempt(_ path: String, logger: Logger?) throws(TokenCacheError) -> Attempt {
        let created = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        if created >= 0 {
            // A .NET process may open and flock the new file between our create and flock.
            guard (try? FileLock.lock(created, waiting: false)) == true else {
                close(created)
                return .held("a .NET or portalocker process")
            }
            guard isSameFile(created, path) else {
                flock(created, LOCK_UN)
                close(created)
                return .retryNow
            }
            let content = Array("\(getpid()) \(CommandLine.arguments.first ?? "tokencache")".utf8)
            _ = content.withUnsafeBytes { write(created, $0.baseAddress, $0.count) }
            return .acquired(created)
        }
        guard errno == EEXIST else { throw FileIO.error("create the lock file", path) }
        let existing = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC)
        guard existing >= 0 else {
            if errno == ENOENT { return .retryNow }  // released meanwhile
            throw FileIO.error("open the lock file", path)
        }
        defer { close(existing) }
        guard (try? FileLock.lock(existing, waiting: false)) == true else { return .held(describeHolder(existing)) }
        defer { flock(existing, LOCK_UN) }
        // Flocked by nobody: a live O_EXCL-only holder (Python filelock, Java, Node) or a stale file.
        let holder = describeHolder(existing)
        var info = stat()
        guard fstat(existing, &info) == 0 else { return .held(holder) }
        let age = realtimeNow() - (Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9)
        let pid = holderPID(existing)
        if let pid, isAlive(pid) { return .held(holder) }
        guard age >= staleAge else { return .held(holder) }
        // Only a lock is ever removed: a config "lock" path may name a file of other content.
        guard pid != nil else {
            throw TokenCacheError(.unsafeFile, "\(path) is not a lock file (its content is not a \"pid program\" line); it was left as it is, and nothing was read or changed.",
                                  hint: "Check the store's \"lock\" path in the config file; if it is a lock a crashed tool left, remove it: `rm \(path)`")
        }
        guard isSameFile(existing, path) else { return .retryNow }
        logger?.warning("Removing a stale lock file left by a process that is gone", metadata: [
            "lock": .string(path), "holder": .string(holder), "age_seconds": .stringConvertible(Int(age))])
        unlink(path)
        return .retryNow
    }

    /// "pid 123 (argv0)" from the file's content: Python writes "pid argv0", .NET a UTF-8 BOM
    /// first and a newline after.
    private static func describeHolder(_ descriptor: Int32) -> String {
        let text = content(descriptor)
        guard !text.isEmpty else { return "" }
        let parts = text.split(separator: " ", maxSplits: 1)
        let name = parts.count > 1 ? " (\(parts[1].prefix(80)))" : ""
        return "pid \(parts[0].prefix(12))\(name)"
    }

    /// The pid of a file whose whole content is a lock's: one line "pid" or "pid argv0" (.NET:
    /// after a UTF-8 BOM, then a newline); nil for anything else.
    private static func holderPID(_ descriptor: Int32) -> pid_t? {
        var buffer = [UInt8](repeating: 0, count: 4097)
        let count = pread(descriptor, &buffer, buffer.count, 0)
        guard count > 0, count < buffer.count else { return nil }
        var bytes = buffer[..<count]
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes = bytes.dropFirst(3) }
        if bytes.last == 0x0A { bytes = bytes.dropLast() }
        if bytes.last == 0x0D { bytes = bytes.dropLast() }
        guard !bytes.contains(where: { $0 < 0x20 }), let line = String(validating: bytes, as: UTF8.self) else { return nil }
        let digits = line.prefix { $0.isASCII && $0.isNumber }
        guard !digits.isEmpty, digits.count == line.count || line.dropFirst(digits.count).first == " ",
              let pid = pid_t(digits), pid > 0 else { return nil }
        return pid
    }

    private static func content(_ descriptor: Int32) -> String {
        var buffer = [UInt8](repeating: 0, count: 512)
        let count = pread(descriptor, &buffer, buffer.count, 0)
        guard count > 0 else { return "" }
        var bytes = buffer[..<count]
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes = bytes.dropFirst(3) }
        // Control characters (the .NET newline included) never reach a message.
        return String(String(decoding: bytes, as: UTF8.self).filter { !$0.isASCII || $0.asciiValue! >= 0x20 })
    }

    private static func isAlive(_ pid: pid_t) -> Bool {
        kill(pid, 0) == 0 || errno == EPERM
    }

    private static func isSameFile(_ descriptor: Int32, _ path: String) -> Bool {
        var held = stat(), current = stat()
        guard fstat(descriptor, &held) == 0, lstat(path, &current) == 0 else { return false }
        return held.st_dev == current.st_dev && held.st_ino == current.st_ino
    }

    private static func ensureParent(of path: String) throws(TokenCacheError) {
        guard let slash = path.lastIndex(of: "/"), slash != path.startIndex else { return }
        let directory = String(path[..<slash])
        var info = stat()
        if stat(directory, &info) == 0 { return }
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        } catch {
            throw FileIO.error("create the directory", directory)
        }
    }

    private static func realtimeNow() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }
}
