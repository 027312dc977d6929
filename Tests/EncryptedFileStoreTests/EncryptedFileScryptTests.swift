import Foundation
import Testing
@testable import EncryptedFileStore
@_spi(Backend) @testable import TokenCacheCore
@testable import TokenCacheCrypto
@testable import TokenCachePlatform
#if canImport(Glibc)
import Glibc
#endif
import TokenCacheTestSupport

/// The passphrase key source's scrypt cost: current defaults for new files, older files still
/// open, and a header demanding too much refused before any key is derived.
@Suite("Encrypted-file backend: scrypt cost and bounds", .harness)
struct EncryptedFileScryptTests {
    let directory: URL
    let group = try! CacheGroup("org.swift-tokencache.scrypt")
    static let passphrase = "correct horse battery staple"

    init() throws { directory = try TestEnvironment.temporaryDirectory().appendingPathComponent("cache") }

    func backend(_ keySource: EncryptedFileBackend.KeySource = .passphrase(Self.passphrase)) -> EncryptedFileBackend {
        EncryptedFileBackend(directory: directory, keySource: keySource)
    }

    /// Writes a file whose header carries `kdf`, sealed with the key scrypt derives from it when
    /// `derive` (else with garbage: the header alone is under test).
    func writeFile(kdf: CacheFileFormat.KDFParameters, derive: Bool, plaintext: Data = Data("{}".utf8)) throws {
        try FileIO.ensureDirectory(directory)
        let key = derive ? try OpenSSL.scrypt(passphrase: Self.passphrase, salt: [UInt8](Data(base64Encoded: kdf.salt)!), n: kdf.n, r: kdf.r, p: kdf.p)
            : [UInt8](repeating: 9, count: 32).withUnsafeBytes { SymmetricKey(copying: $0) }
        let header = CacheFileFormat.Header(group: group.name, keyID: try key.identifier(), generation: 3, kdf: kdf)
        let nonce = [UInt8](repeating: 1, count: OpenSSL.nonceByteCount)
        let sealed = try OpenSSL.seal(plaintext, key: key, nonce: nonce, authenticating: try CacheFileFormat.associatedData(for: header))
        let url = backend().fileURL(for: group)
        try CacheFileFormat.encode(header: header, nonce: nonce, sealed: sealed).write(to: url)
        chmod(url.path, 0o600)
    }

    static let salt = Data(repeating: 0x42, count: 16).base64EncodedString()
    static let hostile: [(name: String, n: UInt64, r: UInt64, p: UInt64)] = [
        ("N = 2^40", 1 << 40, 8, 1),
        ("N = 2^63", 1 << 63, 1, 1),
        ("N not a power of two", (1 << 15) + 1, 8, 1),
        ("N = 1", 1, 8, 1),
        ("r * p huge", 1 << 10, 1 << 31, 1 << 31),
        ("4 GiB of memory (N = 2^20, r = 32)", 1 << 20, 32, 1),
        ("1 GiB of memory (N = 2^20, r = 8)", 1 << 20, 8, 1),
        ("16 times the default work (p = 16)", 1 << 17, 8, 16),
        ("r = 0", 1 << 14, 0, 1),
        ("p = 0", 1 << 14, 8, 0),
    ]

    @Test("A header demanding more of scrypt than the bounds is refused with fileAuthenticationFailed, before a passphrase is asked for or a key derived; a save refuses too and the file is unchanged",
          arguments: hostile)
    func hostileParameters(_ sample: (name: String, n: UInt64, r: UInt64, p: UInt64)) throws {
        defer { try? FileManager.default.removeItem(at: directory.deletingLastPathComponent()) }
        try writeFile(kdf: CacheFileFormat.KDFParameters(salt: Self.salt, n: sample.n, r: sample.r, p: sample.p), derive: false)
        let url = backend().fileURL(for: group)
        let before = try Data(contentsOf: url)
        let asked = Locked(0)
        for source in [EncryptedFileBackend.KeySource.passphrase(Self.passphrase),
                       .passphraseProvider { asked.withLock { $0 += 1 }; return Self.passphrase }] {
            let opened = backend(source)
            let error = try #require(throws: TokenCacheError.self, "\(sample.name)") { try opened.load(group) }
            #expect(error.code == .fileAuthenticationFailed, "\(sample.name): \(error)")
            #expect(error.message.contains("scrypt parameters beyond"), "\(sample.name)")
            #expect(error.hint?.contains("not changed") == true)
            let saveError = try #require(throws: TokenCacheError.self) { _ = try opened.apply([], to: group, expected: nil) }
            #expect(saveError.code == .fileAuthenticationFailed)
            // Checked on the backend, not by the time taken: scrypt never ran.
            #expect(opened.derivedKeyCount == 0, "\(sample.name)")
        }
        #expect(asked.withLock { $0 } == 0, "the app was asked for a passphrase for a hostile file")
        #expect(try Data(contentsOf: url) == before)
    }

    @Test("New files get N = 2^17, r = 8, p = 1; a file written with the old N = 2^15 still opens and keeps its parameters when saved")
    func defaultsAndOlderFiles() throws {
        #expect(EncryptedFileBackend.scryptN == 1 << 17 && EncryptedFileBackend.scryptR == 8 && EncryptedFileBackend.scryptP == 1)
        let old = CacheFileFormat.KDFParameters(salt: Self.salt, n: 1 << 15, r: 8, p: 1)
        try writeFile(kdf: old, derive: true, plaintext: Data(#"{"AppMetadata": {"k": {"client_id": "c", "environment": "e"}}}"#.utf8))
        let opened = backend()
        #expect(try opened.load(group).entries.count == 1)
        #expect(opened.derivedKeyCount == 1)  // the count the hostile-header test expects to stay 0
        _ = try opened.apply([.remove(.appMetadata, key: "k")], to: group, expected: nil)
        let url = opened.fileURL(for: group)
        #expect(try CacheFileFormat.parse(try Data(contentsOf: url), path: "x").header.kdf?.n == 1 << 15)
        #expect(try backend().load(group).entries.isEmpty)

        try FileManager.default.removeItem(at: directory)
        let clock = ContinuousClock()
        let elapsed = try clock.measure { _ = try backend().apply([], to: group, expected: nil) }
        let kdf = try #require(try CacheFileFormat.parse(try Data(contentsOf: url), path: "x").header.kdf)
        #expect(kdf.n == 1 << 17 && kdf.r == 8 && kdf.p == 1)
        #expect(EncryptedFileBackend.scryptParametersProblem(kdf) == nil, "the defaults are within the bounds")
        print("SCRYPT: first save with N = 2^17, r = 8, p = 1 (one derivation) took \(elapsed)")
    }
}
