import FoundationEssentials
import Glibc
import TokenCacheCore
import TokenCacheCrypto
import TokenCachePlatform

/// The default key file: 32 random bytes, mode 0600. Created whole or not at all: under a
/// creation lock, written to a temporary file, synced and renamed into place, so a process
/// killed while creating it never leaves a truncated key (which would make the cache unreadable
/// for good), and two processes creating it at once agree on one key.
///
/// With `sealing`, the file holds the key sealed to the TPM that TCTI reaches
/// (``TPMSealedKey``) instead of the key itself, created and replaced the same way.
enum KeyFile {
    static func load(_ url: URL, creating: Bool, directory: URL, sealing tcti: String? = nil) throws(TokenCacheError) -> SymmetricKey {
        if let key = try readExisting(url, sealedWith: tcti) { return key }
        guard creating else {
            throw TokenCacheError(.fileAuthenticationFailed, "The key file \(url.path) is missing, so the cache cannot be decrypted.",
                                  hint: "Restore the key file, or move the cache file away to start over")
        }
        let folder = url.deletingLastPathComponent()
        try FileIO.ensureDirectory(folder)
        let lock = try FileLock(path: folder.appendingPathComponent(".\(url.lastPathComponent).lock").path)
        defer { withExtendedLifetime(lock) {} }
        if let key = try readExisting(url, sealedWith: tcti) { return key }  // another process created it meanwhile
        // No live creator can own a temporary key file while we hold the lock: a killed one's is stale.
        let temporaryPrefix = ".\(url.lastPathComponent).tmp."
        FileIO.removeStaleTemporaryFiles(in: folder, prefix: temporaryPrefix)
        let key = try SymmetricKey.random()
        // Written from the key's page itself: no copy on the heap.
        let material = if let tcti { try TPMSealedKey.seal(key, tcti: tcti) } else {
            key.withUnsafeBytes { Data(bytesNoCopy: UnsafeMutableRawPointer(mutating: $0.baseAddress!), count: $0.count, deallocator: .none) }
        }
        _ = try withExtendedLifetime(key) { () throws(TokenCacheError) in
            try FileIO.atomicReplace(url.path, with: material, temporaryPrefix: temporaryPrefix)
        }
        return key
    }

    private static func readExisting(_ url: URL, sealedWith tcti: String?) throws(TokenCacheError) -> SymmetricKey? {
        let path = url.path
        guard let file = try FileIO.openExisting(path) else { return nil }
        defer { close(file.descriptor) }
        if let tcti {
            // A sealed key is no secret without its TPM: read into an ordinary buffer (under 2 KiB).
            var sealed = [UInt8](repeating: 0, count: 8192)
            let count = read(file.descriptor, &sealed, sealed.count)
            guard count >= 0 else { throw FileIO.error("read", path) }
            return try TPMSealedKey.unseal(Data(sealed[..<count]), path: path, tcti: tcti)
        }
        // Read straight into the key's page; one byte more tells a longer file.
        return try SymmetricKey.filling { (key) throws(TokenCacheError) in
            let count = read(file.descriptor, key.baseAddress, key.count)
            var extra: UInt8 = 0
            guard count == SymmetricKey.byteCount, read(file.descriptor, &extra, 1) == 0 else {
                throw TokenCacheError(.fileMismatch, "The key file \(path) is not a 32-byte key.",
                                      hint: "Restore it from a backup; without it the cache cannot be read")
            }
        }
    }
}
