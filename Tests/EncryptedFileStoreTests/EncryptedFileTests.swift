import Foundation
import Testing
@testable import EncryptedFileStore
@_spi(Backend) @testable import TokenCacheCore
@testable import TokenCachePlatform
#if canImport(Glibc)
import Glibc
#endif
import TokenCacheTestSupport

@Suite("Encrypted-file backend", .harness)
struct EncryptedFileTests {
    let directory: URL
    let group = try! CacheGroup("org.swift-tokencache.file-test")

    init() throws { directory = try TestEnvironment.temporaryDirectory().appendingPathComponent("cache") }

    func backend(_ keySource: EncryptedFileBackend.KeySource = .keyFile()) -> EncryptedFileBackend {
        EncryptedFileBackend(directory: directory, keySource: keySource)
    }

    func savedStore(_ backend: EncryptedFileBackend) throws -> AccountStore {
        let store = AccountStore(backend: backend, group: group)
        try store.save(Fixtures.tokenResponse(Fixtures.response(for: Fixtures.alice)), clientID: Fixtures.appOne,
                       authority: Fixtures.authority(), scopes: [], now: Fixtures.now)
        return store
    }

    func mode(_ path: String) throws -> Int {
        try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as! Int
    }

    @Test("The account store runs unchanged on the encrypted file, across backend instances")
    func accountStoreRoundTrip() throws {
        let store = try savedStore(backend())
        try store.save(Fixtures.tokenResponse(Fixtures.response(for: Fixtures.alice, tag: "two")), clientID: Fixtures.appTwo,
                       authority: Fixtures.authority(), scopes: [], now: Fixtures.now)
        // A fresh process's view: a new backend and store on the same directory.
        let reopened = AccountStore(backend: backend(), group: group)
        let account = try #require(try reopened.account(Fixtures.alice.username, clientID: Fixtures.appTwo))
        #expect(try reopened.accessToken(clientID: Fixtures.appOne, account: account, scopes: ["User.Read"], now: Fixtures.now) != nil)
        try reopened.signOut(account, clientID: Fixtures.appOne)
        #expect(try store.accounts(clientID: Fixtures.appOne).isEmpty)
        #expect(try store.accounts(clientID: Fixtures.appTwo).count == 1)
        try store.remove(account)
        #expect(try reopened.allAccounts().isEmpty)
        #expect(try reopened.exportMSALJSON() == store.exportMSALJSON())
    }

    @Test("Files and directory get 0600 and 0700, and the file reveals no token")
    func modesAndNoPlaintext() throws {
        let backend = backend()
        _ = try savedStore(backend)
        #expect(try mode(directory.path) == 0o700)
        #expect(try mode(backend.fileURL(for: group).path) == 0o600)
        #expect(try mode(directory.appendingPathComponent("cache.key").path) == 0o600)
        let bytes = try Data(contentsOf: backend.fileURL(for: group))
        for secret in ["at-", "rt-", Fixtures.alice.username, "AccessToken"] {
            #expect(bytes.range(of: Data(secret.utf8)) == nil, "file contains \(secret)")
        }
    }

    @Test("Every byte of a small file flipped in turn is detected, and the file is never rewritten")
    func everyByteFlipped() throws {
        let backend = backend()
        let store = AccountStore(backend: backend, group: group)
        try store.importMSALJSON(Data(#"{"AppMetadata": {"k": {"client_id": "c", "environment": "e"}}}"#.utf8))
        let path = backend.fileURL(for: group).path
        let original = try Data(contentsOf: URL(fileURLWithPath: path))
        for index in 0..<original.count {
            var damaged = original
            damaged[index] ^= 0x01
            try damaged.write(to: URL(fileURLWithPath: path))
            let fresh = EncryptedFileBackend(directory: directory)
            let error = try #require(throws: TokenCacheError.self, "byte \(index)") { try fresh.load(group) }
            #expect([.fileAuthenticationFailed, .fileMismatch].contains(error.code), "byte \(index): \(error.code)")
            #expect(index >= 10 || error.code == .fileMismatch, "magic/version byte \(index)")
            // A write must refuse, leaving the damaged file exactly as it was.
            #expect(throws: TokenCacheError.self) {
                _ = try fresh.apply([.remove(.appMetadata, key: "k")], to: group, expected: nil)
            }
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == damaged)
        }
        try original.write(to: URL(fileURLWithPath: path))
        #expect(try EncryptedFileBackend(directory: directory).load(group).entries.count == 1)
    }

