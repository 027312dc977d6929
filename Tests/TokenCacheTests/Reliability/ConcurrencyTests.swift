import Foundation
import Testing
@testable import EncryptedFileStore
@testable import SecretServiceStore
@testable import TokenCache
@_spi(Backend) @testable import TokenCacheCore
@testable import TokenCachePlatform
import TokenCacheTestSupport

/// Run under ThreadSanitizer in CI (`swift test --sanitize=thread --filter Concurrency`).
@Suite("Concurrency within one process", .harness)
struct ConcurrencyTests {
    @Test("Many tasks saving, reading and removing through one store lose nothing and never crash")
    func manyTasksOneStore() async throws {
        let store = AccountStore(backend: InMemoryBackend())
        let users = (0..<64).map { index in
            Fixtures.User(uid: String(format: "%08x-0000-0000-0000-000000000000", index), tenant: Fixtures.tenantA,
                          username: "user\(index)@contoso.com", name: "User \(index)")
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, user) in users.enumerated() {
                group.addTask {
                    let client = [Fixtures.appOne, Fixtures.appTwo, Fixtures.appThree][index % 3]
                    try store.save(Fixtures.tokenResponse(Fixtures.response(for: user, tag: "\(index)")), clientID: client,
                                   authority: Fixtures.authority(), scopes: [], now: Fixtures.now)
                    let account = try #require(try store.account(user.homeAccountID))
                    #expect(try store.accessToken(clientID: client, account: account, scopes: ["User.Read"], now: Fixtures.now) != nil)
                    if index % 8 == 0 {
                        _ = try store.inventory(now: Fixtures.now)
                        _ = try store.accounts(clientID: Fixtures.appOne)
                    }
                }
                group.addTask { _ = try store.allAccounts() }
            }
            try await group.waitForAll()
        }
        #expect(try store.allAccounts().count == users.count)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for user in users.prefix(32) {
                group.addTask {
                    let account = try #require(try store.account(user.homeAccountID))
                    try store.remove(account)
                }
            }
            try await group.waitForAll()
        }
        #expect(try store.allAccounts().count == 32)
    }

    @Test("A large group is indexed and described on all cores: the same index as one entry at a time, every account described once, in order")
    func largeGroupOnAllCores() throws {
        let backend = InMemoryBackend()
        let store = AccountStore(backend: backend)
        let users = (0..<100).map { index in
            Fixtures.User(uid: String(format: "%08x-0000-0000-0000-00000000beef", index), tenant: Fixtures.tenantA,
                          username: "user\(index)@contoso.com", name: "User \(index)")
        }
        for (index, user) in users.enumerated() {
            try store.save(Fixtures.tokenResponse(Fixtures.response(for: user, tag: "\(index)")),
                           clientID: [Fixtures.appOne, Fixtures.appTwo][index % 2], authority: Fixtures.authority(), scopes: [],
                           now: Fixtures.now)
        }
        // Five more access tokens per account, for other scopes: 600, over the threshold for indexing them apart.
        let saved = try backend.load(.universalStorage).entries
        var more: [CacheChange] = []
        for entry in saved where entry.kind == .accessToken {
            for scope in 1...5 {
                var fields = entry.fields
                fields["target"] = .string("Scope\(scope).Read")
                more.append(.upsert(CacheEntry(kind: .accessToken, fields: fields)))
            }
        }
        _ = try backend.apply(more, to: .universalStorage, expected: nil)
        let entries = try backend.load(.universalStorage).entries
        #expect(entries.filter { $0.kind == .accessToken }.count == 600)

        let onAllCores = CacheIndex(entries)
        var oneAtATime = CacheIndex()
        for entry in entries { oneAtATime.insert(entry) }
        #expect(onAllCores.entries == oneAtATime.entries)
        for (index, user) in users.enumerated() {
            let home = user.homeAccountID
            for kind in EntityKind.allCases {
                #expect(Set(onAllCores.entries(kind, homeAccountID: home)) == Set(oneAtATime.entries(kind, homeAccountID: home)))
            }
            #expect(onAllCores.accessTokens(homeAccountID: home).map(\.key).sorted() == oneAtATime.accessTokens(homeAccountID: home).map(\.key).sorted())
            #expect(onAllCores.accessTokens(homeAccountID: home).count == 6)
            let client = [Fixtures.appOne, Fixtures.appTwo][index % 2]
            #expect(onAllCores.signInState(homeAccountID: home, clientID: client) == .signedIn)
        }

        let inventory = try AccountStore(backend: backend).inventory(now: Fixtures.now)
        #expect(inventory.accounts.map(\.homeAccountID) == users.sorted { $0.username < $1.username }.map(\.homeAccountID))
        for account in inventory.accounts {
            #expect(account.clients.count == 1)
            #expect(account.clients.first?.accessTokens.count == 6)
            #expect(account.name?.hasPrefix("User ") == true)
        }
    }

    @Test("Several stores on one backend in many threads stay coherent")
    func storesShareBackendConcurrently() async throws {
        let backend = InMemoryBackend()
        let stores = (0..<4).map { _ in AccountStore(backend: backend) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<40 {
                group.addTask {
                    let user = Fixtures.User(uid: "u\(index)", tenant: Fixtures.tenantA, username: "u\(index)@x.com", name: "U")
                    try stores[index % 4].save(Fixtures.tokenResponse(Fixtures.response(for: user, tag: "\(index)")),
                                               clientID: Fixtures.appOne, authority: Fixtures.authority(), scopes: [])
                }
            }
            try await group.waitForAll()
        }
        for store in stores { #expect(try store.allAccounts().count == 40) }
    }
}
