import Foundation
import Testing
@testable import EncryptedFileStore
@_spi(Backend) @testable import TokenCacheCore
@testable import TokenCachePlatform
#if canImport(Glibc)
import Glibc
#endif
import TokenCacheTestSupport

/// An older, validly encrypted copy of a group's file put back (an attacker, a restore) after
/// newer writes: refused with `fileRolledBack`, never overwritten, accepted only on request.
@Suite("Encrypted-file backend: rollback of the file", .harness)
struct EncryptedFileRollbackTests {
    let directory: URL
    let group = try! CacheGroup("org.swift-tokencache.rollback")

    static let carol = Fixtures.User(uid: "ca201000-0000-0000-0000-000000000000", tenant: Fixtures.tenantA,
                                     username: "carol@contoso.com", name: "Carol Example")

    init() throws { directory = try TestEnvironment.temporaryDirectory().appendingPathComponent("cache") }

    func backend(_ keySource: EncryptedFileBackend.KeySource = .keyFile()) -> EncryptedFileBackend {
        EncryptedFileBackend(directory: directory, keySource: keySource)
    }

    func save(_ store: AccountStore, _ user: Fixtures.User) throws {
        try store.save(Fixtures.tokenResponse(Fixtures.response(for: user)), clientID: Fixtures.appOne,
                       authority: Fixtures.authority(), scopes: [], now: Fixtures.now)
    }

    /// Puts `bytes` back as the group's file, as a restore would (a new inode, mode 0600).
    func putBack(_ bytes: Data, for backend: EncryptedFileBackend) throws {
        let url = backend.fileURL(for: group)
        let staging = directory.appendingPathComponent("staging")
        try bytes.write(to: staging)
        chmod(staging.path, 0o600)
        #expect(rename(staging.path, url.path) == 0)
    }

    func generation(_ backend: EncryptedFileBackend) throws -> UInt64 {
        try CacheFileFormat.parse(try Data(contentsOf: backend.fileURL(for: group)), path: "x").header.generation
    }

