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

/// The one-shot HTTP listener on loopback that receives the authorization redirect (RFC 8252
/// section 7.3). Hand-written on POSIX sockets: it answers a few GETs and closes, which does not
/// justify an HTTP server in the dependency set.
///
/// Every address `localhost` resolves to is ours: it binds 127.0.0.1 and ::1 (IPV6_V6ONLY) on the
/// same port, so another local user cannot bind the one a browser tries first. It answers only
/// connections whose peer socket belongs to this process's user (looked up in /proc/net/tcp and
/// tcp6), refusing every other with 403. It serves the start page (a random path, a redirect to the
/// authorization URL, so that URL never has to be in a browser's arguments), answers a redirect
/// whose `state` is missing or wrong with 400 and keeps waiting, and ends at the first redirect
/// that carries the expected `state`.
///
/// It accepts several connections at once (browsers open speculative ones that never send a
/// request) and reads a request head of at most ``HTTPRequestHead/maximumBytes`` from each.
final class LoopbackListener: @unchecked Sendable {
    // @unchecked: the descriptors are set in init; only the waiting thread uses the sockets, and
    // `cancel` only writes one byte to the wake pipe (a thread-safe system call).
    /// The port bound on every loopback address.
    let port: Int
    /// The addresses bound: 127.0.0.1, and [::1] unless the kernel has no IPv6.
    let addresses: [String]
    private let sockets: [Int32]
    private let wakeRead: Int32
    private let wakeWrite: Int32
    /// Whether the listening sockets are closed: when the wait ends, not when the object goes, so
    /// the port is free as soon as the sign-in returns.
    private let socketsClosed = Mutex(false)
    /// Set by ``timeOut()``: the wake that follows ends the wait as `.timedOut`.
    private let timedOut = Mutex(false)
    /// What was refused during the wait, for the message of a sign-in that then times out.
    let refusals = Mutex(Refusals())

    /// At most this many connections of each kind (ours, another user's) are held open; the
    /// oldest goes first, so another user's connections never push out the browser's.
    static let maximumConnections = 16
    /// How many ephemeral ports are tried when another program holds the ::1 side of one.
    static let ephemeralAttempts = 32

    /// What the wait ended with.
    enum Outcome: Sendable {
        /// The redirect's query parameters (first value of each name), with the expected state.
        case redirect([String: String])
        case cancelled
        case timedOut
        case failed(String)
    }

    /// Requests refused while waiting.
    struct Refusals: Sendable, Equatable {
        /// Redirects from this user whose `state` was missing or not this sign-in's.
        var wrongState = 0
        /// Connections from another user's socket (or one whose owner could not be found).
        var otherUser = 0
    }

    /// The page served back for a redirect.
    struct Page: Sendable {
        var status: Int
        var html: String
    }

    /// What the wait answers: the redirect path and its `state`, and the start page.
    struct Expectation: Sendable {
        /// The redirect URI's path.
        var path: String
        /// The `state` sent in the authorization request.
        var state: String
        /// The start page's path (`/start/<random>`), if any, and where it redirects.
        var start: (path: String, location: String)?
    }

    /// Binds 127.0.0.1 and ::1 (never all interfaces) on `port`, 0 for an ephemeral one free on both.
    /// - Throws: `TokenCacheError` `portUnavailable` naming the address, `invalidArgument`.
    init(port: Int) throws(TokenCacheError) {
        guard (0...65535).contains(port) else {
            throw TokenCacheError.invalidArgument("redirectPort", "\(port) is not a TCP port", hint: "Use 0 for an ephemeral port")
        }
        var bound: (sockets: [Int32], port: Int)?
        for _ in 0..<(port == 0 ? Self.ephemeralAttempts : 1) {
            let v4 = try Self.listen(ipv6: false, port: port)
            do throws(BindFailure) {
                bound = ([v4.fd, try Self.bindIPv6(port: v4.port)], v4.port)
            } catch {
                guard case .error(let code) = error else {
                    // No ::1 on this kernel: nobody can bind it, so IPv4 alone is every address of localhost.
                    bound = ([v4.fd], v4.port)
                    break
                }
                Glibc.close(v4.fd)
                // Another program holds [::1] on this ephemeral port: take another one.
                if port == 0 && code == EADDRINUSE { continue }
                throw Self.bindError("[::1]", v4.port, code)
            }
            break
        }
        guard let bound else { throw Self.bindError("[::1]", port, EADDRINUSE) }
        var pipeFDs: [Int32] = [0, 0]
        guard pipe(&pipeFDs) == 0 else {
            let code = errno
            bound.sockets.forEach { _ = Glibc.close($0) }
            throw Self.bindError("127.0.0.1", bound.port, code)
        }
        for end in pipeFDs { _ = fcntl(end, F_SETFD, FD_CLOEXEC); _ = fcntl(end, F_SETFL, O_NONBLOCK) }
        self.sockets = bound.sockets
        self.port = bound.port
        self.addresses = Array(["127.0.0.1", "[::1]"].prefix(bound.sockets.count))
        self.wakeRead = pipeFDs[0]
        self.wakeWrite = pipeFDs[1]
    }

