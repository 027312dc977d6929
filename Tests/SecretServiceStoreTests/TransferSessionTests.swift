import Foundation
import Glibc
import Testing
import CLibSecret
@testable import SecretServiceStore
@testable import TokenCacheCore
@testable import TokenCachePlatform
import TokenCacheTestSupport

/// The encrypted transfer session the Secret Service backend opens itself. That gnome-keyring,
/// `secret-tool` and MSAL Python read what the backend stores, and the backend reads what they
/// store, is tested end to end in SecretServiceTests and the interop tests; these check the
/// parts one by one, against a real gnome-keyring where a session is needed.
@Suite("Secret Service transfer session", .harness, .enabled(if: TestEnvironment.runsSecretServiceTests))
struct TransferSessionTests {
    @Test("HKDF-SHA256 gives RFC 5869's test case 1 (salt and info) and test case 3 (no salt, no info, as the session uses it)")
    func hkdfKnownAnswer() throws {
        let gcrypt = try Gcrypt.shared()
        let input = [UInt8](repeating: 0x0b, count: 22)
        let one = try #require(TransferCrypto.hkdf(input, salt: Array(0x00...0x0c), info: Array(0xf0...0xf9), length: 42, gcrypt))
        #expect(Self.hex(one) == "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865")
        let three = try #require(TransferCrypto.hkdf(input, salt: nil, info: nil, length: 42, gcrypt))
        #expect(Self.hex(three) == "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8")
        // The session's use: the first 16 bytes.
        #expect(try #require(TransferCrypto.hkdf(input, length: 16, gcrypt)) == Array(three.prefix(16)))
    }

    @Test("AES-128-CBC gives NIST SP 800-38A's F.2.1 (encrypt) and F.2.2 (decrypt); a partial block is refused")
    func aesKnownAnswer() throws {
        let gcrypt = try Gcrypt.shared()
        let key = Self.bytes("2b7e151628aed2a6abf7158809cf4f3c"), iv = Self.bytes("000102030405060708090a0b0c0d0e0f")
        let plaintext = Self.bytes("6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51"
                                   + "30c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710")
        let ciphertext = "7649abac8119b246cee98e9b12e9197d5086cb9b507219ee95db113a917678b2"
            + "73bed6b8e3c1743b7116e69e222295163ff1caa1681fac09120eca307586e1a7"
        var buffer = plaintext
        #expect(TransferCrypto.cipher(encrypt: true, key: key, iv: iv, &buffer, gcrypt))
        #expect(Self.hex(buffer) == ciphertext)
        #expect(TransferCrypto.cipher(encrypt: false, key: key, iv: iv, &buffer, gcrypt))
        #expect(buffer == plaintext)
        var partial = Array(plaintext.prefix(17))
        #expect(!TransferCrypto.cipher(encrypt: true, key: key, iv: iv, &partial, gcrypt))
    }

    @Test("Diffie-Hellman known answers (computed with Python's pow): a fixed exponent's public value, left-padded to 128 bytes; a shared value with a leading zero byte is refused (another session is opened: kwalletd5 drops those zeros)")
    func diffieHellmanKnownAnswer() throws {
        let gcrypt = try Gcrypt.shared()
        // pow(2, 0x800102…1f, p), 128 bytes.
        let exponent = Self.bytes("800102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f")
        let publicValue = try #require(TransferCrypto.publicValue(exponent: exponent, gcrypt))
        #expect(Self.hex(publicValue) == "ff2f22817ed9fcb52eb84299e01daf054628e462504ec4f57dd646cb77314a8c5d0f0ed2d588085a49c0de73e8c64db4"
                + "82e2b3e7f21ebcb9768873857f61963a3ce9fd8092c1dee1486e3a62162a2d8d7bfc481836b10c8694220dc2bb5dc4349feb44b8"
                + "fadba98f56d63a6ed248a3acfc2eebad12106bd3e166d91ab3f93cee")
        // pow(2, e, p) is below 2^1016 for this e: its first byte is zero. As a shared value it is
        // refused: the specification hashes all 128 bytes (0870…) but kwalletd5 hashes it without
        // the zero (d485…), so no key is derived and the caller opens another session.
        let small = Self.bytes("de9ffe754b70ecd7ca144093a1e67b7962758fabaedb7a042f1d86f49269f380")
        let padded = try #require(TransferCrypto.publicValue(exponent: small, gcrypt))
        #expect(padded.count == 128 && padded[0] == 0 && Self.hex(Array(padded.prefix(4))) == "003f2bec")
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

