import Foundation
import Testing
@testable import TokenCache

/// NETLINK_SOCK_DIAG: a loopback connection's peer looked up by its exact 4-tuple.
@Suite("SocketDiagnostics")
struct SocketDiagnosticsTests {
    /// A listening socket on 127.0.0.1, a connection to it, and the accepted end.
    struct Connection {
        var listening, client, accepted: Int32
        func close() { for fd in [listening, client, accepted] { Glibc.close(fd) } }
    }

    func connect() throws -> Connection {
        let listening = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = in_addr_t(0x7f00_0001).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listening, $0, length) == 0 && listen(listening, 4) == 0 && getsockname(listening, $0, &length) == 0 }
        }
        try #require(bound)
        let client = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        let connected = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(client, $0, length) } }
        try #require(connected == 0)
        let accepted = accept(listening, nil, nil)
        try #require(accepted >= 0)
        return Connection(listening: listening, client: client, accepted: accepted)
    }

    @Test("the peer of an accepted connection is found by its 4-tuple and is this user's; a 4-tuple no socket has is none, not a guess")
    func ownerByFourTuple() throws {
        let diagnostics = try #require(SocketDiagnostics.shared, "netlink sock_diag is unavailable here")
        let connection = try connect()
        defer { connection.close() }
        let us = try #require(SocketAddress.local(connection.accepted)), peer = try #require(SocketAddress.peer(connection.accepted))
        #expect(us.isIPv4Mapped && peer.isIPv4Mapped)
        #expect(diagnostics.owner(local: peer, remote: us) == .uid(geteuid()))
        #expect(PeerCredentials.loopbackPeerUID(connection.accepted) == geteuid())
        // The same ends swapped name the accepted socket, ours too; a port no one uses names nothing.
        #expect(diagnostics.owner(local: us, remote: peer) == .uid(geteuid()))
        let nowhere = SocketAddress(address: peer.address, port: peer.port == 1 ? 2 : 1)
        #expect(diagnostics.owner(local: nowhere, remote: us) == SocketDiagnostics.Owner.none)
    }
}
