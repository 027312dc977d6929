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
    /// One lookup as the kernel answers it: 0 and the uid, or a negated errno (`tc_sock_diag_tcp_uid`).
    package typealias Query = @Sendable (_ fd: Int32, _ sequence: UInt32, _ family: Int32, _ source: [UInt8], _ sourcePort: UInt16,
                                         _ destination: [UInt8], _ destinationPort: UInt16) -> (result: Int32, uid: UInt32)

    /// The netlink descriptor and the last query's sequence number: one query at a time.
    private let state: Mutex<(fd: Int32, sequence: UInt32)>
    private let query: Query

    /// The process's one socket, opened on first use; nil where netlink is unavailable (a
    /// seccomp filter, a kernel without sock_diag) or cannot find TCP sockets.
    package static let shared = SocketDiagnostics()

    /// Opens the netlink socket and asks it for a loopback connection of its own; nil when the
    /// socket cannot be made or does not find that connection as this user's. A kernel whose
    /// inet_diag has no TCP handler (tcp_diag not loaded) answers ENOENT, "no such socket", for
    /// every socket: believed, it would make every peer nobody's and refuse the user's own.
    package init?(query: @escaping Query = SocketDiagnostics.kernelQuery) {
        let fd = tc_sock_diag_open()
        guard fd >= 0 else { return nil }
        // The kernel answers every request at once; the bound only keeps a lost answer from hanging a connection's thread.
        var timeout = timeval(tv_sec: 1, tv_usec: 0)
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        state = Mutex((fd, 0))
        self.query = query
        guard let probe = LoopbackConnection(), let us = SocketAddress.local(probe.accepted),
              let peer = SocketAddress.peer(probe.accepted), owner(local: peer, remote: us) == .uid(geteuid()) else { return nil }
    }

    /// The kernel's answer, through the NETLINK_SOCK_DIAG socket.
    package static let kernelQuery: Query = { fd, sequence, family, source, sourcePort, destination, destinationPort in
        var uid: UInt32 = 0
        let result = tc_sock_diag_tcp_uid(fd, sequence, family, source, sourcePort, destination, destinationPort, &uid)
        return (result, uid)
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
        let (result, uid) = state.withLock { state in
            state.sequence &+= 1
            return query(state.fd, state.sequence, isIPv4 ? AF_INET : AF_INET6, source, local.port, destination, remote.port)
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

/// A TCP connection to ourselves on 127.0.0.1: a listening socket, a client and the accepted
/// end, closed on deinit (SocketDiagnostics' probe, and tests).
package final class LoopbackConnection {
    package let listening: Int32, client: Int32, accepted: Int32

    /// Nil when any step fails (no loopback interface, a seccomp filter).
    package init?() {
        let listening = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        let client = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = in_addr_t(0x7f00_0001).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        // A connect to a listening loopback socket completes at once, from the listen backlog.
        let connected = listening >= 0 && client >= 0 && withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listening, $0, length) == 0 && listen(listening, 1) == 0 && getsockname(listening, $0, &length) == 0
                    && connect(client, $0, length) == 0
            }
        }
        let accepted = connected ? accept(listening, nil, nil) : -1
        guard accepted >= 0 else {
            for fd in [listening, client] where fd >= 0 { close(fd) }
            return nil
        }
        (self.listening, self.client, self.accepted) = (listening, client, accepted)
    }

    deinit { for fd in [listening, client, accepted] { close(fd) } }
}
