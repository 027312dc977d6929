#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Dispatch
import Synchronization
import TokenCache
import TokenCacheCore
import TokenCachePlatform

/// A listening socket accepted on a thread of its own until stopped, each connection served on
/// a thread of the blocking pool, at most `maximumConnections` at once (more wait in the listen
/// backlog): the agent's socket and its managed-identity endpoint.
package final class SocketListener: Sendable {
    package let socket: SocketDescriptor
    private let stopped = Mutex(false)

    package init(_ socket: SocketDescriptor) { self.socket = socket }

    /// Starts accepting; returns at once.
    /// - Throws: `overloaded` when the blocking pool has no thread for the accept loop.
    package func start(label: String, maximumConnections: Int, serve: @escaping @Sendable (SocketDescriptor) -> Void) throws(TokenCacheError) {
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
    package func stop() -> Bool {
        guard stopped.withLock({ stopped in defer { stopped = true }; return !stopped }) else { return false }
        socket.shutdown()
        return true
    }
}

/// The listening end of the agent's Unix socket.
extension UnixSocket {
    /// Listens at `path`, mode 0600, in a directory of mode 0700 owned by this user (made when
    /// missing). A socket left there by an agent that is gone is replaced; a live one is not.
    package static func listen(_ path: String) throws(TokenCacheError) -> SocketDescriptor {
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
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(socket.fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0 else {
            throw TokenCacheError(.portUnavailable, "Could not listen at \(path): \(String(cString: strerror(errno))).",
                                  hint: "Choose another path with --socket")
        }
        // The mode is set before listen, so no one connects while it is wider (a bound socket that
        // does not listen refuses every connection); not with umask, which is the whole process's
        // and gave files other threads created meanwhile mode 0600 (a C compiler's output in the tests).
        guard chmod(path, 0o600) == 0 else {
            let chmodError = errno
            unlink(path)
            throw TokenCacheError(.portUnavailable, "Could not set the mode of \(path): \(String(cString: strerror(chmodError))).")
        }
        guard Glibc.listen(socket.fd, 64) == 0 else {
            unlink(path)
            throw TokenCacheError(.portUnavailable, "Could not listen at \(path): \(String(cString: strerror(errno))).")
        }
        return socket
    }

    /// The socket's directory: made with mode 0700 when missing; otherwise it must be a real
    /// directory of this user that no one else can enter or write to.
    static func secureDirectory(_ directory: String) throws(TokenCacheError) {
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
