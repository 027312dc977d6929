import Foundation
import Testing
@testable import SecretServiceStore
@testable import TokenCache
@testable import TokenCacheCore
@testable import TokenCachePlatform
import TokenCacheTestSupport
import TokenCacheTestIdentityProvider

extension OtherToolsStores {
    /// The real Azure CLI 2.91 (PyPI, .venv-azure-cli) reads what this project left in its cache:
    /// `az account get-access-token`, offline, against the loopback provider as a custom cloud
    /// (Fixtures/azure_cli_setup.py). AZURE_CONFIG_DIR points both tools at a folder other than
    /// ~/.azure, as users do. In CI these fail, never skip, when Azure CLI is missing.
    @Suite("Azure CLI reads what tokencache changed", .harness, .serialized, .enabled(if: TestEnvironment.runsInteropTests))
    struct AzureCLITests {
        static let armScopes = ["https://management.core.windows.net//user_impersonation", "https://management.core.windows.net//.default"]

        struct AzureCLI {
            let machine: ExternalStoreTests.Machine
            let idp: FakeIdentityProvider
            let az: String
            var configDirectory: String { machine.home.path + "/azure-config" }
            var cacheFile: String { configDirectory + "/msal_token_cache.json" }

            init() async throws {
                az = try #require(TestEnvironment.azureCLI, "Azure CLI missing: run scripts/install-deps.sh")
                idp = try FakeIdentityProvider(https: true)
                let plain = try ExternalStoreTests.Machine()
                var cli = plain.cli
                cli.environmentOverrides["AZURE_CONFIG_DIR"] = plain.home.path + "/azure-config"
                let machine = ExternalStoreTests.Machine(cli: cli)
                self.machine = machine
                let python = URL(fileURLWithPath: az).deletingLastPathComponent().appendingPathComponent("python").path
                let setup = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
                    .appendingPathComponent("Fixtures/azure_cli_setup.py").standardizedFileURL.path
                let done = try runProcess(python, [setup, machine.home.path + "/azure-config", "--authority-host", authorityHost,
                                                   "--tenant", Fixtures.alice.tenant, "--username", Fixtures.alice.username])
                try #require(done.status == 0, "azure_cli_setup.py: \(done.stderr)")
            }

            var authorityHost: String { String(idp.httpsAuthority().dropLast(Fixtures.alice.tenant.count + 1)) }

            /// Azure CLI signed `user` in (through msal-extensions, as Azure CLI writes its cache).
            func signedIn(_ user: Fixtures.User, accessToken: String, refreshToken: String, expiresIn: Int = 3600) async throws {
                var response = Fixtures.response(for: user, scope: AzureCLITests.armScopes.joined(separator: " "), foci: "1",
                                                 tag: "az", expiresIn: expiresIn)
                response["access_token"] = accessToken
                response["refresh_token"] = refreshToken
                let seed = machine.home.appendingPathComponent("seed-\(user.uid).json")
                try JSONSerialization.data(withJSONObject: [
                    "client_id": ExternalStoreSSOTests.azureCLIClient, "authority": idp.httpsAuthority(user.tenant),
                    "scope": AzureCLITests.armScopes, "response": response]).write(to: seed)
                _ = try machine.peer(["--file", cacheFile], ["write", seed.path])
                try await idp.seed(refreshToken: refreshToken, user: user, clientID: ExternalStoreSSOTests.azureCLIClient, family: "1")
            }

            /// `az account get-access-token`: the token, or nil and what Azure CLI said.
            func accessToken() throws -> (token: String?, stderr: String) {
                var environment = machine.environment
                environment["AZURE_CONFIG_DIR"] = configDirectory
                environment["REQUESTS_CA_BUNDLE"] = try #require(idp.certificate).path
                // Anything but loopback goes to a closed port: an attempt to reach the internet fails at once.
                for name in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] { environment[name] = "http://127.0.0.1:9" }
                environment["NO_PROXY"] = "127.0.0.1,localhost"
                environment["no_proxy"] = "127.0.0.1,localhost"
                let done = try runProcess(az, ["account", "get-access-token", "-o", "json"], environment: environment)
                guard done.status == 0 else { return (nil, done.stderr) }
                let object = try #require(try JSONSerialization.jsonObject(with: Data(done.stdout.utf8)) as? [String: Any])
                return (object["accessToken"] as? String, done.stderr)
            }

            func cleanUp() { machine.cleanUp() }
        }

