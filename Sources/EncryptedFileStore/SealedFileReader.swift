import TokenCacheCore
import TokenCacheCrypto
import TokenCachePlatform
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// Reads a cache file and decrypts it in place, returning the plaintext's range only once the
/// tag has verified it (unauthenticated plaintext is wiped).
enum SealedFileReader {
    struct Opened {
        /// The file's bytes, the plaintext decrypted where the ciphertext was.
        var data: Data
        var header: CacheFileFormat.Header
        /// Where the plaintext is in `data`.
        var plaintext: Range<Int>
    }

    /// - Parameter key: checks the header (group, key ID) and returns the key to decrypt with.
    static func read(_ descriptor: Int32, path: String,
                     key: (CacheFileFormat.Header) throws(TokenCacheError) -> SymmetricKey) throws(TokenCacheError) -> Opened {
        guard lseek(descriptor, 0, SEEK_SET) == 0 else { throw FileIO.error("read", path) }
        var data = try FileIO.readAll(descriptor, path: path)
        let parsed = try CacheFileFormat.parse(data, path: path)
        let key = try key(parsed.header)
        guard let plaintext = try OpenSSL.openInPlace(&data, sealed: parsed.sealedRange, key: key, nonce: parsed.nonce,
                                                      authenticating: parsed.associatedData) else {
            throw CacheFileFormat.damaged(path)
        }
        return Opened(data: data, header: parsed.header, plaintext: plaintext)
    }
}
