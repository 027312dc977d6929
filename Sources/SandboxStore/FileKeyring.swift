import FoundationEssentials
import Logging
import TokenCacheCore
import TokenCacheCrypto
import TokenCachePlatform
#if canImport(Glibc)
import Glibc
#endif

/// A libsecret/oo7 file keyring (``FileKeyringContents``) opened with its secret: searches by
/// attribute, and stores and removes items the way libsecret's file backend does, so libsecret
/// (`secret-tool`) and oo7 in the same app read and write the same file.
///
/// - Reads reload the file when it changed on disk (its bytes' SHA-256): another process wrote it.
/// - Writes take `<file>.lock` (an exclusive `flock`, as the encrypted file does) across our
///   processes, re-read the file under it, and replace it atomically: a 0600 temporary file in
///   the (0700) directory, fsync, then rename, once the target is still the version that was read
///   (libsecret and oo7 take no lock; a write of theirs in between makes us start over).
/// - A file that is not a keyring, or whose items do not authenticate under this secret (another
///   secret, tampering), is refused with a typed error and never overwritten.
package final class FileKeyring: @unchecked Sendable {
    // @unchecked: the secret is immutable after init; the cache is behind a lock.
    package let path: String
    private let secret: SecretPage
    private struct Loaded {
        var contents: FileKeyringContents
        var key: FileKeyringKey
        var signature: FileSignature?
    }
    private let cache = Locked<Loaded?>(nil)
    private let logger: Logger

    /// The file's identity and exact version: what `stat` tells and the SHA-256 of its bytes, so
    /// a same-size rewrite within one timestamp tick on a reused inode is still a new version.
    package struct FileSignature: Hashable, Sendable, CustomStringConvertible {
        var device: UInt64, inode: UInt64, size: Int64, seconds: Int, nanoseconds: Int
        var digest: [UInt8]
        package var description: String { "\(inode).\(size).\(seconds).\(nanoseconds).\(ASCII.hex(digest))" }

        init(_ info: stat, contents: Data) throws(TokenCacheError) {
            (device, inode, size) = (UInt64(info.st_dev), UInt64(info.st_ino), Int64(info.st_size))
            (seconds, nanoseconds) = (info.st_mtim.tv_sec, info.st_mtim.tv_nsec)
            digest = try SHA256Digest.hash(Array(contents))
        }
    }

    /// Opens the keyring at `path` with `secret` (copied into memory of its own, wiped on release).
    package init(path: String, secret: UnsafeRawBufferPointer, logger: Logger = Logger(label: "tokencache.keyring")) {
        self.path = path
        self.logger = logger
        self.secret = SecretPage(byteCount: secret.count)
        self.secret.bytes.copyMemory(from: secret)
    }

    /// libsecret's and oo7's default keyring of this user or app: `$XDG_DATA_HOME/keyrings/default.keyring`.
    package static func defaultPath(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        let dataHome = environment["XDG_DATA_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? FileIO.homeDirectory + "/.local/share"
        return dataHome + "/keyrings/default.keyring"
    }

    /// The file's current signature: changes whenever any process changes it.
    package func signature() throws(TokenCacheError) -> FileSignature? {
        try read()?.signature
    }

    /// The file's bytes and their signature, read once (nil when it does not exist).
    private func read() throws(TokenCacheError) -> (data: Data, signature: FileSignature)? {
        guard let file = try FileIO.openExisting(path) else { return nil }
        defer { close(file.descriptor) }
        let data = try FileIO.readAll(file.descriptor, path: path)
        return (data, try FileSignature(file.info, contents: data))
    }

    // MARK: Reading

    /// The decrypted items whose attributes include every pair of `attributes` (all items for none).
    /// - Throws: `invalidCacheData` when a matching item does not authenticate (tampered, or another secret).
    package func items(matching attributes: [String: String]) throws(TokenCacheError) -> [FileKeyringItem] {
        let loaded = try current()
        return try Self.items(matching: attributes, in: loaded, path: path)
    }

    /// Loads the file unless the cached copy is still the file on disk.
    private func current() throws(TokenCacheError) -> Loaded {
        let file = try read()
        if let file, let cached = cache.withLock({ $0 }), cached.signature == file.signature { return cached }
        let loaded = try load(file)
        cache.withLock { $0 = loaded }
        return loaded
    }

    /// Parses the file as ``read()`` returned it (an empty keyring with a fresh salt when there
    /// is none) and derives its key, reusing the last key when the salt is the same.
    private func load(_ file: (data: Data, signature: FileSignature)?) throws(TokenCacheError) -> Loaded {
        guard let file else {
            let contents = try FileKeyringContents.empty()
            return Loaded(contents: contents, key: try key(for: contents), signature: nil)
        }
        let contents = try FileKeyringContents(parsing: file.data, path: path)
        let key = try key(for: contents)
        // Every item must authenticate: under another secret nothing would match a search, and
        // an empty answer must never stand for "cannot read" (nor a write add to such a file).
        for item in contents.items where !(try key.authenticates(item.blob)) {
            throw Self.unauthentic(path)
        }
        logger.trace("Keyring file read", metadata: ["path": .string(path), "items": .stringConvertible(contents.items.count), "version": .string(file.signature.description)])
        return Loaded(contents: contents, key: key, signature: file.signature)
    }

    private static func unauthentic(_ path: String) -> TokenCacheError {
        TokenCacheError(.fileAuthenticationFailed, "The keyring \(path) does not authenticate with this app's secret: it was written with another secret, or changed by something else.",
                        hint: "Nothing was changed; if another app's keyring was copied here, put this app's own file back")
    }

    private func key(for contents: FileKeyringContents) throws(TokenCacheError) -> FileKeyringKey {
        if let cached = cache.withLock({ $0 }), cached.contents.salt == contents.salt, cached.contents.iterations == contents.iterations {
            return cached.key
        }
        return try FileKeyringKey(secret: UnsafeRawBufferPointer(secret.bytes), salt: contents.salt, iterations: contents.iterations)
    }

    private static func matches(_ item: FileKeyringContents.EncryptedItem, _ hashes: [String: [UInt8]]) -> Bool {
        hashes.allSatisfy { item.hashedAttributes[$0.key] == $0.value }
    }

    private static func hashes(of attributes: [String: String], key: FileKeyringKey) throws(TokenCacheError) -> [String: [UInt8]] {
        var hashes: [String: [UInt8]] = [:]
        for (name, value) in attributes { hashes[name] = try key.mac(value) }
        return hashes
    }

    private static func items(matching attributes: [String: String], in loaded: Loaded, path: String) throws(TokenCacheError) -> [FileKeyringItem] {
        let hashes = try hashes(of: attributes, key: loaded.key)
        var found: [FileKeyringItem] = []
        for item in loaded.contents.items where matches(item, hashes) {
            guard let opened = try loaded.key.open(item.blob, { FileKeyringItem(serialized: $0) }), let decrypted = opened,
                  // The hashed attributes sit outside the item's MAC: an item whose own (encrypted,
                  // authenticated) attributes are not the ones asked for had its hashes swapped.
                  attributes.allSatisfy({ decrypted.attributes[$0.key] == $0.value }) else {
                throw unauthentic(path)
            }
            found.append(decrypted)
        }
        return found
    }

    // MARK: Writing

    /// One write: what ``modify(_:)`` lets the caller change, on the contents read under the lock.
    package struct Edit {
        fileprivate var contents: FileKeyringContents
        fileprivate let key: FileKeyringKey
        fileprivate let path: String
        fileprivate var changed = false
        /// The file's signature when it was read for this edit (nil: there was none).
        package let readSignature: FileSignature?

        /// The decrypted items matching `attributes`.
        package func items(matching attributes: [String: String]) throws(TokenCacheError) -> [FileKeyringItem] {
            try FileKeyring.items(matching: attributes, in: Loaded(contents: contents, key: key, signature: nil), path: path)
        }

        /// Removes the items matching `attributes` (as libsecret's clear); returns how many.
        @discardableResult
        package mutating func remove(matching attributes: [String: String]) throws(TokenCacheError) -> Int {
            let hashes = try FileKeyring.hashes(of: attributes, key: key)
            let before = contents.items.count
            contents.items.removeAll { FileKeyring.matches($0, hashes) }
            changed = changed || contents.items.count != before
            return before - contents.items.count
        }

        /// Stores an item, replacing one with exactly the same attributes and keeping its
        /// creation time (libsecret's replace).
        package mutating func store(attributes: [String: String], label: String, secret: Data) throws(TokenCacheError) {
            let hashes = try FileKeyring.hashes(of: attributes, key: key)
            let now = FileKeyringContents.now
            let existing = try items(matching: attributes).first { $0.attributes == attributes }
            contents.items.removeAll { $0.hashedAttributes == hashes }
            let item = FileKeyringItem(attributes: attributes, label: label, created: existing?.created ?? now, modified: now, secret: secret)
            let blob = try item.withSerialized { (bytes) throws(TokenCacheError) in try key.seal(bytes) }
            contents.items.append(.init(hashedAttributes: hashes, blob: blob))
            contents.usageCount &+= 1
            contents.modified = now
            changed = true
        }
    }

    /// Changes the keyring: `body` edits the contents as read under the lock, then the file is
    /// replaced atomically (nothing is written when `body` changed nothing or threw).
    /// - Returns: what `body` returned and the file's new signature.
    package func modify<T>(_ body: (inout Edit) throws(TokenCacheError) -> T) throws(TokenCacheError) -> (T, FileSignature?) {
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent()
        try FileIO.ensureDirectory(directory, purpose: "keyring directory")
        let lock = try FileLock(path: path + ".lock")
        defer { withExtendedLifetime(lock) {} }
        let prefix = "." + URL(fileURLWithPath: path).lastPathComponent + ".tmp."
        FileIO.removeStaleTemporaryFiles(in: directory, prefix: prefix)
        // libsecret and oo7 write without our lock: when one did between our read and our
        // rename, read again and redo the change (bounded; each try is milliseconds).
        for _ in 0..<20 {
            let loaded = try load(try read())
            var edit = Edit(contents: loaded.contents, key: loaded.key, path: path, readSignature: loaded.signature)
            let result = try body(&edit)
            guard edit.changed else {
                cache.withLock { $0 = loaded }
                return (result, loaded.signature)
            }
            let data = edit.contents.serialized()
            guard try signature() == loaded.signature else {
                logger.debug("Keyring file changed while being written; reading it again", metadata: ["path": .string(path)])
                continue
            }
            // The signature of what we wrote (a write of another program after our rename is a
            // newer version, seen by the next read).
            let written = try FileSignature(try FileIO.atomicReplace(path, with: data, temporaryPrefix: prefix), contents: data)
            logger.trace("Keyring file written", metadata: ["path": .string(path), "items": .stringConvertible(edit.contents.items.count), "version": .string(written.description)])
            cache.withLock { $0 = Loaded(contents: edit.contents, key: loaded.key, signature: written) }
            return (result, written)
        }
        throw TokenCacheError(.fileSystem, "The keyring \(path) kept changing while it was being written.",
                              hint: "Another program writes it continuously; retry when it is done")
    }
}