        @Test("After tokencache removed another account from Azure CLI's cache, az finds its user's token there; after --all-stores removed that user too, az asks for a login")
        func removalsSeenByAzureCLI() async throws {
            let azure = try await AzureCLI()
            defer { azure.cleanUp() }
            try await azure.signedIn(Fixtures.alice, accessToken: "az-alice-at", refreshToken: "az-alice-rt")
            try await azure.signedIn(Fixtures.bob, accessToken: "az-bob-at", refreshToken: "az-bob-rt")
            let machine = azure.machine
            #expect(Set(try ExternalStoreTests.usernames("azure-cli", in: machine)) == [Fixtures.alice.username, Fixtures.bob.username])

            let removed = try machine.tokencache(["remove", "--account", Fixtures.bob.username, "--store", "azure-cli", "--yes"])
            #expect(removed.status == 0, "\(removed.stderr)")
            let seen = try azure.accessToken()
            #expect(seen.token == "az-alice-at", "az: \(seen.stderr)")
            #expect(try await azure.idp.stats().token_requests == 0, "the token did not come from the cache")

            let everywhere = try machine.tokencache(["remove", "--account", Fixtures.alice.username, "--all-stores", "--yes"])
            #expect(everywhere.status == 0, "\(everywhere.stderr)")
            #expect(everywhere.stdout.contains("azure-cli"))
            let gone = try azure.accessToken()
            #expect(gone.token == nil)
            #expect(gone.stderr.contains("az login"), "az: \(gone.stderr)")
        }

        @Test("After migrate --to-store azure-cli-encrypted-2.91 --configure-azure-cli --remove-source, az 2.91 reads its token from the keyring item; the plaintext file is gone",
              .enabled(if: TestEnvironment.runsSecretServiceTests))
        func migratedToKeyring() async throws {
            let azure = try await AzureCLI()
            let backend = try SecretServiceBackend()
            func deleteItems() {
                while let found = try? backend.findExternalItem(attributeSets: [["my_attr1": "foo", "my_attr2": "bar"]], schema: "my_schema_name") {
                    _ = try? backend.client.delete(found.path)
                }
            }
            deleteItems()
            defer { deleteItems(); azure.cleanUp() }
            try await azure.signedIn(Fixtures.alice, accessToken: "az-keyring-at", refreshToken: "az-keyring-rt")

            let moved = try azure.machine.tokencache(["migrate", "--from-store", "azure-cli", "--to-store", "azure-cli-encrypted-2.91",
                                                      "--configure-azure-cli", "--remove-source", "--yes"])
            #expect(moved.status == 0, "\(moved.stderr)")
            #expect(!FileManager.default.fileExists(atPath: azure.cacheFile))
            let seen = try azure.accessToken()
            #expect(seen.token == "az-keyring-at", "az: \(seen.stderr)")
            // Azure CLI falls back to the plaintext file when libsecret fails: it must not have.
            #expect(!FileManager.default.fileExists(atPath: azure.cacheFile))
            #expect(try await azure.idp.stats().token_requests == 0)
        }

        @Test("After single sign-on with Azure CLI's family token rotated it, az refreshes its expiring token with the rotated refresh token tokencache wrote back")
        func azureCLIRefreshesAfterSingleSignOn() async throws {
            let azure = try await AzureCLI()
            defer { azure.cleanUp() }
            // Azure CLI's access token expires within MSAL's 5-minute margin: its next call refreshes.
            try await azure.signedIn(Fixtures.alice, accessToken: "az-expiring-at", refreshToken: "az-sso-rt", expiresIn: 120)

            let sso = try azure.machine.cli.run(["token", "--client", Fixtures.appTwo, "--scopes", "User.Read", "--refresh",
                                                 "--account", Fixtures.alice.username, "--authority", azure.idp.authority().url.absoluteString,
                                                 "--sso-store", "azure-cli"])
            #expect(sso.status == 0, "\(sso.stderr)")
            let rotated = try #require(try await azure.idp.stats().grants.last?.issued)

            let seen = try azure.accessToken()
            #expect(seen.token?.hasPrefix("at-issued-") == true, "az could not refresh: \(seen.stderr)")
            let last = try #require(try await azure.idp.stats().grants.last)
            #expect(last.redeemed == rotated && last.client_id == ExternalStoreSSOTests.azureCLIClient && last.outcome == "ok")
        }
    }
}
