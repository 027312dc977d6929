import Benchmark
import Foundation
import TokenCache

/// Warm in-process access-token lookup: the path a desktop app takes many times a minute.
/// Target: at most 2 µs median at 1,000 accounts x 3 clients, flat across sizes.
let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(metrics: [.wallClock, .cpuTotal, .mallocCountTotal, .throughput],
                                           maxDuration: .seconds(3))
    for accounts in [10, 100, 1_000] {
        Benchmark("Warm access-token lookup, \(accounts) accounts x 3 clients (in-memory)",
                  configuration: .init(scalingFactor: .kilo)) { benchmark, fixture in
            for _ in benchmark.scaledIterations {
                blackHole(try fixture.store.accessToken(clientID: fixture.clientID, account: fixture.account, scopes: ["User.Read"]))
            }
        } setup: {
            try Fixture(accounts: accounts, backend: InMemoryBackend())
        }
    }
}

struct Fixture: Sendable {
    let store: AccountStore
    let account: CachedAccount
    let clientID: String

    static let clients = ["aaaaaaaa-0000-0000-0000-000000000001", "aaaaaaaa-0000-0000-0000-000000000002",
                          "aaaaaaaa-0000-0000-0000-000000000003"]

    init(accounts: Int, backend: any CacheBackend) throws {
        let group = try CacheGroup("org.swift-tokencache.bench-\(accounts)")
        store = AccountStore(backend: backend, group: group)
        let authority = try Authority("https://login.microsoftonline.com/11111111-1111-1111-1111-111111111111")
        for index in 0..<accounts {
            for client in Self.clients {
                try store.save(Self.response(index: index), clientID: client, authority: authority, scopes: ["User.Read"])
            }
        }
        clientID = Self.clients[1]
        account = try store.account("user\(accounts / 2)@contoso.com")!
    }

    static func response(index: Int) -> TokenResponse {
        func b64(_ object: [String: String]) -> String {
            (try! JSONSerialization.data(withJSONObject: object)).base64EncodedString()
                .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
        }
        let uid = String(format: "%08x-0000-0000-0000-000000000000", index)
        return TokenResponse(
            accessToken: "at-\(index)-" + String(repeating: "x", count: 1200), refreshToken: "rt-\(index)",
            idToken: b64(["alg": "none"]) + "." + b64(["oid": uid, "sub": uid, "tid": "11111111-1111-1111-1111-111111111111",
                                                      "preferred_username": "user\(index)@contoso.com"]) + ".sig",
            clientInfo: b64(["uid": uid, "utid": "11111111-1111-1111-1111-111111111111"]),
            scope: "User.Read Mail.Read", tokenType: "Bearer", expiresIn: 3600, familyID: "1")
    }
}
