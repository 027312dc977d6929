import Foundation
import Testing
@testable import SecretServiceStore
@testable import TokenCache
@testable import TokenCacheCore
@testable import TokenCachePlatform

extension OtherToolsStores {
    /// `tokencache migrate --from-store … --to-store …` (#29): Azure CLI's plaintext cache moved into
    /// its keyring item, which msal-extensions then finds with Azure CLI's own parameters; Azure CLI
    /// pointed at it; the source deleted only after the copy was verified.
    @Suite("Migrating between other tools' stores", .serialized,
           .enabled(if: TestEnvironment.runsInteropTests && TestEnvironment.runsSecretServiceTests))
    struct ExternalStoreMigrationTests {
        struct Setup {
            let machine: ExternalStoreTests.Machine
            let encrypted: ExternalStore
            let keyringPeer: [String]
            let backend: SecretServiceBackend
            let item: ExternalStore.SecretServiceItem

            init() throws {
                machine = try ExternalStoreTests.Machine()
                encrypted = try #require(ExternalStore.catalogue(home: machine.home.path, dataHome: machine.cli.dataHome.path)
                    .first { $0.name == "azure-cli-encrypted" })
                (keyringPeer, item) = try ExternalStoreTests.libsecretArguments(encrypted)
                backend = try SecretServiceBackend()
                deleteItems()
            }

            func deleteItems() {
                while let found = try? backend.findExternalItem(attributeSets: [item.attributes], schema: nil) {
                    _ = try? backend.client.delete(found.path)
                }
            }

            func cleanUp() {
                deleteItems()
                machine.cleanUp()
            }

            var configFile: String { machine.home.path + "/.azure/config" }

            /// configparser's reading of [core] encrypt_token_cache, as knack reads Azure CLI's config.
            func encryptsTokenCache() throws -> String {
                let python = try #require(TestEnvironment.python)
                let script = "import configparser,sys; c=configparser.ConfigParser(); c.read(sys.argv[1]); print(c.getboolean('core','encrypt_token_cache',fallback=False), c.get('cloud','name',fallback='-'))"
                return try runProcess(python, ["-c", script, configFile]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            }
        }

        @Test("--to-store azure-cli-encrypted --configure-azure-cli --remove-source --yes: the item is created as msal-extensions finds it, every field kept, Azure CLI's config switched with its other settings kept, the plaintext file deleted after the copy was verified")
        func plaintextToKeyring() throws {
            let setup = try Setup()
            defer { setup.cleanUp() }
            let machine = setup.machine
            try machine.writeAzureCLICache()
            try Data("[cloud]\nname = AzureCloud\n\n[core]\noutput = table\n".utf8).write(to: URL(fileURLWithPath: setup.configFile))
            let before = try machine.peer(["--file", machine.azureCLIFile, "--show-secrets"], ["list"])

            let moved = try machine.tokencache(["migrate", "--from-store", "azure-cli", "--to-store", "azure-cli-encrypted",
                                                "--configure-azure-cli", "--remove-source", "--yes"])
            #expect(moved.status == 0, "\(moved.stderr)")
            #expect(moved.stdout.contains("verified") && moved.stdout.contains("Deleted azure-cli"))
            #expect(!FileManager.default.fileExists(atPath: machine.azureCLIFile))

            // msal-extensions, with Azure CLI's parameters, reads the same tokens and the unknown field.
            let after = try machine.peer(setup.keyringPeer + ["--show-secrets"], ["list"])
            let tokens = try #require(before["tokens"] as? NSArray)
            #expect(tokens.count == 3, "the peer's cache has an access, refresh and ID token")
            #expect(after["tokens"] as? NSArray == tokens)
            #expect(try #require(after["accounts"] as? NSArray) == before["accounts"] as? NSArray)
            #expect(after["unknown_top_level_fields"] as? [String] == ["FutureSection"])
            let found = try #require(try setup.backend.findExternalItem(attributeSets: [setup.item.attributes], schema: "Microsoft Azure CLI"))
            #expect(found.attributes["xdg:schema"] == "Microsoft Azure CLI")
            #expect(FileManager.default.fileExists(atPath: setup.item.signalFiles[0]))
            #expect(try setup.encryptsTokenCache() == "True AzureCloud")
            #expect(try String(contentsOfFile: setup.configFile, encoding: .utf8).contains("output = table"))
            #expect(try ExternalStoreTests.status("azure-cli-encrypted", in: machine)["accounts"] as? Int == 1)

            // Again: nothing to change, the setting already there, nothing left to delete.
            try machine.writeAzureCLICache()
            let again = try machine.tokencache(["migrate", "--from-store", "azure-cli", "--to-store", "azure-cli-encrypted",
                                                "--configure-azure-cli"])
            #expect(again.status == 0, "\(again.stderr)")
            #expect(again.stdout.contains("was already set") && again.stdout.contains("The source was not changed"))
            #expect(FileManager.default.fileExists(atPath: machine.azureCLIFile))
        }

