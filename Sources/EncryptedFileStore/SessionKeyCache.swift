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
/// with possessor-only permissions: only processes attached to this session keyring (the
/// session's processes) can read it, not other sessions of the same user nor other users.
enum SessionKeyCache {
    static let recordSize = 8 + SymmetricKey.byteCount

    static func description(of directory: URL) throws(TokenCacheError) -> String {
        "tokencache:file-key:" + ASCII.hex(try OpenSSL.sha256(Array(directory.standardizedFileURL.path.utf8)).prefix(8))
    }

    static func saltTag(_ kdf: CacheFileFormat.KDFParameters) throws(TokenCacheError) -> [UInt8] {
        Array(try OpenSSL.sha256(Array(kdf.salt.utf8)).prefix(8))
    }

    /// Stores the keys (by their files' salts) for `directory`, replacing what was there;
    /// dropped by the kernel after `timeout` seconds (0: with the session).
    static func store(_ keys: [(kdf: CacheFileFormat.KDFParameters, key: SymmetricKey)], for directory: URL,
                      timeout: UInt32) throws(TokenCacheError) {
        let payload = SecretPage(byteCount: keys.count * recordSize)
        for (index, entry) in keys.enumerated() {
            let record = UnsafeMutableRawBufferPointer(rebasing: payload.bytes[(index * recordSize)...])
            record.copyBytes(from: try saltTag(entry.kdf))
            entry.key.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: record[8..<recordSize]).copyMemory(from: $0) }
        }
        let name = try description(of: directory)
        let id = tc_add_key("user", name, payload.bytes.baseAddress, payload.bytes.count, Int(TC_KEY_SPEC_SESSION_KEYRING))
        guard id >= 0 else { throw failure("add_key") }
        guard tc_keyctl(Int32(TC_KEYCTL_SETPERM), UInt(id), UInt(TC_KEY_POS_ALL), 0, 0) == 0 else {
            _ = tc_keyctl(Int32(TC_KEYCTL_INVALIDATE), UInt(id), 0, 0, 0)
            throw failure("keyctl SETPERM")
        }
        if timeout > 0, tc_keyctl(Int32(TC_KEYCTL_SET_TIMEOUT), UInt(id), UInt(timeout), 0, 0) != 0 {
            _ = tc_keyctl(Int32(TC_KEYCTL_INVALIDATE), UInt(id), 0, 0, 0)
            throw failure("keyctl SET_TIMEOUT")
        }
    }

    /// The key of the file with these scrypt parameters, when the session holds it.
    static func key(for kdf: CacheFileFormat.KDFParameters, in directory: URL) -> SymmetricKey? {
        guard let name = try? description(of: directory), let tag = try? saltTag(kdf) else { return nil }
        let id = search(name)
        guard id > 0 else { return nil }
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
        guard tc_keyctl(Int32(TC_KEYCTL_INVALIDATE), UInt(id), 0, 0, 0) == 0 else { throw failure("keyctl INVALIDATE") }
        return true
    }

    /// The "user" key `name` in the session keyring (or a keyring linked to it); -1 when none.
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
