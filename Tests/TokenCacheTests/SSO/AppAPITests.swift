import Foundation
import Testing
@testable import EncryptedFileStore
@testable import SecretServiceStore
@testable import TokenCache
@testable import TokenCacheCore
@testable import TokenCachePlatform
import TokenCacheTestSupport
import TokenCacheTestIdentityProvider

/// The MSAL-shaped app API: one object from one configuration, silent parameters, results that
/// say where they came from, account management, and the stream of account changes.
@Suite("MSAL-shaped app API", .harness)
struct AppAPITests {
    let idp: FakeIdentityProvider
    let directory: URL
    let group = "org.swift-tokencache.app-api"

    init() throws {
        idp = try FakeIdentityProvider()
        directory = try TestEnvironment.temporaryDirectory().appendingPathComponent("cache")
    }

    /// An app that opens its own store (the encrypted file in this test's directory), as an app
    /// built from a tokencache.json does.
    func app(_ clientID: String, group: String? = nil, backend: BackendPolicy = .file,
             clock: any Clock<Duration> = ContinuousClock()) throws -> PublicClientApplication {
        let configuration = AppConfiguration(clientID: clientID, authority: idp.authority().url.absoluteString,
                                             scopes: ["User.Read"], group: group ?? self.group, backend: backend)
        var options = PublicClientApplication.Options()
        options.fileDirectory = directory
        options.requestTimeout = 60
        options.clock = clock
        return try PublicClientApplication(configuration: configuration, options: options)
    }

    /// Alice signed in to `clientID` through `app`; the provider knows her refresh token.
    @discardableResult
    func signIn(_ app: PublicClientApplication, foci: String? = "1", expiresIn: Int = 3600) async throws -> CachedAccount {
        var response = Fixtures.response(for: Fixtures.alice, scope: "User.Read", foci: foci, tag: app.clientID, expiresIn: expiresIn)
        response["refresh_token"] = "rt-initial-\(app.clientID)"
        try app.store.save(Fixtures.tokenResponse(response), clientID: app.clientID, authority: idp.authority(), scopes: [])
        try await idp.seed(refreshToken: "rt-initial-\(app.clientID)", user: Fixtures.alice, clientID: app.clientID, family: foci)
        return try #require(try await app.account(forUsername: Fixtures.alice.username.uppercased()))
    }

    @Test("An app made from its configuration opens the configured group: apps of one group share accounts, another group's do not")
    func configurationOpensGroup() async throws {
        let first = try app(Fixtures.appOne)
        try await signIn(first)
        let second = try app(Fixtures.appTwo)
        #expect(second.store.group.name == group)
        #expect(try await second.accounts().map(\.username) == [Fixtures.alice.username])
        let elsewhere = try app(Fixtures.appTwo, group: "org.swift-tokencache.app-api-other")
        #expect(try await elsewhere.accounts().isEmpty)
        let opened = try await PublicClientApplication.open(configuration: AppConfiguration(
            clientID: Fixtures.appThree, authority: idp.authority().url.absoluteString, group: group, backend: .file),
            options: { var options = PublicClientApplication.Options(); options.fileDirectory = directory; return options }())
        #expect(try await opened.accounts().map(\.username) == [Fixtures.alice.username])
    }

    @Test("A response another host saved for alice's uid.utid is another account: the app's lookup and acquireTokenSilent use its authority's cloud; an app at a third cloud gets ambiguousAccount")
    func plantedAccountAtAnotherCloud() async throws {
        let first = try app(Fixtures.appOne)
        let alice = try await signIn(first)
        var response = Fixtures.response(for: Fixtures.alice, scope: "User.Read", foci: "1", tag: "planted")
        response["refresh_token"] = "rt-planted"
        try first.store.save(Fixtures.tokenResponse(response), clientID: Fixtures.appOne,
                             authority: try Authority("http://127.0.0.2:8400/\(Fixtures.tenantA)"), scopes: [])
        #expect(try await first.accounts().count == 2)
        for _ in 0..<5 {
            #expect(try await first.account(forUsername: Fixtures.alice.username) == alice)
            let token = try await first.acquireTokenSilent(scopes: ["User.Read"], account: alice)
            #expect(token.accessToken == "at-\(Fixtures.alice.uid)-\(Fixtures.tenantA)-\(Fixtures.appOne)")
        }
        let configuration = AppConfiguration(clientID: Fixtures.appOne, authority: "https://login.microsoftonline.com/\(Fixtures.tenantA)",
                                             scopes: ["User.Read"], group: group, backend: .file)
        var options = PublicClientApplication.Options()
        options.fileDirectory = directory
        let elsewhere = try PublicClientApplication(configuration: configuration, options: options)
        let error = await #expect(throws: TokenCacheError.self) { try await elsewhere.account(forUsername: Fixtures.alice.username) }
        #expect(error?.code == .ambiguousAccount && error?.message.contains("127.0.0.2") == true, "\(String(describing: error))")
    }

    @Test("A configuration with an invalid field is refused with the field named")
    func invalidConfiguration() throws {
        let configuration = AppConfiguration(clientID: "not a client id", authority: idp.authority().url.absoluteString)
        let error = #expect(throws: TokenCacheError.self) { try PublicClientApplication(configuration: configuration) }
        #expect(error?.code == .invalidArgument)
        #expect(error?.field == "clientId")
    }

