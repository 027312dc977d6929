import Foundation
import Testing
@testable import SecretServiceStore
@testable import TokenCache
import TokenCacheAdmin
@testable import TokenCacheCore
@testable import TokenCachePlatform
import TokenCacheTestSupport

extension OtherToolsStores {
    /// `tokencache migrate --from-store … --to-store …` (#29): Azure CLI's plaintext cache moved into
    /// its keyring item, which msal-extensions then finds with Azure CLI's own parameters; Azure CLI
    /// pointed at it; the source deleted only after the copy was verified.
    @Suite("Migrating between other tools' stores", .harness, .serialized,
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

        @Test("--configure-azure-cli to the 2.91 item is refused before anything is copied while Azure CLI keeps service-principal secrets in plaintext")
        func servicePrincipalSecrets() throws {
            let setup = try Setup()
            defer { setup.cleanUp() }
            let machine = setup.machine
            try machine.writeAzureCLICache()
            let secrets = machine.home.path + "/.azure/service_principal_entries.json"
            try Data("[]".utf8).write(to: URL(fileURLWithPath: secrets))
            let refused = try machine.tokencache(["migrate", "--from-store", "azure-cli", "--to-store", "azure-cli-encrypted-2.91",
                                                  "--configure-azure-cli", "--remove-source", "--yes"])
            #expect(refused.status == 64)
            #expect(refused.stderr.contains("service_principal_entries.json") && refused.stderr.contains("Nothing was copied"))
            #expect(FileManager.default.fileExists(atPath: machine.azureCLIFile))
            #expect(try ExternalStoreTests.status("azure-cli-encrypted-2.91", in: machine)["present"] as? Bool == false)
            #expect(!FileManager.default.fileExists(atPath: setup.configFile))
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
@Suite("Azure CLI's config file", .harness)
struct AzureCLIConfigurationTests {
    @Test("encrypt_token_cache = true is set in [core], replacing another value, keeping every other line; nothing changes when it is set")
    func setting() throws {
        #expect(try AzureCLIConfiguration.settingEncryption(in: "") == "[core]\nencrypt_token_cache = true\n")
        #expect(try AzureCLIConfiguration.settingEncryption(in: "[cloud]\nname = AzureCloud\n")
                == "[cloud]\nname = AzureCloud\n\n[core]\nencrypt_token_cache = true\n")
        #expect(try AzureCLIConfiguration.settingEncryption(in: "# mine\n[core]\noutput = table\n[logging]\nx = 1\n")
                == "# mine\n[core]\nencrypt_token_cache = true\noutput = table\n[logging]\nx = 1\n")
        #expect(try AzureCLIConfiguration.settingEncryption(in: "[core]\n; off for now\nEncrypt_Token_Cache: false\n")
                == "[core]\n; off for now\nencrypt_token_cache = true\n")
        // The same key in another section is not Azure CLI's setting.
        #expect(try AzureCLIConfiguration.settingEncryption(in: "[other]\nencrypt_token_cache = true\n")
                == "[other]\nencrypt_token_cache = true\n\n[core]\nencrypt_token_cache = true\n")
        #expect(try AzureCLIConfiguration.settingEncryption(in: "[core]\nencrypt_token_cache = true\n") == nil)
        // What configparser reads differently from a line-by-line edit is refused, not guessed.
        for text in ["[core] # mine\noutput = table\n", "[core]\n  output = table\n", "[core]\noutput = a\n  b\n"] {
            #expect(throws: TokenCacheError.self, "\(text)") { try AzureCLIConfiguration.settingEncryption(in: text) }
        }
    }

    @Test("A source that changed after it was copied is not deleted; one that still holds what was copied is")
    func deleteOnlyWhatWasCopied() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("cache.json").path
        let store = ExternalStore(name: "tool", persistence: .file(path: path, signal: nil), lockFiles: [path + ".lockfile"], source: "test")
        let access = ExternalStoreAccess(store, secretService: nil)
        try access.modify(creatingIfMissing: true) { (theirs) throws(TokenCacheError) -> (write: Bool, result: Void) in
            try theirs.save(Fixtures.tokenResponse(Fixtures.response(for: Fixtures.alice)), clientID: Fixtures.appOne,
                            authority: Fixtures.authority(), scopes: [])
            return (true, ())
        }
        let copied = try #require(try access.read()).entries()
        // The owner signs another user in after the copy was made.
        try access.modify { (theirs) throws(TokenCacheError) -> (write: Bool, result: Void) in
            try theirs.save(Fixtures.tokenResponse(Fixtures.response(for: Fixtures.bob)), clientID: Fixtures.appOne,
                            authority: Fixtures.authority(), scopes: [])
            return (true, ())
        }
        #expect { try access.delete(ifStillHolding: copied) } throws: { ($0 as? TokenCacheError)?.code == .migrationNotVerified }
        #expect(FileManager.default.fileExists(atPath: path))
        try access.delete(ifStillHolding: try #require(try access.read()).entries())
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    @Test("Merging into a store keeps its entries written later than the copied ones of the same slot")
    func mergeKeepsNewer() throws {
        let target = AccountStore(backend: InMemoryBackend())
        var newer = Fixtures.response(for: Fixtures.alice, tag: "newer")
        newer["refresh_token"] = "rt-newer"
        try target.save(Fixtures.tokenResponse(newer), clientID: Fixtures.appOne, authority: Fixtures.authority(), scopes: [])
        let source = AccountStore(backend: InMemoryBackend())
        var older = Fixtures.response(for: Fixtures.alice, tag: "older")
        older["refresh_token"] = "rt-older"
        try source.save(Fixtures.tokenResponse(older), clientID: Fixtures.appOne, authority: Fixtures.authority(), scopes: [],
                        now: Date().addingTimeInterval(-3600))
        let (_, kept) = try CacheMigration.merge(try source.entries(), into: target)
        #expect(kept.contains { $0.kind == .refreshToken } && kept.contains { $0.kind == .accessToken })
        #expect(try target.entries().filter { $0.kind == .refreshToken }.compactMap { $0["secret"] } == ["rt-newer"])
    }

    @Test("A symbolic link or a file that is not UTF-8 is left as it was, with `az config set` as the way")
    func unsafeFiles() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let target = directory.appendingPathComponent("dotfiles-config")
        try Data("[core]\n".utf8).write(to: target)
        try FileManager.default.createSymbolicLink(atPath: directory.appendingPathComponent("config").path, withDestinationPath: target.path)
        #expect { try AzureCLIConfiguration.enableEncryptedTokenCache(configDirectory: directory.path) } throws: { error in
            (error as? TokenCacheError)?.code == .unsafeFile && (error as? TokenCacheError)?.hint?.contains("az config set") == true
        }
        #expect(try String(contentsOf: target, encoding: .utf8) == "[core]\n")
        #expect((try FileManager.default.attributesOfItem(atPath: directory.appendingPathComponent("config").path))[.type] as? FileAttributeType == .typeSymbolicLink)
        try FileManager.default.removeItem(at: directory.appendingPathComponent("config"))
        try Data([0x5B, 0xFF, 0x5D, 0x0A]).write(to: directory.appendingPathComponent("config"))
        #expect(throws: TokenCacheError.self) { try AzureCLIConfiguration.enableEncryptedTokenCache(configDirectory: directory.path) }
        #expect(try Data(contentsOf: directory.appendingPathComponent("config")) == Data([0x5B, 0xFF, 0x5D, 0x0A]))
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