        @Test("Without --yes where no question can be asked, the copy is made and verified but the source is kept (exit 64); a copy into an existing store keeps what it held")
        func keepsSourceWithoutConfirmation() throws {
            let setup = try Setup()
            defer { setup.cleanUp() }
            let machine = setup.machine
            try FileManager.default.createDirectory(atPath: (setup.item.signalFiles[0] as NSString).deletingLastPathComponent,
                                                    withIntermediateDirectories: true)
            // The keyring item already holds another account, written by msal-extensions.
            var seed = ["client_id": "04b07795-8ddb-461a-bbee-02f9e1bf7b46", "authority": "https://login.microsoftonline.com/organizations"] as [String: Any]
            var response = Fixtures.response(for: Fixtures.bob, scope: "https://management.core.windows.net//user_impersonation", foci: "1")
            response["refresh_token"] = "bob-rt"
            seed["response"] = response
            let seedFile = machine.home.appendingPathComponent("bob.json")
            try JSONSerialization.data(withJSONObject: seed).write(to: seedFile)
            _ = try machine.peer(setup.keyringPeer, ["write", seedFile.path])
            try machine.writeAzureCLICache()

            let refused = try machine.tokencache(["migrate", "--from-store", "azure-cli", "--to-store", "azure-cli-encrypted", "--remove-source"])
            #expect(refused.status == 64)
            #expect(refused.stderr.contains("--yes"))
            #expect(FileManager.default.fileExists(atPath: machine.azureCLIFile))
            let usernames = Set(try ExternalStoreTests.usernames("azure-cli-encrypted", in: machine))
            #expect(usernames == [ExternalStoreTests.username, Fixtures.bob.username])
        }

        @Test("--to-store azure-cli creates Azure CLI's missing file with mode 0600 from its keyring item, and msal-extensions reads it; bad combinations are usage errors")
        func keyringToNewFile() throws {
            let setup = try Setup()
            defer { setup.cleanUp() }
            let machine = setup.machine
            try FileManager.default.createDirectory(atPath: (setup.item.signalFiles[0] as NSString).deletingLastPathComponent,
                                                    withIntermediateDirectories: true)
            _ = try machine.peer(setup.keyringPeer, ["write"])
            try FileManager.default.removeItem(at: machine.home.appendingPathComponent(".azure"))

            let moved = try machine.tokencache(["migrate", "--from-store", "azure-cli-encrypted", "--to-store", "azure-cli"])
            #expect(moved.status == 0, "\(moved.stderr)")
            let attributes = try FileManager.default.attributesOfItem(atPath: machine.azureCLIFile)
            #expect(attributes[.posixPermissions] as? Int == 0o600)
            let seen = try machine.peer(["--file", machine.azureCLIFile], ["list"])
            #expect((seen["accounts"] as? [[String: Any]])?.compactMap { $0["username"] as? String } == [ExternalStoreTests.username])
            #expect(try setup.backend.findExternalItem(attributeSets: [setup.item.attributes], schema: nil) != nil, "the source went without --remove-source")

            for arguments in [["--from-store", "azure-cli", "--to-store", "azure-cli"],
                              ["--from-store", "azure-cli", "--to-store", "azure-cli-encrypted", "--to", "file"],
                              ["--from", "file", "--to-store", "azure-cli"],
                              ["--from-store", "azure-cli", "--to", "file", "--configure-azure-cli"]] {
                #expect(try machine.tokencache(["migrate"] + arguments).status == 64, "\(arguments)")
            }
        }
    }
}

/// The one edit made to Azure CLI's config file, on the texts configparser accepts.
@Suite("Azure CLI's config file")
struct AzureCLIConfigurationTests {
    @Test("encrypt_token_cache = true is set in [core], replacing another value, keeping every other line; nothing changes when it is set")
    func setting() {
        #expect(AzureCLIConfiguration.settingEncryption(in: "") == "[core]\nencrypt_token_cache = true\n")
        #expect(AzureCLIConfiguration.settingEncryption(in: "[cloud]\nname = AzureCloud\n")
                == "[cloud]\nname = AzureCloud\n\n[core]\nencrypt_token_cache = true\n")
        #expect(AzureCLIConfiguration.settingEncryption(in: "# mine\n[core]\noutput = table\n[logging]\nx = 1\n")
                == "# mine\n[core]\nencrypt_token_cache = true\noutput = table\n[logging]\nx = 1\n")
        #expect(AzureCLIConfiguration.settingEncryption(in: "[core]\n; off for now\nEncrypt_Token_Cache: false\n")
                == "[core]\n; off for now\nencrypt_token_cache = true\n")
        // The same key in another section is not Azure CLI's setting.
        #expect(AzureCLIConfiguration.settingEncryption(in: "[other]\nencrypt_token_cache = true\n")
                == "[other]\nencrypt_token_cache = true\n\n[core]\nencrypt_token_cache = true\n")
        #expect(AzureCLIConfiguration.settingEncryption(in: "[core]\nencrypt_token_cache = true\n") == nil)
    }

    @Test("The file is created in a missing folder with mode 0600, an existing one keeps its mode, and the setting reads back")
    func file() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let config = directory.appendingPathComponent("azure").path
        #expect(!AzureCLIConfiguration.encryptsTokenCache(configDirectory: config))
        #expect(try AzureCLIConfiguration.enableEncryptedTokenCache(configDirectory: config))
        let path = AzureCLIConfiguration.path(configDirectory: config)
        #expect(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int == 0o600)
        #expect(AzureCLIConfiguration.encryptsTokenCache(configDirectory: config))
        #expect(try !AzureCLIConfiguration.enableEncryptedTokenCache(configDirectory: config))
        try Data("[core]\nencrypt_token_cache = no\n".utf8).write(to: URL(fileURLWithPath: path))
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: path)
        #expect(!AzureCLIConfiguration.encryptsTokenCache(configDirectory: config))
        #expect(try AzureCLIConfiguration.enableEncryptedTokenCache(configDirectory: config))
        #expect(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int == 0o644)
    }
}
