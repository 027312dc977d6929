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

/// Validly encrypted files (right key, right group, tag correct) whose decrypted JSON is hostile,
/// and a directory that became read-only.
@Suite("Encrypted-file backend: hostile content and read-only directory", .harness)
struct EncryptedFileHostileTests {
    let directory: URL
    let group = try! CacheGroup("org.swift-tokencache.hostile")
    static let keyBytes = [UInt8](repeating: 0x5A, count: 32)

    init() throws { directory = try TestEnvironment.temporaryDirectory().appendingPathComponent("cache") }

    func backend() -> EncryptedFileBackend { EncryptedFileBackend(directory: directory, keySource: .key(Self.keyBytes)) }

    /// Seals `plaintext` exactly as the backend would, so only the content is hostile.
    func writeSealed(_ plaintext: Data) throws {
        try FileIO.ensureDirectory(directory)
        let key = Self.keyBytes.withUnsafeBytes { SymmetricKey(copying: $0) }
        let header = CacheFileFormat.Header(group: group.name, keyID: try key.identifier(), generation: 7)
        let nonce = [UInt8](repeating: 1, count: OpenSSL.nonceByteCount)
        let sealed = try OpenSSL.seal(plaintext, key: key, nonce: nonce, authenticating: try CacheFileFormat.associatedData(for: header))
        let url = backend().fileURL(for: group)
        try CacheFileFormat.encode(header: header, nonce: nonce, sealed: sealed).write(to: url)
        chmod(url.path, 0o600)
    }

    @Test("Decrypting in place uses the buffer's own indexes (a slice not starting at zero), and a bad tag leaves zeros, not the unauthenticated plaintext")
    func openInPlaceOnASlice() throws {
        let key = Self.keyBytes.withUnsafeBytes { SymmetricKey(copying: $0) }
        let nonce = [UInt8](repeating: 3, count: OpenSSL.nonceByteCount)
        let plaintext = Data((0..<300).map { UInt8(truncatingIfNeeded: $0 * 7 + 1) })
        let sealed = try OpenSSL.seal(plaintext, key: key, nonce: nonce, authenticating: Data("aad".utf8))
        let padding = Data(repeating: 0xEE, count: 40)
        let whole = padding + sealed + padding
        var slice = whole[20...]  // indexes 20..., the sealed part at 40..<(40 + sealed.count)
        let range = 40..<(40 + sealed.count)
        let opened = try #require(try OpenSSL.openInPlace(&slice, sealed: range, key: key, nonce: nonce, authenticating: Data("aad".utf8)))
        #expect(slice[opened] == plaintext)
        #expect(slice[20..<40] == padding.prefix(20) && slice[range.upperBound...] == padding, "nothing outside the range is touched")

        var tampered = whole[20...]
        tampered[range.upperBound - 1] ^= 1  // the tag's last byte
        #expect(try OpenSSL.openInPlace(&tampered, sealed: range, key: key, nonce: nonce, authenticating: Data("aad".utf8)) == nil)
        #expect(tampered[range.lowerBound..<(range.upperBound - OpenSSL.tagByteCount)].allSatisfy { $0 == 0 })
        #expect(tampered[20..<40] == padding.prefix(20))
    }

    static let account = #"{"home_account_id": "h.t", "environment": "login.microsoftonline.com", "realm": "t", "username": "u@x.com", "authority_type": "MSSTS"}"#
    static let hostilePlaintexts: [(name: String, plaintext: Data)] = [
        ("not JSON", Data("not json".utf8)),
        ("a JSON array", Data("[1, 2, 3]".utf8)),
        ("empty", Data()),
        ("invalid UTF-8", Data([0x7B, 0x22, 0xFF, 0xFE, 0x22, 0x3A, 0x7B, 0x7D, 0x7D])),
        ("deep nesting", Data((String(repeating: "{\"a\":", count: 20_000) + "1" + String(repeating: "}", count: 20_000)).utf8)),
        ("deep arrays inside an entity", Data(("{\"Account\": {\"k\": {\"x\": " + String(repeating: "[", count: 20_000)
                                               + String(repeating: "]", count: 20_000) + "}}}").utf8)),
        ("sections of the wrong type", Data("{\"AccessToken\": 5, \"RefreshToken\": [1], \"Account\": \"x\", \"IdToken\": null}".utf8)),
        ("entities of the wrong type", Data("{\"AccessToken\": {\"a\": 5, \"b\": [], \"c\": \"s\", \"d\": null}, \"Account\": {\"k\": \(account)}}".utf8)),
        ("fields of the wrong type", Data("{\"AccessToken\": {\"a\": {\"secret\": 5, \"expires_on\": {\"x\": 1}, \"target\": true, \"home_account_id\": []}}}".utf8)),
        ("a huge value", Data("{\"Account\": {\"k\": {\"home_account_id\": \"\(String(repeating: "h", count: 8 << 20))\"}}}".utf8)),
        ("many entities", Data(("{\"AppMetadata\": {" + (0..<20_000).map { "\"k\($0)\": {\"client_id\": \"c\($0)\", \"environment\": \"e\"}" }
                                    .joined(separator: ",") + "}}").utf8)),
        ("NUL bytes and control characters", Data("{\"Account\": {\"k\\u0000\": {\"username\": \"a\\u0000b\\u001b[31m\"}}}".utf8)),
    ]

