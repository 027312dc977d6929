import Foundation
import Testing
@testable import TokenCacheCore
@testable import TokenCacheCrypto
import TokenCacheTestSupport

/// The Secret Service's transfer crypto (`dh-ietf1024-sha256-aes128-cbc-pkcs7`) step by step, on
/// the real libgcrypt: known answers from the RFCs and NIST, and Diffie-Hellman values computed
/// apart (Python's `pow`, `hmac`). No keyring needed: the session over the bus is
/// TransferSessionTests'.
@Suite("Transfer crypto (libgcrypt)", .harness)
struct TransferCryptoTests {
    @Test("HKDF-SHA256 gives RFC 5869's test case 1 (salt and info) and test case 3 (no salt, no info, as the session uses it)")
    func hkdfKnownAnswer() throws {
        let gcrypt = try Gcrypt.shared()
        let input = [UInt8](repeating: 0x0b, count: 22)
        let one = try #require(TransferCrypto.hkdf(input, salt: Array(0x00...0x0c), info: Array(0xf0...0xf9), length: 42, gcrypt))
        #expect(ASCII.hex(one) == "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865")
        let three = try #require(TransferCrypto.hkdf(input, salt: nil, info: nil, length: 42, gcrypt))
        #expect(ASCII.hex(three) == "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8")
        // The session's use: the first 16 bytes.
        #expect(try #require(TransferCrypto.hkdf(input, length: 16, gcrypt)) == Array(three.prefix(16)))
    }

    @Test("AES-128-CBC gives NIST SP 800-38A's F.2.1 (encrypt) and F.2.2 (decrypt); a partial block is refused")
    func aesKnownAnswer() throws {
        let gcrypt = try Gcrypt.shared()
        let key = Hex.bytes("2b7e151628aed2a6abf7158809cf4f3c"), iv = Hex.bytes("000102030405060708090a0b0c0d0e0f")
        let plaintext = Hex.bytes("6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51"
                                  + "30c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710")
        let ciphertext = "7649abac8119b246cee98e9b12e9197d5086cb9b507219ee95db113a917678b2"
            + "73bed6b8e3c1743b7116e69e222295163ff1caa1681fac09120eca307586e1a7"
        var buffer = plaintext
        #expect(TransferCrypto.cipher(encrypt: true, key: key, iv: iv, &buffer, gcrypt))
        #expect(ASCII.hex(buffer) == ciphertext)
        #expect(TransferCrypto.cipher(encrypt: false, key: key, iv: iv, &buffer, gcrypt))
        #expect(buffer == plaintext)
        var partial = Array(plaintext.prefix(17))
        #expect(!TransferCrypto.cipher(encrypt: true, key: key, iv: iv, &partial, gcrypt))
    }

