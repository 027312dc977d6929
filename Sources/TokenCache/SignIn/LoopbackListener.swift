#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Dispatch
import FoundationEssentials
import Synchronization
import TokenCacheCore

/// The one-shot HTTP listener on 127.0.0.1 that receives the authorization redirect (RFC 8252
/// section 7.3). Hand-written on POSIX sockets: it answers one GET and closes, which does not
/// justify an HTTP server in the dependency set.
///
/// It accepts several connections at once (browsers open speculative ones that never send a
/// request), reads at most ``maximumRequestBytes`` from each, answers anything that is not a
/// GET of the redirect path with an error status and keeps waiting, and ends at the first GET
/// of the redirect path that carries `code` or `error`.
final class LoopbackListener: @unchecked Sendable {
    // @unchecked: the descriptors are set in init; only the waiting thread uses the socket, and
    // `cancel` only writes one byte to the wake pipe (a thread-safe system call).
    /// The port bound on 127.0.0.1.
    let port: Int
    private let socket: Int32
    private let wakeRead: Int32
    private let wakeWrite: Int32
    /// Whether the listening socket is closed: when the wait ends, not when the object goes, so
    /// the port is free as soon as the sign-in returns.
    private let socketClosed = Mutex(false)

    /// The largest request read: a redirect with a code is about 2 KiB.
    static let maximumRequestBytes = 16 * 1024
    /// At most this many connections are held open; the oldest goes first.
    static let maximumConnections = 16

    /// What the wait ended with.
    enum Outcome: Sendable {
        /// The redirect's query parameters (first value of each name).
        case redirect([String: String])
        case cancelled
        case timedOut
        case failed(String)
    }

    /// The page served back for a redirect.
    struct Page: Sendable {
        var status: Int
        var html: String
    }

