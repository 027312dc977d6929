import FoundationEssentials
import SystemPackage
import TokenCacheCore
#if canImport(Glibc)
import Glibc
#endif

/// POSIX file operations with the safety checks the encrypted file needs.
package enum FileIO {
    package struct OpenFile {
        package var descriptor: Int32
        package var info: stat
    }

    package static func error(_ action: String, _ path: String, _ failure: Errno) -> TokenCacheError {
        error(action, path, code: failure.rawValue)
    }

    package static func error(_ action: String, _ path: String, code: Int32 = errno) -> TokenCacheError {
        let reason = String(cString: strerror(code))
        let hint: String = switch code {
        case ENOSPC, EDQUOT, EFBIG: "Free disk space; the previous cache file is intact"
        case EROFS: "The file system is read-only; the previous cache file is intact"
        case EACCES, EPERM: "Check the permissions of \(path)"
        default: "The previous cache file is intact"
        }
        return TokenCacheError(.fileSystem, "Cannot \(action) \(path): \(reason).", hint: hint)
    }

    /// Opens a file for reading if it exists, refusing links and files others can reach.
    /// - Parameter emptyMayBeReadable: an empty file of this user's may have any mode (another
    ///   tool's signal file, created 0644, holds nothing to protect).
    package static func openExisting(_ path: String, emptyMayBeReadable: Bool = false) throws(TokenCacheError) -> OpenFile? {
        // O_NONBLOCK: a FIFO put in a cache file's place would block open forever (#44); the
        // checks below refuse anything but a regular file, whose reads ignore the flag.
        let descriptor = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        if descriptor < 0 {
            if errno == ENOENT { return nil }
            if errno == ELOOP {
                throw TokenCacheError(.unsafeFile, "\(path) is a symbolic link; cache files must be regular files.",
                                      hint: "Put the file the link points to in its place (mv, keeping its data), then retry; removing the link would start an empty cache")
            }
            throw error("open", path)
        }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else {
            let failure = error("inspect", path)
            close(descriptor)
            throw failure
        }
        let emptySignal = emptyMayBeReadable && info.st_size == 0 && info.st_mode & S_IFMT == S_IFREG
            && info.st_uid == geteuid() && info.st_nlink == 1
        if !emptySignal, let problem = unsafeReason(info, expectFile: true) {
            close(descriptor)
            throw TokenCacheError(.unsafeFile, "\(path) is unsafe: \(problem).",
                                  hint: "Fix it: `chmod 600 \(path)`, owned by you, a file of its own (no hard links); it was not used")
        }
        return OpenFile(descriptor: descriptor, info: info)
    }

    package static func unsafeReason(_ info: stat, expectFile: Bool) -> String? {
        let type = info.st_mode & S_IFMT
        if expectFile && type != S_IFREG { return "not a regular file" }
        if !expectFile && type != S_IFDIR { return "not a directory" }
        if info.st_uid != geteuid() { return "owned by another user (uid \(info.st_uid))" }
        if expectFile && info.st_mode & 0o077 != 0 { return "readable or writable by others (mode \(String(info.st_mode & 0o777, radix: 8)))" }
        if !expectFile && info.st_mode & 0o022 != 0 { return "writable by others (mode \(String(info.st_mode & 0o777, radix: 8)))" }
        if expectFile && info.st_nlink > 1 { return "hard-linked (\(info.st_nlink) links)" }
        return nil
    }

    /// The user's home directory: `$HOME` when set (as Foundation's `NSHomeDirectory`), else
    /// the password database's entry.
    package static var homeDirectory: String {
        if let home = ProcessInfo.processInfo.environment["HOME"], !home.isEmpty { return home }
        var record = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 4096)
        if getpwuid_r(geteuid(), &record, &buffer, buffer.count, &result) == 0, let result, let directory = result.pointee.pw_dir {
            return String(cString: directory)
        }
        return "/"
    }

    /// Files larger than this are not token caches and are refused.
    package static let readLimit = 256 << 20

    /// One read(2) into `bytes`, retried on EINTR: the number of bytes read, 0 at the end.
    package static func readSome(_ descriptor: Int32, into bytes: UnsafeMutableRawPointer, count: Int, path: String) throws(TokenCacheError) -> Int {
        do {
            return try FileDescriptor(rawValue: descriptor).read(into: UnsafeMutableRawBufferPointer(start: bytes, count: count))
        } catch {
            throw Self.error("read", path, error as? Errno ?? .ioError)
        }
    }

    package static func readAll(_ descriptor: Int32, path: String) throws(TokenCacheError) -> Data {
        let limit = readLimit
        // Read straight into a buffer of the file's size (plus room to see the end), not through
        // a bounce buffer: a large cache is copied once, not twice. Not zero-filled first
        // (`Data(count:)` does): read(2) writes every byte that is kept.
        var info = stat()
        let expected = fstat(descriptor, &info) == 0 ? min(max(Int(info.st_size), 0), limit) : 0
        if expected >= HugePageBuffer.minimumFileSize, let whole = try readWhole(descriptor, expected: expected, path: path) {
            return whole
        }
        var capacity = expected + 4096
        guard var buffer = malloc(capacity) else { throw Self.error("read", path, .noMemory) }
        var filled = 0
        while true {
            if filled == capacity {
                capacity += max(capacity, 64 * 1024)
                guard let grown = realloc(buffer, capacity) else { free(buffer); throw Self.error("read", path, .noMemory) }
                buffer = grown
            }
            let count: Int
            do { count = try readSome(descriptor, into: buffer + filled, count: capacity - filled, path: path) } catch { free(buffer); throw error }
            if count == 0 { return Data(bytesNoCopy: buffer, count: filled, deallocator: .free) }
            filled += count
            if filled > limit {
                free(buffer)
                throw TokenCacheError(.fileMismatch, "\(path) is larger than 256 MiB; it is not a token cache.")
            }
        }
    }

    /// A large file read into huge pages (``HugePageBuffer``); nil when none could be mapped or
    /// the file grew past its size meanwhile (the caller then reads it the usual way).
    private static func readWhole(_ descriptor: Int32, expected: Int, path: String) throws(TokenCacheError) -> Data? {
        guard let buffer = HugePageBuffer(capacity: expected + 1) else { return nil }
        var filled = 0
        while filled < buffer.capacity {
            let count = try readSome(descriptor, into: buffer.start + filled, count: buffer.capacity - filled, path: path)
            if count == 0 { return buffer.data(count: filled) }
            filled += count
        }
        guard lseek(descriptor, 0, SEEK_SET) == 0 else { throw Self.error("read", path) }
        return nil  // grew while read: dropped with its bytes unread by anyone
    }

    /// Creates the directory (0700, as each missing parent) if needed, and refuses one that is a
    /// link, not owned by this user or writable by others.
    /// - Parameter purpose: what the directory is for, in error messages ("cache directory").
    package static func ensureDirectory(_ url: URL, purpose: String = "cache directory") throws(TokenCacheError) {
        guard try !checkDirectory(url.path, purpose: purpose) else { return }
        try createMissingParents(of: url)
        if mkdir(url.path, 0o700) != 0 && errno != EEXIST { throw error("create directory", url.path) }
        guard try checkDirectory(url.path, purpose: purpose) else { throw error("inspect", url.path, code: ENOENT) }
    }

    /// Refuses a directory that is a link, not owned by this user or writable by others (the
    /// rule of ``ensureDirectory(_:purpose:)``); false when it does not exist.
    /// - Parameter recreatable: whether removing a directory of another user loses nothing
    ///   (this library creates it again); otherwise the hint only says to make it yours.
    package static func checkDirectory(_ path: String, purpose: String, recreatable: Bool = true) throws(TokenCacheError) -> Bool {
        var info = stat()
        guard lstat(path, &info) == 0 else {
            if errno == ENOENT { return false }
            throw error("inspect", path)
        }
        if info.st_mode & S_IFMT == S_IFLNK {
            throw TokenCacheError(.unsafeFile, "\(path) is a symbolic link; the \(purpose) must be a real directory.",
                                  hint: "Put the directory the link points to in its place (mv, keeping its files), then retry; removing the link would start an empty cache")
        }
        if let problem = unsafeReason(info, expectFile: false) {
            let fix = info.st_uid == geteuid() ? "chmod 700 \(path)"
                : recreatable ? "Remove \(path) (or make it yours: chown \(geteuid()) \(path)); swift-tokencache will create it"
                : "Make it yours: `chown \(geteuid()) \(path)`, then `chmod 700 \(path)`; nothing in it was read or changed"
            throw TokenCacheError(.unsafeFile, "The \(purpose) \(path) is unsafe: \(problem).", hint: fix)
        }
        return true
    }

    /// mkdir 0700 for each missing ancestor of `url`, outermost first (XDG: create with 0700).
    private static func createMissingParents(of url: URL) throws(TokenCacheError) {
        var missing: [String] = []
        var parent = url.deletingLastPathComponent().standardizedFileURL
        var info = stat()
        while parent.path != "/", lstat(parent.path, &info) != 0, errno == ENOENT {
            missing.append(parent.path)
            parent = parent.deletingLastPathComponent().standardizedFileURL
        }
        for path in missing.reversed() where mkdir(path, 0o700) != 0 && errno != EEXIST {
            throw error("create directory", path)
        }
    }

    /// Writes `data` to a new O_EXCL temporary file beside `path`, syncs it, renames it over
    /// `path` and syncs the directory. On failure the old file is untouched and the temporary
    /// file removed. Without `sync`, still atomic but not made durable (for files whose loss is harmless).
    /// `mode` is the new file's permission bits (another tool's file keeps its owner's mode).
    package static func atomicReplace(_ path: String, with data: Data, temporaryPrefix: String, sync: Bool = true,
                                      mode: mode_t = 0o600) throws(TokenCacheError) -> stat {
        let directory = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? "."
        let random = (0..<6).map { _ in UInt8.random(in: .min ... .max) }  // a unique name, not a secret
        let temporary = directory + "/" + temporaryPrefix + "\(getpid())." + ASCII.hex(random)
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw error("create", temporary) }
        // fchmod, not open's mode: the umask would otherwise narrow the owner's mode.
        if mode != 0o600 { fchmod(descriptor, mode & 0o7777) }
        var committed = false
        defer {
            close(descriptor)
            if !committed { unlink(temporary) }
        }
        let file = FileDescriptor(rawValue: descriptor)
        do { _ = try file.writeAll(data) } catch { throw Self.error("write", temporary, error as? Errno ?? .ioError) }
        guard !sync || fsync(descriptor) == 0 else { throw error("sync", temporary) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw error("inspect", temporary) }
        guard rename(temporary, path) == 0 else { throw error("replace", path) }
        committed = true
        let directoryDescriptor = sync ? open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1
        if directoryDescriptor >= 0 {
            fsync(directoryDescriptor)
            close(directoryDescriptor)
        }
        return info
    }

    /// Removes temporary files a killed writer left. Call with the group's lock held: no live
    /// writer of the group can own one then.
    package static func removeStaleTemporaryFiles(in directory: URL, prefix: String) {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory.path) else { return }
        for name in names where name.hasPrefix(prefix) {
            unlink(directory.appendingPathComponent(name).path)
        }
    }
}

