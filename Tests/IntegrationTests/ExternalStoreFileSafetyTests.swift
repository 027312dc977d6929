import Foundation
import Testing
@testable import TokenCache
@testable import TokenCacheCore
@testable import TokenCachePlatform
#if canImport(Glibc)
import Glibc
#endif
import TokenCacheTestSupport

/// Other tools' store files get the encrypted file's owner, mode and link checks, and a config
/// "lock" path never deletes a file that is not a lock (#34 items 6 and 7). We run as root: the
/// other user is uid 65534.
@Suite("External store files: owner, mode, links and lock paths", .harness)
struct ExternalStoreFileSafetyTests {
    static let otherUser: uid_t = 65534
    /// MSAL JSON with a section the codec keeps as it is: what must survive a refusal byte for byte.
    static let cache = Data(#"{"AccessToken": {}, "Account": {}, "AppMetadata": {}, "IdToken": {}, "RefreshToken": {}, "Kept": {"by": "owner"}}"#.utf8)

    /// A folder of the test (0700, ours) holding `folder/cache.json` with `cache`, mode `mode`.
    func storeFile(mode: mode_t = 0o600) throws -> (root: URL, folder: URL, path: String) {
        let root = try TestEnvironment.temporaryDirectory()
        let folder = root.appendingPathComponent("tool")
        #expect(mkdir(folder.path, 0o700) == 0)
        let path = folder.appendingPathComponent("cache.json").path
        try Self.cache.write(to: URL(fileURLWithPath: path))
        #expect(chmod(path, mode) == 0)
        return (root, folder, path)
    }

    func access(_ path: String) -> ExternalStoreAccess {
        ExternalStoreAccess(ExternalStore(name: "tool", persistence: .file(path: path, signal: nil), lockFiles: [path + ".lockfile"],
                                          source: "test"), secretService: nil)
    }

    /// Reading and changing the store are both refused with `unsafeFile` and `hint`; the file keeps
    /// its content, mode and owner, and no lock file is left.
    func expectRefused(_ path: String, problem: String, hint: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        var before = stat()
        #expect(lstat(path, &before) == 0, sourceLocation: sourceLocation)
        let store = access(path)
        for (what, attempt) in [("read", { () throws(TokenCacheError) in _ = try store.read() }),
                                ("write", { () throws(TokenCacheError) in _ = try store.modify { _ in (true, ()) } })] {
            do {
                try attempt()
                Issue.record("the \(what) of \(path) was not refused", sourceLocation: sourceLocation)
            } catch {
                #expect(error.code == .unsafeFile, "\(what): \(error)", sourceLocation: sourceLocation)
                #expect(error.message.contains(problem), "\(what): \(error.message)", sourceLocation: sourceLocation)
                #expect(error.hint?.contains(hint) == true, "\(what): \(error.hint ?? "")", sourceLocation: sourceLocation)
                #expect(error.hint?.contains("move it away") != true, sourceLocation: sourceLocation)
            }
        }
        var after = stat()
        #expect(lstat(path, &after) == 0, sourceLocation: sourceLocation)
        #expect((after.st_mode, after.st_uid, after.st_ino) == (before.st_mode, before.st_uid, before.st_ino), sourceLocation: sourceLocation)
        if before.st_mode & S_IFMT == S_IFREG {
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == Self.cache, sourceLocation: sourceLocation)
        }
        #expect(!FileManager.default.fileExists(atPath: path + ".lockfile"), sourceLocation: sourceLocation)
    }

    @Test("A store file others can read or write (0666, 0644) is refused for reads and writes with chmod 600 as the fix, and left as it was")
    func unsafeMode() throws {
        for mode: mode_t in [0o666, 0o644, 0o660] {
            let (root, _, path) = try storeFile(mode: mode)
            defer { try? FileManager.default.removeItem(at: root) }
            try expectRefused(path, problem: "readable or writable by others (mode \(String(mode, radix: 8)))", hint: "chmod 600 \(path)")
        }
    }

