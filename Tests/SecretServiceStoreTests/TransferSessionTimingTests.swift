import Foundation
import Testing
@testable import SecretServiceStore
@testable import TokenCacheCrypto
@testable import TokenCacheDBus
@testable import TokenCacheCore
import TokenCacheTestSupport

/// Times opening the transfer session, for Benchmarks/results/HISTORY.md: opt-in
/// (`TOKENCACHE_TIME_SESSIONS=200`), since timings on a shared machine make no pass/fail.
@Suite("Transfer session timing", .harness, .enabled(if: TestEnvironment.runsSecretServiceTests
                                            && ProcessInfo.processInfo.environment["TOKENCACHE_TIME_SESSIONS"] != nil))
struct TransferSessionTimingTests {
    @Test("Open a session N times against the test keyring; the key pair and agreement alone N times")
    func timeSessions() throws {
        let iterations = Int(ProcessInfo.processInfo.environment["TOKENCACHE_TIME_SESSIONS"] ?? "") ?? 200
        let backend = try SecretServiceBackend()
        _ = try TransferSession.open(backend.client.bus, timeoutMilliseconds: 5000)  // warm: libgcrypt loaded, bus up
        let clock = ContinuousClock()
        let opened = try clock.measure {
            for _ in 0..<iterations { _ = try TransferSession.open(backend.client.bus, timeoutMilliseconds: 5000) }
        }
        let gcrypt = try Gcrypt.shared()
        var a = [UInt8](repeating: 0, count: 32), b = [UInt8](repeating: 0, count: 32)
        try TransferSession.fillRandom(&a)
        try TransferSession.fillRandom(&b)
        a[0] |= 0x80
        b[0] |= 0x80
        let peer = try #require(TransferCrypto.publicValue(exponent: b, gcrypt))
        var key = [UInt8](repeating: 0, count: 16)
        let local = clock.measure {
            for _ in 0..<iterations {
                _ = TransferCrypto.publicValue(exponent: a, gcrypt)
                _ = key.withUnsafeMutableBufferPointer { TransferCrypto.sessionKey(peer: peer, exponent: a, gcrypt, into: $0.baseAddress!) }
            }
        }
        func perOpen(_ duration: Duration) -> String {
            String(format: "%.3f ms", Double(duration.components.attoseconds / 1_000_000_000_000 + duration.components.seconds * 1_000_000) / 1000 / Double(iterations))
        }
        print("TIMING transfer session: \(iterations) opens, \(perOpen(opened)) per open; key pair + agreement alone \(perOpen(local)) per session")
    }
}
