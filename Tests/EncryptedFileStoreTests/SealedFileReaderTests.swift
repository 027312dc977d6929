import Foundation
import Testing
@testable import EncryptedFileStore
@testable import TokenCacheCore
@testable import TokenCachePlatform
#if canImport(Glibc)
import Glibc
#endif
import TokenCacheTestSupport

/// The encrypted file read while it is decrypted (a helper thread reads ahead), against the
/// plain read: the same plaintext, and the same refusals for every damaged file.
@Suite("Encrypted file read while decrypting", .capturesLogs)
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

    /// Reads `file` through a descriptor, concurrently (`threshold` 0) or the plain way.
    func read(_ file: Data, concurrently: Bool, piece: Int = 4_099) -> Result<Data, TokenCacheError> {
        let url = directory.appendingPathComponent("f-\(UUID().uuidString)")
        try! file.write(to: url)
        let descriptor = open(url.path, O_RDONLY)
        defer { close(descriptor); try? FileManager.default.removeItem(at: url) }
        let key = self.key
        return Result { () throws(TokenCacheError) -> Data in
            let opened = try SealedFileReader.read(descriptor, path: url.path, key: { _ in key },
                                                   concurrentFrom: concurrently ? 0 : .max, piece: piece)
            return opened.data[opened.plaintext]
        }
    }

    @Test("A large file read while decrypting gives the plaintext, whatever the piece size")
    func sameAsPlainRead() throws {
        let (file, plaintext) = try sealedFile(plaintextBytes: 300_000)
        for piece in [1, 16, 4_099, 65_536, 1 << 20] {
            #expect(try read(file, concurrently: true, piece: piece).get() == plaintext, "piece \(piece)")
        }
        #expect(try read(file, concurrently: false).get() == plaintext)
    }

    @Test("Every truncation and flipped byte is refused as the plain read refuses it")
    func damagedFiles() throws {
        let (file, _) = try sealedFile(plaintextBytes: 5_000)
        func code(_ result: Result<Data, TokenCacheError>) -> TokenCacheError.Code? {
            if case .failure(let error) = result { return error.code }
            return nil
        }
        var lengths = Array(0..<200) + Array(stride(from: 200, to: file.count, by: 97)) + [file.count - 16, file.count - 1]
        lengths.removeAll { $0 >= file.count }
        for length in lengths {
            let truncated = file.prefix(length)
            let plain = code(read(truncated, concurrently: false))
            #expect(plain != nil, "length \(length) was accepted")
            #expect(code(read(truncated, concurrently: true)) == plain, "length \(length)")
        }
        for offset in stride(from: 0, to: file.count, by: 13) {
            var flipped = file
            flipped[offset] ^= 0x40
            let plain = code(read(flipped, concurrently: false))
            #expect(plain != nil, "a flip at \(offset) was accepted")
            #expect(code(read(flipped, concurrently: true)) == plain, "flip at \(offset)")
        }
    }

    @Test("A file longer than fstat said is read the plain way, and read whole")
    func fileLongerThanExpected() throws {
        let (file, plaintext) = try sealedFile(plaintextBytes: 50_000)
        let url = directory.appendingPathComponent("grown")
        try file.write(to: url)
        let descriptor = open(url.path, O_RDONLY)
        defer { close(descriptor) }
        let key = self.key
        // As if the file had been 20,000 bytes when inspected: the buffer fills up, so it is not used.
        #expect(try SealedFileReader.readWhileDecrypting(descriptor, path: url.path, expected: 20_000, key: { _ in key }, piece: 4_096) == nil)
        let opened = try SealedFileReader.read(descriptor, path: url.path, key: { _ in key }, concurrentFrom: 0, piece: 4_096)
        #expect(opened.data[opened.plaintext] == plaintext)
    }

    @Test("The encrypted-file backend reads a large cache while decrypting it, with the same entries as written")
    func backendReadsLargeCache() throws {
        // 400 accounts saved in memory, then written to the file at once: about 1.3 MB, above the 1 MiB threshold.
        let written = try Fixtures.largeCache(group: group)
        let cache = directory.appendingPathComponent("cache")
        _ = try EncryptedFileBackend(directory: cache, keySource: .key(Self.keyBytes)).apply(written.map { .upsert($0) }, to: group, expected: nil)
        let backend = EncryptedFileBackend(directory: cache, keySource: .key(Self.keyBytes))
        let size = try FileManager.default.attributesOfItem(atPath: backend.fileURL(for: group).path)[.size] as! Int
        #expect(size >= 1 << 20, "the file is large enough to be read while decrypting")
        #expect(Set(try backend.load(group).entries) == Set(written))
    }
}