    @Test("A store file of another user (uid 65534) is refused, never written and chowned back")
    func otherOwner() throws {
        let (root, _, path) = try storeFile()
        defer { try? FileManager.default.removeItem(at: root) }
        #expect(chown(path, Self.otherUser, gid_t(Self.otherUser)) == 0)
        try expectRefused(path, problem: "owned by another user (uid 65534)", hint: "owned by you")
    }

    @Test("A store file in a folder another user owns, or that group or others can write, is refused for reads and writes; nothing is lost")
    func unsafeFolder() throws {
        let (root, folder, path) = try storeFile()
        defer { try? FileManager.default.removeItem(at: root) }
        #expect(chown(folder.path, Self.otherUser, gid_t(Self.otherUser)) == 0)
        try expectRefused(path, problem: "owned by another user (uid 65534)", hint: "chown \(geteuid()) \(folder.path)")
        #expect(chown(folder.path, geteuid(), getegid()) == 0)
        for mode: mode_t in [0o770, 0o777, 0o1777] {
            #expect(chmod(folder.path, mode) == 0)
            try expectRefused(path, problem: "writable by others", hint: "chmod 700 \(folder.path)")
        }
        // A new store in such a folder is not created there either.
        let missing = folder.appendingPathComponent("new.json").path
        #expect(throws: TokenCacheError.self) { try access(missing).modify(creatingIfMissing: true) { _ in (true, ()) } }
        #expect(!FileManager.default.fileExists(atPath: missing))
    }

