#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import FoundationEssentials
import CLibSecret
import TokenCache
import TokenCacheBroker
import TokenCacheCore

/// Who called the keeper, as the kernel says: the uid and pid from SO_PEERCRED, the process
/// pinned by a pidfd (SO_PEERPIDFD) where the kernel has one and by its start time always, and
/// its identity (the broker's ``CallerIdentity``: a Flatpak app ID, a snap name, or its
/// executable), kept only when no one could have changed what runs under it.
package struct KeeperCaller: Sendable, Hashable {
    /// The caller's real uid (SO_PEERCRED): whose store it is served from, never the request's say.
    package var uid: UInt32
    /// The caller's pid.
    package var pid: Int32
    /// What the caller is identified as; nil when it is not identified.
    package var identity: CallerIdentity?
    /// Why it is not identified (nil when it is): for the refusal and the log, never a secret.
    package var unidentifiedBecause: String?

    /// How the log and refusals name it.
    package var described: String {
        "\(identity?.description ?? "an unidentified process") (pid \(pid), uid \(uid))"
    }

    /// The variables that make a process run code its executable does not hold.
    static let loaderVariables = ["LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH"]

    /// Identifies the process at the other end of `connection`; nil when the kernel does not say who it is.
    package static func identify(_ connection: SocketDescriptor) -> KeeperCaller? {
        guard let peer = connection.peerCredentials(), peer.pid > 0 else { return nil }
        let pinned = PeerPidFD(connection)
        var caller = KeeperCaller(uid: peer.uid, pid: peer.pid, identity: nil, unidentifiedBecause: nil)
        // Start time first and last: a pid reused between the reads shows a different one.
        guard let started = startTime(of: peer.pid) else {
            caller.unidentifiedBecause = "its process could not be read in /proc"
            return caller
        }
        let identity = CallerIdentity.identify(pid: UInt32(peer.pid), pidfd: pinned?.fd)
        let verdict = check(identity, pid: peer.pid)
        guard startTime(of: peer.pid) == started, pinned.map({ tc_pidfd_alive($0.fd) == 0 }) ?? true else {
            caller.unidentifiedBecause = "its process ended while it was being identified"
            return caller
        }
        switch verdict {
        case .success(let identity): caller.identity = identity
        case .failure(let why): caller.unidentifiedBecause = why.text
        }
        return caller
    }

    /// The identity when nothing else runs under it: not traced, no loader variables, and for a
    /// host program an executable only root can have changed.
    static func check(_ identity: CallerIdentity, pid: Int32) -> Result<CallerIdentity, Why> {
        if case .unknown(let reason) = identity { return .failure(Why(text: reason)) }
        guard let status = read("/proc/\(pid)/status") else { return .failure(Why(text: "its /proc status could not be read")) }
        let tracer = status.split(separator: "\n").first { $0.hasPrefix("TracerPid:") }
            .map { String($0.dropFirst("TracerPid:".count).filter { !$0.isWhitespace }) }
        guard tracer == "0" else { return .failure(Why(text: "it runs under a tracer (ptrace)")) }
        guard let environ = readBytes("/proc/\(pid)/environ") else {
            return .failure(Why(text: "its environment could not be read"))
        }
        for entry in environ.split(separator: 0) {
            let name = String(decoding: entry.prefix { $0 != UInt8(ascii: "=") }, as: UTF8.self)
            if loaderVariables.contains(name) { return .failure(Why(text: "it was started with \(name)")) }
        }
        guard case .host(let path) = identity else { return .success(identity) }
        guard path.hasPrefix("/"), !path.hasSuffix(" (deleted)") else { return .failure(Why(text: "its executable was deleted or replaced")) }
        // The file at the path must be the one the process runs (same device and inode).
        var running = stat(), named = stat()
        guard stat("/proc/\(pid)/exe", &running) == 0, lstat(path, &named) == 0,
              running.st_dev == named.st_dev, running.st_ino == named.st_ino else {
            return .failure(Why(text: "its executable \(path) was replaced since it started"))
        }
        if let why = rootOwnedChain(path) { return .failure(Why(text: why)) }
        return .success(identity)
    }

    struct Why: Error { var text: String }

    /// Nil when the file and every directory up to / are root's and not writable by group or
    /// others; else what is not.
    static func rootOwnedChain(_ path: String) -> String? {
        var current = path
        while true {
            var info = stat()
            guard lstat(current, &info) == 0 else { return "\(current) could not be inspected" }
            if info.st_mode & S_IFMT == S_IFLNK { return "\(current) is a symbolic link" }
            if info.st_uid != 0 { return "\(current) belongs to uid \(info.st_uid), not root" }
            if info.st_mode & 0o022 != 0 { return "\(current) can be written by group or others" }
            if current == "/" { return nil }
            current = UnixSocket.parent(of: current)
        }
    }

    /// Field 22 of /proc/PID/stat (clock ticks since boot), read after the command name's last ')'.
    static func startTime(of pid: Int32) -> UInt64? {
        guard let text = read("/proc/\(pid)/stat"), let close = text.lastIndex(of: ")") else { return nil }
        // After ") " come fields 3, 4, …: the start time is the 20th of them.
        let fields = text[text.index(after: close)...].split(separator: " ")
        return fields.count > 19 ? UInt64(fields[19]) : nil
    }

    static func read(_ path: String) -> String? { readBytes(path).map { String(decoding: $0, as: UTF8.self) } }

    /// A /proc file's bytes (at most 1 MiB); nil when it cannot be opened.
    static func readBytes(_ path: String) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while bytes.count < 1 << 20 {
            let got = Glibc.read(fd, &chunk, chunk.count)
            if got < 0, errno == EINTR { continue }
            guard got >= 0 else { return nil }
            if got == 0 { break }
            bytes += chunk[..<got]
        }
        return bytes
    }
}

/// The caller's process as a pidfd (SO_PEERPIDFD, Linux 6.5): it names that process and no
/// later one with the same pid. Closed in deinit.
final class PeerPidFD {
    /// SO_PEERPIDFD, which Glibc's headers here do not name yet.
    static let option: Int32 = 77
    let fd: Int32

    /// Nil where the kernel has no SO_PEERPIDFD: the start time alone then pins the process.
    init?(_ connection: SocketDescriptor) {
        var descriptor: Int32 = -1
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(connection.fd, SOL_SOCKET, Self.option, &descriptor, &length) == 0, descriptor >= 0 else { return nil }
        fd = descriptor
    }

    deinit { close(fd) }
}
