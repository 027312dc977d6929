import Foundation
import Testing
import TokenCacheTestSupport
@testable import TokenCacheCore

/// `tokencache migrate --to sandbox`, run inside the test Flatpak: a one-time move into the
/// app's portal-keyed file keyring from the host's Secret Service (the app talks to
/// org.freedesktop.secrets, as `--talk-name=org.freedesktop.secrets` allows) or from the
/// encrypted file, as `oo7::migrate` does, but verified by reading back before the source loses
/// anything.
extension PortalKeyringTests {
    /// The CLI outside the sandbox, on the host's Secret Service, this test's group.
    func hostKeyring(_ arguments: [String], input: Data? = nil, backend: [String] = ["--backend", "secret-service"]) throws -> ProcessOutput {
        var environment = ProcessInfo.processInfo.environment
        for name in ["TOKENCACHE_BACKEND", "TOKENCACHE_GROUP", "TOKENCACHE_COLLECTION"] { environment[name] = nil }
        return try runProcess(TestEnvironment.binDirectory.appendingPathComponent("tokencache").path,
                              arguments + backend + ["--group", group], input: input, environment: environment)
    }

    @Test("migrate --from secret-service --to sandbox moves the host keyring's group into the app's keyring")
    func migrateFromHostKeyring() async throws {
        defer {
            cleanUp()
            _ = try? hostKeyring(["remove", "--all", "--yes"])
        }
        try await offThePool {
            let response = Fixtures.response(for: Fixtures.alice, scope: "User.Read", foci: "1", tag: "host")
            let saved = try hostKeyring(["save", "--client", Fixtures.appOne, "--authority", Fixtures.authority().url.absoluteString,
                                         "--scopes", "User.Read"], input: Fixtures.json(response))
            #expect(saved.status == 0, "\(saved.stderr)")
            let secrets = ["org.freedesktop.secrets"]
            let migrated = try tokencache(["migrate", "--from", "secret-service", "--to", "sandbox"], backend: nil, talk: secrets)
            #expect(migrated.status == 0 && migrated.stdout.contains("Moved") && migrated.stdout.contains("default.keyring"),
                    "\(migrated.stdout)\(migrated.stderr)")
            #expect(!(migrated.stdout + migrated.stderr).contains(response["refresh_token"] as! String))
            // In the sandbox, auto (the portal-keyed keyring) has it, with its token; the host keyring no longer.
            let token = try tokencache(["token", "--client", Fixtures.appOne, "--scopes", "User.Read",
                                        "--authority", Fixtures.authority().url.absoluteString])
            #expect(token.status == 0 && token.stdout.contains(response["access_token"] as! String), "\(token.stderr)")
            let host = try hostKeyring(["list"])
            #expect(host.status != 0 && host.stderr.contains("No group \(group) on Secret Service"), "\(host.stdout)\(host.stderr)")
        }
    }

    @Test("migrate --from file --to sandbox moves the encrypted file's group; a refused portal secret removes nothing")
    func migrateFromEncryptedFile() async throws {
        defer { cleanUp() }
        try await offThePool {
            _ = try save(Fixtures.alice, backend: "file")
            // The destination cannot be opened (the user dismissed the portal's request): the source keeps everything.
            let cancelled = try tokencache(["migrate", "--from", "file", "--to", "sandbox"], backend: nil, portal: "cancel")
            #expect(cancelled.status == 1 && cancelled.stderr.contains("was cancelled"), "\(cancelled.stdout)\(cancelled.stderr)")
            #expect(try tokencache(["list"], backend: "file").stdout.contains(Fixtures.alice.username))
            #expect(!FileManager.default.fileExists(atPath: keyringPath))

            let migrated = try tokencache(["migrate", "--from", "file", "--to", "sandbox"], backend: nil)
            #expect(migrated.status == 0 && migrated.stdout.contains("Moved"), "\(migrated.stdout)\(migrated.stderr)")
            #expect(try tokencache(["list"]).stdout.contains(Fixtures.alice.username))
            let file = try tokencache(["list"], backend: "file")
            #expect(file.status != 0 && file.stderr.contains("No group \(group) on encrypted files"), "\(file.stdout)\(file.stderr)")
            // Running it again finds nothing left to move.
            let again = try tokencache(["migrate", "--from", "file", "--to", "sandbox"], backend: nil)
            #expect(again.status == 0 && again.stdout.contains("Moved 0 entries"), "\(again.stdout)\(again.stderr)")
        }
    }

    @Test("migrate --to sandbox outside a sandbox is refused before anything is read or written")
    func migrateToSandboxOutsideSandbox() async throws {
        try await offThePool {
            let outside = try hostKeyring(["migrate", "--from", "secret-service", "--to", "sandbox"], backend: [])
            #expect(outside.status != 0 && outside.stderr.contains("only inside a Flatpak or Snap sandbox"), "\(outside.stdout)\(outside.stderr)")
        }
    }
}
