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

/// The encrypted file read and decrypted in place: the plaintext back, and a typed refusal for
/// every damaged file.
@Suite("Encrypted file read and decrypted in place", .harness)
struct SealedFileReaderTests {
    let directory: URL
    static let keyBytes = [UInt8](repeating: 0x3C, count: 32)
    let key = keyBytes.withUnsafeBytes { SymmetricKey(copying: $0) }
    let group = try! CacheGroup("org.swift-tokencache.reader")

    init() throws {
        directory = try TestEnvironment.temporaryDirectory()
    }

    /// A cache file as the backend writes it, with `count` bytes of plaintext.
    func sealedFile(plaintextBytes count: Int) throws -> (file: Data, plaintext: Data) {
        let plaintext = Data((0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 8) })
        let header = CacheFileFormat.Header(group: group.name, keyID: try key.identifier(), generation: 3)
        let nonce = [UInt8](repeating: 9, count: OpenSSL.nonceByteCount)
        let sealed = try OpenSSL.seal(plaintext, key: key, nonce: nonce, authenticating: try CacheFileFormat.associatedData(for: header))
        return (try CacheFileFormat.encode(header: header, nonce: nonce, sealed: sealed), plaintext)
    }

    /// Reads `file` through a descriptor.
    func read(_ file: Data) -> Result<Data, TokenCacheError> {
        let url = directory.appendingPathComponent("f-\(UUID().uuidString)")
        try! file.write(to: url)
        let descriptor = open(url.path, O_RDONLY)
        defer { close(descriptor); try? FileManager.default.removeItem(at: url) }
        let key = self.key
        return Result { () throws(TokenCacheError) -> Data in
            let opened = try SealedFileReader.read(descriptor, path: url.path, key: { _ in key })
            return opened.data[opened.plaintext]
        }
    }

    @Test("A sealed file read back gives its plaintext")
    func readsPlaintext() throws {
        let (file, plaintext) = try sealedFile(plaintextBytes: 300_000)
        #expect(try read(file).get() == plaintext)
    }

    @Test("Every truncation and flipped byte is refused")
    func damagedFiles() throws {
        let (file, _) = try sealedFile(plaintextBytes: 5_000)
        func code(_ result: Result<Data, TokenCacheError>) -> TokenCacheError.Code? {
            if case .failure(let error) = result { return error.code }
            return nil
        }
        var lengths = Array(0..<200) + Array(stride(from: 200, to: file.count, by: 97)) + [file.count - 16, file.count - 1]
        lengths.removeAll { $0 >= file.count }
        for length in lengths {
            #expect(code(read(file.prefix(length))) != nil, "length \(length) was accepted")
        }
        for offset in stride(from: 0, to: file.count, by: 13) {
            var flipped = file
            flipped[offset] ^= 0x40
            #expect(code(read(flipped)) != nil, "a flip at \(offset) was accepted")
        }
    }

    @Test("The encrypted-file backend reads back a large cache with the same entries as written")
    func backendReadsLargeCache() throws {
        // 400 accounts saved in memory, then written to the file at once: about 1.3 MB.
        let written = try Fixtures.largeCache(group: group)
        let cache = directory.appendingPathComponent("cache")
        _ = try EncryptedFileBackend(directory: cache, keySource: .key(Self.keyBytes)).apply(written.map { .upsert($0) }, to: group, expected: nil)
        let backend = EncryptedFileBackend(directory: cache, keySource: .key(Self.keyBytes))
        #expect(Set(try backend.load(group).entries) == Set(written))
    }
}
