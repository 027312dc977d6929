import Foundation
import Testing
@testable import SecretServiceStore
@testable import TokenCache
@testable import TokenCacheCore
@testable import TokenCacheDBus
@testable import TokenCachePlatform
#if canImport(Glibc)
import Glibc
#endif
import TokenCacheTestSupport

/// Every suite that uses other tools' stores: they share the catalogue's keyring items (whose
/// schema and attributes are the owners', not per test), so they run one after another.
@Suite("Other tools' stores", .harness, .serialized)
enum OtherToolsStores {}

extension OtherToolsStores {
    /// Other tools' MSAL caches (#29), against the real msal-extensions 1.3.1 and MSAL Python 1.39
    /// (Fixtures/msal_extensions_peer.py): what they write is listed and changed here under their
    /// lock, and what is changed here is what they read. In CI these fail, never skip, when the venv
    /// (or, for keyring stores, the Secret Service) is missing.
    @Suite("External MSAL stores", .harness, .serialized, .enabled(if: TestEnvironment.runsInteropTests))
    struct ExternalStoreTests {
        static let username = "peer@contoso.example"

        /// A temporary HOME (and XDG_DATA_HOME) shared by the CLI and the peer.
        struct Machine {
            let cli: CLI
            var home: URL { cli.dataHome.appendingPathComponent("home") }
            var azureCLIFile: String { home.path + "/.azure/msal_token_cache.json" }

            init() throws {
                var cli = try CLI(backend: "file")
                let home = cli.dataHome.appendingPathComponent("home")
                try FileManager.default.createDirectory(at: home.appendingPathComponent(".azure"), withIntermediateDirectories: true)
                cli.environmentOverrides["HOME"] = home.path
                self.cli = cli
            }

            /// The same machine seen through `cli` (other variables).
            init(cli: CLI) { self.cli = cli }

            var environment: [String: String] { cli.environment }

            /// The peer on `store` (its --file or --libsecret arguments) running `command`.
            func peer(_ store: [String], _ command: [String]) throws -> [String: Any] {
                let python = try #require(TestEnvironment.python, "MSAL Python venv missing: run scripts/install-deps.sh")
                let output = try runProcess(python, [ExternalStoreTests.peerScript] + store + command, environment: environment)
                #expect(output.status == 0, "peer \(command) failed: \(output.stderr)")
                return try #require(try JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [String: Any])
            }

            /// A peer process started in the background (hammer, hold-lock).
            func startPeer(_ store: [String], _ command: [String]) throws -> (Process, Pipe) {
                let python = try #require(TestEnvironment.python, "MSAL Python venv missing: run scripts/install-deps.sh")
                let process = Process()
                process.executableURL = URL(fileURLWithPath: python)
                process.arguments = [ExternalStoreTests.peerScript] + store + command
                process.environment = environment
                let output = Pipe()
                process.standardOutput = output
                process.standardError = FileHandle.nullDevice
                try process.run()
                return (process, output)
            }

            func tokencache(_ arguments: [String]) throws -> ProcessOutput {
                try cli.run(arguments, withGroup: false)
            }

            func cleanUp() { try? FileManager.default.removeItem(at: cli.dataHome) }