extension FileIO {
    /// Refuses (`unsafeFile`) anything but a regular file of this user's, of any mode: the check
    /// for files that hold nothing (signal files), from `lstat` (a link is refused) or `fstat`.
    package static func checkOwnRegularFile(_ info: stat, path: String) throws(TokenCacheError) {
        guard info.st_mode & S_IFMT != S_IFREG || info.st_uid != geteuid() else { return }
        throw TokenCacheError(.unsafeFile, "\(path) is unsafe: \(unsafeReason(info, expectFile: true) ?? "not a regular file"); nothing was changed.",
                              hint: info.st_mode & S_IFMT == S_IFLNK ? "Put the file the link points to in its place (mv), then retry"
                                  : "Make it a regular file of yours: `chown \(geteuid()) \(path)`")
    }

    /// Sets a file's modification (and access) time to the fine-grained wall clock now, creating
    /// it empty with `mode` when missing. Peers that compare mtime with their own last sync
    /// (msal-extensions Python) see the change; `UTIME_NOW` would use the coarse kernel clock.
    /// A link, or anything that is not a regular file of this user's, is refused (`unsafeFile`).
    package static func touch(_ path: String, mode: mode_t = 0o600) throws(TokenCacheError) {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, mode)
        guard descriptor >= 0 else {
            guard errno == ELOOP else { throw error("touch", path) }
            var link = stat()
            lstat(path, &link)
            try checkOwnRegularFile(link, path: path)
            throw error("touch", path)
        }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw error("inspect", path) }
        try checkOwnRegularFile(info, path: path)
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let times = [now, now]
        guard futimens(descriptor, times) == 0 else { throw error("set the modification time of", path) }
    }
}