    @Test("A truncated file gives an authentication error at every length", arguments: [0, 5, 12, 40, 100, -16, -1])
    func truncated(at length: Int) throws {
        let backend = backend()
        _ = try savedStore(backend)
        let url = backend.fileURL(for: group)
        let original = try Data(contentsOf: url)
        let cut = length >= 0 ? original.prefix(length) : original.dropLast(-length)
        try Data(cut).write(to: url)
        let error = try #require(throws: TokenCacheError.self) { try EncryptedFileBackend(directory: directory).load(group) }
        #expect([.fileAuthenticationFailed, .fileMismatch].contains(error.code))
        #expect(!error.description.contains("at-"))
    }

    @Test("A different key or passphrase cannot read the file, and cannot overwrite it")
    func wrongKey() throws {
        _ = try savedStore(backend(.key([UInt8](repeating: 7, count: 32))))
        let path = backend().fileURL(for: group)
        let before = try Data(contentsOf: path)
        for other in [EncryptedFileBackend.KeySource.key([UInt8](repeating: 8, count: 32)), .passphrase("guess"), .keyFile()] {
            let error = try #require(throws: TokenCacheError.self) { try backend(other).load(group) }
            #expect([.fileAuthenticationFailed, .fileMismatch].contains(error.code))
            #expect(throws: TokenCacheError.self) { _ = try backend(other).apply([], to: group, expected: nil) }
        }
        #expect(try Data(contentsOf: path) == before)
    }

    @Test("Another group's file swapped in is refused as a mismatch")
    func wrongGroup() throws {
        let backend = backend()
        _ = try savedStore(backend)
        let other = try CacheGroup("org.swift-tokencache.other")
        try FileManager.default.copyItem(at: backend.fileURL(for: group), to: backend.fileURL(for: other))
        let error = try #require(throws: TokenCacheError.self) { try backend.load(other) }
        #expect(error.code == .fileMismatch)
    }