            /// Azure CLI's file as msal-extensions writes it, with an unknown top-level field added.
            func writeAzureCLICache() throws {
                _ = try peer(["--file", azureCLIFile], ["write"])
                _ = try peer(["--file", azureCLIFile], ["add-field", "FutureSection", #"{"kept": [1, 2]}"#])
            }
        }

        static var peerScript: String {
            URL(fileURLWithPath: #filePath).deletingLastPathComponent()
                .appendingPathComponent("Fixtures/msal_extensions_peer.py").standardizedFileURL.path
        }

        static func json(_ output: ProcessOutput) throws -> [String: Any] {
            #expect(output.status == 0, "tokencache failed: \(output.stderr)")
            return try #require(try JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [String: Any])
        }

        static func status(_ name: String, in machine: Machine) throws -> [String: Any] {
            let stores = try #require(try json(machine.tokencache(["stores", "--json"]))["stores"] as? [[String: Any]])
            return try #require(stores.first { $0["name"] as? String == name }, "no store \(name)")
        }

        static func usernames(_ name: String, in machine: Machine) throws -> [String] {
            let accounts = try #require(try json(machine.tokencache(["list", "--store", name, "--json"]))["accounts"] as? [[String: Any]])
            return accounts.compactMap { $0["username"] as? String }
        }

        static func modificationTime(_ path: String) -> Double? {
            guard let date = (try? FileManager.default.attributesOfItem(atPath: path))?[.modificationDate] as? Date else { return nil }
            return date.timeIntervalSince1970
        }

        /// Reads the peer's first stdout line (hold-lock's {"locked": …}).
        static func firstLine(_ pipe: Pipe) -> String {
            var bytes = Data()
            while !bytes.contains(0x0A) {
                let chunk = pipe.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                bytes.append(chunk)
            }
            return String(decoding: bytes, as: UTF8.self)
        }

        // MARK: File store (Azure CLI's default)

        @Test("A cache msal-extensions wrote to Azure CLI's file is listed; a removal here is what the peer reads, with an unknown field kept and the mode unchanged")
        func azureCLIFile() throws {
            let machine = try Machine()
            defer { machine.cleanUp() }
            let store = ["--file", machine.azureCLIFile]
            try machine.writeAzureCLICache()

            let status = try Self.status("azure-cli", in: machine)
            #expect(status["present"] as? Bool == true)
            #expect(status["readable"] as? Bool == true)
            #expect(status["encrypted"] as? Bool == false)
            #expect(status["accounts"] as? Int == 1)
            #expect(try Self.usernames("azure-cli", in: machine) == [Self.username])
            let table = try machine.tokencache(["list", "--store", "azure-cli"])
            #expect(table.stdout.contains(Self.username))
            #expect(!table.stdout.contains("peer-at-") && !table.stdout.contains("peer-rt-"), "list shows no secrets")

            // No question can be asked here: nothing is removed without --yes.
            let refused = try machine.tokencache(["remove", "--account", Self.username, "--store", "azure-cli"])
            #expect(refused.status == 64)
            #expect(try Self.usernames("azure-cli", in: machine) == [Self.username])

            let before = Self.modificationTime(machine.azureCLIFile) ?? 0
            let removed = try machine.tokencache(["remove", "--account", Self.username, "--store", "azure-cli", "--yes"])
            #expect(removed.status == 0, "\(removed.stderr)")
            let seen = try machine.peer(store, ["list"])
            #expect((seen["accounts"] as? [Any])?.isEmpty == true)
            #expect((seen["tokens"] as? [Any])?.isEmpty == true)
            #expect(seen["unknown_top_level_fields"] as? [String] == ["FutureSection"])
            let read = try machine.peer(store, ["read"])
            #expect(((read["blob"] as? [String: Any])?["FutureSection"] as? [String: Any])?["kept"] as? [Int] == [1, 2])
            let attributes = try FileManager.default.attributesOfItem(atPath: machine.azureCLIFile)
            #expect((attributes[.posixPermissions] as? Int) == 0o600)
            #expect((Self.modificationTime(machine.azureCLIFile) ?? 0) > before)
            #expect(!FileManager.default.fileExists(atPath: machine.azureCLIFile + ".lockfile"))
            #expect(try machine.tokencache(["list", "--store", "azure-cli", "--json"]).status == 0)
            #expect(try machine.tokencache(["remove", "--account", Self.username, "--store", "azure-cli", "--yes"]).status == 2)
        }

        @Test("An unknown store name is a usage error naming the known stores; an absent store is not found; an unparsable one is reported and left as it was")
        func unknownAndAbsentStores() throws {
            let machine = try Machine()
            defer { machine.cleanUp() }
            let unknown = try machine.tokencache(["list", "--store", "no-such-store"])
            #expect(unknown.status == 64)
            #expect(unknown.stderr.contains("azure-cli"))
            #expect(try machine.tokencache(["list", "--store", "azure-cli"]).status == 2)

            // A blob that is not MSAL JSON is reported unreadable and left exactly as it was.
            let garbage = Data("{\"Account\": {".utf8)
            try garbage.write(to: URL(fileURLWithPath: machine.azureCLIFile))
            #expect(chmod(machine.azureCLIFile, 0o600) == 0)  // as msal-extensions creates it (0644 is refused as unsafe)
            let status = try Self.status("azure-cli", in: machine)
            #expect(status["present"] as? Bool == true)
            #expect(status["readable"] as? Bool == false)
            #expect((status["problem"] as? String)?.contains("not valid JSON") == true)
            // Said as the owner's cache, where it lives: not as an import.
            let listed = try machine.tokencache(["list", "--store", "azure-cli"])
            #expect(listed.status == 1 && listed.stderr.contains(machine.azureCLIFile) && !listed.stderr.contains("imported"), "\(listed.stderr)")
            let stores = try machine.tokencache(["stores"])
            #expect(stores.stderr.contains("azure-cli: Store azure-cli"), "the text form names the problem: \(stores.stderr)")
            #expect(try machine.tokencache(["remove", "--account", Self.username, "--store", "azure-cli", "--yes"]).status == 1)
            #expect(try Data(contentsOf: URL(fileURLWithPath: machine.azureCLIFile)) == garbage)
            #expect(!FileManager.default.fileExists(atPath: machine.azureCLIFile + ".lockfile"))

            // With no keyring to ask, a keyring store's presence is unknown: null in JSON, never false.
            var offline = machine.cli
            offline.environmentOverrides["DBUS_SESSION_BUS_ADDRESS"] = "unix:path=/nonexistent"
            let report = try offline.run(["stores", "--json"], withGroup: false)
            let rows = try #require(try JSONSerialization.jsonObject(with: Data(report.stdout.utf8)) as? [String: Any])["stores"] as? [[String: Any]]
            let keyringRow = try #require(rows?.first { $0["name"] as? String == "azure-cli-encrypted" })
            #expect(keyringRow["present"] is NSNull, "\(keyringRow)")
            #expect(try offline.run(["stores"], withGroup: false).stdout.contains("unknown"))
        }

        @Test("A store declared in the config file is listed and changed like a built-in one; --all-stores removes from every store holding the account")
        func configuredStore() throws {
            let machine = try Machine()
            defer { machine.cleanUp() }
            let path = machine.home.path + "/tool/cache.json"
            try FileManager.default.createDirectory(atPath: machine.home.path + "/tool", withIntermediateDirectories: true)
            let config = machine.cli.dataHome.appendingPathComponent("config/tokencache")
            try FileManager.default.createDirectory(at: config, withIntermediateDirectories: true)
            try Data(#"{"stores": {"my-tool": {"file": "~/tool/cache.json"}}}"#.utf8).write(to: config.appendingPathComponent("config.json"))
            _ = try machine.peer(["--file", path], ["write"])
            _ = try machine.peer(["--file", machine.azureCLIFile], ["write"])
            #expect(try Self.status("my-tool", in: machine)["accounts"] as? Int == 1)
            #expect(try machine.tokencache(["remove", "--account", Self.username, "--store", "my-tool", "--yes"]).status == 0)
            #expect((try machine.peer(["--file", path], ["list"])["accounts"] as? [Any])?.isEmpty == true)

            // --all-stores: every store holding the account, and only those.
            _ = try machine.peer(["--file", path], ["write"])
            let everywhere = try machine.tokencache(["remove", "--account", Self.username, "--all-stores", "--yes"])
            #expect(everywhere.status == 0, "\(everywhere.stderr)")
            #expect(everywhere.stdout.contains("my-tool") && everywhere.stdout.contains("azure-cli"))
            for file in [path, machine.azureCLIFile] {
                #expect((try machine.peer(["--file", file], ["list"])["accounts"] as? [Any])?.isEmpty == true)
            }
            #expect(try machine.tokencache(["remove", "--account", Self.username, "--all-stores", "--yes"]).status == 2)

            try Data(#"{"stores": {"bad": {"file": "relative.json"}}}"#.utf8).write(to: config.appendingPathComponent("config.json"))
            let refused = try machine.tokencache(["stores"])
            #expect(refused.status == 64, "\(refused.status): \(refused.stdout) \(refused.stderr)")
        }

        // MARK: Migration

        @Test("migrate --from-store copies a cache msal-extensions wrote into a group on the encrypted file, unknown field included, verified; the source stays byte for byte")
        func migrateFromStore() throws {
            let machine = try Machine()
            defer { machine.cleanUp() }
            try machine.writeAzureCLICache()
            let source = try Data(contentsOf: URL(fileURLWithPath: machine.azureCLIFile))
            let group = machine.cli.group

            let migrated = try machine.tokencache(["migrate", "--from-store", "azure-cli", "--to", "file", "--group", group])
            #expect(migrated.status == 0, "\(migrated.stderr)")
            #expect(migrated.stdout.contains("of azure-cli (\(machine.azureCLIFile)) into \(group) on "))
            #expect(migrated.stdout.contains("verified.\nThe source was not changed."))
            #expect(migrated.stdout.contains("--to-store azure-cli-encrypted-2.91 --configure-azure-cli"))
            #expect(migrated.stdout.contains("az config set core.encrypt_token_cache=true"))
            #expect(!migrated.stdout.contains("peer-at-") && !migrated.stdout.contains("peer-rt-"), "migrate shows no secrets")

            let listed = try Self.json(machine.cli.run(["list", "--json"]))
            let accounts = try #require(listed["accounts"] as? [[String: Any]])
            #expect(accounts.compactMap { $0["username"] as? String } == [Self.username])
            let exported = try machine.cli.exported()
            #expect((exported["FutureSection"] as? [String: Any])?["kept"] as? [Int] == [1, 2])
            #expect(try Data(contentsOf: URL(fileURLWithPath: machine.azureCLIFile)) == source)
            #expect(!FileManager.default.fileExists(atPath: machine.azureCLIFile + ".lockfile"))

            // Again: the same entries, nothing added twice, the source still as it was.
            let again = try machine.tokencache(["migrate", "--from-store", "azure-cli", "--to", "file", "--group", group])
            #expect(again.status == 0, "\(again.stderr)")
            #expect(try machine.cli.exported() == exported)
            #expect(try Data(contentsOf: URL(fileURLWithPath: machine.azureCLIFile)) == source)
        }

        @Test("migrate --from-store: an unknown store is a usage error, an absent one not found, and neither creates anything; --from with --from-store is a usage error")
        func migrateFromMissingStore() throws {
            let machine = try Machine()
            defer { machine.cleanUp() }
            let group = machine.cli.group
            let unknown = try machine.tokencache(["migrate", "--from-store", "no-such-store", "--to", "file", "--group", group])
            #expect(unknown.status == 64)
            #expect(unknown.stderr.contains("azure-cli"))
            let absent = try machine.tokencache(["migrate", "--from-store", "azure-cli", "--to", "file", "--group", group])
            #expect(absent.status == 2, "\(absent.stderr)")
            #expect(try machine.tokencache(["migrate", "--from-store", "azure-cli", "--from", "file", "--to", "secret-service"]).status == 64)
            #expect(try machine.tokencache(["migrate", "--to", "file"]).status == 64)
            #expect(!FileManager.default.fileExists(atPath: machine.azureCLIFile))
            #expect(!FileManager.default.fileExists(atPath: machine.azureCLIFile + ".lockfile"))
            let file = EncryptedFileBackend().fileURL(for: try CacheGroup(group)).lastPathComponent
            let created = FileManager.default.enumerator(atPath: machine.cli.dataHome.path)?.compactMap { $0 as? String } ?? []
            #expect(!created.contains { $0.hasSuffix(file) }, "a cache file was created: \(created)")
        }

        // MARK: Locking

        @Test("Two msal-extensions writers and two of ours, all under the lock, lose no update")
        func concurrentWriters() throws {
            let machine = try Machine()
            defer { machine.cleanUp() }
            let store = ["--file", machine.azureCLIFile]
            _ = try machine.peer(store, ["write"])
            let count = 25
            let helper = TestEnvironment.binDirectory.appendingPathComponent("TokenCacheTestHelper").path
            let peers = try ["p1", "p2"].map { try machine.startPeer(store, ["hammer", "\(count)", "--tag", $0]) }
            let ours = try ["s1", "s2"].map { tag in
                let process = Process()
                process.executableURL = URL(fileURLWithPath: helper)
                process.arguments = ["external-hammer", machine.azureCLIFile, "\(count)", tag]
                process.environment = machine.environment
                process.standardOutput = FileHandle.nullDevice
                process.standardError = FileHandle.nullDevice
                try process.run()
                return process
            }
            for process in ours + peers.map(\.0) { process.waitUntilExit() }
            for process in ours { #expect(process.terminationStatus == 0) }
            // A Python filelock peer may starve and raise LockError after 5 s (docs/EXTERNAL-STORES.md
            // §3.1, 6); then only its own updates are missing, never ours or the other's.
            let peerSucceeded = peers.map { $0.0.terminationStatus == 0 }
            let tokens = try #require(try machine.peer(store, ["list"])["tokens"] as? [[String: Any]])
            let targets = Set(tokens.compactMap { $0["target"] as? String })
            for tag in ["s1", "s2"] {
                for index in 0..<count { #expect(targets.contains("api://swift-hammer/\(tag)-\(index)"), "lost \(tag)-\(index)") }
            }
            for (tag, succeeded) in zip(["p1", "p2"], peerSucceeded) where succeeded {
                for index in 0..<count { #expect(targets.contains("api://peer-hammer/\(tag)-\(index)"), "lost \(tag)-\(index)") }
            }
            #expect(peerSucceeded.contains(true), "both peers gave up")
            #expect(!FileManager.default.fileExists(atPath: machine.azureCLIFile + ".lockfile"))
        }

        /// The peer holds the lock for `seconds` (killed with SIGKILL at once when `kill`); meanwhile
        /// our removal runs. Returns the time from the peer taking the lock (its own clock, so a
        /// late read of its line on a loaded machine does not count) to the removal's end, and the
        /// peer's exit status.
        static func removeWhileLocked(seconds: Int, kill killHolder: Bool) throws -> (elapsed: Double, holderStatus: Int32) {
            let machine = try Machine()
            defer { machine.cleanUp() }
            let store = ["--file", machine.azureCLIFile]
            _ = try machine.peer(store, ["write"])
            let (holder, output) = try machine.startPeer(store, ["hold-lock", "\(seconds)"])
            let line = firstLine(output)
            #expect(line.contains("locked"))
            let lockedAt = try #require((try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["at"] as? Double, "\(line)")
            if killHolder { kill(holder.processIdentifier, SIGKILL) }
            if killHolder { holder.waitUntilExit() }
            #expect(FileManager.default.fileExists(atPath: machine.azureCLIFile + ".lockfile"))
            let removed = try machine.tokencache(["remove", "--account", username, "--store", "azure-cli", "--yes"])
            let elapsed = Date().timeIntervalSince1970 - lockedAt
            holder.waitUntilExit()
            #expect(removed.status == 0, "\(removed.stderr)")
            #expect(!FileManager.default.fileExists(atPath: machine.azureCLIFile + ".lockfile"))
            #expect((try machine.peer(store, ["list"])["accounts"] as? [Any])?.isEmpty == true)
            return (elapsed, holder.terminationStatus)
        }

        @Test("A lock file left by a peer killed with SIGKILL is removed once stale (5 s old), and the write goes through")
        func staleLock() throws {
            // Real time on purpose: staleness is the lock file's mtime age, shared with another
            // tool's process, which no injected clock reaches; the upper bound is slack for a loaded machine.
            let (elapsed, _) = try Self.removeWhileLocked(seconds: 60, kill: true)
            #expect(elapsed > 3, "a fresh lock file was taken as stale: \(elapsed) s")
            #expect(elapsed < 15, "took \(elapsed) s")
        }

        @Test("A live lock the peer holds makes us wait for it, not skip it")
        func liveLock() throws {
            let (elapsed, holderStatus) = try Self.removeWhileLocked(seconds: 2, kill: false)
            #expect(holderStatus == 0)
            #expect(elapsed > 1.2, "did not wait for the holder: \(elapsed) s")
        }

        // MARK: Keyring stores

        /// The peer's --libsecret arguments for a catalogue store's item.
        static func libsecretArguments(_ store: ExternalStore) throws -> (arguments: [String], item: ExternalStore.SecretServiceItem) {
            guard case .secretService(let item) = store.persistence else { throw TokenCacheError(.invalidArgument, "not a keyring store") }
            let attributes = item.attributes.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
            return (["--libsecret", item.schema] + attributes + ["--label", item.label, "--signal", item.signalFiles.last!,
                                                                  "--lock", store.lockFiles.last!], item)
        }

        @Test("A cache msal-extensions wrote to the keyring (Azure CLI encrypted, .NET msal.cache parameters) is listed; a removal here is what the peer reads",
              .enabled(if: TestEnvironment.runsSecretServiceTests), arguments: ["azure-cli-encrypted", "azure-cli-encrypted-2.91", "dotnet-identity-service"])
        func keyringStore(_ name: String) throws {
            let machine = try Machine()
            defer { machine.cleanUp() }
            let dataHome = machine.cli.dataHome.path
            let store = try #require(ExternalStore.catalogue(home: machine.home.path, dataHome: dataHome).first { $0.name == name })
            let (peerStore, item) = try Self.libsecretArguments(store)
            let backend = try SecretServiceBackend()
            func deleteItems() throws {
                while let found = try backend.findExternalItem(attributeSets: [item.attributes], schema: nil) {
                    _ = try backend.client.delete(found.path)
                }
            }
            try deleteItems()
            defer { try? deleteItems() }
            try FileManager.default.createDirectory(atPath: (item.signalFiles.last! as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            _ = try machine.peer(peerStore, ["write"])
            _ = try machine.peer(peerStore, ["add-field", "FutureSection", "42"])

            let status = try Self.status(name, in: machine)
            #expect(status["present"] as? Bool == true)
            #expect(status["encrypted"] as? Bool == true)
            #expect(status["accounts"] as? Int == 1)
            #expect(try Self.usernames(name, in: machine) == [Self.username])
            if name.hasPrefix("azure-cli-encrypted") {
                // Azure CLI's silent plaintext fallback beside its keyring item is pointed out.
                _ = try machine.peer(["--file", machine.azureCLIFile], ["write"])
                #expect(try machine.tokencache(["stores"]).stderr.contains("Both Azure CLI's plaintext file and its keyring item exist"))
            }

            let signal = item.signalFiles.last!
            let before = Self.modificationTime(signal) ?? 0
            let removed = try machine.tokencache(["remove", "--account", Self.username, "--store", name, "--yes"])
            #expect(removed.status == 0, "\(removed.stderr)")
            #expect((Self.modificationTime(signal) ?? 0) > before, "the signal file was not touched")
            let seen = try machine.peer(peerStore, ["list"])
            #expect((seen["accounts"] as? [Any])?.isEmpty == true)
            #expect(seen["unknown_top_level_fields"] as? [String] == ["FutureSection"])
            // One item still: replaced in place, not a second one beside it.
            #expect(try backend.client.searchItems(item.attributes).unlocked.count == 1)
        }

        @Test("A base64 keyring blob (as MSAL.NET writes it) is read and written back as base64",
              .enabled(if: TestEnvironment.runsSecretServiceTests))
        func base64KeyringBlob() throws {
            let machine = try Machine()
            defer { machine.cleanUp() }
            let tag = UUID().uuidString
            let signal = machine.home.path + "/.tool/cache"
            let store = ExternalStore(name: "dotnet-like", persistence: .secretService(.init(
                schema: "org.swift-tokencache.test-external", matchesSchema: false, attributes: ["test-run": tag],
                label: "test", signalFiles: [signal], encoding: .detect)), lockFiles: [signal + ".lockfile"], source: "test")
            let backend = try SecretServiceBackend()
            let fragment = try JSONSerialization.data(withJSONObject: [
                "Account": ["k": ["home_account_id": "uid.utid", "environment": "login.microsoftonline.com", "realm": "utid",
                                  "local_account_id": "uid", "username": "dotnet@contoso.example", "authority_type": "MSSTS"]],
                "Other": ["x": 1]])
            let collection = try #require(try backend.client.readAlias("default"))
            let sealed = GVariantRef(sinking: try backend.session.session().secretStruct(Data(fragment.base64EncodedString().utf8), contentType: "text/plain"))
            _ = try backend.client.createItem(in: collection, label: "test", attributes: ["test-run": tag, "xdg:schema": "msal.cache"],
                                              secret: sealed, replace: true)
            defer {
                if let found = try? backend.findExternalItem(attributeSets: [["test-run": tag]], schema: nil) { _ = try? backend.client.delete(found.path) }
            }
            let access = ExternalStoreAccess(store, secretService: backend)
            let accounts = try #require(try access.read())
            let account = try #require(try accounts.account("dotnet@contoso.example"))
            try access.modify { (locked) throws(TokenCacheError) in
                guard let current = try locked.account(account.homeAccountID) else { return (false, ()) }
                _ = try locked.remove(current)
                return (true, ())
            }
            let found = try #require(try backend.findExternalItem(attributeSets: [["test-run": tag]], schema: nil))
            #expect(found.attributes["xdg:schema"] == "msal.cache")
            let secret = try backend.readExternalSecret(found)
            let decoded = try #require(Data(base64Encoded: String(decoding: secret, as: UTF8.self)), "not written back as base64")
            let object = try #require(try JSONSerialization.jsonObject(with: decoded) as? [String: Any])
            #expect((object["Account"] as? [String: Any])?.isEmpty ?? true)
            #expect((object["Other"] as? [String: Any])?["x"] as? Int == 1)
            #expect(FileManager.default.fileExists(atPath: signal))
        }
    }
}

/// The catalogue's parameters (docs/EXTERNAL-STORES.md §1) and the lock's rules, without peers.
@Suite("External store catalogue and lock", .harness)
struct ExternalStoreCatalogueTests {
    @Test("The catalogue names each store with its owner's exact parameters and a source")
    func catalogue() throws {
        let all = ExternalStore.catalogue(home: "/h", dataHome: "/d")
        #expect(all.map(\.name) == ["azure-cli", "azure-cli-encrypted", "azure-cli-encrypted-2.91", "azure-identity-python",
                                       "azure-identity-python-cae", "azure-identity-python-plaintext", "dotnet-identity-service-plaintext",
                                       "azure-identity-python-cae-plaintext", "dotnet-identity-service-cae-plaintext",
                                       "dotnet-identity-service", "azureauth"])
        let stores = all.filter { !$0.name.hasSuffix("-plaintext") }
        #expect(all[6].persistence == .file(path: "/d/.IdentityService/msal.cache.nocae", signal: nil))
        for store in stores { #expect(!store.source.isEmpty) }
        #expect(stores[0].persistence == .file(path: "/h/.azure/msal_token_cache.json", signal: nil))
        #expect(stores[0].lockFiles == ["/h/.azure/msal_token_cache.json.lockfile"])
        guard case .secretService(let cli) = stores[1].persistence, case .secretService(let released) = stores[2].persistence,
              case .secretService(let python) = stores[3].persistence,
              case .secretService(let dotnet) = stores[5].persistence, case .secretService(let azureauth) = stores[6].persistence else {
            Issue.record("keyring stores are not keyring stores")
            return
        }
        #expect(cli.schema == "Microsoft Azure CLI" && cli.matchesSchema && cli.attributes == ["type": "Token cache"] && cli.encoding == .raw)
        #expect(cli.signalFiles == ["/h/.azure/msal_token_cache.sig"] && stores[1].lockFiles == ["/h/.azure/msal_token_cache.sig.lockfile"])
        // What az 2.91.0 from PyPI does (checked against it in AzureCLITests).
        #expect(released.schema == "my_schema_name" && released.matchesSchema && released.attributes == ["my_attr1": "foo", "my_attr2": "bar"])
        #expect(released.signalFiles == ["/h/.azure/msal_token_cache.bin"] && stores[2].lockFiles == ["/h/.azure/msal_token_cache.bin.lockfile"])
        #expect(python.schema == "msal.cache.nocae" && python.matchesSchema && python.label == "MSALCache")
        #expect(python.attributes == ["MsalClientID": "Microsoft.Developer.IdentityService"])
        #expect(stores[3].lockFiles == ["/h/.IdentityService/msal.cache.nocae.lockfile"])
        #expect(dotnet.schema == "msal.cache" && !dotnet.matchesSchema && dotnet.encoding == .base64)
        #expect(dotnet.attributes == ["MsalClientID": "Microsoft.Developer.IdentityService", "Microsoft.Developer.IdentityService": "1.0.0.0"])
        #expect(dotnet.alternativeAttributes == [["MsalClientID": "Microsoft.Developer.IdentityService", "MsalClientVersion": "1.0.0.0"]])
        #expect(stores[5].lockFiles == ["/d/.IdentityService/msal.cache.lockfile", "/d/.IdentityService/msal.cache.cae.lockfile",
                                        "/d/.IdentityService/msal.cache.nocae.lockfile"])
        #expect(azureauth.attributes == ["Version": "1", "ProductGroup": "Microsoft Develoepr Tools"] && azureauth.encoding == .base64)
    }

    @Test("A lock file flocked by a live holder (.NET, portalocker) or naming a live pid (.NET's BOM content) is waited for, then reported with its holder")
    func liveHolders() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("cache.lockfile").path

        let held = open(path, O_RDWR | O_CREAT, 0o600)
        defer { close(held) }
        #expect(flock(held, LOCK_EX | LOCK_NB) == 0)
        #expect(throws: TokenCacheError.self) { try MSALExtensionsLock.acquire(path, timeout: 0.3) }
        flock(held, LOCK_UN)

        // Not flocked, old, but its pid is alive (ours): never stale.
        let content = Data([0xEF, 0xBB, 0xBF]) + Data("\(getpid()) dotnet\n".utf8)
        try content.write(to: URL(fileURLWithPath: path))
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: -60)], ofItemAtPath: path)
        do {
            _ = try MSALExtensionsLock.acquire(path, timeout: 0.3)
            Issue.record("a live holder's lock was taken")
        } catch {
            #expect(error.code == .timedOut)
            #expect(error.message.contains("pid \(getpid()) (dotnet)"))
        }

        // An old file naming a dead pid is stale: removed, and the lock taken afresh, then released.
        try Data("999999999 python".utf8).write(to: URL(fileURLWithPath: path))
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: -60)], ofItemAtPath: path)
        let lock = try MSALExtensionsLock.acquire(path, timeout: 1)
        #expect(try String(contentsOfFile: path, encoding: .utf8).hasPrefix("\(getpid()) "))
        lock.release()
        #expect(!FileManager.default.fileExists(atPath: path))
    }
}
