import FoundationEssentials
import TokenCacheCore
import TokenCacheCrypto

/// For the benchmarks only (Benchmarks/, `bench-tool aes`): AES-256-GCM through exactly the wrapper
/// the encrypted file uses, so its throughput can be compared with `openssl speed`.
@_spi(Benchmarks) public final class AESGCMBenchmarkHook {
    /// The key, made once as the backend makes it once per file operation (a key lives in a page
    /// of its own, kept out of core dumps: mapping one per call would time the mapping).
    private let key: SymmetricKey

    /// A sealer for a 32-byte key.
    public init(key: [UInt8]) { self.key = key.withUnsafeBytes { SymmetricKey(copying: $0) } }

    /// Seals `plaintext` (ciphertext + tag) with a 12-byte nonce.
    public func seal(_ plaintext: Data, nonce: [UInt8]) throws(TokenCacheError) -> Data {
        try OpenSSL.seal(plaintext, key: key, nonce: nonce, authenticating: Data())
    }

    /// Opens what ``seal(_:nonce:)`` returned; nil when authentication fails.
    public func open(_ sealed: Data, nonce: [UInt8]) throws(TokenCacheError) -> Data? {
        try OpenSSL.open(sealed, key: key, nonce: nonce, authenticating: Data())
    }
}