    deinit {
        closeSockets()
        Glibc.close(wakeRead)
        Glibc.close(wakeWrite)
    }

    private enum BindFailure: Error {
        case noIPv6
        case error(Int32)
    }

    private static func bindIPv6(port: Int) throws(BindFailure) -> Int32 {
        do {
            return try listenSocket(ipv6: true, port: port).fd
        } catch let code {
            // No IPv6 in the kernel (EAFNOSUPPORT) or no ::1 on lo (disable_ipv6): nobody can bind it.
            if code.value == EAFNOSUPPORT || code.value == EADDRNOTAVAIL { throw .noIPv6 }
            throw .error(code.value)
        }
    }

    private static func listen(ipv6: Bool, port: Int) throws(TokenCacheError) -> (fd: Int32, port: Int) {
        do {
            return try listenSocket(ipv6: ipv6, port: port)
        } catch let code {
            throw bindError(ipv6 ? "[::1]" : "127.0.0.1", port, code.value)
        }
    }

    struct Errno: Error { let value: Int32 }

    /// A listening socket on 127.0.0.1 or ::1 (IPv6 only: it never takes IPv4 connections).
    /// Internal, not private: a test holds a port with it exactly as the listener would bind it.
    static func listenSocket(ipv6: Bool, port: Int) throws(Errno) -> (fd: Int32, port: Int) {
        let fd = Glibc.socket(ipv6 ? AF_INET6 : AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw Errno(value: errno) }
        // SO_REUSEADDR only lets a fixed port be reused while an earlier sign-in's connections sit
        // in TIME_WAIT; Linux still refuses a port another socket listens on.
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var storage = sockaddr_storage()
        let length: socklen_t
        if ipv6 {
            setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &one, socklen_t(MemoryLayout<Int32>.size))
            length = withUnsafeMutableBytes(of: &storage) { raw in
                let address = raw.baseAddress!.assumingMemoryBound(to: sockaddr_in6.self)
                address.pointee.sin6_family = sa_family_t(AF_INET6)
                address.pointee.sin6_port = in_port_t(UInt16(port)).bigEndian
                address.pointee.sin6_addr = in6addr_loopback
                return socklen_t(MemoryLayout<sockaddr_in6>.size)
            }
        } else {
            length = withUnsafeMutableBytes(of: &storage) { raw in
                let address = raw.baseAddress!.assumingMemoryBound(to: sockaddr_in.self)
                address.pointee.sin_family = sa_family_t(AF_INET)
                address.pointee.sin_port = in_port_t(UInt16(port)).bigEndian
                address.pointee.sin_addr.s_addr = in_addr_t(0x7f00_0001).bigEndian  // 127.0.0.1
                return socklen_t(MemoryLayout<sockaddr_in>.size)
            }
        }
        let bound = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, length) }
        }
        guard bound == 0, Glibc.listen(fd, 16) == 0 else {
            let code = errno
            Glibc.close(fd)
            throw Errno(value: code)
        }
        guard let local = SocketAddress.local(fd) else {
            Glibc.close(fd)
            throw Errno(value: EINVAL)
        }
        return (fd, Int(local.port))
    }

    private static func bindError(_ address: String, _ port: Int, _ code: Int32) -> TokenCacheError {
        let reason = String(cString: strerror(code))
        return TokenCacheError(.portUnavailable, "Could not listen on \(address):\(port) for the sign-in redirect: \(reason).",
                               hint: code == EADDRINUSE ? "Another program uses that port on \(address): free it, or use redirectPort 0 (an ephemeral port)"
                                   : "Use redirectPort 0 (an ephemeral port), or check the loopback interface",
                               reason: .redirectPortUnavailable(port: port))
    }

    private func closeSockets() {
        if socketsClosed.withLock({ closed in defer { closed = true }; return !closed }) { sockets.forEach { _ = Glibc.close($0) } }
    }

    /// Ends a wait in progress (or the next one) with `.cancelled`.
    func cancel() {
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
    }

    /// Ends a wait in progress (or the next one) with `.timedOut`: the sign-in's timeout,
    /// kept on its clock by the caller, was reached.
    func timeOut() {
        timedOut.withLock { $0 = true }
        cancel()
    }

    /// Waits for the redirect on the calling thread, one that may block (a C caller's, the
    /// command line's, the sign-in job's on the blocking pool: never the cooperative pool), until
    /// ``timeOut()``, ``cancel()`` or `isCancelled` (asked every ``ThreadSleep/cancellationCheck``);
    /// serves `page(query)` to it. It keeps no time itself: the caller's clock does. The listening
    /// sockets are closed when it returns.
    func waitForRedirectHere(_ expectation: Expectation, isCancelled: () -> Bool = { false },
                             page: ([String: String]) -> Page) -> Outcome {
        serve(expectation, isCancelled: isCancelled, page: page)
    }

    /// Closes the listening sockets now (a sign-in that ended before its wait began frees the port).
    func close() {
        closeSockets()
    }

    private struct Connection {
        let fd: Int32
        /// Whether its peer socket is another user's (or of no user found): answered 403.
        let otherUser: Bool
        var head = HTTPRequestHead.Reader()
    }

    /// The blocking loop: poll on the sockets, the wake pipe and the open connections.
    private func serve(_ expectation: Expectation, isCancelled: () -> Bool, page: ([String: String]) -> Page) -> Outcome {
        var connections: [Connection] = []
        defer {
            for connection in connections { Glibc.close(connection.fd) }
            closeSockets()
        }
        let me = getuid()
        let first = sockets.count + 1  // poll index of the first connection
        let checkEvery = Int32(ThreadSleep.cancellationCheck / .milliseconds(1))
        while true {
            if isCancelled() { return .cancelled }
            var fds = sockets.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) } + [pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
            fds += connections.map { pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0) }
            let ready = poll(&fds, nfds_t(fds.count), checkEvery)
            if ready < 0 {
                if errno == EINTR { continue }
                return .failed(String(cString: strerror(errno)))
            }
            if fds[sockets.count].revents != 0 { return timedOut.withLock { $0 } ? .timedOut : .cancelled }
            // Connections first (indices shift when one closes): walk them backwards.
            for index in stride(from: connections.count - 1, through: 0, by: -1) where fds[index + first].revents != 0 {
                switch read(into: &connections[index]) {
                case .more:
                    continue
                case .closed:
                    Glibc.close(connections[index].fd)
                    connections.remove(at: index)
                case .request(let request):
                    let connection = connections.remove(at: index)
                    defer { Glibc.close(connection.fd) }
                    if connection.otherUser {
                        Self.respond(connection.fd, status: 403, html: Self.text("Forbidden: this sign-in belongs to another user"))
                        continue
                    }
                    switch Self.route(request, expectation) {
                    case .redirect(let query):
                        let answer = page(query)
                        Self.respond(connection.fd, status: answer.status, html: answer.html)
                        return .redirect(query)
                    case .start(let location):
                        Self.respond(connection.fd, status: 302, html: Self.text("Continue to the sign-in page"), location: location)
                    case .wrongState:
                        refusals.withLock { $0.wrongState += 1 }
                        Self.respond(connection.fd, status: 400, html: Self.text("This answer does not belong to the sign-in in progress"))
                    case .reject(let status, let text):
                        Self.respond(connection.fd, status: status, html: Self.text(text))
                    }
                }
            }
            for listening in sockets.indices where fds[listening].revents != 0 {
                let fd = accept(sockets[listening], nil, nil)
                guard fd >= 0 else { continue }
                // accept4 and SOCK_CLOEXEC on accept need _GNU_SOURCE, which Glibc does not expose to Swift.
                _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
                _ = fcntl(fd, F_SETFL, O_NONBLOCK)
                let otherUser = PeerCredentials.loopbackPeerUID(fd) != me
                if otherUser { refusals.withLock { $0.otherUser += 1 } }
                if let oldest = connections.firstIndex(where: { $0.otherUser == otherUser }),
                   connections.count(where: { $0.otherUser == otherUser }) >= Self.maximumConnections {
                    Glibc.close(connections.remove(at: oldest).fd)
                }
                connections.append(Connection(fd: fd, otherUser: otherUser))
            }
        }
    }

    private enum ReadResult {
        case more
        case closed
        /// A whole request head, or a malformed one.
        case request(HTTPRequestHead?)
    }

    private func read(into connection: inout Connection) -> ReadResult {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = Glibc.read(connection.fd, &buffer, min(buffer.count, connection.head.wanted))
        if count < 0 { return errno == EAGAIN || errno == EINTR ? .more : .closed }
        if count == 0 { return .closed }
        do throws(HTTPRequestHead.Failure) {
            return try connection.head.append(buffer[..<count]).map { .request($0) } ?? .more
        } catch .tooLarge {
            Self.respond(connection.fd, status: 431, html: Self.text("Request too large"))
            return .closed
        } catch {
            return .request(nil)
        }
    }

    private enum Route {
        case redirect([String: String])
        case start(String)
        case wrongState
        case reject(Int, String)
    }

    /// The start page, the redirect with the expected state, or a refusal.
    private static func route(_ head: HTTPRequestHead?, _ expectation: Expectation) -> Route {
        guard let head else { return .reject(400, "Bad request") }
        guard head.method == "GET" else { return .reject(405, "Method not allowed") }
        // A page of another site resolving to 127.0.0.1 (DNS rebinding) names its own host.
        let hosts = head.values(of: "host")
        guard hosts.count == 1, isLoopbackHost(ASCII.lowercased(hosts[0])) else { return .reject(400, "Bad request") }
        if let start = expectation.start, head.path == start.path { return .start(start.location) }
        guard head.path == expectation.path, let query = head.query else { return .reject(404, "Not found") }
        // Only this sign-in's state ends the wait: a forged or stale answer must not end or fail it.
        guard let state = query["state"], state == expectation.state else { return .wrongState }
        guard query["code"] != nil || query["error"] != nil else { return .reject(400, "No authorization response") }
        return .redirect(query)
    }

    /// `localhost`, `127.0.0.1` or `[::1]`, with or without a port.
    private static func isLoopbackHost(_ host: String) -> Bool {
        let name = host.hasPrefix("[") ? String(host.prefix { $0 != "]" }) + "]"
            : String(host.prefix { $0 != ":" })
        return ["localhost", "127.0.0.1", "[::1]"].contains(name)
    }

    private static func text(_ text: String) -> String {
        "<!doctype html><title>\(text)</title><p>\(text)</p>"
    }

    /// Writes a small page and gives up on a peer that does not read it (the socket is
    /// non-blocking; the page is far smaller than a socket buffer).
    private static func respond(_ fd: Int32, status: Int, html: String, location: String? = nil) {
        let reason = [200: "OK", 302: "Found", 400: "Bad Request", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
                      431: "Request Header Fields Too Large"][status] ?? "Error"
        let body = Array(html.utf8)
        // no-referrer: the page's URL holds the authorization code; no-store: nor is the start page's redirect kept.
        let head = "HTTP/1.1 \(status) \(reason)\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: \(body.count)\r\n"
            + (location.map { "Location: \($0)\r\n" } ?? "")
            + "Cache-Control: no-store\r\nReferrer-Policy: no-referrer\r\nConnection: close\r\n\r\n"
        let bytes = Array(head.utf8) + body
        var written = 0
        var attempts = 0
        while written < bytes.count, attempts < 100 {
            let count = bytes[written...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if count > 0 {
                written += count
            } else if count < 0, errno == EAGAIN || errno == EINTR {
                attempts += 1
                var out = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                _ = poll(&out, 1, 20)
            } else {
                return
            }
        }
    }
}

