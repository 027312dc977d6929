import Foundation
import Testing
@testable import EncryptedFileStore
@testable import TokenCacheCore
@testable import TokenCacheCrypto
@testable import TokenCachePlatform
#if canImport(Glibc)
import Glibc
#endif
import TokenCacheTestSupport

/// Where symmetric keys live in memory: pages of their own, advised MADV_DONTDUMP, so a core
/// dump of the process leaves them out.
@Suite("Encrypted-file backend: keys left out of core dumps", .harness)
struct EncryptedFileKeyMemoryTests {
    /// The VmFlags of the mapping of this process holding `address`, from /proc/self/smaps.
    static func vmFlags(of address: UInt) throws -> [String]? {
        let smaps = String(decoding: try #require(FileHandle(forReadingAtPath: "/proc/self/smaps")).readDataToEndOfFile(), as: UTF8.self)
        var inside = false
        for line in smaps.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            if let range = fields.first, !range.hasSuffix(":"), range.contains("-") {
                let bounds = range.split(separator: "-").compactMap { UInt($0, radix: 16) }
                inside = bounds.count == 2 && bounds[0] <= address && address < bounds[1]
            } else if inside, line.hasPrefix("VmFlags:") {
                return fields.dropFirst().map(String.init)
            }
        }
        return nil
    }

    static func check(_ key: SymmetricKey, _ name: String) throws {
        let address = key.withUnsafeBytes { UInt(bitPattern: $0.baseAddress) }
        #expect(address % UInt(sysconf(Int32(_SC_PAGESIZE))) == 0, "\(name): not page-aligned")
        let flags = try #require(try vmFlags(of: address), "\(name): no mapping holds the key")
        #expect(flags.contains("dd"), "\(name): the key's mapping is not excluded from core dumps: \(flags)")
    }

    @Test("Keys copied in, random, derived by scrypt and read from or created in a key file each sit in a page advised MADV_DONTDUMP (dd in /proc/self/smaps), and hold the right bytes")
    func keysExcludedFromCoreDumps() throws {
        let bytes = [UInt8](repeating: 0x5A, count: 32)
        let copied = bytes.withUnsafeBytes { SymmetricKey(copying: $0) }
        try Self.check(copied, "copied")
        #expect(copied.withUnsafeBytes { Array($0) } == bytes)
        try Self.check(try SymmetricKey.random(), "random")
        let derived = try OpenSSL.scrypt(passphrase: "password", salt: Array("NaCl".utf8), n: 1024, r: 8, p: 16)
        try Self.check(derived, "scrypt")
        // RFC 7914's second test vector: the key is derived in place, correctly.
        #expect(ASCII.hex(derived.withUnsafeBytes { Array($0) }) == "fdbabe1c9d3472007856e7190d01e9fe7c6ad7cbc8237830e77376634b373162")

        let directory = try TestEnvironment.temporaryDirectory().appendingPathComponent("keys")
        defer { try? FileManager.default.removeItem(at: directory.deletingLastPathComponent()) }
        let url = directory.appendingPathComponent("cache.key")
        let created = try KeyFile.load(url, creating: true, directory: directory)
        try Self.check(created, "created key file")
        let read = try KeyFile.load(url, creating: false, directory: directory)
        try Self.check(read, "read key file")
        #expect(read.withUnsafeBytes { Array($0) } == created.withUnsafeBytes { Array($0) })
        #expect(try Data(contentsOf: url) == Data(read.withUnsafeBytes { Array($0) }))
        // A key file one byte longer is still refused.
        try (Data(contentsOf: url) + Data([0])).write(to: url)
        #expect((try #require(throws: TokenCacheError.self) { try KeyFile.load(url, creating: false, directory: directory) }).code == .fileMismatch)
    }
}