    @Test("Diffie-Hellman known answers (computed with Python's pow): a fixed exponent's public value, left-padded to 128 bytes; a shared value with a leading zero byte is refused (another session is opened: kwalletd5 drops those zeros)")
    func diffieHellmanKnownAnswer() throws {
        let gcrypt = try Gcrypt.shared()
        // pow(2, 0x800102…1f, p), 128 bytes.
        let exponent = Hex.bytes("800102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f")
        let publicValue = try #require(TransferCrypto.publicValue(exponent: exponent, gcrypt))
        #expect(ASCII.hex(publicValue) == "ff2f22817ed9fcb52eb84299e01daf054628e462504ec4f57dd646cb77314a8c5d0f0ed2d588085a49c0de73e8c64db4"
                + "82e2b3e7f21ebcb9768873857f61963a3ce9fd8092c1dee1486e3a62162a2d8d7bfc481836b10c8694220dc2bb5dc4349feb44b8"
                + "fadba98f56d63a6ed248a3acfc2eebad12106bd3e166d91ab3f93cee")
        // pow(2, e, p) is below 2^1016 for this e: its first byte is zero. As a shared value it is
        // refused: the specification hashes all 128 bytes (0870…) but kwalletd5 hashes it without
        // the zero (d485…), so no key is derived and the caller opens another session.
        let small = Hex.bytes("de9ffe754b70ecd7ca144093a1e67b7962758fabaedb7a042f1d86f49269f380")
        let padded = try #require(TransferCrypto.publicValue(exponent: small, gcrypt))
        #expect(padded.count == 128 && padded[0] == 0 && ASCII.hex(Array(padded.prefix(4))) == "003f2bec")
        var key = [UInt8](repeating: 0, count: 16)
        let status = key.withUnsafeMutableBufferPointer { TransferCrypto.sessionKey(peer: [2], exponent: small, gcrypt, into: $0.baseAddress!) }
        #expect(status == TransferCrypto.leadingZero)
        #expect(key == [UInt8](repeating: 0, count: 16))
    }

    @Test("A public value that kwalletd5 would misread (0xFF then a byte with its top bit set) is recognised, and only such a value")
    func kwalletMisreadValues() {
        var value = [UInt8](repeating: 0x11, count: 128)
        for (first, second, misread) in [(0xFF, 0x80, true), (0xFF, 0xFF, true), (0xFF, 0x9B, true),
                                         (0xFF, 0x7F, false), (0xFE, 0x80, false), (0x80, 0xFF, false), (0x00, 0x80, false)] {
            value[0] = UInt8(first); value[1] = UInt8(second)
            #expect(TransferCrypto.isMisreadByKWallet(value) == misread, "\(first) \(second)")
        }
    }

    @Test("Both sides of the Diffie-Hellman exchange agree on the key; public values outside 2...p-2 are refused")
    func agreement() throws {
        let gcrypt = try Gcrypt.shared()
        func key(_ peer: [UInt8], _ exponent: [UInt8]) -> (Int32, [UInt8]) {
            var key = [UInt8](repeating: 0, count: 16)
            let status = key.withUnsafeMutableBufferPointer { TransferCrypto.sessionKey(peer: peer, exponent: exponent, gcrypt, into: $0.baseAddress!) }
            return (status, key)
        }
        var a = [UInt8](repeating: 0, count: 32), b = [UInt8](repeating: 0, count: 32)
        var publicA: [UInt8] = [], publicB: [UInt8] = []
        var (statusA, keyA, statusB, keyB): (Int32, [UInt8], Int32, [UInt8]) = (-1, [], -1, [])
        // One pair in 256 shares a value with a leading zero byte, which both sides refuse alike
        // (the session then opens again); such a pair is drawn again.
        for _ in 0..<8 {
            #expect(SecureRandom.fill(&a) == nil && SecureRandom.fill(&b) == nil)
            publicA = try #require(TransferCrypto.publicValue(exponent: a, gcrypt))
            publicB = try #require(TransferCrypto.publicValue(exponent: b, gcrypt))
            (statusA, keyA) = key(publicB, a)
            (statusB, keyB) = key(publicA, b)
            #expect(statusA == statusB)
            if statusA != TransferCrypto.leadingZero { break }
        }
        #expect(publicA != publicB && publicA.count == 128)
        #expect(statusA == 0 && statusB == 0)
        #expect(keyA == keyB && keyA != [UInt8](repeating: 0, count: 16))
        // Leading zero bytes of a public value do not change it.
        #expect(key([0, 0] + publicB, a).1 == keyA)

        let prime = TransferCrypto.prime  // RFC 2409's
        #expect(prime.count == 128 && prime.prefix(8).allSatisfy { $0 == 0xFF } && prime.suffix(8).allSatisfy { $0 == 0xFF })
        var primeMinusOne = prime
        primeMinusOne[127] -= 1
        var primeMinusTwo = prime
        primeMinusTwo[127] -= 2
        for invalid in [[], [0], [1], primeMinusOne, prime, [1] + prime] {
            #expect(key(invalid, a).0 == TransferCrypto.invalidPeer, "\(invalid.count) bytes")
        }
        // The bounds themselves are accepted (a leading-zero refusal is a different status).
        #expect(key([2], a).0 != TransferCrypto.invalidPeer)
        #expect(key(primeMinusTwo, a).0 != TransferCrypto.invalidPeer)
    }

    @Test("A fixed key pair gives the known shared value and session key (computed apart with Python's pow and HKDF-SHA256), from both sides")
    func fixedKeyPairKnownAnswer() throws {
        let gcrypt = try Gcrypt.shared()
        let a = Hex.bytes("800102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f")
        let b = Hex.bytes("c0fefdfcfbfaf9f8f7f6f5f4f3f2f1f0efeeedecebeae9e8e7e6e5e4e3e2e1e0")
        let publicA = try #require(TransferCrypto.publicValue(exponent: a, gcrypt))
        let publicB = try #require(TransferCrypto.publicValue(exponent: b, gcrypt))
        #expect(ASCII.hex(publicB) == "bf83fe518ff1d0abc58985b4d5a20b04891ae88a004ab70558b6e22c6005e25c830021fe042ba89caea7e09f8f955a53"
                + "ee083eef024e7bbc50d854fc4d5a29409e09c34ab0c67f756d377d265f98da33630dee8e1188ad103cfeb53816cef4a2e641"
                + "9930064bfee3db9a191e50a34074eeb27114a68293ec17720f8f04f5710c")
        // The shared value pow(B, a, p), as the peer's side computes it too.
        var shared = [UInt8](repeating: 0, count: TransferCrypto.primeByteCount)
        let status = publicB.withUnsafeBufferPointer { peer in
            a.withUnsafeBufferPointer { exponent in
                shared.withUnsafeMutableBufferPointer { TransferCrypto.power(base: peer, exponent: exponent, gcrypt, into: $0) }
            }
        }
        #expect(status == 0)
        #expect(ASCII.hex(shared) == "3134e6181ff0fa2043f3b82e75bc86b47a2c4909f1cb9b522bcbb1f6abedb73f3f76458d24b9be56acd35abaf4f13918"
                + "d10ea9278f7c164d9e5d998b34f17e147aa5917d5825d3315d8449c866eb7b3834be7a529b80e8731938d5d1d0d731190b21"
                + "6cee41487ec45e92a9a07be13c63bde8beb4d74fa31971bbfaf48420287f")
        // The session key: HKDF-SHA256 of the shared value (no salt, no info), 16 bytes; both sides.
        for (peer, exponent) in [(publicB, a), (publicA, b)] {
            var key = [UInt8](repeating: 0, count: TransferCrypto.keyByteCount)
            let agreed = key.withUnsafeMutableBufferPointer { TransferCrypto.sessionKey(peer: peer, exponent: exponent, gcrypt, into: $0.baseAddress!) }
            #expect(agreed == 0)
            #expect(ASCII.hex(key) == "3f119de9be872c1124240333ae0c485d")
        }
    }
}
