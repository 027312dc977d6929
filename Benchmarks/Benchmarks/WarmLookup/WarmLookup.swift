import Benchmark
import Foundation
import TokenCache
@_spi(Backend) import TokenCacheCore

/// Warm in-process access-token lookup: the path a desktop app takes many times a minute.
/// Target: at most 2 µs median at 1,000 accounts x 3 clients, flat across sizes.
///
/// With TOKENCACHE_BENCH_SECRET_SERVICE=1 (set by scripts/bench.sh, which runs this inside
/// scripts/with-test-keyring.sh with a seeded keyring) the same lookup runs on the Secret Service
/// backend with its coherence mechanism on (item-signal revision checked on every lookup), reading
/// groups `org.swift-tokencache.bench-ss-N` that bench.sh seeded with N accounts x 3 clients.
///
/// bench.sh's smoke run sets TOKENCACHE_BENCH_SIZES (the account counts, `10,100`) and
/// TOKENCACHE_BENCH_SMOKE=1 (a fraction of a second a benchmark): it checks the machinery only.
let benchmarks: @Sendable () -> Void = {
    let environment = ProcessInfo.processInfo.environment
    let smoke = environment["TOKENCACHE_BENCH_SMOKE"] == "1"
    let sizes = environment["TOKENCACHE_BENCH_SIZES"].map { $0.split(separator: ",").compactMap { Int($0) } } ?? [10, 100, 1_000]
    Benchmark.defaultConfiguration = .init(metrics: [.wallClock, .cpuTotal, .mallocCountTotal, .throughput],
                                           maxDuration: smoke ? .milliseconds(300) : .seconds(3))
    for accounts in sizes {
        Benchmark("Warm access-token lookup, \(accounts) accounts x 3 clients (in-memory)",
                  configuration: .init(scalingFactor: .kilo)) { benchmark, fixture in
            for _ in benchmark.scaledIterations {
                blackHole(try fixture.store.accessToken(clientID: fixture.clientID, account: fixture.account, scopes: ["User.Read"]))
            }
        } setup: {
            try Fixture(accounts: accounts, backend: InMemoryBackend())
        }
    }
    guard environment["TOKENCACHE_BENCH_SECRET_SERVICE"] == "1" else { return }
    for accounts in sizes {
        Benchmark("Warm access-token lookup, \(accounts) accounts x 3 clients (Secret Service, coherence on)",
                  configuration: .init(scalingFactor: .kilo)) { benchmark, fixture in
            for _ in benchmark.scaledIterations {
                blackHole(try fixture.store.accessToken(clientID: fixture.clientID, account: fixture.account, scopes: ["User.Read"]))
            }
        } setup: {
            try Fixture(seededSecretServiceGroup: accounts)
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

    /// A group bench.sh seeded in the keyring; the first lookup loads it, later ones stay in memory.
    init(seededSecretServiceGroup accounts: Int) throws {
        let group = try CacheGroup("org.swift-tokencache.bench-ss-\(accounts)")
        store = AccountStore(backend: try SecretServiceBackend(), group: group)
        clientID = Self.clients[1]
        guard let account = try store.account("user\(accounts / 2)@contoso.com"),
              try store.accessToken(clientID: clientID, account: account, scopes: ["User.Read"]) != nil else {
            throw TokenCacheError(.invalidCacheData, "group \(group) is not seeded (run through scripts/bench.sh)")
        }
        self.account = account
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
