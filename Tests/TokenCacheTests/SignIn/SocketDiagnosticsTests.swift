import Foundation
import Testing
@testable import TokenCache

/// NETLINK_SOCK_DIAG: a loopback connection's peer looked up by its exact 4-tuple.
@Suite("SocketDiagnostics")
struct SocketDiagnosticsTests {
    @Test("the peer of an accepted connection is found by its 4-tuple and is this user's; a 4-tuple no socket has is none, not a guess")
    func ownerByFourTuple() throws {
        let diagnostics = try #require(SocketDiagnostics.shared, "netlink sock_diag is unavailable here")
        let connection = try #require(LoopbackConnection())
        let us = try #require(SocketAddress.local(connection.accepted)), peer = try #require(SocketAddress.peer(connection.accepted))
        #expect(us.isIPv4Mapped && peer.isIPv4Mapped)
        #expect(diagnostics.owner(local: peer, remote: us) == .uid(geteuid()))
        #expect(PeerCredentials.loopbackPeerUID(connection.accepted) == geteuid())
        // The same ends swapped name the accepted socket, ours too; a port no one uses names nothing.
        #expect(diagnostics.owner(local: us, remote: peer) == .uid(geteuid()))
        let nowhere = SocketAddress(address: peer.address, port: peer.port == 1 ? 2 : 1)
        #expect(diagnostics.owner(local: nowhere, remote: us) == SocketDiagnostics.Owner.none)
    }

    @Test("a netlink socket that cannot find the user's own connection (a kernel without tcp_diag answers ENOENT for all) is not used: /proc answers")
    func unansweredLookupsAreNotBelieved() throws {
        #expect(SocketDiagnostics(query: { _, _, _, _, _, _, _ in (-ENOENT, 0) }) == nil)
        #expect(SocketDiagnostics(query: { _, _, _, _, _, _, _ in (-EACCES, 0) }) == nil)
        #expect(SocketDiagnostics(query: { _, _, _, _, _, _, _ in (0, geteuid() &+ 1) }) == nil)
        #expect(SocketDiagnostics(query: SocketDiagnostics.kernelQuery) != nil)
        // Without it the peer is still found, in /proc/net/tcp.
        let connection = try #require(LoopbackConnection())
        #expect(PeerCredentials.loopbackPeerUID(connection.accepted, diagnostics: nil) == geteuid())
    }
}
