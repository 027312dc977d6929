import Foundation
import Testing
@testable import EncryptedFileStore
@testable import SecretServiceStore
@testable import TokenCache
@testable import TokenCacheCore
@testable import TokenCachePlatform
import TokenCacheTestSupport

/// The refresh-lock directory gets the encrypted file's directory checks: whoever controls it
/// could hold every lock file and block refreshes.
@Suite("Refresh-lock directory", .harness)
struct SSORefreshLockDirectoryTests {
    /// `<temp>/runtime/tokencache/locks`, as RefreshLock.directory makes of XDG_RUNTIME_DIR.
    static func locks(in root: URL) -> URL { root.appendingPathComponent("runtime/tokencache/locks") }

    static func mode(_ path: String) -> mode_t {
        var info = stat()
        return lstat(path, &info) == 0 ? info.st_mode & 0o777 : 0
    }

    static func refusal(_ directory: URL) -> TokenCacheError? {
        do {
            _ = try RefreshLock.acquireBlocking(name: "alice", timeout: 1, directory: directory, isCancelled: { false })
            return nil
        } catch {
            return error
        }
    }

    @Test("Missing directories are created 0700 up to the runtime dir, and the lock is taken")
    func createsPrivateDirectories() throws {
        let root = try TestEnvironment.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let directory = Self.locks(in: root)
        let lock = try RefreshLock.acquireBlocking(name: "alice", timeout: 1, directory: directory, isCancelled: { false })
        withExtendedLifetime(lock) {}
        for path in [root.appendingPathComponent("runtime").path, directory.deletingLastPathComponent().path, directory.path] {
            #expect(Self.mode(path) == 0o700, "\(path)")
        }
    }

    @Test("A tokencache directory owned by another user is refused, naming it and the fix",
          .enabled(if: geteuid() == 0, "needs root to give a directory to nobody"))
    func otherOwnerRefused() throws {
        let root = try TestEnvironment.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let directory = Self.locks(in: root)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        #expect(chown(directory.deletingLastPathComponent().path, 65534, 65534) == 0)
        let error = try #require(Self.refusal(directory))
        #expect(error.code == .unsafeFile)
        #expect(error.message.contains(directory.deletingLastPathComponent().path) && error.message.contains("owned by another user (uid 65534)"), "\(error.message)")
        #expect(error.hint?.contains("Remove \(directory.deletingLastPathComponent().path)") == true, "\(error.hint ?? "")")

        // The locks directory itself owned by nobody, its parent ours: refused too.
        #expect(chown(directory.deletingLastPathComponent().path, geteuid(), getegid()) == 0)
        #expect(chown(directory.path, 65534, 65534) == 0)
        let inner = try #require(Self.refusal(directory))
        #expect(inner.code == .unsafeFile && inner.message.contains("The lock directory \(directory.path) is unsafe"), "\(inner.message)")
    }

    @Test("A lock directory that is a symbolic link (even to a private directory of ours) is refused")
    func symlinkRefused() throws {
        let root = try TestEnvironment.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let directory = Self.locks(in: root)
        let elsewhere = root.appendingPathComponent("elsewhere")
        try FileManager.default.createDirectory(at: elsewhere, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try FileManager.default.createDirectory(at: directory.deletingLastPathComponent(), withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        #expect(symlink(elsewhere.path, directory.path) == 0)
        let error = try #require(Self.refusal(directory))
        #expect(error.code == .unsafeFile && error.message.contains("\(directory.path) is a symbolic link"), "\(error.message)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: elsewhere.path).isEmpty, "no lock file made through the link")
    }

    @Test("A group-writable lock directory is refused with the chmod that fixes it")
    func groupWritableRefused() throws {
        let root = try TestEnvironment.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let directory = Self.locks(in: root)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        #expect(chmod(directory.path, 0o770) == 0)
        let error = try #require(Self.refusal(directory))
        #expect(error.code == .unsafeFile && error.message.contains("writable by others (mode 770)"), "\(error.message)")
        #expect(error.hint == "chmod 700 \(directory.path)")
    }
}
