internal import CLinux
internal import COpenSSL
import FoundationEssentials
import TokenCacheCore
import TokenCacheCrypto
import TokenCachePlatform
#if canImport(Glibc)
import Glibc
#endif

/// Passphrase-derived file keys kept in the kernel's session keyring (keyutils), as gpg-agent
/// keeps a passphrase: `tokencache unlock --file` derives them once, later processes of the
/// same login session read them without asking, and they go at the timeout, on `lock --file`
/// or when the session ends. Nothing is written to disk.
///
/// One "user" key per cache directory, `tokencache:file-key:<16 hex of SHA-256 of its path>`,
/// whose payload is records of (first 8 bytes of SHA-256 of a file's scrypt salt, 32-byte key),
/// with user-only permissions: possessor permissions would let any uid attached to the same
/// session keyring read it (`su`, `sudo -u`, `runuser` keep the caller's). A key is used only
/// when the kernel says it is this user's and no one else may touch it (``isOwn(_:)``).
package enum SessionKeyCache {
    static let recordSize = 8 + SymmetricKey.byteCount
    /// KEY_USR_ALL (<linux/keyctl.h>): every permission for the key's own uid, none for
    /// possessors, group or others.
    static let userOnlyPermissions: UInt = 0x003f_0000
    private static let threadKeyring = -1  // KEY_SPEC_THREAD_KEYRING
    private static let sessionKeyring = Int(TC_KEY_SPEC_SESSION_KEYRING)
    private static let userSessionKeyring = -5  // KEY_SPEC_USER_SESSION_KEYRING
    private static let getKeyringIDOperation: Int32 = 0  // KEYCTL_GET_KEYRING_ID
    private static let describeOperation: Int32 = 6  // KEYCTL_DESCRIBE
    private static let linkOperation: Int32 = 8  // KEYCTL_LINK

    /// Which keyring holds the keys: the session keyring when this process has one of its own
    /// (a login session's, `keyctl session`); otherwise its session keyring is the per-user
    /// default (docker exec, su, many CI shells), and linking into "the session keyring" would
    /// make a new anonymous one that dies with the command: the user-session keyring itself
    /// is used, which the user's processes without a session keyring of their own share.
    package enum Scope: Sendable, Equatable {
        case session
        case userSession
    }

    static var scope: Scope {
        // Asked without creating: a process with no session keyring is given the user-session one.
        let session = tc_keyctl(getKeyringIDOperation, UInt(bitPattern: sessionKeyring), 0, 0, 0)
        let userSession = tc_keyctl(getKeyringIDOperation, UInt(bitPattern: userSessionKeyring), 0, 0, 0)
        return session >= 0 && session == userSession ? .userSession : .session
    }

    private static func keyring(_ scope: Scope) -> UInt {
        UInt(bitPattern: scope == .session ? sessionKeyring : userSessionKeyring)
    }

    static func description(of directory: URL) throws(TokenCacheError) -> String {
        "tokencache:file-key:" + ASCII.hex(try OpenSSL.sha256(Array(directory.standardizedFileURL.path.utf8)).prefix(8))
    }

    static func saltTag(_ kdf: CacheFileFormat.KDFParameters) throws(TokenCacheError) -> [UInt8] {
        Array(try OpenSSL.sha256(Array(kdf.salt.utf8)).prefix(8))
    }

    /// Stores the keys (by their files' salts) for `directory`, replacing what was there;
    /// dropped by the kernel after `timeout` seconds (0: with the session). Returns where.
    @discardableResult
    static func store(_ keys: [(kdf: CacheFileFormat.KDFParameters, key: SymmetricKey)], for directory: URL,
                      timeout: UInt32) throws(TokenCacheError) -> Scope {
        let scope = self.scope
        let payload = SecretPage(byteCount: keys.count * recordSize)
        for (index, entry) in keys.enumerated() {
            let record = UnsafeMutableRawBufferPointer(rebasing: payload.bytes[(index * recordSize)...])
            record.copyBytes(from: try saltTag(entry.kdf))
            entry.key.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: record[8..<recordSize]).copyMemory(from: $0) }
        }
        let name = try description(of: directory)
        // Made in this thread's own keyring, never in the shared session keyring: add_key there
        // would update a key of the same name another uid planted (and can read) in place.
        let id = tc_add_key("user", name, payload.bytes.baseAddress, payload.bytes.count, threadKeyring)
        guard id >= 0 else { throw failure("add_key") }
        defer { _ = tc_keyctl(Int32(TC_KEYCTL_UNLINK), UInt(id), UInt(bitPattern: threadKeyring), 0, 0) }
        guard tc_keyctl(Int32(TC_KEYCTL_SETPERM), UInt(id), userOnlyPermissions, 0, 0) == 0 else {
            _ = tc_keyctl(Int32(TC_KEYCTL_INVALIDATE), UInt(id), 0, 0, 0)
            throw failure("keyctl SETPERM")
        }
        if timeout > 0, tc_keyctl(Int32(TC_KEYCTL_SET_TIMEOUT), UInt(id), UInt(timeout), 0, 0) != 0 {
            _ = tc_keyctl(Int32(TC_KEYCTL_INVALIDATE), UInt(id), 0, 0, 0)
            throw failure("keyctl SET_TIMEOUT")
        }
        // Linking displaces any key of the same name from the keyring, ours or planted.
        guard tc_keyctl(linkOperation, UInt(id), keyring(scope), 0, 0) == 0 else {
            let failure = failure("keyctl LINK")
            _ = tc_keyctl(Int32(TC_KEYCTL_INVALIDATE), UInt(id), 0, 0, 0)
            throw failure
        }
        return scope
    }

    /// The directory's kept keys as the kernel lists them (/proc/keys): how many files they
    /// open, where, and the time left as the kernel words it ("59m", "perm"); nil when none.
    static func held(for directory: URL) -> (files: Int, scope: Scope, expires: String)? {
        guard let name = try? description(of: directory) else { return nil }
        let id = search(name)
        guard id > 0, isOwn(id) else { return nil }
        let size = tc_keyctl(Int32(TC_KEYCTL_READ), UInt(id), 0, 0, 0)
        // /proc/keys: "id flags usage timeout perm uid gid type description", id in hex.
        let line = (try? String(contentsOfFile: "/proc/keys", encoding: .utf8))?.split(separator: "\n")
            .first { $0.split(separator: " ", omittingEmptySubsequences: true).first == Substring(String(id, radix: 16).leftPadded(to: 8)) }
        let fields = line?.split(separator: " ", omittingEmptySubsequences: true) ?? []
        return (max(size, 0) / recordSize, scope, fields.count > 3 ? String(fields[3]) : "unknown")
    }

    /// The key of the file with these scrypt parameters, when the session holds it.
    static func key(for kdf: CacheFileFormat.KDFParameters, in directory: URL) -> SymmetricKey? {
        guard let name = try? description(of: directory), let tag = try? saltTag(kdf) else { return nil }
        let id = search(name)
        guard id > 0, isOwn(id) else { return nil }
        let page = SecretPage(byteCount: 64 * recordSize)
        let count = tc_keyctl(Int32(TC_KEYCTL_READ), UInt(id), UInt(bitPattern: page.bytes.baseAddress), UInt(page.bytes.count), 0)
        guard count > 0, count <= page.bytes.count, count % recordSize == 0 else { return nil }
        for index in 0..<(count / recordSize) {
            let record = UnsafeRawBufferPointer(rebasing: page.bytes[(index * recordSize)..<((index + 1) * recordSize)])
            if Array(record[0..<8]) == tag {
                return SymmetricKey(copying: UnsafeRawBufferPointer(rebasing: record[8...]))
            }
        }
        return nil
    }

    /// Drops the directory's keys from the session keyring; false when it held none.
    @discardableResult
    static func drop(for directory: URL) throws(TokenCacheError) -> Bool {
        let name = try description(of: directory)
        let id = search(name)
        guard id > 0 else { return false }
        guard isOwn(id) else {
            // Another uid's key under our name: taken out of the session keyring (it cannot be invalidated by us).
            guard tc_keyctl(Int32(TC_KEYCTL_UNLINK), UInt(id), keyring(scope), 0, 0) == 0 else {
                throw failure("keyctl UNLINK")
            }
            return true
        }
        guard tc_keyctl(Int32(TC_KEYCTL_INVALIDATE), UInt(id), 0, 0, 0) == 0 else { throw failure("keyctl INVALIDATE") }
        return true
    }

    /// Whether key `id` is this user's and open to no one else, as KEYCTL_DESCRIBE
    /// ("type;uid;gid;perm;description", perm in hex) says: a key another uid sharing the
    /// session keyring planted under our name would hand us a key it chose.
    static func isOwn(_ id: Int) -> Bool {
        var buffer = [CChar](repeating: 0, count: 256)
        let length = buffer.withUnsafeMutableBytes {
            tc_keyctl(describeOperation, UInt(id), UInt(bitPattern: $0.baseAddress), UInt($0.count), 0)
        }
        guard length > 0, length <= buffer.count else { return false }
        let fields = String(decoding: buffer.prefix(length - 1).map { UInt8(bitPattern: $0) }, as: UTF8.self)
            .split(separator: ";", maxSplits: 4, omittingEmptySubsequences: false)
        guard fields.count == 5, fields[0] == "user", let uid = UInt32(fields[1]), let permissions = UInt(fields[3], radix: 16) else {
            return false
        }
        return uid == geteuid() && permissions & ~userOnlyPermissions == 0
    }

    /// The "user" key `name` in the session keyring (or a keyring linked to it: a process without
    /// a session keyring of its own searches the user-session keyring); -1 when none.
    private static func search(_ name: String) -> Int {
        "user".withCString { type in
            name.withCString { description in
                tc_keyctl(Int32(TC_KEYCTL_SEARCH), UInt(bitPattern: Int(TC_KEY_SPEC_SESSION_KEYRING)),
                          UInt(bitPattern: type), UInt(bitPattern: description), 0)
            }
        }
    }

    private static func failure(_ call: String) -> TokenCacheError {
        TokenCacheError(.fileSystem, "The session keyring refused \(call): \(String(cString: strerror(errno))).",
                        hint: "Nothing was cached; the passphrase is asked for as before")
    }
}

private extension String {
    func leftPadded(to width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}