    /// Before the fix about 1 session in 170 failed to decrypt against kwalletd5 (18 of 3,000,
    /// each a leading zero in the shared value or a misread public value), and the backend had
    /// to open another; now none may. TOKENCACHE_FRESH_SESSIONS sets the count (default 3,000
    /// under KWallet, about 5 s, where without the fix this fails 997 times in 1,000; 200 elsewhere).
    @Test("Every freshly opened session decrypts the daemon's secrets on the first read")
    func freshSessionsDecrypt() throws {
        let (backend, store, items) = try Self.savedItems("fresh-sessions")
        defer { try? store.removeAll() }
        let item = try #require(items.first)
        let defaultCount = TestEnvironment.provider == .kwallet ? 3000 : 200
        let count = Int(TestEnvironment.environment["TOKENCACHE_FRESH_SESSIONS"] ?? "") ?? defaultCount
        var failures = 0
        for _ in 0..<count {
            let session = try TransferSession.open(backend.client.bus, timeoutMilliseconds: 5000)
            var read = 0
            _ = try backend.client.getSecrets([item], session: session) { _, plaintext in
                if SecretServiceBackend.entry(fromSecret: plaintext) != nil { read += 1 }
            }
            if read != 1 { failures += 1 }
        }
        #expect(failures == 0, "\(failures) of \(count) fresh sessions did not decrypt")
    }

    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    static func bytes(_ hex: String) -> [UInt8] {
        var bytes: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            bytes.append(UInt8(hex[index..<next], radix: 16)!)
            index = next
        }
        return bytes
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
            try TransferSession.fillRandom(&a)
            try TransferSession.fillRandom(&b)
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

    @Test("A secret sealed for the session opens to the same bytes; a fresh IV every time; another length, IV or padding is refused, not guessed")
    func sealAndOpen() throws {
        let backend = try SecretServiceBackend()
        let session = try backend.session.session()
        #expect(session.path.hasPrefix("/org/freedesktop/secrets/session/"))
        for length in [0, 1, 15, 16, 17, 1000] {
            let plaintext = Data((0..<length).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) })
            let sealed = try session.secretStruct(plaintext, contentType: "application/json")
            g_variant_ref_sink(sealed)
            defer { g_variant_unref(sealed) }
            let opened = try #require(try session.plaintext(ofSecretStruct: sealed))
            #expect(Data(opened) == plaintext)
            // The ciphertext is a whole number of blocks, padding included, and is not the plaintext.
            let value = try #require(Self.bytes(of: sealed, at: 2))
            #expect(value.count == (length / 16 + 1) * 16)
            if length >= 16 { #expect(!value.starts(with: plaintext.prefix(16))) }
        }
        let plaintext = Data("{\"AccessToken\":{}}".utf8)
        let first = try session.secretStruct(plaintext, contentType: "application/json")
        let second = try session.secretStruct(plaintext, contentType: "application/json")
        g_variant_ref_sink(first)
        g_variant_ref_sink(second)
        defer { g_variant_unref(first); g_variant_unref(second) }
        #expect(Self.bytes(of: first, at: 1) != Self.bytes(of: second, at: 1))

