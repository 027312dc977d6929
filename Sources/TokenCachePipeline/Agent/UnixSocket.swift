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

/// One open socket descriptor, closed in deinit: a listening socket, or one connection (either end).
package final class SocketDescriptor: @unchecked Sendable {
    // @unchecked: the descriptor is fixed at init; reads and writes are system calls the kernel
    // serialises, and one connection is used by one thread at a time.
    package let fd: Int32

    package init(_ fd: Int32) { self.fd = fd }

    deinit { Glibc.close(fd) }

    /// Ends both directions now (a blocked accept or read returns), without closing the descriptor.
    package func shutdown() { _ = Glibc.shutdown(fd, Int32(SHUT_RDWR)) }

    /// Whether the peer closed its end or the connection broke (a poll that does not wait): a
    /// long answer (the keeper's device code sign-in) stops for a caller that is gone.
    package var peerHungUp: Bool {
        // POLLRDHUP (0x2000, Linux): the peer shut its end down; Glibc's module does not export it.
        var entry = pollfd(fd: fd, events: Int16(0x2000), revents: 0)
        return poll(&entry, 1, 0) > 0 && entry.revents & Int16(0x2000 | POLLHUP | POLLERR) != 0
    }

    /// Waits until a read would not block, up to `milliseconds`; false when it would still block.
    package func waitReadable(milliseconds: Int32) -> Bool {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        while true {
            let ready = poll(&entry, 1, milliseconds)
            if ready < 0 && errno == EINTR { continue }
            return ready > 0
        }
    }

    /// Bounds each blocking read and write, so a peer that stops mid-frame frees its thread.
    package func setTimeouts(seconds: Int) {
        var time = timeval(tv_sec: seconds, tv_usec: 0)
        let size = socklen_t(MemoryLayout<timeval>.size)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &time, size)
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &time, size)
    }

    /// The process at the other end of a Unix-domain connection, as the kernel recorded it when
    /// the connection was made (SO_PEERCRED): it cannot be forged by the peer.
    package func peerCredentials() -> AgentPeer? {
        // struct ucred { pid_t pid; uid_t uid; gid_t gid; }, which Glibc exposes only under _GNU_SOURCE.
        var credentials: (Int32, UInt32, UInt32) = (0, 0, 0)
        var length = socklen_t(MemoryLayout<(Int32, UInt32, UInt32)>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0,
              Int(length) == MemoryLayout<(Int32, UInt32, UInt32)>.size else { return nil }
        return AgentPeer(pid: credentials.0, uid: credentials.1)
    }

    /// Reads exactly `count` bytes; nil at end of file, on a timeout or an error, or once
    /// `deadline` has passed (each read then waits at most until it).
    package func read(exactly count: Int, by deadline: ReadDeadline? = nil) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            if let deadline {
                // Each read waits only until the deadline: a peer sending a byte just inside each read's timeout still runs out.
                let remaining = deadline.remaining
                guard remaining > .zero else { return nil }
                setReceiveTimeout(min(remaining, deadline.perRead))
            }
            let got = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + done, count - done) }
            if got < 0, errno == EINTR { continue }
            guard got > 0 else { return nil }
            // Checked after the read too: bytes that came after the deadline never complete a message.
            if let deadline, deadline.remaining <= .zero { return nil }
            done += got
        }
        return bytes
    }

    /// Bounds the next blocking reads by `duration` (at least 1 ms: a zero timeout would mean none).
    private func setReceiveTimeout(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        var time = timeval(tv_sec: Int(seconds), tv_usec: Int(attoseconds / 1_000_000_000_000))
        if time.tv_sec <= 0 && time.tv_usec < 1000 { time = timeval(tv_sec: 0, tv_usec: 1000) }
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Writes all of `bytes`; false when the peer went away or stopped reading past the timeout.
    package func write(all bytes: [UInt8]) -> Bool {
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

/// When a whole message must have arrived, on a monotonic reading (`now`) a test can move by hand.
package struct ReadDeadline: Sendable {
    /// The moment, on `now`'s scale.
    package var at: Duration
    /// The longest one read may wait, however far `at` is.
    package var perRead: Duration
    package let now: @Sendable () -> Duration

    package init(at: Duration, perRead: Duration, now: @escaping @Sendable () -> Duration) {
        (self.at, self.perRead, self.now) = (at, perRead, now)
    }

    /// Time left until `at` (zero or less once passed).
    package var remaining: Duration { at - now() }
}

/// Who is at the other end of an agent connection.
package struct AgentPeer: Sendable, Hashable {
    /// The peer's process ID (for a forwarded socket, the forwarding process: ssh, sshd).
    package var pid: Int32
    /// The peer's real user ID.
    package var uid: UInt32

    /// The peer's executable (`/proc/PID/exe`), whom `--confirm`'s answers are remembered for;
    /// `uid N` when it cannot be read. Unlike ``command``, the process cannot rename it.
    package var executable: String {
        var buffer = [CChar](repeating: 0, count: 4096)
        let count = readlink("/proc/\(pid)/exe", &buffer, buffer.count - 1)
        guard count > 0 else { return "uid \(uid)" }
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The peer's command name from /proc (what `ps` shows), for the request log.
    package var command: String {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8) else { return "?" }
        return String(text.prefix { $0 != "\n" })
    }
}

/// Unix-domain socket addresses and the two ends' set-up.
package enum UnixSocket {
    /// The longest path a `sockaddr_un` holds (107 bytes and a NUL on Linux).
    static let maximumPathBytes = MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1

    package static func address(_ path: String) throws(TokenCacheError) -> sockaddr_un {
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

    package static func newSocket() throws(TokenCacheError) -> SocketDescriptor {
        let fd = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw TokenCacheError(.fileSystem, "Could not make a Unix socket: \(String(cString: strerror(errno))).") }
        return SocketDescriptor(fd)
    }

    /// Connects to the socket at `path`.
    /// - Throws: `TokenCacheError` `agentUnavailable` when nothing listens there or it may not be used.
    package static func connect(_ path: String) throws(TokenCacheError) -> SocketDescriptor {
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

    /// The directory part of a path ("." for a bare name).
    package static func parent(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }
}