    @Test("A same-size rewrite in place that keeps the inode, the modification time and the size is still a new revision: a reader that cached the old file reads it again instead of serving its stale copy")
    func exactRevision() throws {
        let writer = backend(), reader = backend()
        try save(AccountStore(backend: writer, group: group), Fixtures.alice)
        let file = writer.fileURL(for: group).path
        let cached = try reader.load(group)
        #expect(cached.entries.contains { $0.kind == .accessToken })
        var before = stat()
        #expect(lstat(file, &before) == 0)
        // Other bytes of the same length written into the same inode, and the modification time
        // set back to the very nanosecond. Every write ends in a tag of its own (a fresh nonce):
        // here the last byte differs, as another write's would.
        var bytes = try Data(contentsOf: URL(fileURLWithPath: file))
        bytes[bytes.count - 1] ^= 0x01
        let descriptor = open(file, O_WRONLY)
        #expect(descriptor >= 0)
        _ = bytes.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }
        close(descriptor)
        var times = [before.st_atim, before.st_mtim]
        #expect(utimensat(AT_FDCWD, file, &times, 0) == 0)
        var after = stat()
        #expect(lstat(file, &after) == 0)
        #expect(after.st_ino == before.st_ino && after.st_size == before.st_size
                && after.st_mtim.tv_sec == before.st_mtim.tv_sec && after.st_mtim.tv_nsec == before.st_mtim.tv_nsec)
        #expect(try reader.currentRevision(of: group) != cached.revision)
        // Read again, not served from the cache: the changed bytes do not authenticate.
        let error = #expect(throws: TokenCacheError.self) { try reader.load(group) }
        #expect(error?.code == .fileAuthenticationFailed)
    }

    @Test("An older copy put back after an account was removed is refused on load, listing and save, the file left as it is; accepting it on purpose brings it back")
    func olderCopyRefused() throws {
        let backend = backend()
        let store = AccountStore(backend: backend, group: group)
        try save(store, Fixtures.alice)
        try save(store, Fixtures.bob)
        let old = try Data(contentsOf: backend.fileURL(for: group))
        let oldGeneration = try generation(backend)
        try store.remove(try #require(try store.account(Fixtures.alice.username)))
        #expect(try generation(backend) > oldGeneration)
        try putBack(old, for: backend)

        for reader in [backend, self.backend()] {  // this process (which saw the newer file) and a fresh one
            let error = try #require(throws: TokenCacheError.self) { try reader.load(group) }
            #expect(error.code == .fileRolledBack)
            #expect(error.message.contains("older than one this machine has already seen"))
            #expect(error.hint?.contains("--accept-rollback") == true && error.hint?.contains("acceptRolledBackFile") == true)
            #expect(throws: TokenCacheError.self) { try reader.loadForListing(group) }
            let saveError = try #require(throws: TokenCacheError.self) {
                _ = try reader.apply([.remove(.appMetadata, key: "x")], to: group, expected: nil)
            }
            #expect(saveError.code == .fileRolledBack, "a save must not overwrite the rolled-back file")
            #expect((try #require(throws: TokenCacheError.self) { try reader.removeAll(in: group) }).code == .fileRolledBack)
        }
        #expect(try Data(contentsOf: backend.fileURL(for: group)) == old, "nothing stored was changed")
        #expect(throws: TokenCacheError.self) { try AccountStore(backend: self.backend(), group: group).allAccounts() }

        try self.backend().acceptRolledBackFile(for: group)
        #expect(try Data(contentsOf: backend.fileURL(for: group)) == old, "accepting does not change the file")
        let accepted = AccountStore(backend: self.backend(), group: group)
        #expect(Set(try accepted.allAccounts().map(\.username)) == [Fixtures.alice.username, Fixtures.bob.username])
        try save(accepted, Self.carol)
        #expect(try generation(backend) == oldGeneration + 1)
        // And from now on that copy is older again.
        try putBack(old, for: backend)
        #expect((try #require(throws: TokenCacheError.self) { try self.backend().load(group) }).code == .fileRolledBack)
    }

    @Test("The state file: 0600 beside the key file, named after the cache directory when the key lives elsewhere, never a link; deleted, nothing is known; a deleted cache file continues above it")
    func stateFile() throws {
        let backend = backend()
        let store = AccountStore(backend: backend, group: group)
        try save(store, Fixtures.alice)
        let old = try Data(contentsOf: backend.fileURL(for: group))
        try save(store, Fixtures.bob)
        let state = try backend.generationStateURL(for: group)
        #expect(state.path == directory.appendingPathComponent("\(group.name).generation").path)
        #expect(try FileManager.default.attributesOfItem(atPath: state.path)[.posixPermissions] as? Int == 0o600)
        let text = try String(contentsOf: state, encoding: .utf8)
        let current = try generation(backend)
        #expect(text.hasPrefix("tokencache-generations 1\n") && text.hasSuffix(" \(current)\n"), "\(text)")

        // A link in its place is refused like every file here.
        let moved = directory.appendingPathComponent("state-elsewhere")
        #expect(rename(state.path, moved.path) == 0)
        #expect(symlink(moved.path, state.path) == 0)
        let linked = try #require(throws: TokenCacheError.self) { try self.backend().load(group) }
        #expect(linked.code == .unsafeFile)
        #expect(unlink(state.path) == 0)
        #expect(rename(moved.path, state.path) == 0)

        // The cache file deleted: the next write continues above what was seen, so it is not refused.
        let seen = try #require(try GenerationState(path: state.path).generation(keyID: try CacheFileFormat.parse(old, path: "x").header.keyID))
        try FileManager.default.removeItem(at: backend.fileURL(for: group))
        try save(AccountStore(backend: self.backend(), group: group), Self.carol)
        #expect(try generation(backend) == seen + 1)
        #expect(try self.backend().load(group).entries.isEmpty == false)

        // What remains possible: with the state file deleted, nothing is known and an old copy is accepted.
        try FileManager.default.removeItem(at: state)
        try putBack(old, for: backend)
        #expect(try self.backend().load(group).entries.isEmpty == false)
        #expect(FileManager.default.fileExists(atPath: state.path), "the first read remembers again")

        // A key file in another directory keeps the state beside it, one file per cache directory.
        let keyDirectory = directory.deletingLastPathComponent().appendingPathComponent("keys")
        let elsewhere = EncryptedFileBackend(directory: directory.deletingLastPathComponent().appendingPathComponent("other"),
                                             keySource: .keyFile(keyDirectory.appendingPathComponent("my.key")))
        try save(AccountStore(backend: elsewhere, group: group), Fixtures.alice)
        let remote = try elsewhere.generationStateURL(for: group)
        #expect(remote.deletingLastPathComponent().path == keyDirectory.path)
        #expect(remote.lastPathComponent.hasPrefix("\(group.name).") && remote.lastPathComponent != "\(group.name).generation")
        #expect(FileManager.default.fileExists(atPath: remote.path))
        // An app-supplied key: in the cache directory.
        #expect(try self.backend(.key([UInt8](repeating: 3, count: 32))).generationStateURL(for: group).path == state.path)
    }

    @Test("Writer processes at once leave the remembered generation at the file's, and no temporary state file")
    func concurrentWriters() throws {
        let helper = TestEnvironment.binDirectory.appendingPathComponent("TokenCacheTestHelper").path
        let processes = try ["a", "b", "c"].map { prefix in
            let process = Process()
            process.executableURL = URL(fileURLWithPath: helper)
            process.arguments = ["file-writer", directory.path, group.name, prefix, "15"]
            try process.run()
            return process
        }
        for process in processes {
            process.waitUntilExit()
            #expect(process.terminationStatus == 0)
        }
        let header = try CacheFileFormat.parse(try Data(contentsOf: backend().fileURL(for: group)), path: "x").header
        #expect(header.generation == 45)
        let state = GenerationState(path: try backend().generationStateURL(for: group).path)
        #expect(try state.generation(keyID: header.keyID) == 45)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.contains(".tmp.") }.isEmpty)
    }

    @Test("tokencache refuses a rolled-back file with the hint, and doctor --accept-rollback accepts it")
    func commandLine() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        _ = try cli.save(Fixtures.alice, client: Fixtures.appOne)
        let file = cli.dataHome.appendingPathComponent("tokencache/\(cli.group).tkc")
        let old = try Data(contentsOf: file)
        _ = try cli.save(Fixtures.bob, client: Fixtures.appOne)
        try old.write(to: file)
        let refused = try cli.run(["list"])
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("older than one this machine has already seen"), "\(refused.stderr)")
        // The command in the hint names the group: run as it is, it accepts this file and no other.
        #expect(refused.stderr.contains("tokencache doctor --backend file --group \(cli.group) --accept-rollback"), "\(refused.stderr)")
        #expect(try Data(contentsOf: file) == old)
        let help = try cli.run(["doctor", "--help"], withGroup: false)
        #expect(help.stdout.contains("--accept-rollback"))
        let accepted = try cli.run(["doctor", "--accept-rollback"])
        #expect(accepted.status == 0, "\(accepted.stderr)")
        #expect(accepted.stderr.contains("Accepted"))
        let listed = try cli.run(["list"])
        #expect(listed.status == 0, "\(listed.stderr)")
        #expect(listed.stdout.contains(Fixtures.alice.username) && !listed.stdout.contains(Fixtures.bob.username))
    }
}
