import Foundation
import Testing
@testable import TokenCacheCore
import TokenCacheTestSupport

/// Accounts must not seem to vanish when the backend changes (#46 item 3): `list` and `token`
/// say when the other backend holds the group, and `migrate` warns when the commands will not
/// read where it moved the group.
@Suite("The other backend is named", .harness, .enabled(if: TestEnvironment.runsSecretServiceTests))
struct CLIOtherBackendTests {
    @Test("In a keyring session, with the group only in the encrypted file: list says 'No accounts.' and names the file's entries and the migrate command; token exits 2 saying the same")
    func fileHoldsTheGroup() throws {
        let file = try CLI(backend: "file")
        let keyring = CLI(file, backend: "secret-service")
        defer { keyring.cleanUp(); file.cleanUp() }
        _ = try file.save(Fixtures.alice, client: Fixtures.appOne)
        // No --backend: automatic, which reads the keyring here.
        let list = try file.run(["list", "--group", file.group], withGroup: false)
        #expect(list.status == 0 && list.stdout.contains("No accounts."), "\(list.stdout) \(list.stderr)")
        #expect(list.stderr.contains("The encrypted file also holds") && list.stderr.contains("tokencache migrate --from file --to secret-service --group \(file.group)"),
                "\(list.stderr)")
        let token = try file.run(["token", "--group", file.group, "--client", Fixtures.appOne, "--scopes", "User.Read"], withGroup: false)
        #expect(token.status == 2 && token.stderr.contains("The encrypted file also holds"), "\(token.stderr)")
        // Naming the account (read from the keyring scoped to it) says the same, as list does (#59 item 5).
        let named = try file.run(["token", "--group", file.group, "--client", Fixtures.appOne, "--scopes", "User.Read",
                                  "--account", Fixtures.alice.username], withGroup: false)
        #expect(named.status == 2 && named.stderr.contains("The encrypted file also holds"), "\(named.stderr)")
        // With --json, said inside the one error line (#59 item 2).
        for arguments in [["list", "--account", "nobody@example.com"], ["token", "--client", Fixtures.appOne, "--scopes", "User.Read"]] {
            let json = try file.run(arguments + ["--group", file.group, "--json"], withGroup: false)
            #expect(json.status == 2 && json.stderr.split(separator: "\n").count == 1, "\(arguments[0]): \(json.stderr)")
            let error = (try JSONSerialization.jsonObject(with: Data(json.stderr.utf8)) as? [String: Any])?["error"] as? [String: Any]
            #expect((error?["hint"] as? String)?.contains("The encrypted file also holds") == true, "\(arguments[0]): \(json.stderr)")
        }
        // Where the group is, nothing is said.
        let there = try file.run(["list"])
        #expect(there.status == 0 && !there.stderr.contains("also holds"), "\(there.stderr)")
    }

    @Test("migrate --from secret-service --to file warns that the automatic backend still reads the keyring, and says how to switch; with TOKENCACHE_BACKEND=file it does not")
    func migrateWarns() throws {
        let keyring = try CLI(backend: "secret-service")
        let file = CLI(keyring, backend: "file")
        defer { keyring.cleanUp(); file.cleanUp() }
        _ = try keyring.save(Fixtures.alice, client: Fixtures.appOne)
        let moved = try keyring.run(["migrate", "--from", "secret-service", "--to", "file", "--group", keyring.group], withGroup: false)
        #expect(moved.status == 0, "\(moved.stderr)")
        #expect(moved.stderr.contains("does not read the encrypted file") && moved.stderr.contains("TOKENCACHE_BACKEND=file"), "\(moved.stderr)")
        var configured = file
        configured.environmentOverrides["TOKENCACHE_BACKEND"] = "file"
        let back = try configured.run(["migrate", "--from", "file", "--to", "secret-service", "--group", keyring.group], withGroup: false)
        #expect(back.status == 0 && back.stderr.contains("TOKENCACHE_BACKEND") && back.stderr.contains("is file, not secret-service"), "\(back.stderr)")
        let again = try configured.run(["migrate", "--from", "secret-service", "--to", "file", "--group", keyring.group], withGroup: false)
        #expect(again.status == 0 && !again.stderr.contains("will not see"), "\(again.stderr)")
    }
}
