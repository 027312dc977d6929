import Foundation
import Testing
@testable import TokenCacheCore
@testable import TokenCacheCrypto
import TokenCacheTestSupport

/// The primitives under the stores, on the real libcrypto, against published vectors: SHA-256
/// (FIPS 180-2's examples), AES-256-GCM (McGrew and Viega's test cases 13 to 16, the AES-256
/// ones of "The Galois/Counter Mode of Operation"), and the random sources.
@Suite("Crypto primitives: fixed vectors", .harness)
struct PrimitiveVectorTests {
    @Test("SHA-256 of the FIPS 180-2 examples: empty, \"abc\", the 448-bit message, a million 'a'")
    func sha256Vectors() throws {
        let vectors: [([UInt8], String)] = [
            ([], "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
            (Array("abc".utf8), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
            (Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8),
             "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"),
            ([UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"),
        ]
        for (message, digest) in vectors {
            #expect(ASCII.hex(try SHA256Digest.hash(message)) == digest, "\(message.count) bytes")
            #expect(ASCII.hex(try OpenSSL.sha256(Data(message))) == digest, "\(message.count) bytes, as Data")
        }
    }

    /// McGrew-Viega test cases: key, IV, plaintext, associated data, ciphertext, tag.
    static let gcmCases: [(name: String, key: String, iv: String, plaintext: String, aad: String, ciphertext: String, tag: String)] = [
        ("13", String(repeating: "00", count: 32), String(repeating: "00", count: 12), "", "", "", "530f8afbc74536b9a963b4f1c4cb738b"),
        ("14", String(repeating: "00", count: 32), String(repeating: "00", count: 12), String(repeating: "00", count: 16), "",
         "cea7403d4d606b6e074ec5d3baf39d18", "d0d1c8a799996bf0265b98b5d48ab919"),
        ("15", "feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308", "cafebabefacedbaddecaf888",
         "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b391aafd255", "",
         "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662898015ad",
         "b094dac5d93471bdec1a502270e3cc6c"),
        ("16", "feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308", "cafebabefacedbaddecaf888",
         "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39",
         "feedfacedeadbeeffeedfacedeadbeefabaddad2",
         "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662",
         "76fc6ece0f4e1768cddf8853bb2d551b"),
    ]

    @Test("AES-256-GCM seals McGrew-Viega's test cases 13-16 to their ciphertext and tag, and opens them back", arguments: 0..<4)
    func gcmVectors(_ index: Int) throws {
        let vector = Self.gcmCases[index]
        let key = Hex.bytes(vector.key).withUnsafeBytes { SymmetricKey(copying: $0) }
        let nonce = Hex.bytes(vector.iv), aad = Data(Hex.bytes(vector.aad)), plaintext = Data(Hex.bytes(vector.plaintext))
        let sealed = try OpenSSL.seal(plaintext, key: key, nonce: nonce, authenticating: aad)
        #expect(ASCII.hex(sealed) == vector.ciphertext + vector.tag, "case \(vector.name)")
        #expect(try OpenSSL.open(sealed, key: key, nonce: nonce, authenticating: aad) == plaintext, "case \(vector.name)")
    }

    @Test("AES-256-GCM refuses a wrong tag, a changed ciphertext byte, other associated data, another nonce or key: nil, and no plaintext left in the buffer")
    func gcmTagFailure() throws {
        let vector = Self.gcmCases[3]
        let key = Hex.bytes(vector.key).withUnsafeBytes { SymmetricKey(copying: $0) }
        let nonce = Hex.bytes(vector.iv), aad = Data(Hex.bytes(vector.aad))
        let sealed = Data(Hex.bytes(vector.ciphertext + vector.tag))
        #expect(try OpenSSL.open(sealed, key: key, nonce: nonce, authenticating: aad) != nil)  // the intact one opens
        var badTag = sealed
        badTag[badTag.count - 1] ^= 0x01
        var badCiphertext = sealed
        badCiphertext[0] ^= 0x80
        let otherKey = [UInt8](repeating: 0, count: 32).withUnsafeBytes { SymmetricKey(copying: $0) }
        #expect(try OpenSSL.open(badTag, key: key, nonce: nonce, authenticating: aad) == nil)
        #expect(try OpenSSL.open(badCiphertext, key: key, nonce: nonce, authenticating: aad) == nil)
        #expect(try OpenSSL.open(sealed, key: key, nonce: nonce, authenticating: Data(aad.dropLast())) == nil)
        #expect(try OpenSSL.open(sealed, key: key, nonce: [UInt8](repeating: 0, count: 12), authenticating: aad) == nil)
        #expect(try OpenSSL.open(sealed, key: otherKey, nonce: nonce, authenticating: aad) == nil)
        #expect(try OpenSSL.open(Data(sealed.prefix(15)), key: key, nonce: nonce, authenticating: aad) == nil)  // shorter than a tag
        // In place: the unauthenticated plaintext is wiped, never handed back.
        var buffer = badTag
        #expect(try OpenSSL.openInPlace(&buffer, sealed: buffer.indices, key: key, nonce: nonce, authenticating: aad) == nil)
        #expect(buffer.prefix(buffer.count - OpenSSL.tagByteCount).allSatisfy { $0 == 0 })
    }

    @Test("Random bytes (the kernel's and OpenSSL's) fill exactly the length asked for and do not repeat")
    func randomBytes() throws {
        for count in [0, 1, 16, 32, 1000] {
            var kernel = [UInt8](repeating: 0, count: count), openssl = [UInt8](repeating: 0, count: count)
            #expect(SecureRandom.fill(&kernel) == nil)
            try OpenSSL.randomBytes(&openssl)
            #expect(kernel.count == count && openssl.count == count)
        }
        // 200 draws of 32 bytes each: all distinct (a repeat has probability about 2^-241), and
        // not all zero: the buffers start zeroed, so an unfilled one would show.
        var seen: Set<[UInt8]> = []
        for _ in 0..<100 {
            var kernel = [UInt8](repeating: 0, count: 32), openssl = [UInt8](repeating: 0, count: 32)
            #expect(SecureRandom.fill(&kernel) == nil)
            try OpenSSL.randomBytes(&openssl)
            seen.insert(kernel)
            seen.insert(openssl)
        }
        #expect(seen.count == 200)
        #expect(!seen.contains([UInt8](repeating: 0, count: 32)))
        // A fresh key is random too: two keys never share an identifier.
        #expect(try SymmetricKey.random().identifier() != SymmetricKey.random().identifier())
    }
}
