import Foundation
import Synchronization
import Testing
@testable import SecretServiceStore
@testable import TokenCache
@testable import TokenCacheAgent
@testable import TokenCacheCore
@testable import TokenCachePlatform
import TokenCacheTestSupport
import TokenCacheTestIdentityProvider

/// 64 silent acquisitions at once in one process, for accounts whose tokens need a refresh, while
/// the Secret Service stalls for 5 s (its daemon stopped with SIGSTOP: every keyring call waits)
/// and another process holds one account's refresh lock. Every call must end with the right
/// token, and no `network` or `timedOut` may come from work waiting for a thread.
///
/// Stopping the daemon stalls every suite that uses the keyring, so scripts/test.sh runs this
/// suite in a `swift test` of its own (with the multi-process load).
@Suite("Pool stress", .harness, .serialized, .enabled(if: TestEnvironment.runsSecretServiceTests))
struct PoolStressTests {
    static let users = (0..<8).map { index in
        Fixtures.User(uid: "57e55000-0000-0000-0000-00000000000\(index)", tenant: Fixtures.tenantA,
                      username: "stress\(index)@contoso.com", name: "Stress \(index)")
    }
    static let callsPerUser = 8
    /// The request timeout: shorter than the stall, so a token request that waited behind stalled
    /// keyring calls for a thread (as in a fixed-size pool) would fail with `network`.
    static let requestTimeout: TimeInterval = 4

    let idp: FakeIdentityProvider
    let group = try! CacheGroup("org.swift-tokencache.stress-\(UUID().uuidString.prefix(8).lowercased())")
    let store: AccountStore

    init() throws {
        idp = try FakeIdentityProvider()
        store = AccountStore(backend: try SecretServiceBackend(), group: group)
    }

