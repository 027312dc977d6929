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

/// The token agent's Unix socket: accepts connections of this user only (checked with
/// SO_PEERCRED, beyond the socket's mode 0600 in a 0700 directory) and answers each request
/// of ``AgentProtocol`` with the ``TokenAgent``.
///
/// Blocking sockets on Dispatch threads, as ``LoopbackListener`` does: a connection is a few
/// hundred bytes each way, which does not justify an event-loop library.
package final class AgentServer: Sendable {
    /// Where the socket is.
    package let path: String
    private let listener: SocketListener
    private let socketInode: UInt
    private let agent: TokenAgent

    /// Bound on reading a request and writing its answer: a client that stops mid-message is dropped.
    /// Also the deadline of a whole request, counted from the connection or the previous answer: a
    /// client that sends nothing, or a byte just inside each read's timeout, cannot keep one of the
    /// ``maximumConnections`` slots longer (another user's connection gets 1 s).
    package static let ioTimeoutSeconds = 10
    /// Connections served at once; more wait in the listen backlog.
    package static let maximumConnections = 32

    /// A monotonic reading for the request deadlines; tests pass a clock they move by hand.
    private let now: @Sendable () -> Duration

    /// Listens at `path` (see ``UnixSocket/listen(_:)`` for the modes and checks).
    /// - Parameter now: the monotonic time the request deadlines are read on (the default: since the agent started).
    package init(path: String, agent: TokenAgent, now: (@Sendable () -> Duration)? = nil) throws(TokenCacheError) {
        listener = SocketListener(try UnixSocket.listen(path))
        var status = stat()
        lstat(path, &status)
        socketInode = UInt(status.st_ino)
        self.path = path
        self.agent = agent
        let start = ContinuousClock.now
        self.now = now ?? { start.duration(to: .now) }
    }

    /// The deadline of the next whole request, `seconds` from now.
    private func deadline(seconds: Int) -> ReadDeadline {
        ReadDeadline(at: now() + .seconds(seconds), perRead: .seconds(seconds), now: now)
    }

    /// Starts accepting on a thread of its own; returns at once.
    /// - Throws: `overloaded` when the blocking pool has no thread left for the accept loop.
    package func start() throws(TokenCacheError) {
        try listener.start(label: "org.swift-tokencache.agent.accept", maximumConnections: Self.maximumConnections) { [self] in serve($0) }
    }

    /// Stops accepting and removes the socket file (when it is still this agent's).
    package func stop() {
        guard listener.stop() else { return }
        var status = stat()
        if lstat(path, &status) == 0, UInt(status.st_ino) == socketInode { unlink(path) }
    }

    deinit { stop() }

    private func serve(_ connection: SocketDescriptor) {
        guard let peer = connection.peerCredentials(), peer.uid == getuid() else {
            let peer = connection.peerCredentials()
            agent.recordRefusedPeer(peer)
            connection.setTimeouts(seconds: 1)
            // Its request is read (and dropped) first: closing on unread bytes would reset the
            // connection before the peer reads why.
            _ = AgentProtocol.readMessage(from: connection, by: deadline(seconds: 1))
            _ = connection.write(all: AgentProtocol.encode(AgentProtocol.Response(TokenCacheError(
                .accessDenied, "This token agent serves its own user only.", hint: "Start your own agent with `tokencache agent`"))))
            return
        }
        connection.setTimeouts(seconds: Self.ioTimeoutSeconds)
        var next = deadline(seconds: Self.ioTimeoutSeconds)
        while let message = AgentProtocol.readMessage(from: connection, by: next) {
            let response: AgentProtocol.Response
            let version = (try? JSONDecoder().decode(AgentProtocol.Versioned.self, from: message))?.version ?? AgentProtocol.version
            if version != AgentProtocol.version {
                response = AgentProtocol.Response(TokenCacheError(
                    .agentUnavailable, "The token agent speaks protocol version \(AgentProtocol.version), not \(version).",
                    hint: "Use a tokencache of the same release on both sides"))
            } else if let request = try? JSONDecoder().decode(AgentProtocol.Request.self, from: message) {
                response = agent.handle(request, peer: peer)
            } else {
                response = AgentProtocol.Response(TokenCacheError(
                    .agentUnavailable, "The token agent received a message that is not a request of protocol version \(AgentProtocol.version).",
                    hint: "See docs/AGENT.md for the protocol"))
            }
            // Set before the answer goes out: a client holding the answer knows the next deadline runs.
            next = deadline(seconds: Self.ioTimeoutSeconds)
            guard connection.write(all: AgentProtocol.encode(response)) else { return }
        }
    }
}

extension TokenAgent {
    /// Counts a connection refused because it came from another user.
    func recordRefusedPeer(_ peer: AgentPeer?) {
        countRefusal(channel: "socket", uid: peer?.uid, pid: peer?.pid)
    }
}
