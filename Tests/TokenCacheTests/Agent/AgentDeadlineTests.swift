import Foundation
import Testing
@testable import TokenCache
@testable import TokenCacheAgent
@_spi(Backend) @testable import TokenCacheCore
@testable import EncryptedFileStore
import TokenCacheTestSupport

/// The agent socket's request deadline (#57, "Also"): a client that sends nothing, or trickles
/// its request a byte at a time inside each read's timeout, loses its connection at the deadline
/// and so cannot keep the 32 slots. Time is a ManualClock the test moves: nothing sleeps.
@Suite("Agent socket: request deadline", .harness)
struct AgentDeadlineTests {
    let clock: ManualClock
    let directory: URL
    let server: AgentServer

    init() throws {
        let clock = ManualClock()
        self.clock = clock
        directory = try TestEnvironment.temporaryDirectory()
        let store = AccountStore(backend: EncryptedFileBackend(directory: directory), group: try CacheGroup("org.swift-tokencache.deadline"))
        server = try AgentServer(path: directory.appendingPathComponent("agent.sock").path,
                                 agent: TokenAgent(store: store, policy: AgentPolicy()), now: { clock.now.offset })
        try server.start()
    }

    /// A request the agent answers without touching the store (a protocol version it does not speak).
    let request = AgentProtocol.encode(["version": 999])

    /// A connection whose first request was answered: the agent is serving it, its next deadline set.
    func servedConnection() throws -> SocketDescriptor {
        let connection = try UnixSocket.connect(server.path)
        #expect(connection.write(all: request))
        #expect(AgentProtocol.readMessage(from: connection) != nil)
        return connection
    }

    @Test("A client idle past the deadline is dropped: its late request gets no answer")
    func idleClientIsDropped() throws {
        defer { server.stop(); try? FileManager.default.removeItem(at: directory) }
        let connection = try servedConnection()
        clock.advance(by: .seconds(AgentServer.ioTimeoutSeconds + 1))
        _ = connection.write(all: request)
        #expect(AgentProtocol.readMessage(from: connection) == nil)
    }

    @Test("A client trickling its request inside each read's timeout is dropped at the request's deadline")
    func tricklingClientIsDropped() throws {
        defer { server.stop(); try? FileManager.default.removeItem(at: directory) }
        let connection = try servedConnection()
        // Each piece comes well inside the per-read timeout; together they pass the request's deadline.
        let pieces = [Array(request[..<2]), Array(request[2..<4]), Array(request[4...])]
        for piece in pieces {
            #expect(connection.write(all: piece))
            clock.advance(by: .seconds(AgentServer.ioTimeoutSeconds / 2 + 1))
        }
        #expect(AgentProtocol.readMessage(from: connection) == nil)
        // A client that keeps to the deadline is still served on a connection of its own.
        let prompt = try servedConnection()
        #expect(prompt.write(all: request))
        #expect(AgentProtocol.readMessage(from: prompt) != nil)
    }
}