/// A TCP endpoint as /proc/net/tcp6 shows it: 16 address bytes (IPv4 as ::ffff:a.b.c.d) and a port.
package struct SocketAddress: Hashable {
    var address: [UInt8]
    var port: UInt16

    package static func local(_ fd: Int32) -> SocketAddress? { read(fd, getsockname) }
    package static func peer(_ fd: Int32) -> SocketAddress? { read(fd, getpeername) }

    private static func read(_ fd: Int32, _ call: (Int32, UnsafeMutablePointer<sockaddr>, UnsafeMutablePointer<socklen_t>) -> Int32) -> SocketAddress? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let done = withUnsafeMutablePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { call(fd, $0, &length) } }
        guard done == 0 else { return nil }
        let family = Int32(storage.ss_family)
        return withUnsafeBytes(of: &storage) { raw -> SocketAddress? in
            switch family {
            case AF_INET:
                let address = raw.load(as: sockaddr_in.self)
                let bytes = withUnsafeBytes(of: address.sin_addr) { Array($0) }
                return SocketAddress(address: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff] + bytes, port: UInt16(bigEndian: address.sin_port))
            case AF_INET6:
                let address = raw.load(as: sockaddr_in6.self)
                return SocketAddress(address: withUnsafeBytes(of: address.sin6_addr) { Array($0) }, port: UInt16(bigEndian: address.sin6_port))
            default:
                return nil
            }
        }
    }

    /// Parses `0100007F:1F90` (tcp) or 32 hex digits and a port (tcp6): each 32-bit word is printed
    /// in the host's byte order, so its in-memory bytes are the address's.
    init?(proc field: Substring) {
        let parts = field.split(separator: ":")
        guard parts.count == 2, let port = UInt16(parts[1], radix: 16), parts[0].count == 8 || parts[0].count == 32 else { return nil }
        var bytes: [UInt8] = []
        var rest = parts[0]
        while !rest.isEmpty {
            guard let word = UInt32(rest.prefix(8), radix: 16) else { return nil }
            bytes += withUnsafeBytes(of: word) { Array($0) }
            rest = rest.dropFirst(8)
        }
        self.address = bytes.count == 4 ? [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff] + bytes : bytes
        self.port = port
    }

    init(address: [UInt8], port: UInt16) {
        self.address = address
        self.port = port
    }

    /// ::1, 127.0.0.0/8 (as ::ffff:127.x.y.z), or the wildcard address (:: or ::ffff:0.0.0.0).
    var isLoopbackOrWildcard: Bool {
        let mapped: [UInt8] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]
        if address == [UInt8](repeating: 0, count: 15) + [1] || address == [UInt8](repeating: 0, count: 16) { return true }
        guard address.count == 16, Array(address[..<12]) == mapped else { return false }
        return address[12] == 127 || address[12...] == [0, 0, 0, 0]
    }
}

