internal import COpenSSL
import TokenCacheCore
import TokenCachePlatform

/// The key of a libsecret/oo7 file keyring (`secret-file-collection.c`, oo7 `client/src/file/`),
/// with the keyring's three operations on it, through the libcrypto the encrypted file loads:
///
/// - the key: PBKDF2-HMAC-SHA256(secret, salt, iterations) -> 16 bytes, in a ``SecretPage``;
/// - attribute hashes and item MACs: HMAC-SHA256 with the key;
/// - items: AES-128-CBC with PKCS #7 padding and a random IV, stored as
///   `ciphertext || IV || HMAC-SHA256(key, ciphertext || IV)` (encrypt-then-MAC).
///
/// The file format itself (GVariant) lives in SandboxStore. Never printed.
package final class FileKeyringKey: @unchecked Sendable, CustomStringConvertible {
    // @unchecked: the page is written once, in init, and only read afterwards.
    package static let byteCount = 16
    package static let macByteCount = 32
    package static let ivByteCount = 16
    private let page: SecretPage
    private var key: UnsafeRawBufferPointer { UnsafeRawBufferPointer(page.bytes) }

    /// Derives the key from the keyring's secret (the portal's 64 bytes) and the file's salt.
    package init(secret: UnsafeRawBufferPointer, salt: [UInt8], iterations: UInt32) throws(TokenCacheError) {
        let crypto = try LibCrypto.shared()
        guard iterations > 0, iterations <= Int32.max, secret.count <= Int32.max, salt.count <= Int32.max else {
            throw TokenCacheError(.invalidCacheData, "The keyring file asks for \(iterations) key-derivation rounds.",
                                  hint: "The file is damaged or not a keyring; it was not changed")
        }
        page = SecretPage(byteCount: Self.byteCount)
        let status = crypto.functions.PKCS5_PBKDF2_HMAC!(secret.baseAddress?.assumingMemoryBound(to: CChar.self), Int32(secret.count),
                                                         salt, Int32(salt.count), Int32(iterations), crypto.functions.EVP_sha256!(),
                                                         Int32(Self.byteCount), page.bytes.baseAddress!.assumingMemoryBound(to: UInt8.self))
        guard status == 1 else { throw OpenSSL.failure(crypto, "PKCS5_PBKDF2_HMAC") }
    }

    /// HMAC-SHA256 of `data` with the key (an attribute value's hash, an item's MAC).
    package func mac(_ data: UnsafeRawBufferPointer) throws(TokenCacheError) -> [UInt8] {
        let crypto = try LibCrypto.shared()
        guard let mac = Self.hmac(crypto, key: key, data) else { throw OpenSSL.failure(crypto, "HMAC") }
        return mac
    }

    /// The hash an attribute value is stored as.
    package func mac(_ value: String) throws(TokenCacheError) -> [UInt8] {
        let crypto = try LibCrypto.shared()
        guard let mac = Array(value.utf8).withUnsafeBytes({ Self.hmac(crypto, key: key, $0) }) else { throw OpenSSL.failure(crypto, "HMAC") }
        return mac
    }

    private static func hmac(_ crypto: LibCrypto, key: UnsafeRawBufferPointer, _ data: UnsafeRawBufferPointer) -> [UInt8]? {
        var mac = [UInt8](repeating: 0, count: macByteCount)
        var length: UInt32 = 0
        guard crypto.functions.HMAC!(crypto.functions.EVP_sha256!(), key.baseAddress, Int32(key.count),
                                     data.baseAddress?.assumingMemoryBound(to: UInt8.self), data.count, &mac, &length) != nil,
              length == macByteCount
        else { return nil }
        return mac
    }

    /// Encrypts an item: `ciphertext || IV || MAC`.
    package func seal(_ plaintext: UnsafeRawBufferPointer) throws(TokenCacheError) -> [UInt8] {
        let crypto = try LibCrypto.shared()
        var iv = [UInt8](repeating: 0, count: Self.ivByteCount)
        try OpenSSL.randomBytes(&iv)
        let context = try CipherContext(crypto)
        guard crypto.functions.EVP_EncryptInit_ex!(context.pointer, crypto.functions.EVP_aes_128_cbc!(), nil,
                                                   key.baseAddress!.assumingMemoryBound(to: UInt8.self), iv) == 1
        else { throw OpenSSL.failure(crypto, "EVP_EncryptInit_ex") }
        // PKCS #7 (OpenSSL's default for CBC) pads 1 to 16 bytes, as libsecret does by hand.
        let padded = (plaintext.count / 16 + 1) * 16
        var blob = [UInt8](repeating: 0, count: padded + Self.ivByteCount + Self.macByteCount)
        var length: Int32 = 0, total = 0
        let ok = blob.withUnsafeMutableBufferPointer { out -> Bool in
            guard crypto.functions.EVP_EncryptUpdate!(context.pointer, out.baseAddress, &length,
                                                      plaintext.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(plaintext.count)) == 1
            else { return false }
            total = Int(length)
            guard crypto.functions.EVP_EncryptFinal_ex!(context.pointer, out.baseAddress! + total, &length) == 1 else { return false }
            total += Int(length)
            return total == padded
        }
        guard ok else { throw OpenSSL.failure(crypto, "EVP_EncryptUpdate (AES-128-CBC)") }
        blob.replaceSubrange(padded..<(padded + Self.ivByteCount), with: iv)
        guard let mac = blob.withUnsafeBytes({ Self.hmac(crypto, key: key, UnsafeRawBufferPointer(rebasing: $0[..<(padded + Self.ivByteCount)])) })
        else { throw OpenSSL.failure(crypto, "HMAC") }
        blob.replaceSubrange((padded + Self.ivByteCount)..., with: mac)
        return blob
    }

    /// Whether an item's MAC is right under this key (no decryption).
    package func authenticates(_ blob: [UInt8]) throws(TokenCacheError) -> Bool {
        let crypto = try LibCrypto.shared()
        let sealedCount = blob.count - Self.ivByteCount - Self.macByteCount
        guard sealedCount > 0, sealedCount % 16 == 0 else { return false }
        guard let actual = blob.withUnsafeBytes({ Self.hmac(crypto, key: key, UnsafeRawBufferPointer(rebasing: $0[..<(sealedCount + Self.ivByteCount)])) })
        else { throw OpenSSL.failure(crypto, "HMAC") }
        // Constant time: the MAC is what stands between a forged item and the decryption.
        return crypto.functions.CRYPTO_memcmp!(actual, Array(blob[(sealedCount + Self.ivByteCount)...]), Self.macByteCount) == 0
    }

    /// Checks an item's MAC, decrypts it and lends the plaintext to `body`, then wipes it. Returns
    /// nil (without calling `body`) when the MAC or the padding is wrong: another key, or tampering.
    package func open<T>(_ blob: [UInt8], _ body: (UnsafeRawBufferPointer) -> T) throws(TokenCacheError) -> T? {
        let crypto = try LibCrypto.shared()
        guard try authenticates(blob) else { return nil }
        let sealedCount = blob.count - Self.ivByteCount - Self.macByteCount
        let iv = Array(blob[sealedCount..<(sealedCount + Self.ivByteCount)])
        let context = try CipherContext(crypto)
        guard crypto.functions.EVP_DecryptInit_ex!(context.pointer, crypto.functions.EVP_aes_128_cbc!(), nil,
                                                   key.baseAddress!.assumingMemoryBound(to: UInt8.self), iv) == 1
        else { throw OpenSSL.failure(crypto, "EVP_DecryptInit_ex") }
        let plaintext = SecretPage(byteCount: sealedCount + 16)  // wiped when released
        var length: Int32 = 0
        guard crypto.functions.EVP_DecryptUpdate!(context.pointer, plaintext.bytes.baseAddress!.assumingMemoryBound(to: UInt8.self),
                                                  &length, blob, Int32(sealedCount)) == 1
        else { throw OpenSSL.failure(crypto, "EVP_DecryptUpdate (AES-128-CBC)") }
        var total = Int(length)
        guard crypto.functions.EVP_DecryptFinal_ex!(context.pointer, plaintext.bytes.baseAddress!.assumingMemoryBound(to: UInt8.self) + total, &length) == 1 else {
            crypto.functions.ERR_clear_error!()  // bad padding under a valid MAC: refused like a bad MAC
            return nil
        }
        total += Int(length)
        return body(UnsafeRawBufferPointer(rebasing: plaintext.bytes[..<total]))
    }

    /// Fills `bytes` from OpenSSL's random generator (a new keyring's salt).
    package static func random(_ bytes: inout [UInt8]) throws(TokenCacheError) {
        try OpenSSL.randomBytes(&bytes)
    }

    package var description: String { "FileKeyringKey(<redacted>)" }
}
