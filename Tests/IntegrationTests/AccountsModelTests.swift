import Foundation
import Observation
import Testing
@testable import TokenCache
@testable import TokenCacheCore
import TokenCacheModel
import TokenCacheTestSupport
import TokenCacheTestIdentityProvider

/// `AccountsModel` as a UI observes it (`withObservationTracking`): its own sign-in and sign-out,
/// and sign-ins and sign-outs another process (the CLI) makes in the same encrypted file.
@Suite("AccountsModel, observed", .harness)
@MainActor
struct AccountsModelTests {
    let idp: FakeIdentityProvider
    let cli: CLI
    let model: AccountsModel
    let image = Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + Array(repeating: 9, count: 64))

    init() throws {
        idp = try FakeIdentityProvider()
        cli = try CLI(backend: "file")
        // The file the CLI uses ($XDG_DATA_HOME/tokencache, default group and key file).
        let store = AccountStore(backend: EncryptedFileBackend(directory: cli.dataHome.appendingPathComponent("tokencache")), group: .universalStorage)
        var options = PublicClientApplication.Options()
        options.graphEndpoint = idp.graphEndpoint
        let app = PublicClientApplication(clientID: Fixtures.appOne, authority: idp.authority(), store: store, options: options)
        model = AccountsModel(application: app, scopes: ["User.Read"], checkingEvery: .milliseconds(50))
    }

    struct NoChange: Error, CustomStringConvertible {
        var description: String
    }

    /// What `read` gives once `done` holds, waiting for the model's observation callbacks (never
    /// polling): within a generous deadline, which only a broken model reaches.
    func observed<T: Sendable>(_ what: String, _ read: @escaping @MainActor () -> T, until done: (T) -> Bool) async throws -> T {
        let deadline = ContinuousClock.now + .seconds(30)
        while true {
            let (stream, continuation) = AsyncStream<Void>.makeStream()
            let value = withObservationTracking { read() } onChange: { continuation.yield(); continuation.finish() }
            if done(value) { return value }
            let changed = await withTaskGroup(of: Bool.self) { group in
                group.addTask { for await _ in stream { return true }; return false }
                group.addTask { try? await Task.sleep(until: deadline); return false }
                let first = await group.next() ?? false
                group.cancelAll()
                continuation.finish()
                return first
            }
            if !changed { throw NoChange(description: "\(what): no observed change within 30 s (last: \(value))") }
        }
    }

    /// Alice signed in by another process: `tokencache save` of a sign-in's response.
    func cliSignsIn() async throws {
        var response = Fixtures.response(for: Fixtures.alice, scope: "Files.Read", foci: nil, tag: "cli")
        response["refresh_token"] = "rt-cli"
        try await idp.seed(refreshToken: "rt-cli", user: Fixtures.alice, clientID: Fixtures.appOne, family: nil)
        let output = try cli.run(["save", "--backend", "file", "--client", Fixtures.appOne, "--authority", idp.authority().url.absoluteString,
                                  "--scopes", "Files.Read"], input: Fixtures.json(response), withGroup: false)
        try #require(output.status == 0, "\(output.stderr)")
    }

    @Test("Another process signing in and out: the accounts, the current account, its photo and the state follow, each observed")
    func anotherProcess() async throws {
        defer { cli.cleanUp(); model.stop() }
        try await idp.setPhoto(of: Fixtures.alice, data: image)
        model.start()
        #expect(model.signInState == .signedOut && model.accounts.isEmpty)
        try await cliSignsIn()
        let current = try await observed("sign-in", { self.model.currentAccount?.username }) { $0 != nil }
        #expect(current == Fixtures.alice.username)
        #expect(model.signInState == .signedIn && model.accounts.map(\.username) == [Fixtures.alice.username])
        let photo = try await observed("photo", { self.model.photo }) { $0 != nil }
        #expect(photo == AccountPhoto(data: image, contentType: "image/png"))

        let logout = try cli.run(["logout", "--backend", "file", "--client", Fixtures.appOne, "--account", Fixtures.alice.username], withGroup: false)
        try #require(logout.status == 0, "\(logout.stderr)")
        #expect(try await observed("sign-out", { self.model.signInState }) { $0 == .signedOut } == .signedOut)
        #expect(model.currentAccount == nil && model.accounts.isEmpty && model.photo == nil)
    }

    @Test("The model's own device code sign-in (signingIn, then signedIn with the account current), token(scopes:), and signOut")
    func ownSignInAndOut() async throws {
        defer { cli.cleanUp(); model.stop() }
        try await idp.actAsUser("none")
        model.start()
        let model = self.model
        let signIn = Task { try await model.signIn(method: .deviceCode) }
        let message = try await observed("device code", { self.model.deviceCodeMessage }) { $0 != nil }
        #expect(model.signInState == .signingIn)
        try await idp.control(["approve_device": try #require(message).userCode])
        let result = try await signIn.value
        #expect(model.signInState == .signedIn && model.currentAccount?.username == Fixtures.alice.username)
        #expect(result.account?.homeAccountID == model.currentAccount?.homeAccountID && model.deviceCodeMessage == nil)
        #expect(try await model.token().accessToken == result.accessToken)

        try await model.signOut()
        #expect(model.signInState == .signedOut && model.currentAccount == nil && model.accounts.isEmpty)
        let error = await #expect(throws: TokenCacheError.self) { try await model.token() }
        #expect(error?.reason == .noAccount)
        // The group keeps the account for other apps: only this app signed out.
        #expect(try cli.run(["list", "--backend", "file", "--json"], withGroup: false).stdout.contains(Fixtures.alice.username))
    }
}
