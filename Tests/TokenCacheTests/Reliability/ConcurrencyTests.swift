import Foundation
import Testing
@testable import TokenCache

/// Run under ThreadSanitizer in CI (`swift test --sanitize=thread --filter Concurrency`).
@Suite("Concurrency within one process", .capturesLogs)
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