    @Test("A validly encrypted file with hostile JSON inside gives a typed error or only the well-formed entities, never crashes, and a failed read leaves the file as it was",
          arguments: hostilePlaintexts)
    func hostilePlaintext(_ sample: (name: String, plaintext: Data)) throws {
        defer { try? FileManager.default.removeItem(at: directory.deletingLastPathComponent()) }
        try writeSealed(sample.plaintext)
        let url = backend().fileURL(for: group)
        let before = try Data(contentsOf: url)
        do {
            _ = try backend().load(group)
            // What loads is usable: the account store reads it without error.
            let store = AccountStore(backend: backend(), group: group)
            _ = try store.allAccounts()
            _ = try store.inventory()
        } catch {
            #expect([.fileAuthenticationFailed, .invalidCacheData].contains(error.code), "\(sample.name): \(error.code)")
            #expect(error.description.count < 1_000, "\(sample.name): error message echoes the content")
            #expect(throws: TokenCacheError.self, "\(sample.name): a write over an unreadable file must refuse") {
                _ = try backend().apply([], to: group, expected: nil)
            }
            #expect(try Data(contentsOf: url) == before, "\(sample.name): the file was changed")
        }
    }

    @Test("A read-only directory gives a file-system error on save, the old file intact, still readable, and no temp file left")
    func readOnlyDirectory() throws {
        defer { try? FileManager.default.removeItem(at: directory.deletingLastPathComponent()) }
        let keyFileBackend = EncryptedFileBackend(directory: directory)
        let store = AccountStore(backend: keyFileBackend, group: group)
        try store.save(Fixtures.tokenResponse(Fixtures.response(for: Fixtures.alice)), clientID: Fixtures.appOne,
                       authority: Fixtures.authority(), scopes: [], now: Fixtures.now)
        let url = keyFileBackend.fileURL(for: group)
        let before = try Data(contentsOf: url)
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        if getuid() == 0 {
            // The helper drops to `nobody`, which must reach the directory (scripts/test.sh makes
            // its temporary root traversable too).
            #expect(chmod(directory.deletingLastPathComponent().path, 0o711) == 0)
            // The helper drops to `nobody` (root ignores directory modes); it must own the cache.
            for path in [directory.path] + names.map({ directory.appendingPathComponent($0).path }) {
                #expect(chown(path, 65534, 65534) == 0)
            }
        }
        #expect(chmod(directory.path, 0o500) == 0)
        let helper = TestEnvironment.binDirectory.appendingPathComponent("TokenCacheTestHelper").path
        let output = try runProcess(helper, ["file-write-unprivileged", directory.path, group.name])
        #expect(chmod(directory.path, 0o700) == 0)
        if getuid() == 0 {
            for path in [directory.path] + names.map({ directory.appendingPathComponent($0).path }) { chown(path, 0, 0) }
        }
        #expect(output.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "fileSystem", "\(output.stdout) \(output.stderr)")
        #expect(try Data(contentsOf: url) == before)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted() == names.sorted(), "a temp file was left")
        let reread = AccountStore(backend: EncryptedFileBackend(directory: directory), group: group)
        #expect(try reread.allAccounts().map(\.username) == [Fixtures.alice.username])
        try reread.save(Fixtures.tokenResponse(Fixtures.response(for: Fixtures.bob)), clientID: Fixtures.appOne,
                        authority: Fixtures.authority(), scopes: [], now: Fixtures.now)
        #expect(try reread.allAccounts().count == 2)
    }
}
