internal import CGcrypt
import Glibc

/// The Secret Service's `dh-ietf1024-sha256-aes128-cbc-pkcs7` transfer, composed in Swift from
/// libgcrypt's primitives (the library libsecret uses for it; loaded with dlopen, ``Gcrypt``):
/// `gcry_mpi_powm` for the Diffie-Hellman exponentiations, `gcry_md` HMAC-SHA256 for HKDF
/// (RFC 5869), `gcry_cipher` for AES-128-CBC. Why here and not in a C header: the steps are the
/// part worth reading and testing (known answers in TransferSessionTests); the primitives are the
/// part worth leaving to a maintained library.
///
/// The steps (Secret Service API, "Transfer of Secrets"; as libsecret's and gnome-keyring's
/// egg-dh and egg-hkdf do them): a Diffie-Hellman exchange in RFC 2409's 1,024-bit MODP group
/// (generator 2); the shared value, big-endian and left-padded with zeros to the prime's 128
/// bytes, is the input of HKDF-SHA256 (no salt, so 32 zero bytes; no info) for a 16-byte AES-128
/// key; each secret is AES-128-CBC with PKCS#7 padding (the caller's), its IV sent beside it.
/// Intermediate secrets live in scratch memory wiped with `explicit_bzero` before it is freed.
package enum TransferCrypto {
    /// Bytes of the prime, of a public value and of the shared value.
    package static let primeByteCount = 128
    /// Bytes of the AES-128 session key.
    package static let keyByteCount = 16
    /// Bytes of an AES block, and of an IV.
    package static let blockByteCount = 16
    /// Bytes of a SHA-256 digest.
    package static let digestByteCount = 32

    /// ``sessionKey(peer:exponent:_:into:)``'s status when the peer's public value is invalid.
    package static let invalidPeer: Int32 = -1
    /// The shared value starts with a zero byte: kwalletd5 hashes it without its leading zeros
    /// (the specification keeps them, as libsecret does), so such a session would hold a key the
    /// daemon does not share. The caller opens another session (1 in 256).
    package static let leadingZero: Int32 = -3
    /// The status when libgcrypt failed.
    package static let libraryFailed: Int32 = -2

    /// The 1024-bit MODP group's prime (RFC 2409, section 6.2; its generator is 2).
    package static let prime: [UInt8] = [
        0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xC9, 0x0F, 0xDA, 0xA2, 0x21, 0x68, 0xC2, 0x34,
        0xC4, 0xC6, 0x62, 0x8B, 0x80, 0xDC, 0x1C, 0xD1, 0x29, 0x02, 0x4E, 0x08, 0x8A, 0x67, 0xCC, 0x74,
        0x02, 0x0B, 0xBE, 0xA6, 0x3B, 0x13, 0x9B, 0x22, 0x51, 0x4A, 0x08, 0x79, 0x8E, 0x34, 0x04, 0xDD,
        0xEF, 0x95, 0x19, 0xB3, 0xCD, 0x3A, 0x43, 0x1B, 0x30, 0x2B, 0x0A, 0x6D, 0xF2, 0x5F, 0x14, 0x37,
        0x4F, 0xE1, 0x35, 0x6D, 0x6D, 0x51, 0xC2, 0x45, 0xE4, 0x85, 0xB5, 0x76, 0x62, 0x5E, 0x7E, 0xC6,
        0xF4, 0x4C, 0x42, 0xE9, 0xA6, 0x37, 0xED, 0x6B, 0x0B, 0xFF, 0x5C, 0xB6, 0xF4, 0x06, 0xB7, 0xED,
        0xEE, 0x38, 0x6B, 0xFB, 0x5A, 0x89, 0x9F, 0xA5, 0xAE, 0x9F, 0x24, 0x11, 0x7C, 0x4B, 0x1F, 0xE6,
        0x49, 0x28, 0x66, 0x51, 0xEC, 0xE6, 0x53, 0x81, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
    ]

    // MARK: The exchange

    /// The generator raised to `exponent`: the public value, 128 bytes; nil when libgcrypt failed.
    package static func publicValue(exponent: [UInt8], _ gcrypt: Gcrypt) -> [UInt8]? {
        var value = [UInt8](repeating: 0, count: primeByteCount)
        let status = exponent.withUnsafeBufferPointer { exponent in
            value.withUnsafeMutableBufferPointer { power(base: nil, exponent: exponent, gcrypt, into: $0) }
        }
        return status == 0 ? value : nil
    }

    /// Writes the session key agreed with `peer`'s public value into `key` (16 bytes): the shared
    /// value through HKDF-SHA256. Returns 0; ``invalidPeer`` when `peer` is not a valid public
    /// value; ``libraryFailed`` when libgcrypt failed. The shared value is wiped.
    package static func sessionKey(peer: [UInt8], exponent: [UInt8], _ gcrypt: Gcrypt, into key: UnsafeMutablePointer<UInt8>) -> Int32 {
        withWipedScratch(primeByteCount) { shared in
            let status = peer.withUnsafeBufferPointer { peer in
                exponent.withUnsafeBufferPointer { power(base: peer, exponent: $0, gcrypt, into: shared) }
            }
            guard status == 0 else { return status }
            guard shared[0] != 0 else { return leadingZero }
            let agreed = hkdf(UnsafeBufferPointer(shared), salt: nil, info: nil,
                              into: UnsafeMutableBufferPointer(start: key, count: keyByteCount), gcrypt)
            return agreed ? 0 : libraryFailed
        }
    }

    /// Whether kwalletd5 would read this public value as another number: it reads the client's
    /// bytes as a signed two's-complement integer and writes them back in the shortest form
    /// (QCA's BigInteger), which drops a leading 0xFF whose next byte has its top bit set; its
    /// key would then differ from ours. About 1 value in 512; the caller draws another key pair
    /// (measured against kwalletd5: every such session failed to decrypt, and no other did
    /// apart from ``leadingZero``'s).
    package static func isMisreadByKWallet(_ publicValue: [UInt8]) -> Bool {
        publicValue.count > 1 && publicValue[0] == 0xFF && publicValue[1] & 0x80 != 0
    }

    /// `base` raised to the private `exponent` (big-endian bytes) modulo the prime, written
    /// big-endian into `result` (128 bytes) left-padded with zeros, as the specification and
    /// libsecret's egg_dh_gen_secret pad it. `base` nil means the generator, 2. Returns 0;
    /// ``invalidPeer`` when `base` is outside 2 ... p-2 (which would give away the exponent or a
    /// trivial key); ``libraryFailed`` when libgcrypt failed.
    package static func power(base: UnsafeBufferPointer<UInt8>?, exponent: UnsafeBufferPointer<UInt8>, _ g: Gcrypt,
                      into result: UnsafeMutableBufferPointer<UInt8>) -> Int32 {
        precondition(result.count == primeByteCount)
        var modulus: gcry_mpi_t?, b: gcry_mpi_t?, e: gcry_mpi_t?, limit: gcry_mpi_t?, r: gcry_mpi_t?
        // libgcrypt wipes an MPI's limbs when it frees them (and ignores NULL).
        defer { for mpi in [modulus, b, e, limit, r] { g.gcry_mpi_release(mpi) } }
        guard prime.withUnsafeBufferPointer({ scan(&modulus, $0, g) }) else { return libraryFailed }
        if let base {
            // An empty value is zero; said here, not left to how libgcrypt scans a NULL buffer.
            guard !base.isEmpty, scan(&b, base, g) else { return invalidPeer }
            limit = g.gcry_mpi_new(1024)
            g.gcry_mpi_sub_ui(limit, modulus, 1)
            guard g.gcry_mpi_cmp_ui(b, 1) > 0, g.gcry_mpi_cmp(b, limit) < 0 else { return invalidPeer }
        } else {
            b = g.gcry_mpi_set_ui(nil, 2)
        }
        guard !exponent.isEmpty, scan(&e, exponent, g) else { return libraryFailed }
        r = g.gcry_mpi_new(1024)
        g.gcry_mpi_powm(r, b, e, modulus)
        var written = 0
        guard g.gcry_mpi_print(GCRYMPI_FMT_USG, result.baseAddress, result.count, &written, r) == 0,
              written <= result.count else { return libraryFailed }
        if written < result.count {
            let padding = result.count - written
            memmove(result.baseAddress! + padding, result.baseAddress!, written)
            memset(result.baseAddress!, 0, padding)
        }
        return 0
    }

    /// An unsigned big-endian integer into a new MPI; false when libgcrypt refused it.
    private static func scan(_ mpi: inout gcry_mpi_t?, _ bytes: UnsafeBufferPointer<UInt8>, _ g: Gcrypt) -> Bool {
        g.gcry_mpi_scan(&mpi, GCRYMPI_FMT_USG, bytes.baseAddress, bytes.count, nil) == 0
    }

    // MARK: HKDF and HMAC

    /// HKDF-SHA256 (RFC 5869) with no salt and no info, `length` bytes; nil when libgcrypt failed.
    package static func hkdf(_ input: [UInt8], length: Int, _ gcrypt: Gcrypt) -> [UInt8]? {
        hkdf(input, salt: nil, info: nil, length: length, gcrypt)
    }

    /// HKDF-SHA256 (RFC 5869), `length` bytes (at most 255 digests); nil when libgcrypt failed.
    package static func hkdf(_ input: [UInt8], salt: [UInt8]?, info: [UInt8]?, length: Int, _ gcrypt: Gcrypt) -> [UInt8]? {
        var output = [UInt8](repeating: 0, count: length)
        let derived = input.withUnsafeBufferPointer { input in
            output.withUnsafeMutableBufferPointer { output in
                optionalBuffer(salt) { salt in optionalBuffer(info) { info in hkdf(input, salt: salt, info: info, into: output, gcrypt) } }
            }
        }
        return derived ? output : nil
    }

    /// HKDF-SHA256 of `input` into `output`: extract with `salt` (none: 32 zero bytes), then
    /// expand with `info` (none: empty). The pseudorandom key and each block are wiped.
    package static func hkdf(_ input: UnsafeBufferPointer<UInt8>, salt: UnsafeBufferPointer<UInt8>?, info: UnsafeBufferPointer<UInt8>?,
                     into output: UnsafeMutableBufferPointer<UInt8>, _ g: Gcrypt) -> Bool {
        guard output.count <= 255 * digestByteCount else { return false }
        let zeros = [UInt8](repeating: 0, count: digestByteCount)  // RFC 5869 2.2: no salt is HashLen zeros
        return withWipedScratch(2 * digestByteCount) { scratch in
            let prk = UnsafeMutableBufferPointer(rebasing: scratch[..<digestByteCount])
            let block = UnsafeMutableBufferPointer(rebasing: scratch[digestByteCount...])
            let extracted = zeros.withUnsafeBufferPointer { zeros in hmacSHA256(key: salt ?? zeros, [input], g, into: prk) }
            guard extracted else { return false }
            var filled = 0, counter: UInt8 = 1
            while filled < output.count {
                // T(n) = HMAC(PRK, T(n-1) | info | n), T(0) empty.
                let previous = UnsafeBufferPointer(rebasing: block[..<(counter == 1 ? 0 : digestByteCount)])
                let expanded = withUnsafeBytes(of: counter) { counter in
                    hmacSHA256(key: UnsafeBufferPointer(prk), [previous, info ?? UnsafeBufferPointer(start: nil, count: 0),
                                                              counter.assumingMemoryBound(to: UInt8.self)], g, into: block)
                }
                guard expanded else { return false }
                let count = min(digestByteCount, output.count - filled)
                (output.baseAddress! + filled).update(from: block.baseAddress!, count: count)
                filled += count
                counter &+= 1
            }
            return true
        }
    }

    /// HMAC-SHA256 under `key` of the concatenation of `parts`, into `mac` (32 bytes).
    package static func hmacSHA256(key: UnsafeBufferPointer<UInt8>, _ parts: [UnsafeBufferPointer<UInt8>], _ g: Gcrypt,
                           into mac: UnsafeMutableBufferPointer<UInt8>) -> Bool {
        precondition(mac.count == digestByteCount)
        var md: gcry_md_hd_t?
        guard g.gcry_md_open(&md, Int32(GCRY_MD_SHA256.rawValue), GCRY_MD_FLAG_HMAC.rawValue) == 0 else { return false }
        defer { g.gcry_md_close(md) }  // wipes the key and the state
        guard g.gcry_md_setkey(md, key.baseAddress, key.count) == 0 else { return false }
        for part in parts where !part.isEmpty { g.gcry_md_write(md, part.baseAddress, part.count) }
        guard let digest = g.gcry_md_read(md, Int32(GCRY_MD_SHA256.rawValue)) else { return false }
        mac.baseAddress!.update(from: digest, count: digestByteCount)
        return true
    }

    // MARK: AES-128-CBC

    /// AES-128-CBC over `buffer` in place (a whole number of blocks; the padding is the caller's).
    package static func cipher(encrypt: Bool, key: UnsafePointer<UInt8>, iv: [UInt8], _ buffer: inout [UInt8], _ g: Gcrypt) -> Bool {
        guard buffer.count % blockByteCount == 0, iv.count == blockByteCount else { return false }
        var handle: gcry_cipher_hd_t?
        guard g.gcry_cipher_open(&handle, Int32(GCRY_CIPHER_AES.rawValue), Int32(GCRY_CIPHER_MODE_CBC.rawValue), 0) == 0 else {
            return false
        }
        defer { g.gcry_cipher_close(handle) }  // wipes the key schedule
        guard g.gcry_cipher_setkey(handle, key, keyByteCount) == 0, g.gcry_cipher_setiv(handle, iv, iv.count) == 0 else {
            return false
        }
        let count = buffer.count
        return buffer.withUnsafeMutableBytes { bytes in
            (encrypt ? g.gcry_cipher_encrypt(handle, bytes.baseAddress, count, nil, 0)
                     : g.gcry_cipher_decrypt(handle, bytes.baseAddress, count, nil, 0)) == 0
        }
    }

    // MARK: Scratch memory

    /// Runs `body` with `count` zeroed bytes that are wiped with `explicit_bzero` (which the
    /// compiler may not drop as a dead store) before they are freed.
    package static func withWipedScratch<Result>(_ count: Int, _ body: (UnsafeMutableBufferPointer<UInt8>) -> Result) -> Result {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: count) { scratch in
            scratch.initialize(repeating: 0)
            defer { if let start = scratch.baseAddress { explicit_bzero(start, count) } }
            return body(scratch)
        }
    }

    /// `bytes` as a buffer for `body`, or nil when there are none.
    private static func optionalBuffer<Result>(_ bytes: [UInt8]?, _ body: (UnsafeBufferPointer<UInt8>?) -> Result) -> Result {
        guard let bytes else { return body(nil) }
        return bytes.withUnsafeBufferPointer { body($0) }
    }
}
