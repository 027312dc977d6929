import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import TokenCache
@testable import TokenCacheCore
import TokenCacheTestSupport
import TokenCacheTestIdentityProvider

/// The native-auth API of Fixtures/fake_idp.py (native_auth.py) for one test: users, the
/// mailbox the codes are "mailed" to, and the app on it.
final class NativeAuthStandIn: @unchecked Sendable {
    // @unchecked: every property is set once in init.
    let idp: FakeIdentityProvider
    let mailbox: URL
    /// For the tests' password files; removed with the mailbox.
    let scratch: URL
    let store: AccountStore

    init(https: Bool = false, store: AccountStore = AccountStore(backend: InMemoryBackend())) async throws {
        idp = try FakeIdentityProvider(https: https)
        mailbox = try TestEnvironment.temporaryDirectory()
        scratch = try TestEnvironment.temporaryDirectory()
        self.store = store
        // As Entra does, the tenant's domain resolves to its ID (Fixtures.tenantA).
        try await idp.control(["native_mailbox": mailbox.path, "tenant_domains": [Self.domain: Fixtures.tenantA]])
    }

    deinit {
        try? FileManager.default.removeItem(at: mailbox)
        try? FileManager.default.removeItem(at: scratch)
    }

    static let otpUser = "olivia@contoso.com"
    static let passwordUser = "paul@contoso.com"
    static let password = "Correct-horse-42"
    /// The tenant's domain, which an authority may name instead of its ID.
    static let domain = "contoso.onmicrosoft.com"
    /// The password user as the fixtures' responses describe users.
    static let paul = Fixtures.User(uid: "9a55a000-0000-0000-0000-000000000002", tenant: Fixtures.tenantA,
                                    username: passwordUser, name: "Paul")

    /// An email-code user and a password user.
    func addUsers() async throws {
        try await idp.control(["native_users": [Self.otpUser: ["uid": "0714a000-0000-0000-0000-000000000001"],
                                                Self.passwordUser: ["uid": Self.paul.uid, "password": Self.password]]])
    }

    /// The app on the stand-in (loopback http, as tests only may use), at the tenant's ID or
    /// its ``domain``.
    func app(_ types: Set<NativeAuthPublicClientApplication.ChallengeType> = [.oob, .password],
             clientID: String = Fixtures.appOne, tenant: String = Fixtures.tenantA,
             clock: any Clock<Duration> = ContinuousClock(), capabilities: [String] = []) throws -> NativeAuthPublicClientApplication {
        var options = PublicClientApplication.Options()
        options.clock = clock
        options.clientCapabilities = capabilities
        return try NativeAuthPublicClientApplication(clientID: clientID, authority: idp.authority(tenant).description, challengeTypes: types,
                                                     store: store, options: options)
    }

    /// Saves the password user's tokens for the scope as versions before the fix did after a
    /// native sign-in at the ``domain``: realm `contoso.onmicrosoft.com`, not the tenant ID.
    func saveTheOldWay(scope: String, tag: String, cachedAt: Date) throws {
        try store.save(Fixtures.tokenResponse(Fixtures.response(for: Self.paul, scope: scope, foci: nil, tag: tag)),
                       clientID: Fixtures.appOne, authority: idp.authority(Self.domain), scopes: [scope], now: cachedAt)
    }

    /// The last code mailed to the user.
    func latestCode(for email: String) throws -> String {
        let text = try String(contentsOf: mailbox.appendingPathComponent(email.lowercased()), encoding: .utf8)
        return text.split(separator: "\n").last.map(String.init) ?? ""
    }

    /// How many codes the user was mailed.
    func codeCount(for email: String) -> Int {
        ((try? String(contentsOf: mailbox.appendingPathComponent(email.lowercased()), encoding: .utf8)) ?? "").split(separator: "\n").count
    }

    struct Stats: Decodable {
        struct Request: Decodable {
            var path: String
            var challenge_type: String?
            var grant_type: String?
            /// The `claims` parameter (client capabilities merged in).
            var claims: String?
        }
        var requests: [Request]
        var users: [String]
    }

    func stats() async throws -> Stats {
        let (data, _) = try await URLSession.shared.data(from: URL(string: "http://\(idp.host):\(idp.port)/native/stats")!)
        return try JSONDecoder().decode(Stats.self, from: data)
    }
}

extension NativeAuthError.Reason {
    /// The reason's case, without associated values, for comparisons in tests.
    var name: String { String(describing: self).split(separator: "(").first.map(String.init) ?? "" }
}
