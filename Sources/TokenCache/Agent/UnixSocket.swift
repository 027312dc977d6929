#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Dispatch
import FoundationEssentials
import Synchronization
import TokenCacheCore
import TokenCachePlatform

/// One open socket descriptor, closed in deinit: the agent's listening socket, or one
/// connection (either end).
final class SocketDescriptor: @unchecked Sendable {
    // @unchecked: the descriptor is fixed at init; reads and writes are system calls the kernel
    // serialises, and one connection is used by one thread at a time.
    let fd: Int32

    init(_ fd: Int32) { self.fd = fd }

    deinit { Glibc.close(fd) }

    /// Ends both directions now (a blocked accept or read returns), without closing the descriptor.
    func shutdown() { _ = Glibc.shutdown(fd, Int32(SHUT_RDWR)) }

    /// Bounds each blocking read and write, so a peer that stops mid-frame frees its thread.
    func setTimeouts(seconds: Int) {
        var time = timeval(tv_sec: seconds, tv_usec: 0)
        let size = socklen_t(MemoryLayout<timeval>.size)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &time, size)
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &time, size)
    }

    /// The process at the other end of a Unix-domain connection, as the kernel recorded it when
    /// the connection was made (SO_PEERCRED): it cannot be forged by the peer.
    func peerCredentials() -> AgentPeer? {
        // struct ucred { pid_t pid; uid_t uid; gid_t gid; }, which Glibc exposes only under _GNU_SOURCE.
        var credentials: (Int32, UInt32, UInt32) = (0, 0, 0)
        var length = socklen_t(MemoryLayout<(Int32, UInt32, UInt32)>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0,
              Int(length) == MemoryLayout<(Int32, UInt32, UInt32)>.size else { return nil }
        return AgentPeer(pid: credentials.0, uid: credentials.1)
    }

    /// Reads exactly `count` bytes; nil at end of file, on a timeout or an error.
    func read(exactly count: Int) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let got = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + done, count - done) }
            if got < 0, errno == EINTR { continue }
            guard got > 0 else { return nil }
            done += got
        }
        return bytes
    }

    /// Writes all of `bytes`; false when the peer went away or stopped reading past the timeout.
    func write(all bytes: [UInt8]) -> Bool {
        var done = 0
        while done < bytes.count {
            // MSG_NOSIGNAL: a peer that closed early must not kill the agent with SIGPIPE.
            let sent = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + done, bytes.count - done, Int32(MSG_NOSIGNAL)) }
            if sent < 0, errno == EINTR { continue }
            guard sent > 0 else { return false }
            done += sent
        }
        return true
    }
}

/// A listening socket accepted on a thread of its own until stopped, each connection served on
/// a thread of the blocking pool, at most `maximumConnections` at once (more wait in the listen
/// backlog): the agent's socket and its managed-identity endpoint.
final class SocketListener: Sendable {
    let socket: SocketDescriptor
    private let stopped = Mutex(false)

    init(_ socket: SocketDescriptor) { self.socket = socket }

    /// Starts accepting; returns at once.
    /// - Throws: `overloaded` when the blocking pool has no thread for the accept loop.
    func start(label: String, maximumConnections: Int, serve: @escaping @Sendable (SocketDescriptor) -> Void) throws(TokenCacheError) {
        let slots = DispatchSemaphore(value: maximumConnections)
        try BlockingPool.shared.submit(label) { [self] in
            while !stopped.withLock({ $0 }) {
                slots.wait()
                let fd = accept(socket.fd, nil, nil)
                guard fd >= 0 else {
                    slots.signal()
                    if errno == EINTR || errno == ECONNABORTED || errno == EMFILE { if errno == EMFILE { usleep(10_000) }; continue }
                    return
                }
                // accept4 (SOCK_CLOEXEC at accept) needs _GNU_SOURCE, which Glibc does not expose to Swift.
                _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
                let connection = SocketDescriptor(fd)
                do {
                    try BlockingPool.shared.submit("\(label) connection") {
                        defer { slots.signal() }
                        serve(connection)
                    }
                } catch {
                    slots.signal()  // at the ceiling: the connection closes unanswered, as on a full backlog
                }
            }
        }
    }

    /// Stops accepting (a blocked accept returns): true the first time, false when stopped already.
    @discardableResult
    func stop() -> Bool {
        guard stopped.withLock({ stopped in defer { stopped = true }; return !stopped }) else { return false }
        socket.shutdown()
        return true
    }
}

/// Who is at the other end of an agent connection.
package struct AgentPeer: Sendable, Hashable {
    /// The peer's process ID (for a forwarded socket, the forwarding process: ssh, sshd).
    package var pid: Int32
    /// The peer's real user ID.
    package var uid: UInt32

    /// The peer's command name from /proc (what `ps` shows), for the request log.
    package var command: String {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8) else { return "?" }
        return String(text.prefix { $0 != "\n" })
    }
}

