import Foundation
import Testing
@testable import TokenCache
@testable import TokenCacheCore
import TokenCacheTestSupport
import TokenCacheTestIdentityProvider

/// An account is a home account ID at one cloud (#34 item 1): a response another host saves
/// claiming alice's `uid.utid` (not a secret) is another account. Alice signs in at the local
/// identity provider on 127.0.0.1; a second one bound on 127.0.0.2 plays the other host.
@Suite("account planted at another host (CLI)", .serialized, .harness)
struct CLIAccountCloudTests {
    let idp: FakeIdentityProvider
    let planter: FakeIdentityProvider
    let cli: CLI

    init() throws {
        idp = try FakeIdentityProvider()
        planter = try FakeIdentityProvider(host: "127.0.0.2")
        cli = try CLI(backend: "file")
    }

    /// Alice signed in with the device code flow at 127.0.0.1, then a response claiming her
    /// home account ID (another username and object ID) saved for 127.0.0.2.
    func signInAndPlant() async throws -> (list: [String: Any], token: String) {
        try await idp.actAsUser("none", family: [Fixtures.appOne: "1"])
        let login = try RunningProgram(TestEnvironment.binDirectory.appendingPathComponent("tokencache"),
                                       arguments: ["login", "--device-code", "--client", Fixtures.appOne, "--authority", idp.authority().url.absoluteString,
                                                   "--scopes", "User.Read", "--backend", cli.backend, "--group", cli.group],
                                       environment: cli.environment)
        defer { login.terminate() }
        // The user enters the code login shows, while it waits.
        try await idp.control(["approve_device": try await login.shown(#"enter the code (\w+)"#)])
        try #require(await login.exitStatus() == 0, "\(login.stderr)")
        let token = try cli.run(["token", "--client", Fixtures.appOne, "--scopes", "User.Read", "--account", Fixtures.alice.username])
        try #require(token.status == 0, "\(token.stderr)")
        let before = try #require(try account(at: "127.0.0.1"), "alice is listed")

        let impostor = Fixtures.User(uid: Fixtures.alice.uid, tenant: Fixtures.alice.tenant, username: Fixtures.alice.username,
                                     name: "Mallory Planted")
        var response = Fixtures.response(for: impostor, scope: "User.Read", tag: "planted")
        response["access_token"] = "at-planted"
        let saved = try cli.run(["save", "--client", Fixtures.appOne, "--authority", planter.authority().url.absoluteString,
                                 "--scopes", "User.Read"], input: Fixtures.json(response))
        #expect(saved.status == 0, "\(saved.stderr)")
        return (before, token.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// The `list --json` row of alice at a host.
    func account(at host: String) throws -> [String: Any]? {
        let list = try cli.run(["list", "--json"])
        let object = try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [String: Any]
        let accounts = object?["accounts"] as? [[String: Any]] ?? []
        return accounts.first { $0["home_account_id"] as? String == Fixtures.alice.homeAccountID && $0["environment"] as? String == host }
    }

    @Test("token --account without --authority is refused in every process (exit 64 naming both hosts), never the planted token; --authority picks each; list shows alice unchanged")
    func plantedAccountNeverServed() async throws {
        defer { cli.cleanUp() }
        let (before, aliceToken) = try await signInAndPlant()
        #expect(aliceToken.hasPrefix("at-issued-"), "\(aliceToken)")

        // 20 processes, 4 at a time: each reads the group afresh.
        let cli = cli
        let outputs = try await withThrowingTaskGroup(of: [ProcessOutput].self) { group in
            for _ in 0..<4 {
                group.addTask {
                    try await offThePool {
                        try (0..<5).map { _ in
                            try cli.run(["token", "--client", Fixtures.appOne, "--scopes", "User.Read", "--account", Fixtures.alice.username])
                        }
                    }
                }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
        #expect(outputs.count == 20)
        for output in outputs {
            #expect(output.status == 64 && output.stdout.isEmpty, "exit \(output.status): \(output.stdout) \(output.stderr)")
            #expect(output.stderr.contains("127.0.0.1") && output.stderr.contains("127.0.0.2") && output.stderr.contains("--authority"),
                    "\(output.stderr)")
            #expect(!output.stdout.contains("planted") && !output.stderr.contains("planted"))
        }
        // No --account either: the client's two accounts are one name at two clouds.
        let unnamed = try cli.run(["token", "--client", Fixtures.appOne, "--scopes", "User.Read"])
        #expect(unnamed.status == 64 && unnamed.stderr.contains("127.0.0.2"), "\(unnamed.stderr)")

        let own = try cli.run(["token", "--client", Fixtures.appOne, "--scopes", "User.Read", "--account", Fixtures.alice.username,
                               "--authority", idp.authority().url.absoluteString])
        #expect(own.status == 0 && own.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == aliceToken, "\(own.stderr)")
        let other = try cli.run(["token", "--client", Fixtures.appOne, "--scopes", "User.Read", "--account", Fixtures.alice.username,
                                 "--authority", planter.authority().url.absoluteString])
        #expect(other.status == 0 && other.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "at-planted", "\(other.stderr)")

        let after = try #require(try account(at: "127.0.0.1"))
        #expect(NSDictionary(dictionary: after).isEqual(NSDictionary(dictionary: before)), "alice's row changed: \(before) -> \(after)")
        #expect(try account(at: "127.0.0.2")?["name"] as? String == "Mallory Planted", "the planted account is listed apart")
    }

    @Test("logout and remove refuse to pick one of alice's clouds (exit 64 naming the hosts); with --authority they touch only that one")
    func removeAndLogoutPickACloud() async throws {
        defer { cli.cleanUp() }
        let (before, aliceToken) = try await signInAndPlant()
        let logout = try cli.run(["logout", "--client", Fixtures.appOne, "--account", Fixtures.alice.username])
        #expect(logout.status == 64 && logout.stderr.contains("127.0.0.1") && logout.stderr.contains("127.0.0.2"), "\(logout.stderr)")
        let remove = try cli.run(["remove", "--account", Fixtures.alice.username, "--yes"])
        #expect(remove.status == 64 && remove.stderr.contains("127.0.0.2") && remove.stderr.contains("--authority"), "\(remove.stderr)")
        #expect(try account(at: "127.0.0.2") != nil, "nothing was removed")

        let removed = try cli.run(["remove", "--account", Fixtures.alice.username, "--authority", planter.authority().url.absoluteString, "--yes"])
        #expect(removed.status == 0, "\(removed.stderr)")
        #expect(try account(at: "127.0.0.2") == nil)
        let after = try #require(try account(at: "127.0.0.1"))
        #expect(NSDictionary(dictionary: after).isEqual(NSDictionary(dictionary: before)), "alice's row changed: \(before) -> \(after)")
        let token = try cli.run(["token", "--client", Fixtures.appOne, "--scopes", "User.Read", "--account", Fixtures.alice.username])
        #expect(token.status == 0 && token.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == aliceToken, "\(token.stderr)")
    }
}