    @Test("A result says whether it came from the cache and carries the ID token and its claims")
    func resultOriginAndIDToken() async throws {
        let app = try app(Fixtures.appOne)
        let account = try await signIn(app, expiresIn: 60)  // inside the expiry margin: refreshed
        let refreshed = try await app.acquireTokenSilent(scopes: ["User.Read"], account: account)
        #expect(!refreshed.isFromCache)
        #expect(refreshed.idTokenClaims?.objectID == Fixtures.alice.uid)
        #expect(refreshed.tenantID == Fixtures.tenantA)
        #expect(refreshed.scopes.map { $0.lowercased() } == ["user.read"])
        #expect(refreshed.expiresOn > Date().addingTimeInterval(3000))
        let cached = try await app.acquireTokenSilent(scopes: ["User.Read"], account: account)
        #expect(cached.isFromCache)
        #expect(cached.accessToken == refreshed.accessToken)
        #expect(cached.idToken == refreshed.idToken)
        #expect(cached.idTokenClaims?.username == Fixtures.alice.username)
        #expect(try await idp.stats().token_requests == 1)
    }

    @Test("A claims challenge skips the cached token and is sent with the refresh")
    func claimsChallenge() async throws {
        let app = try app(Fixtures.appOne)
        let account = try await signIn(app)
        var parameters = SilentTokenParameters(scopes: ["User.Read"], account: account)
        parameters.claims = #"{"access_token":{"nbf":{"essential":true,"value":"1700000000"}}}"#
        let result = try await app.acquireTokenSilent(parameters)
        #expect(!result.isFromCache)
        let grants = try await idp.stats().grants
        #expect(grants.map(\.claims) == [parameters.claims])
    }

    @Test("A per-request tenant gets the guest tenant's token; the home tenant's stays cached")
    func perRequestTenant() async throws {
        let app = try app(Fixtures.appOne)
        let account = try await signIn(app)
        var parameters = SilentTokenParameters(scopes: ["User.Read"], account: account)
        parameters.tenantID = Fixtures.tenantB
        let guest = try await app.acquireTokenSilent(parameters)
        #expect(guest.tenantID == Fixtures.tenantB)
        #expect(!guest.isFromCache)
        let home = try await app.acquireTokenSilent(scopes: ["User.Read"], account: account)
        #expect(home.tenantID == Fixtures.tenantA)
        #expect(home.isFromCache)
        parameters.tenantID = "not/a tenant"
        await #expect(throws: TokenCacheError.self) { try await app.acquireTokenSilent(parameters) }
    }

    @Test("remove(account) signs only this app out; removeFromEveryApp signs out every app")
    func removeThisAppOrEvery() async throws {
        let first = try app(Fixtures.appOne), second = try app(Fixtures.appTwo)
        let account = try await signIn(first, foci: nil)
        try await signIn(second, foci: nil)
        try await first.remove(account)
        #expect(try await first.accounts().isEmpty)
        #expect(try await first.account(forUsername: Fixtures.alice.username) == nil)
        #expect(try await second.accounts().map(\.username) == [Fixtures.alice.username])
        #expect(try await second.removeFromEveryApp(account) > 0)
        #expect(try await second.accounts().isEmpty)
        #expect(try second.store.allAccounts().isEmpty)
    }

    @Test("accountChanges yields the accounts now, then when another process signs in and out",
          arguments: [BackendPolicy.file, .secretService])
    func accountChangesStream(backend: BackendPolicy) async throws {
        // A group of its own: the Secret Service is shared by every test of the run.
        let group = "org.swift-tokencache.app-api-\(UInt32.random(in: 0...UInt32.max))"
        let watcher = try app(Fixtures.appTwo, group: group, backend: backend)
        let changes = watcher.accountChanges(checkingEvery: .milliseconds(50))
        var iterator = changes.makeAsyncIterator()
        #expect(try await iterator.next() == [])
        // Another process: its own backend instance on the same file.
        let other = try app(Fixtures.appOne, group: group, backend: backend)
        let account = try await signIn(other, foci: "1")
        #expect(try await iterator.next()?.map(\.username) == [Fixtures.alice.username])
        try await other.removeFromEveryApp(account)
        #expect(try await iterator.next() == [])
    }

    @Test("accountChanges ends when the iterating task is cancelled")
    func accountChangesCancellation() async throws {
        let clock = ManualClock()
        let watcher = try app(Fixtures.appTwo, clock: clock)
        let task = Task {
            var count = 0
            for try await _ in watcher.accountChanges(checkingEvery: .milliseconds(20)) { count += 1 }
            return count
        }
        // Ten checks with nothing changed, then the cancellation during the next wait.
        for _ in 0..<10 {
            await clock.sleeping()
            clock.advance(by: .milliseconds(20))
        }
        await clock.sleeping()
        task.cancel()
        #expect(try await task.value == 1)
        #expect(clock.sleeps == Array(repeating: .milliseconds(20), count: 11))
    }
}