    @Test("Passphrase mode round-trips, stores KDF parameters, and a wrong passphrase fails")
    func passphraseMode() throws {
        let store = try savedStore(backend(.passphrase("correct horse battery staple")))
        let header = try CacheFileFormat.parse(try Data(contentsOf: backend().fileURL(for: group)), path: "x").header
        #expect(header.kdf?.name == "scrypt")
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("cache.key").path))
        let reopened = AccountStore(backend: backend(.passphrase("correct horse battery staple")), group: group)
        #expect(try reopened.exportMSALJSON() == store.exportMSALJSON())
        let error = try #require(throws: TokenCacheError.self) { try backend(.passphrase("wrong")).load(group) }
        #expect(error.code == .fileAuthenticationFailed)
        #expect(!error.description.contains("correct horse"))
    }

    @Test("The header tells a passphrase file from a key-file one; each read with the other key source says which key it needs, never to restore a key file")
    func storedKeyKind() throws {
        #expect(try backend().storedKeyKind(of: group) == nil)
        _ = try savedStore(backend(.passphrase("correct horse battery staple")))
        #expect(try backend().storedKeyKind(of: group) == .passphrase)
        let before = try Data(contentsOf: backend().fileURL(for: group))
        let withKeyFile = try #require(throws: TokenCacheError.self) { try backend().load(group) }
        #expect(withKeyFile.code == .fileMismatch)
        #expect(withKeyFile.message.contains("created with a passphrase"), "\(withKeyFile)")
        #expect(!(withKeyFile.hint ?? "").contains("Restore") && !(withKeyFile.hint ?? "").contains("move"), "\(withKeyFile)")
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("cache.key").path), "a key file was created")
        #expect(try Data(contentsOf: backend().fileURL(for: group)) == before)

        let other = try CacheGroup("org.swift-tokencache.key-file")
        _ = try backend().apply([], to: other, expected: nil)  // an empty file with the key file
        #expect(try backend().storedKeyKind(of: other) == .key)
        let withPassphrase = try #require(throws: TokenCacheError.self) { try backend(.passphrase("correct horse battery staple")).load(other) }
        #expect(withPassphrase.code == .fileMismatch && withPassphrase.message.contains("not a passphrase"), "\(withPassphrase)")
    }

    @Test("A passphrase from the environment or an app callback opens the same file; a failing callback changes nothing")
    func passphraseSources() throws {
        // The passphrase is the value of a variable the process started with (PATH): setting one
        // here would race the other suites' threads reading the environment (setenv is not
        // synchronised with getenv).
        let passphrase = try #require(ProcessInfo.processInfo.environment["PATH"].flatMap { $0.isEmpty ? nil : $0 })
        let store = try savedStore(backend(.passphrase(passphrase)))
        let fromEnvironment = AccountStore(backend: backend(.passphraseFromEnvironment(variable: "PATH")), group: group)
        #expect(try fromEnvironment.exportMSALJSON() == store.exportMSALJSON())
        let fromCallback = AccountStore(backend: backend(.passphraseProvider { passphrase }), group: group)
        #expect(try fromCallback.exportMSALJSON() == store.exportMSALJSON())

        struct Cancelled: Error {}
        let before = try Data(contentsOf: backend().fileURL(for: group))
        let error = try #require(throws: TokenCacheError.self) {
            try backend(.passphraseProvider { throw Cancelled() }).load(group)
        }
        #expect(error.code == .invalidArgument)
        #expect(try Data(contentsOf: backend().fileURL(for: group)) == before)
        let unset = try #require(throws: TokenCacheError.self) {
            try backend(.passphraseFromEnvironment(variable: "TOKENCACHE_TEST_UNSET_PASSPHRASE")).load(group)
        }
        #expect(unset.description.contains("TOKENCACHE_TEST_UNSET_PASSPHRASE"))
    }

    @Test("Symlinks, hard links, loose modes and a world-writable directory are refused")
    func unsafeFilesRefused() throws {
        let backend = backend()
        _ = try savedStore(backend)
        let path = backend.fileURL(for: group).path

        chmod(path, 0o644)
        #expect((try? backend.load(group)) == nil)
        #expect(throws: TokenCacheError.self) { try EncryptedFileBackend(directory: directory).load(group) }
        chmod(path, 0o600)

        let link = directory.appendingPathComponent("hard").path
        #expect(Glibc.link(path, link) == 0)
        let hardLinked = try #require(throws: TokenCacheError.self) { try EncryptedFileBackend(directory: directory).load(group) }
        #expect(hardLinked.code == .unsafeFile)
        unlink(link)

        let target = directory.appendingPathComponent("elsewhere").path
        #expect(rename(path, target) == 0)
        #expect(symlink(target, path) == 0)
        let symlinked = try #require(throws: TokenCacheError.self) { try EncryptedFileBackend(directory: directory).load(group) }
        #expect(symlinked.code == .unsafeFile)
        unlink(path)
        #expect(rename(target, path) == 0)

        chmod(directory.path, 0o777)
        let open = try #require(throws: TokenCacheError.self) {
            _ = try EncryptedFileBackend(directory: directory).apply([], to: group, expected: nil)
        }
        #expect(open.code == .unsafeFile)
        chmod(directory.path, 0o700)
        #expect(try EncryptedFileBackend(directory: directory).load(group).entries.count == 6)
    }

    @Test("A full disk (file-size limit) gives a file-system error, the old file intact and no temp file left")
    func diskFull() throws {
        let backend = backend()
        _ = try savedStore(backend)
        let before = try Data(contentsOf: backend.fileURL(for: group))
        let helper = TestEnvironment.binDirectory.appendingPathComponent("TokenCacheTestHelper").path
        let output = try runProcess(helper, ["file-write-limited", directory.path, group.name, "65536"])
        #expect(output.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "fileSystem", "\(output.stderr)")
        #expect(output.stderr.contains("intact"))
        #expect(try Data(contentsOf: backend.fileURL(for: group)) == before)
        #expect(try EncryptedFileBackend(directory: directory).load(group).entries.count == 6)
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.contains(".tmp.") }
        #expect(leftovers.isEmpty)
    }

    @Test("Two processes doing read-modify-write at once lose nothing")
    func concurrentProcesses() throws {
        let helper = TestEnvironment.binDirectory.appendingPathComponent("TokenCacheTestHelper").path
        let count = 100
        let processes = try ["a", "b", "c"].map { prefix in
            let process = Process()
            process.executableURL = URL(fileURLWithPath: helper)
            process.arguments = ["file-writer", directory.path, group.name, prefix, String(count)]
            try process.run()
            return process
        }
        for process in processes {
            process.waitUntilExit()
            #expect(process.terminationStatus == 0)
        }
        let keys = Set(try backend().load(group).entries.map(\.key))
        #expect(keys.count == 3 * count)
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.contains(".tmp.") }
        #expect(leftovers.isEmpty)
    }

    @Test("The key file appears whole or not at all: a creator killed before the rename leaves only a temporary file, which the next creator removes")
    func keyFileCreatedWhole() throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let stale = directory.appendingPathComponent(".cache.key.tmp.4242.abcdef")
        try Data([1, 2, 3]).write(to: stale)
        #expect(try savedStore(backend()).allAccounts().count == 1)
        let key = try Data(contentsOf: directory.appendingPathComponent("cache.key"))
        #expect(key.count == 32)
        #expect(!FileManager.default.fileExists(atPath: stale.path))
        let mode = try FileManager.default.attributesOfItem(atPath: directory.appendingPathComponent("cache.key").path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        // A second backend (another process's view) reads the same key.
        #expect(try AccountStore(backend: backend(), group: group).allAccounts().count == 1)
    }

    @Test("kill -9 during writes always leaves a complete, readable generation and no temp files pile up")
    func killDuringWrites() throws {
        let helper = TestEnvironment.binDirectory.appendingPathComponent("TokenCacheTestHelper").path
        let iterations = Int(ProcessInfo.processInfo.environment["TOKENCACHE_KILL_ITERATIONS"] ?? "30")!
        var previous = 0, maxTemporary = 0
        for iteration in 0..<iterations {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: helper)
            process.arguments = ["file-writer", directory.path, group.name, "k\(iteration)", "1000"]
            try process.run()
            usleep(useconds_t(20_000 + (iteration * 7_919) % 60_000))
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            let entries = try EncryptedFileBackend(directory: directory).load(group).entries
            #expect(entries.count >= previous, "iteration \(iteration) lost entries")
            previous = entries.count
            // Each writer saves keys in order: what is there is a prefix, never a hole.
            let mine = entries.filter { $0.key.hasPrefix("k\(iteration)-") }.count
            #expect(Set(entries.filter { $0.key.hasPrefix("k\(iteration)-") }.map(\.key))
                    == Set((0..<mine).map { "k\(iteration)-\($0)" }))
            // At most the one temp file the killed writer was filling: each write removes stale ones.
            let temporary = ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []).filter { $0.contains(".tmp.") }
            #expect(temporary.count <= 1, "iteration \(iteration): temp files pile up: \(temporary)")
            maxTemporary = max(maxTemporary, temporary.count)
        }
        print("KILL: \(iterations) writers killed with SIGKILL, \(previous) entries kept, at most \(maxTemporary) temp file at a time")
        // The next write cleans up whatever a killed writer left.
        _ = try backend().apply([], to: group, expected: nil)
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.contains(".tmp.") }
        #expect(leftovers.isEmpty)
    }

    @Test("A process reloads only when the file changed")
    func reloadsOnlyOnChange() throws {
        let backend = backend()
        let store = try savedStore(backend)
        let revision = try backend.currentRevision(of: group)
        #expect(try backend.currentRevision(of: group) == revision)
        let other = AccountStore(backend: EncryptedFileBackend(directory: directory), group: group)
        try other.remove(try #require(try other.allAccounts().first))
        #expect(try backend.currentRevision(of: group) != revision)
        #expect(try store.allAccounts().isEmpty)
    }

    @Test("A missing key file with an existing cache is an error, not an empty cache")
    func missingKeyFile() throws {
        _ = try savedStore(backend())
        try FileManager.default.removeItem(at: directory.appendingPathComponent("cache.key"))
        let error = try #require(throws: TokenCacheError.self) { try EncryptedFileBackend(directory: directory).load(group) }
        #expect(error.code == .fileAuthenticationFailed)
        #expect(throws: TokenCacheError.self) { _ = try EncryptedFileBackend(directory: directory).apply([], to: group, expected: nil) }
    }

    @Test("A listing reads access and refresh tokens without their secrets and unread members, keeps ID tokens' secrets, and leaves later reads whole")
    func listingWithoutTokenSecrets() throws {
        _ = try savedStore(backend())
        let fresh = backend()  // a new process: nothing read yet
        let listed = try fresh.loadForListing(group).entries
        let full = try fresh.load(group).entries
        #expect(listed.count == full.count)
        for entry in full {
            let twin = try #require(listed.first { $0.kind == entry.kind && $0.key == entry.key })
            let rule = JSONParser.Omission.listing.rules[entry.kind.rawValue]
            let expected = entry.fields.filter { !(rule?.omits($0.key) ?? false) }
            #expect(twin.fields == expected, "\(entry.kind)")
            #expect(expected.count < entry.fields.count || rule == nil, "\(entry.kind) loses something")
        }
        #expect(full.contains { $0.kind == .accessToken && $0["secret"] != nil }, "the full read after a listing has the secrets")
        #expect(full.contains { $0.kind == .idToken } && listed.filter { $0.kind == .idToken }.allSatisfy { $0["secret"] != nil })
        // With the whole group at hand, a listing gets it as it is.
        #expect(try fresh.loadForListing(group).entries.contains { $0.kind == .accessToken && $0["secret"] != nil })
    }

    @Test("A store lists the same inventory with or without the group loaded, follows changes, and still finds tokens after listing")
    func inventoryFromListingRead() throws {
        let writer = try savedStore(backend())
        // What a listing shows of each kind: a second client signed out, a display name, family and own refresh tokens.
        try writer.save(Fixtures.tokenResponse(Fixtures.response(for: Fixtures.alice, tag: "two")), clientID: Fixtures.appTwo,
                        authority: Fixtures.authority(), scopes: [], now: Fixtures.now)
        try writer.signOut(try #require(try writer.account(Fixtures.alice.username, clientID: Fixtures.appTwo)), clientID: Fixtures.appTwo)
        try writer.setAppDisplayName("Notes", clientID: Fixtures.appOne, authority: Fixtures.authority())
        let loaded = try writer.inventory(now: Fixtures.now)
        #expect(loaded.accounts.first?.name != nil && loaded.accounts.first?.clients.count == 2)
        #expect(loaded.accounts.first?.clients.contains { $0.signInState == .signedOut } == true)
        #expect(loaded.accounts.first?.clients.contains { $0.displayName == "Notes" && !$0.accessTokens.isEmpty && $0.refreshToken != .none } == true)
        let reader = AccountStore(backend: backend(), group: group)  // nothing loaded: reads for listing
        let listed = try reader.inventory(now: Fixtures.now)
        #expect(listed == loaded)
        #expect(listed.jsonData() == loaded.jsonData(), "`list --json` prints the same bytes")
        try writer.save(Fixtures.tokenResponse(Fixtures.response(for: Fixtures.bob, tag: "list")), clientID: Fixtures.appTwo,
                        authority: Fixtures.authority(), scopes: [], now: Fixtures.now)
        let changed = try reader.inventory(now: Fixtures.now)
        #expect(changed.accounts.count == 2, "a change by another store shows in the next listing")
        #expect(changed == (try writer.inventory(now: Fixtures.now)))
        let account = try #require(try reader.account(Fixtures.alice.username, clientID: Fixtures.appOne))
        let token = try reader.accessToken(clientID: Fixtures.appOne, account: account, scopes: ["User.Read"], now: Fixtures.now)
        #expect(token?.accessToken.isEmpty == false, "lookups after a listing read the secrets")
    }
}
