import Foundation
import Testing
@testable import EncryptedFileStore
@testable import SecretServiceStore
@testable import TokenCache
@testable import TokenCacheCore
@testable import TokenCachePlatform
import TokenCacheTestSupport
import TokenCacheTestIdentityProvider

/// Refresh tokens rotate at the fake provider (each is redeemable once). Several helper
/// processes share one encrypted-file cache and call acquireTokenSilent at the same moment.
@Suite("Refresh-token rotation across processes", .harness)
final class RefreshRotationTests {
    let idp: FakeIdentityProvider
    let directory: URL
    /// A group of its own per test, so lock files never meet those of a concurrent run.
    let group: CacheGroup
    let store: AccountStore

    init() throws {
        idp = try FakeIdentityProvider()
        directory = try TestEnvironment.temporaryDirectory()
        group = try CacheGroup("org.swift-tokencache.rotation-\(UUID().uuidString.prefix(8).lowercased())")
        store = AccountStore(backend: EncryptedFileBackend(directory: directory.appendingPathComponent("cache")), group: group)
    }

    deinit { try? FileManager.default.removeItem(at: directory) }

    /// Alice signed in to `clientID` an hour ago: her access token has expired (or, with
    /// `expiresIn` above an hour, is still valid); the provider knows her refresh token
    /// `rt-initial-<client>`.
    func signIn(_ clientID: String, foci: String?, expiresIn: Int = 60) async throws {
        var response = Fixtures.response(for: Fixtures.alice, scope: "User.Read", foci: foci, tag: clientID, expiresIn: expiresIn)
        response["refresh_token"] = "rt-initial-\(clientID)"
        try store.save(Fixtures.tokenResponse(response), clientID: clientID, authority: idp.authority(), scopes: [],
                       now: Date().addingTimeInterval(-3600))
        try await idp.seed(refreshToken: "rt-initial-\(clientID)", user: Fixtures.alice, clientID: clientID, family: foci)
    }

    struct Outcome {
        var ok: Bool
        var accessToken: String?
        var code: String?
        var serverError: String?
        var milliseconds: Int
    }

    /// Starts one helper process per client, waits until every one is ready, releases them at
    /// once, and returns what each got.
    func acquireConcurrently(_ clients: [String], force: Bool) async throws -> [Outcome] {
        let helper = TestEnvironment.binDirectory.appendingPathComponent("TokenCacheTestHelper").path
        let (directory, group, authority) = (directory, group.name, idp.authority().description)
        let runs = try await offThePool {
            try Self.run(helper: helper, directory: directory, group: group, authority: authority, clients: clients, force: force)
        }
        return try runs.map { status, output, errors in
            try #require(status == 0, "helper failed: \(errors)")
            let object = try #require(try JSONSerialization.jsonObject(with: output) as? [String: Any])
            return Outcome(ok: object["ok"] as? Bool ?? false, accessToken: object["access_token"] as? String,
                           code: object["code"] as? String, serverError: object["server_error"] as? String,
                           milliseconds: object["ms"] as? Int ?? -1)
        }
    }

    /// The blocking part of ``acquireConcurrently(_:force:)``: exit status, stdout and stderr of each helper.
    static func run(helper: String, directory: URL, group: String, authority: String, clients: [String],
                    force: Bool) throws -> [(Int32, Data, String)] {
        let barrier = directory.appendingPathComponent("go")
        var running: [(Process, Pipe, Pipe)] = []
        for (index, clientID) in clients.enumerated() {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: helper)
            process.arguments = ["sso-acquire", directory.appendingPathComponent("cache").path, group,
                                 authority, clientID, Fixtures.alice.username, "User.Read",
                                 force ? "force" : "silent", directory.appendingPathComponent("ready-\(index)").path, barrier.path]
            // Lock files go to the test's directory, removed with it.
            process.environment = ProcessInfo.processInfo.environment
                .merging(["XDG_RUNTIME_DIR": directory.appendingPathComponent("run").path]) { $1 }
            let stdout = Pipe(), stderr = Pipe()
            process.standardOutput = stdout
            process.standardError = stderr
            try process.run()
            running.append((process, stdout, stderr))
        }
        let deadline = Date().addingTimeInterval(60)
        while clients.indices.contains(where: {
            !FileManager.default.fileExists(atPath: directory.appendingPathComponent("ready-\($0)").path)
        }) {
            guard Date() < deadline, running.allSatisfy({ $0.0.isRunning }) else { break }
            usleep(2_000)
        }
        _ = FileManager.default.createFile(atPath: barrier.path, contents: nil)
        return running.map { process, stdout, stderr in
            let output = stdout.fileHandleForReading.readDataToEndOfFile()
            let errors = String(decoding: stderr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            return (process.terminationStatus, output, errors)
        }
    }

    func cached(_ kind: EntityKind, clientID: String? = nil) throws -> [CacheEntry] {
        try store.entries().filter { $0.kind == kind && (clientID == nil || $0["client_id"] == clientID) }
    }