/// Unix-domain socket addresses and the two ends' set-up.
enum UnixSocket {
    /// The longest path a `sockaddr_un` holds (107 bytes and a NUL on Linux).
    static let maximumPathBytes = MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1

    private static func address(_ path: String) throws(TokenCacheError) -> sockaddr_un {
        let bytes = Array(path.utf8)
        guard !bytes.isEmpty, bytes.count <= maximumPathBytes, !bytes.contains(0) else {
            throw TokenCacheError.invalidArgument("socket", "'\(path)' is not a usable socket path (at most \(maximumPathBytes) bytes)",
                                                  hint: "Use a shorter path, for example under $XDG_RUNTIME_DIR")
        }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in bytes.enumerated() { raw[index] = byte }
        }
        return address
    }

    private static func newSocket() throws(TokenCacheError) -> SocketDescriptor {
        let fd = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw TokenCacheError(.fileSystem, "Could not make a Unix socket: \(String(cString: strerror(errno))).") }
        return SocketDescriptor(fd)
    }

    /// Connects to the socket at `path`.
    /// - Throws: ``TokenCacheError`` `agentUnavailable` when nothing listens there or it may not be used.
    static func connect(_ path: String) throws(TokenCacheError) -> SocketDescriptor {
        var address = try address(path)
        let socket = try newSocket()
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(socket.fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard result == 0 else {
            let code = errno
            throw TokenCacheError(.agentUnavailable, "Could not reach the token agent at \(path): \(String(cString: strerror(code))).",
                                  hint: code == EACCES ? "The socket belongs to another user: start your own agent with `tokencache agent`"
                                      : "Start it with `eval $(tokencache agent --daemon)`, or unset TOKENCACHE_AGENT_SOCK to use the local cache",
                                  reason: .agentUnreachable(path: path))
        }
        return socket
    }

    /// Listens at `path`, mode 0600, in a directory of mode 0700 owned by this user (made when
    /// missing). A socket left there by an agent that is gone is replaced; a live one is not.
    static func listen(_ path: String) throws(TokenCacheError) -> SocketDescriptor {
        var address = try address(path)
        try secureDirectory(parent(of: path))
        var status = stat()
        if lstat(path, &status) == 0 {
            guard status.st_mode & S_IFMT == S_IFSOCK else {
                throw TokenCacheError(.unsafeFile, "\(path) exists and is not a socket; the agent does not replace it.",
                                      hint: "Choose another path with --socket")
            }
            if (try? connect(path)) != nil {
                throw TokenCacheError(.portUnavailable, "A token agent already listens at \(path).",
                                      hint: "Use it (export TOKENCACHE_AGENT_SOCK=\(path)), stop it, or choose another path with --socket")
            }
            unlink(path)
        }
        let socket = try newSocket()
        // The mode is set at bind: no moment where another user could connect.
        let previous = umask(0o177)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(socket.fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        let bindError = errno
        umask(previous)
        guard bound == 0 else {
            throw TokenCacheError(.portUnavailable, "Could not listen at \(path): \(String(cString: strerror(bindError))).",
                                  hint: "Choose another path with --socket")
        }
        guard Glibc.listen(socket.fd, 64) == 0 else {
            unlink(path)
            throw TokenCacheError(.portUnavailable, "Could not listen at \(path): \(String(cString: strerror(errno))).")
        }
        return socket
    }

    /// The directory part of a path ("." for a bare name).
    static func parent(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    /// The socket's directory: made with mode 0700 when missing; otherwise it must be a real
    /// directory of this user that no one else can enter or write to.
    private static func secureDirectory(_ directory: String) throws(TokenCacheError) {
        if mkdir(directory, 0o700) != 0, errno == ENOENT {
            throw TokenCacheError(.fileSystem, "The socket's parent directory \(parent(of: directory)) does not exist.",
                                  hint: "Create it, or choose another path with --socket")
        }
        var status = stat()
        guard lstat(directory, &status) == 0, status.st_mode & S_IFMT == S_IFDIR else {
            throw TokenCacheError(.unsafeFile, "The socket's directory \(directory) is not a directory.", hint: "Choose another path with --socket")
        }
        guard status.st_uid == geteuid(), status.st_mode & 0o077 == 0 else {
            throw TokenCacheError(.unsafeFile, "The socket's directory \(directory) is \(status.st_uid == geteuid() ? "open to other users" : "another user's"); the agent's socket must be reachable by you alone.",
                                  hint: status.st_uid == geteuid() ? "chmod 700 \(directory), or choose another path with --socket" : "Choose another path with --socket")
        }
    }
}
