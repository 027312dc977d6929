import Foundation
import Testing
import TokenCacheCore
// The CLI's module links the keeper (the only one: scripts/check-module-graph.sh); its package API is visible here.
import TokenCacheKeeper
import TokenCacheTestSupport

/// The keeper's bound on connections per uid, in process.
@Suite("Token keeper connections per uid", .harness)
struct KeeperConnectionsTests {
    @Test("A uid gets at most its limit of connections served at once, another uid is not held back, a released slot is taken again; the refusal is overloaded, names the limit and says what to do")
    func perUIDLimit() {
        let connections = KeeperConnections(limit: KeeperServer.maximumConnectionsPerUID)
        #expect(KeeperServer.maximumConnectionsPerUID < 32, "below the keeper's connections in all, so one uid cannot take them all")
        for _ in 0..<connections.limit { #expect(connections.acquire(uid: 1000)) }
        #expect(!connections.acquire(uid: 1000))
        #expect(connections.count(uid: 1000) == connections.limit)
        #expect(connections.acquire(uid: 1001))
        connections.release(uid: 1000)
        #expect(connections.acquire(uid: 1000))
        #expect(!connections.acquire(uid: 1000))
        let refusal = connections.refusal(uid: 1000)
        #expect(refusal.code == .overloaded && refusal.message.contains("\(connections.limit)") && refusal.hint?.isEmpty == false)
        for _ in 0..<connections.limit { connections.release(uid: 1000) }
        connections.release(uid: 1001)
        #expect(connections.count(uid: 1000) == 0 && connections.count(uid: 1001) == 0)
    }
}