        // Rebuilt with one part changed: each must be refused.
        let iv = try #require(Self.bytes(of: first, at: 1))
        let value = try #require(Self.bytes(of: first, at: 2))
        func rebuilt(iv: [UInt8], value: [UInt8]) -> OpaquePointer {
            var fields = [g_variant_new_object_path(session.path), iv.withUnsafeBytes { GVariants.bytes($0) },
                          value.withUnsafeBytes { GVariants.bytes($0) }, g_variant_new_string("application/json")]
            return g_variant_ref_sink(fields.withUnsafeMutableBufferPointer { g_variant_new_tuple($0.baseAddress, gsize($0.count)) })
        }
        // CBC: a bit flipped in the block before the last flips the same bit of the last plaintext
        // block, so the padding byte 0x0E (18 bytes of JSON) becomes 0x1E, never valid padding.
        // (Noise in the last block itself would end in valid padding 1 time in 256.)
        #expect(value.count == 32)
        var flippedLast = value
        flippedLast[flippedLast.count - 17] ^= 0x10
        for (name, candidate) in [("short IV", rebuilt(iv: Array(iv.prefix(8)), value: value)),
                                  ("partial block", rebuilt(iv: iv, value: Array(value.dropLast()))),
                                  ("empty value", rebuilt(iv: iv, value: [])),
                                  ("corrupt padding", rebuilt(iv: iv, value: flippedLast))] {
            #expect(try session.plaintext(ofSecretStruct: candidate) == nil, "\(name)")
            g_variant_unref(candidate)
        }
        let intact = rebuilt(iv: iv, value: value)
        defer { g_variant_unref(intact) }
        #expect(try #require(try session.plaintext(ofSecretStruct: intact)) == Array(plaintext))
    }

    @Test("A secret naming another session is refused with a typed error, alone and inside a GetSecrets reply, never read as missing")
    func otherSessionRefused() throws {
        let backend = try SecretServiceBackend()
        let session = try backend.session.session()
        let entry = Data(#"{"AccessToken":{"k":{"secret":"x"}}}"#.utf8)
        let sealed = try session.secretStruct(entry, contentType: "application/json")
        g_variant_ref_sink(sealed)
        defer { g_variant_unref(sealed) }
        let iv = try #require(Self.bytes(of: sealed, at: 1)), value = try #require(Self.bytes(of: sealed, at: 2))
        // The same ciphertext, but claiming another session: a forged or misrouted answer.
        func secret(session path: String) -> OpaquePointer {
            var fields = [g_variant_new_object_path(path), iv.withUnsafeBytes { GVariants.bytes($0) },
                          value.withUnsafeBytes { GVariants.bytes($0) }, g_variant_new_string("application/json")]
            return fields.withUnsafeMutableBufferPointer { g_variant_new_tuple($0.baseAddress, gsize($0.count)) }
        }
        let other = g_variant_ref_sink(secret(session: "/org/freedesktop/secrets/session/someone_else"))!
        defer { g_variant_unref(other) }
        #expect(throws: TokenCacheError.self) { try session.plaintext(ofSecretStruct: other) }
        do {
            _ = try session.plaintext(ofSecretStruct: other)
        } catch {
            #expect(error.code == .secretServiceFailure && error.message.contains("someone_else"), "\(error.message)")
        }

        /// A GetSecrets reply `(a{o(oayays)})` of these secrets (a full reference).
        func reply(_ secrets: [OpaquePointer]) -> OpaquePointer {
            let type = g_variant_type_new("a{o(oayays)}")
            defer { g_variant_type_free(type) }
            let builder = g_variant_builder_new(type)!
            defer { g_variant_builder_unref(builder) }
            for (index, secret) in secrets.enumerated() {
                g_variant_builder_add_value(builder, g_variant_new_dict_entry(
                    g_variant_new_object_path("/org/freedesktop/secrets/collection/login/\(index + 1)"), secret))
            }
            var children = [g_variant_builder_end(builder)]
            return g_variant_ref_sink(children.withUnsafeMutableBufferPointer { g_variant_new_tuple($0.baseAddress, gsize($0.count)) })!
        }
        let good = reply([secret(session: session.path)])
        defer { g_variant_unref(good) }
        let read = try SecretServiceBackend.entries(fromGetSecrets: GVariantRef(sinking: good), session: session)
        #expect(read.answered == 1 && read.entries.count == 1 && read.entries.first?.key == "k")
        let mixed = reply([secret(session: session.path), secret(session: "/org/freedesktop/secrets/session/someone_else")])
        defer { g_variant_unref(mixed) }
        #expect(throws: TokenCacheError.self) { try SecretServiceBackend.entries(fromGetSecrets: GVariantRef(sinking: mixed), session: session) }
    }

    /// A fresh group (`org.swift-tokencache.<name>-<random>`) holding one sign-in, and the paths
    /// of its items; the caller removes it (`store.removeAll()`).
    static func savedItems(_ name: String) throws -> (SecretServiceBackend, AccountStore, [String]) {
        let backend = try SecretServiceBackend()
        let group = try CacheGroup("org.swift-tokencache.\(name)-\(UUID().uuidString.prefix(8).lowercased())")
        let store = AccountStore(backend: backend, group: group)
        do {
            try store.save(Fixtures.tokenResponse(Fixtures.response(for: Fixtures.alice, tag: Fixtures.appOne)), clientID: Fixtures.appOne,
                           authority: Fixtures.authority(), scopes: [], now: Fixtures.now)
            return (backend, store, try backend.searchPaths(["group": group.name], collection: try backend.collectionPath(for: group)))
        } catch {
            try? store.removeAll()
            throw error
        }
    }

    /// The bytes of a Secret struct's `ay` field.
    static func bytes(of secret: OpaquePointer, at index: Int) -> [UInt8]? {
        let child = g_variant_get_child_value(secret, gsize(index))!
        defer { g_variant_unref(child) }
        return GVariants.byteArray(child)
    }

    @Test("A session is closed in the daemon when it goes away: GetSecrets with its path then fails")
    func closedWhenReleased() throws {
        // An item to ask for: KeePassXC and KWallet check the session only when there is a
        // secret to encrypt (an empty GetSecrets answers whatever the session).
        let (backend, store, items) = try Self.savedItems("session-close")
        defer { try? store.removeAll() }
        try #require(!items.isEmpty)
        var session: TransferSession? = try TransferSession.open(backend.client.bus, timeoutMilliseconds: 5000)
        let path = try #require(session?.path)
        func getSecrets() throws -> Int {
            let reply = try backend.client.call("GetSecrets", on: SecretServiceClient.servicePath, interface: "org.freedesktop.Secret.Service",
                                                arguments: [.objectPaths(items), .objectPath(path)],
                                                replyType: "(a{o(oayays)})", action: "read secrets")
            return reply[0].count
        }
        #expect(try getSecrets() == items.count)  // open: every item answered
        session = nil
        _ = session
        // Close is sent without waiting; the bus keeps the order of one connection's messages,
        // though a provider may handle Close after a later call (KeePassXC): given up to 10 s.
        let deadline = Date().addingTimeInterval(10)
        var answered = (try? getSecrets()) ?? 0
        while answered > 0, Date() < deadline {
            Thread.sleep(forTimeInterval: 0.05)
            answered = (try? getSecrets()) ?? 0
        }
        #expect(answered == 0, "a closed session still gets secrets")
    }
}