    /// Every user signed in to app one with an access token past its refresh time; the provider
    /// knows their refresh tokens.
    func signInEveryone() async throws -> [CachedAccount] {
        var accounts: [CachedAccount] = []
        for user in Self.users {
            var response = Fixtures.response(for: user, scope: "User.Read", foci: nil, tag: user.uid, expiresIn: 60)
            response["refresh_token"] = "rt-initial-\(user.uid)"
            try store.save(Fixtures.tokenResponse(response), clientID: Fixtures.appOne, authority: idp.authority(), scopes: [])
            try await idp.seed(refreshToken: "rt-initial-\(user.uid)", user: user, clientID: Fixtures.appOne, family: nil)
            accounts.append(try #require(try store.account(user.username)))
        }
        return accounts
    }

    /// Another process (flock(1)) holds the refresh lock of `account` until `release` is written
    /// to its standard input.
    func holdRefreshLock(of account: CachedAccount) throws -> (process: Process, release: Pipe) {
        let authority = idp.authority()
        let name = "\(group.name)|\(account.homeAccountID)|\(Environment.canonical(authority.environment))|client:\(Fixtures.appOne.lowercased())"
        try FileIO.ensureDirectory(RefreshLock.directory.deletingLastPathComponent(), purpose: "test")
        try FileIO.ensureDirectory(RefreshLock.directory, purpose: "test")
        let file = RefreshLock.directory.appendingPathComponent("refresh-\(RefreshLock.hash(name)).lock").path
        let process = Process(), release = Pipe(), taken = Pipe()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/flock")
        process.arguments = ["-x", file, "sh", "-c", "echo taken; read line"]
        process.standardInput = release
        process.standardOutput = taken
        try process.run()
        _ = try taken.fileHandleForReading.read(upToCount: 6)  // "taken": the lock is held
        return (process, release)
    }

    /// The keyring daemon's process, stopped for `seconds` from the first token request on (so
    /// that calls are in every phase when it stalls), then continued whatever happens.
    final class KeyringStall: Sendable {
        let pid: Int32
        let seconds: Int
        private let started = Atomic<Bool>(false)
        private let ended = DispatchSemaphore(value: 0)

        init(seconds: Int) throws {
            let reply = try runProcess("/usr/bin/dbus-send", ["--session", "--print-reply", "--dest=org.freedesktop.DBus", "/org/freedesktop/DBus",
                                                              "org.freedesktop.DBus.GetConnectionUnixProcessID", "string:org.freedesktop.secrets"])
            let number = reply.stdout.split(whereSeparator: \.isWhitespace).last.flatMap { Int32($0) }
            pid = try #require(number, "no Secret Service pid in \(reply.stdout)")
            self.seconds = seconds
        }

        /// Stops the daemon the first time; later calls do nothing.
        func begin() {
            guard !started.exchange(true, ordering: .sequentiallyConsistent) else { return }
            kill(pid, SIGSTOP)
            let (pid, seconds, ended) = (pid, seconds, ended)
            Thread {
                sleep(UInt32(seconds))
                kill(pid, SIGCONT)
                ended.signal()
            }.start()
        }

        /// Waits for the stall to end (continuing the daemon), if it began.
        func finish() {
            if started.load(ordering: .sequentiallyConsistent) { ended.wait() }
            kill(pid, SIGCONT)
        }

        var didStall: Bool { started.load(ordering: .sequentiallyConsistent) }
    }

    /// libcurl, with the stall begun as the first token request leaves.
    struct StallingTransport: HTTPTransport {
        let stall: KeyringStall
        let curl = CurlTransport()
        func send(_ request: HTTPRequest) async throws -> HTTPResponse {
            if request.method == "POST" { stall.begin() }
            return try await curl.send(request)
        }
    }

    /// One call's end: the token and account it got, or its error.
    struct Outcome: Sendable {
        var user: Int
        var result: Result<(token: String, home: String?), TokenCacheError>
    }

    var options: PublicClientApplication.Options {
        var options = PublicClientApplication.Options()
        options.requestTimeout = Self.requestTimeout
        return options
    }

    /// Checks the outcomes: each call got its own account's refreshed token, one refresh per account.
    func check(_ outcomes: [Outcome]) async throws {
        #expect(outcomes.count == Self.users.count * Self.callsPerUser)
        for outcome in outcomes {
            let index = outcome.user
            switch outcome.result {
            case .success(let (token, home)):
                #expect(token.hasPrefix("at-issued-"))
                #expect(home == nil || home == Self.users[index].homeAccountID)
            case .failure(let error):
                Issue.record("call for \(Self.users[index].username) failed: \(error.code) \(error.message)")
            }
        }
        // The callers of one account share its one refresh: the others read it from the cache after the lock.
        for index in Self.users.indices {
            let tokens = Set(outcomes.filter { $0.user == index }.compactMap { try? $0.result.get().token })
            #expect(tokens.count == 1, "\(Self.users[index].username): \(tokens)")
        }
        let grants = try await idp.stats().grants
        #expect(grants.count == Self.users.count)
        #expect(grants.allSatisfy { $0.outcome == "ok" })
    }

    @Test("64 silent acquisitions in one app while the keyring stalls 5 s and one refresh lock is held elsewhere: every one gets its account's refreshed token")
    func silentAcquisitionsUnderStall() async throws {
        defer { try? store.removeAll() }
        let accounts = try await signInEveryone()
        let stall = try KeyringStall(seconds: 5)
        defer { stall.finish() }
        let locked = try holdRefreshLock(of: accounts[0])
        var options = options
        options.transport = StallingTransport(stall: stall)
        let app = PublicClientApplication(clientID: Fixtures.appOne, authority: idp.authority(), store: store, options: options)
        let outcomes = await withTaskGroup(of: Outcome.self) { group in
            for call in 0..<(Self.users.count * Self.callsPerUser) {
                let user = call % Self.users.count
                group.addTask {
                    do throws(TokenCacheError) {
                        let result = try await app.acquireTokenSilent(scopes: ["User.Read"], account: accounts[user])
                        return Outcome(user: user, result: .success((result.accessToken, result.account?.homeAccountID)))
                    } catch {
                        return Outcome(user: user, result: .failure(error))
                    }
                }
            }
            // The lock's owner lets go once every other account's callers are under way.
            group.addTask {
                try? await Task.sleep(for: .seconds(1))
                try? locked.release.fileHandleForWriting.write(contentsOf: Data("go\n".utf8))
                return Outcome(user: -1, result: .failure(.invalidArgument("marker", "not a call")))
            }
            return await group.reduce(into: [Outcome]()) { if $1.user >= 0 { $0.append($1) } }
        }
        locked.process.waitUntilExit()
        #expect(stall.didStall)
        try await check(outcomes)
    }

    @Test("The same 64 requests through the token agent's socket, from 64 client threads, while the keyring stalls 5 s and one refresh lock is held elsewhere")
    func agentRequestsUnderStall() async throws {
        defer { try? store.removeAll() }
        let accounts = try await signInEveryone()
        let stall = try KeyringStall(seconds: 5)
        defer { stall.finish() }
        let locked = try holdRefreshLock(of: accounts[0])
        var options = options
        options.transport = StallingTransport(stall: stall)
        var policy = AgentPolicy()
        policy.clients = [try ClientID(Fixtures.appOne)]
        policy.authorities = [idp.authority()]
        let directory = try TestEnvironment.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let server = try AgentServer(path: directory.appendingPathComponent("agent.sock").path,
                                     agent: TokenAgent(store: store, policy: policy, options: options))
        try server.start()
        defer { server.stop() }
        let client = AgentClient(path: server.path)
        let outcomes = try await withThrowingTaskGroup(of: Outcome.self) { group in
            for call in 0..<(Self.users.count * Self.callsPerUser) {
                let user = call % Self.users.count
                group.addTask {
                    try await offThePool {
                        do throws(TokenCacheError) {
                            let token = try client.token(clientID: try ClientID(Fixtures.appOne), scopes: ["User.Read"], account: Self.users[user].username)
                            return Outcome(user: user, result: .success((token.accessToken, nil)))
                        } catch {
                            return Outcome(user: user, result: .failure(error))
                        }
                    }
                }
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(1))
                try? locked.release.fileHandleForWriting.write(contentsOf: Data("go\n".utf8))
                return Outcome(user: -1, result: .failure(.invalidArgument("marker", "not a call")))
            }
            return try await group.reduce(into: [Outcome]()) { if $1.user >= 0 { $0.append($1) } }
        }
        locked.process.waitUntilExit()
        #expect(stall.didStall)
        try await check(outcomes)
    }
}
