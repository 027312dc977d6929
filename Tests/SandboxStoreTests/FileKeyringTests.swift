import Foundation
import Testing
@testable import SandboxStore
@_spi(Backend) @testable import TokenCacheCore
@testable import TokenCacheCrypto
@testable import TokenCachePlatform
import TokenCacheTestSupport

/// The libsecret/oo7 file keyring format, against the real libsecret 0.20.5: `secret-tool` with
/// `SECRET_BACKEND=file` and libsecret's own test variables (`SECRET_FILE_TEST_PATH`,
/// `SECRET_FILE_TEST_PASSWORD`: the password is the keyring secret, as the portal's 64 bytes are
/// in a sandbox) reads what we write and writes what we read.
@Suite("File keyring: libsecret/oo7 format", .harness)
struct FileKeyringTests {
    let directory: URL
    var path: String { directory.appendingPathComponent("keyrings/default.keyring").path }
    static let password = "file-keyring-test-secret-0123456789"

    init() throws { directory = try TestEnvironment.temporaryDirectory() }

    func keyring(_ password: String = Self.password) -> FileKeyring {
        Array(password.utf8).withUnsafeBytes { FileKeyring(path: path, secret: $0) }
    }

    /// Runs libsecret's `secret-tool` on the file backend with our file and password.
    func secretTool(_ arguments: [String], input: String? = nil, password: String = Self.password) throws -> ProcessOutput {
        var environment = ProcessInfo.processInfo.environment
        environment["SECRET_BACKEND"] = "file"
        environment["SECRET_FILE_TEST_PATH"] = path
        environment["SECRET_FILE_TEST_PASSWORD"] = password
        return try runProcess("/usr/bin/secret-tool", arguments, input: input.map { Data($0.utf8) }, environment: environment)
    }

    func store(_ keyring: FileKeyring, _ attributes: [String: String], label: String, secret: String) throws {
        _ = try keyring.modify { (edit) throws(TokenCacheError) in
            try edit.store(attributes: attributes, label: label, secret: Data(secret.utf8))
        }
    }

