#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import CLinux
import Synchronization

/// A NETLINK_SOCK_DIAG socket: asks the kernel who owns one TCP socket, named by its exact
/// 4-tuple, as `ss` does. One lookup costs the same however many sockets the machine has,
/// where reading /proc/net/tcp costs a line per socket (#57 item 6: another user's 3,000 idle
/// connections made each refusal parse all of them).
package final class SocketDiagnostics: Sendable {
    /// The netlink descriptor and the last query's sequence number: one query at a time.
    private let state: Mutex<(fd: Int32, sequence: UInt32)>

    /// The process's one socket, opened on first use; nil where netlink is unavailable (a
    /// seccomp filter, a kernel without sock_diag).
    package static let shared = SocketDiagnostics()

    /// Opens the netlink socket; nil when it cannot be made.
    package init?() {
        let fd = tc_sock_diag_open()
        guard fd >= 0 else { return nil }
        // The kernel answers every request at once; the bound only keeps a lost answer from hanging a connection's thread.
        var timeout = timeval(tv_sec: 1, tv_usec: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        state = Mutex((fd, 0))
    }

    deinit { state.withLock { _ = close($0.fd) } }

    /// What a lookup found.
    package enum Owner: Equatable {
        /// The socket exists and belongs to this uid.
        case uid(uid_t)
        /// No ESTABLISHED TCP socket has that 4-tuple.
        case none
        /// The kernel did not answer the question (permission, protocol): ask /proc instead.
        case unknown
    }

    /// The owner of the ESTABLISHED TCP socket whose local end is `local` and remote end `remote`.
    package func owner(local: SocketAddress, remote: SocketAddress) -> Owner {
        // IPv4 (as ::ffff:a.b.c.d here) is asked as AF_INET with its four bytes.
        let isIPv4 = local.isIPv4Mapped && remote.isIPv4Mapped
        let source = isIPv4 ? Array(local.address[12...]) : local.address
        let destination = isIPv4 ? Array(remote.address[12...]) : remote.address
        guard source.count == (isIPv4 ? 4 : 16), destination.count == source.count else { return .none }
        var uid: UInt32 = 0
        let result = state.withLock { state -> Int32 in
            state.sequence &+= 1
            return tc_sock_diag_tcp_uid(state.fd, state.sequence, isIPv4 ? AF_INET : AF_INET6, source, local.port, destination, remote.port, &uid)
        }
        switch result {
        case 0: return .uid(uid_t(uid))
        case -ENOENT: return .none
        default: return .unknown
        }
    }
}

extension SocketAddress {
    /// ::ffff:a.b.c.d, how an IPv4 address is kept here.
    var isIPv4Mapped: Bool { address.count == 16 && address[..<12].elementsEqual([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]) }
}