    /// Binds 127.0.0.1 (never all interfaces) on `port`, 0 for an ephemeral one.
    /// - Throws: ``TokenCacheError`` `portUnavailable`.
    init(port: Int) throws(TokenCacheError) {
        guard (0...65535).contains(port) else {
            throw TokenCacheError.invalidArgument("redirectPort", "\(port) is not a TCP port", hint: "Use 0 for an ephemeral port")
        }
        let fd = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw Self.bindError(port, errno) }
        // SO_REUSEADDR only lets a fixed port be reused while an earlier sign-in's connections sit
        // in TIME_WAIT; Linux still refuses a port another socket listens on.
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port)).bigEndian
        address.sin_addr.s_addr = in_addr_t(0x7f00_0001).bigEndian  // 127.0.0.1
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 16) == 0 else {
            let code = errno
            Glibc.close(fd)
            throw Self.bindError(port, code)
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        var pipeFDs: [Int32] = [0, 0]
        guard pipe(&pipeFDs) == 0 else {
            let code = errno
            Glibc.close(fd)
            throw Self.bindError(port, code)
        }
        for end in pipeFDs { _ = fcntl(end, F_SETFD, FD_CLOEXEC); _ = fcntl(end, F_SETFL, O_NONBLOCK) }
        self.socket = fd
        self.port = Int(UInt16(bigEndian: actual.sin_port))
        self.wakeRead = pipeFDs[0]
        self.wakeWrite = pipeFDs[1]
    }

    deinit {
        closeSocket()
        Glibc.close(wakeRead)
        Glibc.close(wakeWrite)
    }

    private static func bindError(_ port: Int, _ code: Int32) -> TokenCacheError {
        let reason = String(cString: strerror(code))
        return TokenCacheError(.portUnavailable, "Could not listen on 127.0.0.1:\(port) for the sign-in redirect: \(reason).",
                               hint: code == EADDRINUSE ? "Another program uses that port: free it, or use redirectPort 0 (an ephemeral port)"
                                   : "Use redirectPort 0 (an ephemeral port), or check the loopback interface")
    }

    private func closeSocket() {
        if socketClosed.withLock({ closed in defer { closed = true }; return !closed }) { Glibc.close(socket) }
    }

    /// Ends a wait in progress (or the next one) with `.cancelled`.
    func cancel() {
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
    }

    /// Waits for the redirect on a Dispatch thread (never on the cooperative pool), until
    /// `deadline`, a ``cancel()``, or the calling task's cancellation; serves `page(query)` to it.
    func waitForRedirect(path: String, deadline: ContinuousClock.Instant,
                         page: @escaping @Sendable ([String: String]) -> Page) async -> Outcome {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Outcome, Never>) in
                DispatchQueue.global().async { [self] in
                    continuation.resume(returning: serve(path: path, deadline: deadline, page: page))
                }
            }
        } onCancel: {
            cancel()
        }
    }

    private struct Connection {
        let fd: Int32
        var bytes: [UInt8] = []
    }

    /// The blocking loop: poll on the socket, the wake pipe and the open connections.
    private func serve(path: String, deadline: ContinuousClock.Instant, page: ([String: String]) -> Page) -> Outcome {
        var connections: [Connection] = []
        defer {
            for connection in connections { Glibc.close(connection.fd) }
            closeSocket()
        }
        while true {
            let remaining = ContinuousClock.now.duration(to: deadline)
            if remaining <= .zero { return .timedOut }
            let milliseconds = Int32(clamping: remaining.components.seconds * 1000 + remaining.components.attoseconds / 1_000_000_000_000_000 + 1)
            var fds = [pollfd(fd: socket, events: Int16(POLLIN), revents: 0), pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
            fds += connections.map { pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0) }
            let ready = poll(&fds, nfds_t(fds.count), milliseconds)
            if ready < 0 {
                if errno == EINTR { continue }
                return .failed(String(cString: strerror(errno)))
            }
            if fds[1].revents != 0 { return .cancelled }
            // Connections first (indices shift when one closes): walk them backwards.
            for index in stride(from: connections.count - 1, through: 0, by: -1) where fds[index + 2].revents != 0 {
                switch read(into: &connections[index]) {
                case .more:
                    continue
                case .closed:
                    Glibc.close(connections[index].fd)
                    connections.remove(at: index)
                case .request(let request):
                    let fd = connections.remove(at: index).fd
                    defer { Glibc.close(fd) }
                    switch Self.route(request, path: path) {
                    case .redirect(let query):
                        let answer = page(query)
                        Self.respond(fd, status: answer.status, html: answer.html)
                        return .redirect(query)
                    case .reject(let status, let text):
                        Self.respond(fd, status: status, html: "<!doctype html><title>\(text)</title><p>\(text)</p>")
                    }
                }
            }
            if fds[0].revents != 0 {
                let fd = accept(socket, nil, nil)
                if fd >= 0 {
                    // accept4 and SOCK_CLOEXEC on accept need _GNU_SOURCE, which Glibc does not expose to Swift.
                    _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
                    _ = fcntl(fd, F_SETFL, O_NONBLOCK)
                    if connections.count >= Self.maximumConnections {
                        Glibc.close(connections.removeFirst().fd)
                    }
                    connections.append(Connection(fd: fd))
                }
            }
        }
    }

    private enum ReadResult {
        case more
        case closed
        /// The request head (up to the blank line), bounded.
        case request(String)
    }

    private func read(into connection: inout Connection) -> ReadResult {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = Glibc.read(connection.fd, &buffer, min(buffer.count, Self.maximumRequestBytes - connection.bytes.count + 1))
        if count < 0 { return errno == EAGAIN || errno == EINTR ? .more : .closed }
        if count == 0 { return .closed }
        connection.bytes += buffer[..<count]
        if let end = connection.bytes.firstRange(of: [13, 10, 13, 10]) {
            return .request(String(decoding: connection.bytes[..<end.lowerBound], as: UTF8.self))
        }
        if connection.bytes.count > Self.maximumRequestBytes {
            Self.respond(connection.fd, status: 431, html: "<!doctype html><title>Request too large</title>")
            return .closed
        }
        return .more
    }

    private enum Route {
        case redirect([String: String])
        case reject(Int, String)
    }

    /// GET of the redirect path with `code` or `error` in its query; anything else is refused.
    private static func route(_ head: String, path: String) -> Route {
        let requestLine = head.split(separator: "\r\n", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        let parts = requestLine.split(separator: " ")
        guard parts.count == 3, parts[2].hasPrefix("HTTP/1.") else { return .reject(400, "Bad request") }
        guard parts[0] == "GET" else { return .reject(405, "Method not allowed") }
        let target = parts[1]
        let targetPath = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
        guard targetPath == path, let components = URLComponents(string: String(target)) else { return .reject(404, "Not found") }
        var query: [String: String] = [:]
        for item in components.queryItems ?? [] where query[item.name] == nil {
            query[item.name] = item.value ?? ""
        }
        guard query["code"] != nil || query["error"] != nil else { return .reject(400, "No authorization response") }
        return .redirect(query)
    }

    /// Writes a small page and gives up on a peer that does not read it (the socket is
    /// non-blocking; the page is far smaller than a socket buffer).
    private static func respond(_ fd: Int32, status: Int, html: String) {
        let reason = [200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 431: "Request Header Fields Too Large"][status] ?? "Error"
        let body = Array(html.utf8)
        // no-referrer: the page's URL holds the authorization code.
        let head = "HTTP/1.1 \(status) \(reason)\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: \(body.count)\r\n"
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