    @Test("The file has libsecret's header and version, and a new keyring's salt and rounds")
    func headerAndParameters() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        try store(keyring(), ["service": "a"], label: "A", secret: "one")
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(Array(data.prefix(18)) == Array("GnomeKeyring\n\r\u{0}\n".utf8) + [1, 0])
        let contents = try FileKeyringContents(parsing: data, path: path)
        #expect(contents.salt.count == 32 && contents.iterations == 100_000 && contents.items.count == 1)
        #expect(contents.items[0].hashedAttributes["service"]?.count == 32)
        // Written as serialized: parsing and writing again gives the same bytes.
        #expect(contents.serialized() == data)
        var info = stat()
        #expect(stat(path, &info) == 0 && info.st_mode & 0o777 == 0o600)
    }

    @Test("secret-tool (libsecret's file backend) finds and decrypts an item we stored")
    func secretToolReadsOurs() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        try store(keyring(), ["service": "tokencache-test", "account": "alice"], label: "Our item", secret: "our secret value")
        let lookup = try secretTool(["lookup", "service", "tokencache-test"])
        #expect(lookup.status == 0, "\(lookup.stderr)")
        #expect(lookup.stdout == "our secret value")
        let search = try secretTool(["search", "--all", "account", "alice"])
        #expect(search.stdout.contains("label = Our item") || search.stderr.contains("label = Our item"), "\(search.stdout)\(search.stderr)")
    }

    @Test("Short secrets (up to 14 bytes, which Swift's Data keeps inline) are stored intact: secret-tool and a new reader get them back")
    func shortSecretsIntact() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        for secret in ["1", "version-1", "their secret", "fourteen-bytes", "a longer secret of 31 bytes...."] {
            try store(keyring(), ["service": "short"], label: "Short", secret: secret)
            #expect(try secretTool(["lookup", "service", "short"]).stdout == secret)
            let items = try keyring().items(matching: ["service": "short"])
            #expect(items.map { String(decoding: $0.secret, as: UTF8.self) } == [secret])
        }
    }

    @Test("An item secret-tool stored is read by us, and our writes keep it")
    func weReadSecretTools() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let stored = try secretTool(["store", "--label=Theirs", "service", "theirs", "user", "bob"], input: "their secret")
        #expect(stored.status == 0, "\(stored.stderr)")
        let ours = keyring()
        let items = try ours.items(matching: ["service": "theirs"])
        #expect(items.count == 1)
        #expect(items.first.map { String(decoding: $0.secret, as: UTF8.self) } == "their secret")
        #expect(items.first?.label == "Theirs" && items.first?.attributes["user"] == "bob")
        // Our write (another item) keeps theirs, which secret-tool still decrypts.
        try store(ours, ["service": "ours"], label: "Ours", secret: "ours")
        #expect(try secretTool(["lookup", "service", "theirs"]).stdout == "their secret")
        // And secret-tool's replace of our item (same attributes) is what we read next.
        #expect(try secretTool(["store", "--label=Replaced", "service", "ours"], input: "replaced").status == 0)
        let replaced = try ours.items(matching: ["service": "ours"])
        #expect(replaced.count == 1 && replaced.first?.label == "Replaced")
    }

    @Test("secret-tool clear removes our item; our remove removes theirs")
    func removals() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let ours = keyring()
        try store(ours, ["service": "x", "n": "1"], label: "1", secret: "s1")
        #expect(try secretTool(["store", "--label=2", "service", "x", "n", "2"], input: "s2").status == 0)
        #expect(try secretTool(["clear", "n", "1"]).status == 0)
        #expect(try ours.items(matching: ["service": "x"]).map(\.label) == ["2"])
        let (removed, _) = try ours.modify { (edit) throws(TokenCacheError) in try edit.remove(matching: ["n": "2"]) }
        #expect(removed == 1)
        #expect(try secretTool(["lookup", "service", "x"]).stdout.isEmpty)
    }

    @Test("Another secret cannot read the file, and gets a typed error, not an empty keyring")
    func wrongSecret() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        try store(keyring(), ["service": "a"], label: "A", secret: "one")
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(throws: TokenCacheError.self) { try keyring("another app's secret").items(matching: [:]) }
        // A store with the wrong secret must not add an item the right one cannot read, nor lose one.
        let other = keyring("another app's secret")
        #expect(throws: TokenCacheError.self) {
            _ = try other.modify { (edit) throws(TokenCacheError) in
                _ = try edit.items(matching: ["service": "a"])
            }
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
    }

    @Test("A tampered item or a file that is not a keyring is refused and left as it is")
    func tampering() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        try store(keyring(), ["service": "a"], label: "A", secret: "a secret of some length")
        var data = try Data(contentsOf: URL(fileURLWithPath: path))
        // Flip one bit of the item's ciphertext (the blob sits near the end, before the MAC).
        data[data.count - 60] ^= 0x01
        try data.write(to: URL(fileURLWithPath: path))
        let error = #expect(throws: TokenCacheError.self) { try keyring().items(matching: ["service": "a"]) }
        #expect(error?.code == .fileAuthenticationFailed)
        try Data("not a keyring at all".utf8).write(to: URL(fileURLWithPath: path))
        let refused = #expect(throws: TokenCacheError.self) {
            try store(keyring(), ["service": "b"], label: "B", secret: "b")
        }
        #expect(refused?.code == .invalidCacheData)
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "not a keyring at all")
    }

    // The limit ends the hang this test guards against (deriving 2^31-1 rounds takes hours); the
    // refusal takes well under a second, so it is generous: it must hold on a loaded, slow machine.
    @Test("A hostile file asking 2^31-1 key-derivation rounds is refused at once with a typed reason, before any key is derived, and left as it is",
          .timeLimit(.minutes(5)))
    func keyDerivationRoundsCapped() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        try store(keyring(), ["service": "a"], label: "A", secret: "a secret")
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        var contents = try FileKeyringContents(parsing: data, path: path)
        contents.iterations = UInt32(Int32.max)
        let hostile = contents.serialized()
        try hostile.write(to: URL(fileURLWithPath: path))
        let error = #expect(throws: TokenCacheError.self) { try keyring().items(matching: ["service": "a"]) }
        #expect(error?.code == .invalidCacheData)
        #expect(error?.reason == .keyDerivationRoundsOutOfBounds(rounds: Int(Int32.max), limit: 1_000_000))
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == hostile)
    }

    @Test("Two items whose hashed attributes were swapped in the file give fileAuthenticationFailed, never the other item's secret")
    func swappedAttributeHashes() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        try store(keyring(), ["service": "alice"], label: "A", secret: "alice's secret")
        try store(keyring(), ["service": "bob"], label: "B", secret: "bob's secret")
        var contents = try FileKeyringContents(parsing: try Data(contentsOf: URL(fileURLWithPath: path)), path: path)
        #expect(contents.items.count == 2)
        (contents.items[0].hashedAttributes, contents.items[1].hashedAttributes) = (contents.items[1].hashedAttributes, contents.items[0].hashedAttributes)
        try contents.serialized().write(to: URL(fileURLWithPath: path))
        for service in ["alice", "bob"] {
            let error = #expect(throws: TokenCacheError.self) { try keyring().items(matching: ["service": service]) }
            #expect(error?.code == .fileAuthenticationFailed)
        }
    }

    @Test("A change by another process is seen on the next read (mtime reload)")
    func reloadsOnChange() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let ours = keyring()
        try store(ours, ["service": "a"], label: "A", secret: "one")
        #expect(try ours.items(matching: [:]).count == 1)
        #expect(try secretTool(["store", "--label=B", "service", "b"], input: "two").status == 0)
        #expect(try ours.items(matching: [:]).count == 2)
    }

    @Test("Another version written into the same inode with the same size and modification time is still seen: a reader that cached the old one reads the new secret, and the backend's revision changes")
    func exactRevision() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        // Two real versions of the file, of the same size: the same item with another secret of the same length.
        let writer = keyring()
        try store(writer, ["service": "a"], label: "A", secret: "version-1")
        let first = try Data(contentsOf: URL(fileURLWithPath: path))
        try store(writer, ["service": "a"], label: "A", secret: "version-2")
        let second = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(first.count == second.count && first != second)
        var original = stat()
        #expect(lstat(path, &original) == 0)
        /// Writes `bytes` into the file's own inode and sets its times back to `original`'s.
        func rewriteInPlace(_ bytes: Data) {
            let descriptor = open(path, O_WRONLY | O_TRUNC)
            #expect(descriptor >= 0)
            _ = bytes.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }
            close(descriptor)
            var times = [original.st_atim, original.st_mtim]
            #expect(utimensat(AT_FDCWD, path, &times, 0) == 0)
        }
        rewriteInPlace(first)
        let reader = keyring()
        let backend = PortalKeyringBackend(keyring: reader)
        #expect(try reader.items(matching: ["service": "a"]).map { String(decoding: $0.secret, as: UTF8.self) } == ["version-1"])
        let revision = try backend.currentRevision(of: CacheGroup.universalStorage)
        rewriteInPlace(second)
        var now = stat()
        #expect(lstat(path, &now) == 0)
        #expect(now.st_ino == original.st_ino && now.st_size == original.st_size
                && now.st_mtim.tv_sec == original.st_mtim.tv_sec && now.st_mtim.tv_nsec == original.st_mtim.tv_nsec)
        #expect(try reader.items(matching: ["service": "a"]).map { String(decoding: $0.secret, as: UTF8.self) } == ["version-2"])
        #expect(try backend.currentRevision(of: CacheGroup.universalStorage) != revision)
    }
}
