#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Dispatch
import FoundationEssentials
import Synchronization
import TokenCache
import TokenCacheCore

/// The token agent's App Service managed-identity endpoint on 127.0.0.1: what every Azure
/// SDK's `ManagedIdentityCredential` and `az login --identity` call when `IDENTITY_ENDPOINT`
/// and `IDENTITY_HEADER` are set (`GET ?api-version=2019-08-01&resource=R` with header
/// `X-IDENTITY-HEADER`). A request without the header's exact value gets 401 and an empty
/// body; one with it gets a token of the configured client and account for the scope
/// `R/.default`, through the same ``TokenAgent`` (policy, log) as the socket.
///
/// Any local user can reach a loopback port: the header, a fresh random value per agent, is
/// what keeps them out.
package final class ManagedIdentityEndpoint: Sendable {
    /// The port bound on 127.0.0.1.
    package let port: Int
    /// The value `X-IDENTITY-HEADER` must carry (`IDENTITY_HEADER`): 32 random bytes, hex.
    package let header: String
    /// `IDENTITY_ENDPOINT`.
    package var url: String { "http://127.0.0.1:\(port)\(Self.path)" }

    private let listener: SocketListener
    private let agent: TokenAgent
    private let clientID: ClientID
    private let account: String?

    static let path = "/msi/token"
    static let apiVersion = "2019-08-01"
    static let maximumConnections = 32
    /// Bound on reading a request head, from the connection's start: a client that sends a byte
    /// every few seconds is dropped after this, whatever its pace (#44).
    static let headDeadline: Duration = .seconds(5)
    /// Connections of other users served at once (each only to be refused, within a second);
    /// more are closed unread, so other users can never hold the slots this user's requests need.
    static let maximumForeignConnections = 4
    /// How long another user's connection is read before it gets its 401.
    static let foreignDeadline: Duration = .seconds(1)
    private let foreignConnections = Mutex(0)
    /// A monotonic reading for the head deadlines; tests pass a clock they move by hand.
    private let now: @Sendable () -> Duration

    /// Binds 127.0.0.1 on an ephemeral port, for tokens of `clientID` (and `account`, needed
    /// when the client has several).
    /// - Parameter now: the monotonic time the head deadlines are read on (the default: since the endpoint started).
    package init(agent: TokenAgent, clientID: ClientID, account: String?, now: (@Sendable () -> Duration)? = nil) throws(TokenCacheError) {
        let fd = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw TokenCacheError(.portUnavailable, "Could not make a TCP socket: \(String(cString: strerror(errno))).") }
        let socket = SocketDescriptor(fd)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = in_addr_t(0x7f00_0001).bigEndian  // 127.0.0.1 only
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 64) == 0 else {
            throw TokenCacheError(.portUnavailable, "Could not listen on 127.0.0.1 for the managed-identity endpoint: \(String(cString: strerror(errno))).",
                                  hint: "Check the loopback interface, or run the agent without --managed-identity")
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        var generator = SystemRandomNumberGenerator()
        header = (0..<32).map { _ in String(UInt8.random(in: 0...255, using: &generator), radix: 16).leftPadded(to: 2) }.joined()
        port = Int(UInt16(bigEndian: actual.sin_port))
        listener = SocketListener(socket)
        self.agent = agent
        self.clientID = clientID
        self.account = account
        let start = ContinuousClock.now
        self.now = now ?? { start.duration(to: .now) }
    }

    /// A head must be whole `limit` after the connection's start, whatever the client's pace.
    private func deadline(_ limit: Duration) -> ReadDeadline { ReadDeadline(at: now() + limit, perRead: limit, now: now) }

    /// Starts accepting on a thread of its own; returns at once.
    /// - Throws: `overloaded` when the blocking pool has no thread left for the accept loop.
    package func start() throws(TokenCacheError) {
        try listener.start(label: "org.swift-tokencache.agent.managed-identity", maximumConnections: Self.maximumConnections) { [self] connection in
            connection.setTimeouts(seconds: AgentServer.ioTimeoutSeconds)
            // Only this user's processes are served (the socket's owner in /proc/net/tcp, as the
            // loopback listener checks); another user's gets 401, never a slot for long.
            let uid = PeerCredentials.loopbackPeerUID(connection.fd)
            guard uid == getuid() else {
                refuseForeign(connection, uid: uid)
                return
            }
            let (status, body) = answer(Self.readHead(connection, by: deadline(Self.headDeadline)))
            Self.respond(connection, status: status, body: body)
        }
    }

    /// Stops accepting.
    package func stop() { listener.stop() }

    deinit { stop() }

    /// Another user's connection: its head read (and dropped) for at most a second, so that the
    /// 401 is not lost to a reset, then closed; past ``maximumForeignConnections`` at once,
    /// closed unread. Counted (``TokenAgent/refusals(on:)``), not logged one by one.
    private func refuseForeign(_ connection: SocketDescriptor, uid: uid_t?) {
        let admitted = foreignConnections.withLock { count in
            guard count < Self.maximumForeignConnections else { return false }
            count += 1
            return true
        }
        agent.countRefusal(channel: "managed-identity", uid: uid, note: admitted ? "" : ", closed unread: too many at once")
        guard admitted else { return }
        defer { foreignConnections.withLock { $0 -= 1 } }
        _ = Self.readHead(connection, by: deadline(Self.foreignDeadline))
        Self.respond(connection, status: 401, body: nil)
    }

    /// The request head, or nil (closed, too long, malformed, or not complete by `deadline`).
    private static func readHead(_ connection: SocketDescriptor, by deadline: ReadDeadline) -> HTTPRequestHead? {
        var head = HTTPRequestHead.Reader()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let remaining = min(deadline.remaining, deadline.perRead)
            guard remaining > .zero else { return nil }
            var ready = pollfd(fd: connection.fd, events: Int16(POLLIN), revents: 0)
            let milliseconds = Int32(clamping: remaining.components.seconds * 1000 + remaining.components.attoseconds / 1_000_000_000_000_000 + 1)
            let polled = poll(&ready, 1, milliseconds)
            if polled < 0, errno == EINTR { continue }
            guard polled > 0 else { return nil }
            let count = buffer.withUnsafeMutableBytes { Glibc.read(connection.fd, $0.baseAddress, min($0.count, head.wanted)) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { return nil }
            do throws(HTTPRequestHead.Failure) {
                if let complete = try head.append(buffer[..<count]) { return complete }
            } catch {
                return nil
            }
        }
    }

    /// The status and JSON body for a request head (nil: none, or not HTTP/1.1: 400 and nothing said).
    private func answer(_ head: HTTPRequestHead?) -> (Int, [String: String]?) {
        guard let head else { return (400, nil) }
        // The header first: without it nothing else is looked at or said.
        let presented = head.values(of: "x-identity-header")
        guard presented.count == 1, Self.constantTimeEquals(Array(presented[0].utf8), Array(header.utf8)) else { return (401, nil) }

        guard head.method == "GET" else { return (405, Self.error("invalid_request", "Only GET is served.")) }
        guard head.path == Self.path, let query = head.query else {
            return (404, Self.error("invalid_request", "Not found: the endpoint is \(Self.path)."))
        }
        guard query["api-version"] == Self.apiVersion else {
            return (400, Self.error("invalid_request", "api-version must be \(Self.apiVersion)."))
        }
        guard let resource = query["resource"], !resource.isEmpty else {
            return (400, Self.error("invalid_request", "The resource parameter is missing."))
        }
        if let requested = query["client_id"], !ASCII.equalsIgnoringCase(requested, clientID.value) {
            return (400, Self.error("invalid_request", "This endpoint serves client \(clientID) only, not \(requested)."))
        }
        if let selector = ["principal_id", "object_id", "mi_res_id", "msi_res_id"].first(where: { query[$0] != nil }) {
            return (400, Self.error("invalid_request", "\(selector) is not supported: this endpoint serves client \(clientID)."))
        }
        let scopes = [resource + "/.default"]
        let request = AgentProtocol.Request(operation: .token, clientID: clientID.value, scopes: scopes, account: account)
        let result: Result<TokenResult, TokenCacheError>
        do throws(TokenCacheError) {
            result = .success(try agent.token(clientID: clientID, scopes: scopes, account: account, authority: nil,
                                              caller: ServerPolicy.Caller(identity: "a managed-identity client")))
        } catch {
            result = .failure(error)
        }
        switch result {
        case .success(let token):
            agent.record(request, channel: "managed-identity", peer: nil, outcome: "granted")
            return (200, ["access_token": token.accessToken, "expires_on": String(Int64(token.expiresOn.timeIntervalSince1970)),
                          "resource": resource, "token_type": token.authenticationScheme, "client_id": clientID.value])
        case .failure(let error):
            agent.record(request, channel: "managed-identity", peer: nil, outcome: TokenAgent.outcome(of: error))
            let status = error.code == .accessDenied ? 403 : [.invalidArgument, .interactionRequired, .notFound].contains(error.code) ? 400 : 500
            return (status, Self.error(error.code == .interactionRequired ? "interaction_required" : "\(error.code)",
                                       error.hint.map { "\(error.message) \($0)." } ?? error.message))
        }
    }

    private static func error(_ code: String, _ description: String) -> [String: String] {
        ["error": code, "error_description": description]
    }

    private static func constantTimeEquals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        return zip(a, b).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }

    private static func respond(_ connection: SocketDescriptor, status: Int, body: [String: String]?) {
        let reasons = [200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
                       405: "Method Not Allowed", 500: "Internal Server Error"]
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let payload = body.flatMap { try? encoder.encode($0) }.map(Array.init) ?? []
        let head = "HTTP/1.1 \(status) \(reasons[status] ?? "Error")\r\n"
            + (payload.isEmpty ? "" : "Content-Type: application/json; charset=utf-8\r\n")
            + "Content-Length: \(payload.count)\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n"
        _ = connection.write(all: Array(head.utf8) + payload)
    }
}

private extension String {
    func leftPadded(to width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}