    @Test("A symlinked store file or folder is refused for reads and writes; the file it points to is unchanged")
    func symlinks() throws {
        let (root, folder, path) = try storeFile()
        defer { try? FileManager.default.removeItem(at: root) }
        let link = folder.appendingPathComponent("link.json").path
        #expect(symlink(path, link) == 0)
        try expectRefused(link, problem: "symbolic link", hint: "in its place")
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == Self.cache)
        let linkedFolder = root.appendingPathComponent("linked")
        #expect(symlink(folder.path, linkedFolder.path) == 0)
        try expectRefused(linkedFolder.appendingPathComponent("cache.json").path, problem: "symbolic link", hint: "in its place")
    }

    @Test("A signal file of another user or a symlinked one refuses the write before anything is written")
    func unsafeSignal() throws {
        let (root, folder, path) = try storeFile()
        defer { try? FileManager.default.removeItem(at: root) }
        let signal = folder.appendingPathComponent("cache.sig").path
        let elsewhere = root.appendingPathComponent("elsewhere").path
        #expect(FileManager.default.createFile(atPath: elsewhere, contents: nil))
        for (plant, problem) in [({ #expect(FileManager.default.createFile(atPath: signal, contents: nil)); #expect(chown(signal, Self.otherUser, gid_t(Self.otherUser)) == 0) },
                                  "owned by another user (uid 65534)"),
                                 ({ #expect(symlink(elsewhere, signal) == 0) }, "not a regular file")] {
            unlink(signal)
            plant()
            let store = ExternalStoreAccess(ExternalStore(name: "tool", persistence: .file(path: path, signal: signal),
                                                          lockFiles: [path + ".lockfile"], source: "test"), secretService: nil)
            do {
                try store.modify { _ in (true, ()) }
                Issue.record("a write signalled through \(problem) was not refused")
            } catch {
                #expect(error.code == .unsafeFile && error.message.contains(problem), "\(error)")
            }
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == Self.cache)
        }
        var info = stat()
        #expect(stat(elsewhere, &info) == 0 && info.st_uid == geteuid())
    }

    @Test("A safe store file is read and written, and stays 0600 and ours; an empty signal file of ours at 0644 holds nothing and is no cache")
    func safeFile() throws {
        let (root, folder, path) = try storeFile()
        defer { try? FileManager.default.removeItem(at: root) }
        #expect(try access(path).read() != nil)
        try access(path).modify { _ in (true, ()) }
        var info = stat()
        #expect(stat(path, &info) == 0)
        #expect((info.st_mode & 0o777, info.st_uid) == (0o600, geteuid()))
        #expect(String(decoding: try Data(contentsOf: URL(fileURLWithPath: path)), as: UTF8.self).contains(#""Kept""#))

        let signal = folder.appendingPathComponent("cache.sig").path
        #expect(FileManager.default.createFile(atPath: signal, contents: nil, attributes: [.posixPermissions: 0o644]))
        #expect(try access(signal).read() == nil)
    }

    @Test("A lock path holding a regular file of other content is never deleted however old; a real stale lock still is")
    func lockPathOnOtherFile() throws {
        let root = try TestEnvironment.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let path = root.appendingPathComponent("notes.txt").path
        for content in ["my notes\n", "", "123abc", "42 python\nsecond line", "-5 x", String(repeating: "7", count: 5000)] {
            try Data(content.utf8).write(to: URL(fileURLWithPath: path))
            try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: -3600)], ofItemAtPath: path)
            do {
                _ = try MSALExtensionsLock.acquire(path, timeout: 0.5)
                Issue.record("a file of content \(content.prefix(20).debugDescription) was taken for a lock")
            } catch {
                #expect(error.code == .unsafeFile, "\(error)")
                #expect(error.message.contains("is not a lock file"), "\(error.message)")
            }
            #expect(try String(contentsOfFile: path, encoding: .utf8) == content)
        }
        // msal-extensions' own content ("pid argv0") of a dead process, and .NET's (BOM, newline): stale.
        for content in [Data("999999999 /usr/bin/az".utf8), Data([0xEF, 0xBB, 0xBF]) + Data("999999999\r\n".utf8)] {
            try content.write(to: URL(fileURLWithPath: path))
            try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: -3600)], ofItemAtPath: path)
            try MSALExtensionsLock.acquire(path, timeout: 1).release()
            #expect(!FileManager.default.fileExists(atPath: path))
        }
    }

    @Test("A config \"lock\" path equal to a store's file or signal file, or relative, exits 64 naming the key; the file is kept")
    func configLockOnData() throws {
        let cli = try CLI(backend: "file")
        let folder = cli.dataHome.appendingPathComponent("config/tokencache")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let data = cli.dataHome.appendingPathComponent("tool")
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let file = data.appendingPathComponent("cache.json").path
        try Self.cache.write(to: URL(fileURLWithPath: file))
        let declarations = [
            (#"{"file": "\#(file)", "lock": "\#(file)"}"#, "\"lock\" \(file) is the \"file\" of store mine"),
            (#"{"file": "\#(file)", "lock": "\#(data.path)/./cache.json"}"#, "is the \"file\" of store mine"),
            (#"{"file": "\#(data.path)/other.json", "signal": "\#(file)", "lock": "\#(file)"}"#, "is the \"signal\" of store mine"),
            (#"{"libsecret": {"schema": "s", "attributes": {"a": "b"}, "signal": "\#(file)"}, "lock": "\#(file)"}"#, "is the \"signal\" of store mine"),
            (#"{"file": "\#(data.path)/other.json", "lock": "cache.json"}"#, "\"lock\" is not an absolute path"),
        ]
        for (declaration, problem) in declarations {
            try Data(#"{"stores": {"mine": \#(declaration)}}"#.utf8).write(to: folder.appendingPathComponent("config.json"))
            for arguments in [["stores"], ["remove", "--account", "x@y", "--store", "mine", "--yes"]] {
                let refused = try cli.run(arguments, withGroup: false)
                #expect(refused.status == 64, "\(arguments): \(refused.status) \(refused.stderr)")
                #expect(refused.stderr.contains(problem), "\(refused.stderr)")
            }
            #expect(try Data(contentsOf: URL(fileURLWithPath: file)) == Self.cache)
        }
        // Another store's file is data too.
        try Data(#"{"stores": {"a": {"file": "\#(file)"}, "b": {"file": "\#(data.path)/b.json", "lock": "\#(file)"}}}"#.utf8)
            .write(to: folder.appendingPathComponent("config.json"))
        let other = try cli.run(["stores"], withGroup: false)
        #expect(other.status == 64 && other.stderr.contains("store b: \"lock\" \(file) is the \"file\" of store a"), "\(other.stderr)")
    }
}