/// Who is at the other end of a loopback TCP connection.
package enum PeerCredentials {
    /// The uid owning the peer's socket of an accepted loopback connection: the socket whose
    /// local end is our peer and whose remote end is us, asked of the kernel by that exact
    /// 4-tuple (NETLINK_SOCK_DIAG), else found in /proc/net/tcp or tcp6. Nil when none is found
    /// (then the connection is treated as another user's).
    package static func loopbackPeerUID(_ fd: Int32, diagnostics: SocketDiagnostics? = .shared) -> uid_t? {
        guard let us = SocketAddress.local(fd), let peer = SocketAddress.peer(fd) else { return nil }
        switch diagnostics?.owner(local: peer, remote: us) ?? .unknown {
        case .uid(let uid): return uid
        case .none: return nil
        case .unknown: break  // netlink unavailable or refused the question: the /proc tables, a line per socket
        }
        for table in ["/proc/net/tcp6", "/proc/net/tcp"] {
            guard let text = readProcFile(table) else { continue }
            for line in text.split(separator: "\n").dropFirst() {
                // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid ...
                let fields = line.split(separator: " ", omittingEmptySubsequences: true)
                // TIME_WAIT entries (06) belong to no process and show uid 0: never a live peer.
                guard fields.count > 7, fields[3] != "06", let local = SocketAddress(proc: fields[1]), local == peer,
                      let remote = SocketAddress(proc: fields[2]), remote == us else { continue }
                return uid_t(fields[7])
            }
        }
        return nil
    }

    /// The uids owning the sockets that listen on loopback (or every address) at `port`, from
    /// /proc/net/tcp and tcp6: who would answer a connection to a loopback URL with that port.
    package static func loopbackListenerUIDs(port: UInt16) -> [uid_t] {
        var uids: [uid_t] = []
        for table in ["/proc/net/tcp6", "/proc/net/tcp"] {
            guard let text = readProcFile(table) else { continue }
            for line in text.split(separator: "\n").dropFirst() {
                let fields = line.split(separator: " ", omittingEmptySubsequences: true)
                // 0A: LISTEN. Another user's listener on the wildcard address takes loopback connections too.
                guard fields.count > 7, fields[3] == "0A", let local = SocketAddress(proc: fields[1]), local.port == port,
                      local.isLoopbackOrWildcard, let uid = uid_t(fields[7]) else { continue }
                uids.append(uid)
            }
        }
        return uids
    }

    /// A /proc file (which reports size 0, so it is read to its end).
    private static func readProcFile(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = Glibc.read(fd, &buffer, buffer.count)
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { break }
            bytes += buffer[..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
