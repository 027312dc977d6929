internal import COpenSSL
import TokenCacheCore
import TokenCachePlatform
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// Page-aligned memory of its own for key material: mapped anonymously, advised
/// `MADV_DONTDUMP` so core dumps leave it out, and zeroed before it is unmapped.
package final class SecretPage: @unchecked Sendable {
    // @unchecked: the owner writes the bytes before sharing them and only reads them afterwards.
    /// The bytes asked for, at the start of the mapping.
    package let bytes: UnsafeMutableRawBufferPointer
    private let mappedCount: Int

    package init(byteCount: Int) {
        let pageSize = max(Int(sysconf(Int32(_SC_PAGESIZE))), 4096)
        mappedCount = (max(byteCount, 1) + pageSize - 1) / pageSize * pageSize
        let address = mmap(nil, mappedCount, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
        // As for any allocation: out of address space is not recoverable here.
        guard let address, address != UnsafeMutableRawPointer(bitPattern: -1) else { fatalError("Out of memory for key material") }
        // A mapping of its own: advising heap pages would mark whatever malloc later puts there.
        _ = madvise(address, mappedCount, MADV_DONTDUMP)
        bytes = UnsafeMutableRawBufferPointer(start: address, count: byteCount)
    }

    deinit {
        tc_cleanse(bytes.baseAddress, mappedCount)
        munmap(bytes.baseAddress, mappedCount)
    }
}

/// 256-bit key material in a ``SecretPage`` (left out of core dumps, zeroed when released).
/// Never printed.
package final class SymmetricKey: @unchecked Sendable, CustomStringConvertible {
    // @unchecked: the buffer is written once, before the key is returned, and only read afterwards.
    package static let byteCount = 32
    private let page: SecretPage
    private var buffer: UnsafeMutableRawBufferPointer { page.bytes }

    private init(page: SecretPage) { self.page = page }

    /// Takes a copy of the bytes; the caller zeroes its own copy.
    package convenience init(copying bytes: UnsafeRawBufferPointer) {
        precondition(bytes.count == Self.byteCount)
        self.init(page: SecretPage(byteCount: Self.byteCount))
        buffer.copyMemory(from: bytes)
    }

    /// A key whose bytes `fill` writes where they stay (scrypt, a key file read): no other copy
    /// to zero. The page is zeroed and released if `fill` throws.
    package static func filling(_ fill: (UnsafeMutableRawBufferPointer) throws(TokenCacheError) -> Void) throws(TokenCacheError) -> SymmetricKey {
        let page = SecretPage(byteCount: byteCount)
        try fill(page.bytes)
        return SymmetricKey(page: page)
    }

    /// A fresh random key.
    package static func random() throws(TokenCacheError) -> SymmetricKey {
        try filling { (bytes) throws(TokenCacheError) in try OpenSSL.randomBytes(bytes) }
    }

    package func withUnsafeBytes<T>(_ body: (UnsafeRawBufferPointer) throws -> T) rethrows -> T {
        try body(UnsafeRawBufferPointer(buffer))
    }

    /// A public identifier: the first 8 bytes of SHA-256 of the key, in hex. Reveals nothing.
    package func identifier() throws(TokenCacheError) -> String {
        let digest = try OpenSSL.sha256(UnsafeRawBufferPointer(buffer))
        return ASCII.hex(digest.prefix(8))
    }

    package var description: String { "SymmetricKey(<redacted>)" }
}

/// The few OpenSSL libcrypto operations the encrypted file needs (libcrypto loaded on first
/// use, see ``LibCrypto``), with errors drained from the OpenSSL error queue right at the call site.
package enum OpenSSL {
    package static let nonceByteCount = 12
    package static let tagByteCount = 16

    package static func randomBytes(_ bytes: inout [UInt8]) throws(TokenCacheError) {
        let crypto = try LibCrypto.shared()
        let count = Int32(bytes.count)
        guard bytes.withUnsafeMutableBytes({ crypto.functions.RAND_bytes!($0.baseAddress!.assumingMemoryBound(to: UInt8.self), count) }) == 1 else {
            throw failure(crypto, "RAND_bytes")
        }
    }

    package static func randomBytes(_ bytes: UnsafeMutableRawBufferPointer) throws(TokenCacheError) {
        let crypto = try LibCrypto.shared()
        guard let base = bytes.baseAddress else { return }
        guard crypto.functions.RAND_bytes!(base.assumingMemoryBound(to: UInt8.self), Int32(bytes.count)) == 1 else {
            throw failure(crypto, "RAND_bytes")
        }
    }

    /// Zeroes key material and plaintext (explicit_bzero: needs no libcrypto, is not optimized away).
    package static func cleanse(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { tc_cleanse($0.baseAddress, $0.count) }
    }

    package static func cleanse(_ bytes: UnsafeMutableRawPointer, count: Int) {
        tc_cleanse(bytes, count)
    }

    package static func cleanse(_ data: inout Data) {
        cleanse(&data, data.indices)
    }

    /// Zeroes `data[range]` (the data's own indexes).
    package static func cleanse(_ data: inout Data, _ range: Range<Int>) {
        guard !range.isEmpty else { return }
        let offset = range.lowerBound - data.startIndex
        data.withUnsafeMutableBytes { tc_cleanse($0.baseAddress! + offset, range.count) }
    }

    package static func sha256(_ data: some ContiguousBytes) throws(TokenCacheError) -> [UInt8] {
        let crypto = try LibCrypto.shared()
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        let status = data.withUnsafeBytes { crypto.functions.EVP_Digest!($0.baseAddress, $0.count, &digest, &length, crypto.functions.EVP_sha256!(), nil) }
        guard status == 1 else {
            throw failure(crypto, "EVP_Digest")
        }
        return digest
    }

    /// scrypt (RFC 7914) from OpenSSL.
    package static func scrypt(passphrase: String, salt: [UInt8], n: UInt64, r: UInt64, p: UInt64) throws(TokenCacheError) -> SymmetricKey {
        let crypto = try LibCrypto.shared()
        var passphraseBytes = Array(passphrase.utf8)
        defer { cleanse(&passphraseBytes) }
        // Derived straight into the key's page: no other copy of the key to zero.
        return try SymmetricKey.filling { (key) throws(TokenCacheError) in
            let status = passphraseBytes.withUnsafeBufferPointer { pass in
                pass.withMemoryRebound(to: CChar.self) { pass in
                    crypto.functions.EVP_PBE_scrypt!(pass.baseAddress, pass.count, salt, salt.count, n, r, p, 256 << 20,
                                          key.baseAddress!.assumingMemoryBound(to: UInt8.self), key.count)
                }
            }
            guard status == 1 else { throw failure(crypto, "EVP_PBE_scrypt") }
        }
    }

    /// AES-256-GCM encryption: returns ciphertext followed by the 16-byte tag.
    /// Writes straight into the returned buffer: no intermediate copy (a copy and a cleanse per
    /// call cost three quarters of the throughput at 1 MiB).
    // libcrypto is called through its table (`crypto.functions.X!`), not the loader's key-path
    // member lookup, which instantiates a generic key path per call (HISTORY.md: 78 -> 88 % at 16 KiB).
    package static func seal(_ plaintext: Data, key: SymmetricKey, nonce: [UInt8], authenticating aad: Data) throws(TokenCacheError) -> Data {
        let crypto = try LibCrypto.shared()
        let context = try CipherContext(crypto)
        let ok = key.withUnsafeBytes { key in
            crypto.functions.EVP_EncryptInit_ex!(context.pointer, crypto.aes256GCM, nil, nil, nil) == 1
                && crypto.functions.EVP_CIPHER_CTX_ctrl!(context.pointer, Int32(TC_EVP_CTRL_GCM_SET_IVLEN), Int32(nonce.count), nil) == 1
                && crypto.functions.EVP_EncryptInit_ex!(context.pointer, nil, nil, key.baseAddress!.assumingMemoryBound(to: UInt8.self), nonce) == 1
        }
        guard ok else { throw failure(crypto, "EVP_EncryptInit_ex") }
        var length: Int32 = 0
        guard aad.withUnsafeBytes({ crypto.functions.EVP_EncryptUpdate!(context.pointer, nil, &length, $0.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32($0.count)) }) == 1
        else { throw failure(crypto, "EVP_EncryptUpdate (AAD)") }
        // Not zero-filled first (Data(count:) is): every byte is written below. At 16 KiB the
        // zeroing was a sixth of a seal.
        let outputCount = plaintext.count + tagByteCount
        guard let output = malloc(outputCount) else { throw TokenCacheError(.crypto, "Out of memory sealing \(outputCount) bytes.", hint: "Free memory and retry; nothing was written") }
        let failed: String? = {
            let base = output.assumingMemoryBound(to: UInt8.self)
            guard plaintext.withUnsafeBytes({ input in
                crypto.functions.EVP_EncryptUpdate!(context.pointer, base, &length, input.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(input.count))
            }) == 1 else { return "EVP_EncryptUpdate" }
            var total = Int(length)
            guard crypto.functions.EVP_EncryptFinal_ex!(context.pointer, base + total, &length) == 1 else { return "EVP_EncryptFinal_ex" }
            total += Int(length)
            // GCM is a stream mode: the ciphertext is exactly as long as the plaintext.
            guard total == plaintext.count,
                  crypto.functions.EVP_CIPHER_CTX_ctrl!(context.pointer, Int32(TC_EVP_CTRL_GCM_GET_TAG), Int32(tagByteCount), base + total) == 1
            else { return "EVP_CTRL_GCM_GET_TAG" }
            return nil
        }()
        if let failed {
            free(output)
            throw failure(crypto, failed)
        }
        return Data(bytesNoCopy: output, count: outputCount, deallocator: .free)
    }

    /// AES-256-GCM decryption of ciphertext followed by its tag; nil when authentication fails.
    package static func open(_ sealed: Data, key: SymmetricKey, nonce: [UInt8], authenticating aad: Data) throws(TokenCacheError) -> Data? {
        var buffer = Data(sealed)
        guard let plaintext = try openInPlace(&buffer, sealed: buffer.indices, key: key, nonce: nonce, authenticating: aad) else { return nil }
        return buffer[plaintext]
    }

    /// Decrypts `buffer[sealed]` (ciphertext followed by its tag; the buffer's own indexes) where
    /// it lies and returns the range of the plaintext, or nil when authentication fails, after
    /// cleansing the unauthenticated plaintext. In place, a large cache needs no second buffer
    /// of its size (GCM is a stream mode; OpenSSL decrypts with the output equal to the input).
    package static func openInPlace(_ buffer: inout Data, sealed: Range<Int>, key: SymmetricKey, nonce: [UInt8],
                            authenticating aad: Data) throws(TokenCacheError) -> Range<Int>? {
        precondition(sealed.lowerBound >= buffer.startIndex && sealed.upperBound <= buffer.endIndex, "sealed range outside the buffer")
        guard sealed.count >= tagByteCount else { return nil }
        let ciphertext = sealed.lowerBound..<(sealed.upperBound - tagByteCount)
        let decryptor = try GCMDecryptor(key: key, nonce: nonce, authenticating: aad)
        let startIndex = buffer.startIndex  // the bytes below start at the buffer's first index
        // withUnsafeMutableBytes rethrows untyped errors: the outcome comes back as a Result.
        let outcome = buffer.withUnsafeMutableBytes { bytes in
            Result { () throws(TokenCacheError) -> Bool in
                let base = bytes.baseAddress!.assumingMemoryBound(to: UInt8.self) - startIndex
                try decryptor.decrypt(base + ciphertext.lowerBound, count: ciphertext.count)
                return decryptor.finish(tag: UnsafeRawBufferPointer(start: base + ciphertext.upperBound, count: tagByteCount))
            }
        }
        guard case .success(let verified) = outcome, verified else {
            cleanse(&buffer, ciphertext)
            if case .failure(let error) = outcome { throw error }
            return nil
        }
        return ciphertext
    }

    /// A TokenCacheError for a failed OpenSSL call, with the drained error queue.
    package static func failure(_ crypto: LibCrypto, _ function: String) -> TokenCacheError {
        var reasons: [String] = []
        while case let code = crypto.functions.ERR_get_error!(), code != 0 {
            var buffer = [CChar](repeating: 0, count: 256)
            crypto.functions.ERR_error_string_n!(code, &buffer, buffer.count)
            reasons.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return TokenCacheError(.crypto, "OpenSSL \(function) failed\(reasons.isEmpty ? "" : ": " + reasons.joined(separator: "; ")).",
                               hint: "Check that libssl3 (OpenSSL 3) is installed and working")
    }
}

/// AES-256-GCM decryption in place, piece by piece, for a file decrypted while it is still
/// being read: the pieces must follow each other, and nothing decrypted may be used before
/// ``finish(tag:)`` returns true.
package final class GCMDecryptor {
    private let crypto: LibCrypto
    private let context: CipherContext

    package init(key: SymmetricKey, nonce: [UInt8], authenticating aad: Data) throws(TokenCacheError) {
        crypto = try LibCrypto.shared()
        context = try CipherContext(crypto)
        let (crypto, context) = (crypto, context)
        let ok = key.withUnsafeBytes { key in
            crypto.functions.EVP_DecryptInit_ex!(context.pointer, crypto.aes256GCM, nil, nil, nil) == 1
                && crypto.functions.EVP_CIPHER_CTX_ctrl!(context.pointer, Int32(TC_EVP_CTRL_GCM_SET_IVLEN), Int32(nonce.count), nil) == 1
                && crypto.functions.EVP_DecryptInit_ex!(context.pointer, nil, nil, key.baseAddress!.assumingMemoryBound(to: UInt8.self), nonce) == 1
        }
        guard ok else { throw OpenSSL.failure(crypto, "EVP_DecryptInit_ex") }
        var length: Int32 = 0
        guard aad.withUnsafeBytes({ crypto.functions.EVP_DecryptUpdate!(context.pointer, nil, &length, $0.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32($0.count)) }) == 1
        else { throw OpenSSL.failure(crypto, "EVP_DecryptUpdate (AAD)") }
    }

    /// Decrypts the next `count` bytes where they lie.
    package func decrypt(_ bytes: UnsafeMutablePointer<UInt8>, count: Int) throws(TokenCacheError) {
        var done = 0
        while done < count {  // OpenSSL takes an Int32 length
            let piece = min(count - done, 1 << 30)
            var length: Int32 = 0
            guard crypto.functions.EVP_DecryptUpdate!(context.pointer, bytes + done, &length, bytes + done, Int32(piece)) == 1, Int(length) == piece else {
                throw OpenSSL.failure(crypto, "EVP_DecryptUpdate")
            }
            done += piece
        }
    }

    /// Checks the tag against everything decrypted: true when the ciphertext and associated data are authentic.
    package func finish(tag: UnsafeRawBufferPointer) -> Bool {
        guard tag.count == OpenSSL.tagByteCount else { return false }
        var expected = [UInt8](tag)
        var finalLength: Int32 = 0
        var spare = [UInt8](repeating: 0, count: 16)
        // GCM's final step writes no bytes; it only checks the tag.
        let verified = crypto.functions.EVP_CIPHER_CTX_ctrl!(context.pointer, Int32(TC_EVP_CTRL_GCM_SET_TAG), Int32(expected.count), &expected) == 1
            && crypto.functions.EVP_DecryptFinal_ex!(context.pointer, &spare, &finalLength) == 1 && finalLength == 0
        crypto.functions.ERR_clear_error!()  // a failed tag check queues no useful detail; never carry it into later errors
        return verified
    }
}

/// Owns an EVP_CIPHER_CTX and frees it.
package final class CipherContext {
    package let pointer: OpaquePointer
    private let crypto: LibCrypto

    package init(_ crypto: LibCrypto) throws(TokenCacheError) {
        guard let pointer = crypto.functions.EVP_CIPHER_CTX_new!() else { throw OpenSSL.failure(crypto, "EVP_CIPHER_CTX_new") }
        self.pointer = pointer
        self.crypto = crypto
    }

    deinit { crypto.functions.EVP_CIPHER_CTX_free!(pointer) }
}