    @Test("Four processes refreshing one expired token at once redeem the refresh token once and share the result")
    func expiredTokenFourProcesses() async throws {
        try await signIn(Fixtures.appOne, foci: nil)
        // A slow answer keeps the race window wide open: without the lock every process would redeem.
        try await idp.control(["mode": "slow", "delay": 0.3])
        let outcomes = try await acquireConcurrently(Array(repeating: Fixtures.appOne, count: 4), force: false)

        #expect(outcomes.allSatisfy { $0.ok }, "\(outcomes)")
        #expect(outcomes.map(\.accessToken) == Array(repeating: "at-issued-1", count: 4))
        let grants = try await idp.stats().grants
        #expect(grants.count == 1)
        #expect(grants.first?.redeemed == "rt-initial-\(Fixtures.appOne)" && grants.first?.outcome == "ok")
        #expect(try cached(.refreshToken).compactMap { $0["secret"] } == ["rt-rotated-1"])
        #expect(try cached(.accessToken, clientID: Fixtures.appOne).compactMap { $0["secret"] } == ["at-issued-1"])
    }

    @Test("Four processes forcing a refresh at once never redeem a rotated refresh token twice and keep the newest")
    func forcedRefreshFourProcesses() async throws {
        // The cached access token is still valid: forceRefresh is what sends them to the provider.
        try await signIn(Fixtures.appOne, foci: nil, expiresIn: 7200)
        try await idp.control(["mode": "slow", "delay": 0.2])
        let outcomes = try await acquireConcurrently(Array(repeating: Fixtures.appOne, count: 4), force: true)

        #expect(outcomes.allSatisfy { $0.ok }, "\(outcomes)")
        let grants = try await idp.stats().grants
        #expect(grants.allSatisfy { $0.outcome == "ok" }, "\(grants.map(\.outcome))")
        #expect((1...4).contains(grants.count))
        // One chain: each redemption used the token the previous one issued, one at a time.
        #expect(grants.first?.redeemed == "rt-initial-\(Fixtures.appOne)")
        for (previous, next) in zip(grants, grants.dropFirst()) {
            #expect(next.redeemed == previous.issued)
            #expect(next.arrived >= previous.answered)
        }
        #expect(Set(grants.compactMap(\.redeemed)).count == grants.count)
        let newest = try #require(grants.last?.issued)
        #expect(try cached(.refreshToken).compactMap { $0["secret"] } == [newest])
        #expect(try cached(.accessToken, clientID: Fixtures.appOne).compactMap { $0["secret"] }
                == ["at-issued-\(grants.count)"])
        // Nobody got the token cached before the call; callers that started before the first
        // refresh finished share its token instead of redeeming again.
        #expect(outcomes.allSatisfy { ($0.accessToken ?? "").hasPrefix("at-issued-") })
    }

    @Test("Refreshes of two clients with their own refresh tokens run at the same time")
    func differentClientsDoNotWait() async throws {
        try await signIn(Fixtures.appOne, foci: nil)
        try await signIn(Fixtures.appTwo, foci: nil)
        try await idp.control(["mode": "slow", "delay": 2.0])
        let outcomes = try await acquireConcurrently([Fixtures.appOne, Fixtures.appTwo], force: false)

        #expect(outcomes.allSatisfy { $0.ok }, "\(outcomes)")
        let grants = try await idp.stats().grants
        #expect(grants.map(\.outcome) == ["ok", "ok"])
        #expect(Set(grants.map(\.client_id)) == [Fixtures.appOne, Fixtures.appTwo])
        // Both requests were at the provider at once: neither waited for the other's lock.
        let lastArrival = try #require(grants.map(\.arrived).max()), firstAnswer = try #require(grants.map(\.answered).min())
        #expect(lastArrival < firstAnswer, "requests did not overlap: \(grants.map { ($0.arrived, $0.answered) })")
    }

    @Test("Family apps refreshing at once redeem the shared family refresh token one at a time")
    func familyMembersShareOneLock() async throws {
        try await signIn(Fixtures.appOne, foci: "1")
        try await idp.control(["mode": "slow", "delay": 0.3])
        // App one signed in; apps two and three get SSO through its family refresh token.
        let outcomes = try await acquireConcurrently([Fixtures.appOne, Fixtures.appTwo, Fixtures.appThree, Fixtures.appTwo],
                                               force: false)

        #expect(outcomes.allSatisfy { $0.ok }, "\(outcomes)")
        let grants = try await idp.stats().grants
        #expect(grants.allSatisfy { $0.outcome == "ok" }, "\(grants.map(\.outcome))")
        #expect(grants.count == 3, "one redemption per app")
        #expect(Set(grants.map(\.client_id)) == [Fixtures.appOne, Fixtures.appTwo, Fixtures.appThree])
        #expect(grants.first?.redeemed == "rt-initial-\(Fixtures.appOne)")
        for (previous, next) in zip(grants, grants.dropFirst()) { #expect(next.redeemed == previous.issued) }
        // Every family refresh token left in the cache is the newest one issued.
        let newest = try #require(grants.last?.issued)
        #expect(Set(try cached(.refreshToken).compactMap { $0["secret"] }) == [newest])
        for clientID in [Fixtures.appOne, Fixtures.appTwo, Fixtures.appThree] {
            #expect(try cached(.accessToken, clientID: clientID).count == 1)
        }
    }
}
