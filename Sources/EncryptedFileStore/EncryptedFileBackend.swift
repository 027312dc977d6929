import FoundationEssentials
@_spi(Backend) import TokenCacheCore
import TokenCacheCrypto
import TokenCachePlatform
#if canImport(Glibc)
import Glibc
#endif

/// The fallback where no Secret Service exists (SSH sessions, servers, containers, WSL, CI):
/// one AES-256-GCM encrypted file per group, written atomically and safely shared by
/// concurrent processes.
///
/// - Files live in `$XDG_DATA_HOME/tokencache/` (directory 0700, files 0600), are opened with
///   `O_NOFOLLOW`, and are refused when they are links or other users can reach them.
/// - Writes go to an `O_EXCL` temporary file that is synced and renamed over the old file;
///   the directory is synced too. A killed process leaves either the old or the new file.
/// - Read-modify-write holds an exclusive `flock` on `<group>.lock`, a file that is never
///   deleted (the kernel releases the lock when a process dies), and re-reads the file under
///   the lock, so another process's update is never lost.
/// - A file that cannot be read (wrong key, tampered, truncated, another group's, unknown
///   version) raises an error and is never overwritten or replaced by an empty cache.
/// - The highest generation seen of each file is remembered outside it (`<group>.generation`
///   beside the key file, or in the cache directory), so an older copy put back is refused with
///   `fileRolledBack` until ``acceptRolledBackFile(for:)`` accepts it.
///
/// Threat model: see docs/EncryptedFile.md. With the default key file, code running as the same
/// user can read the key; the data file alone (a backup, a synced folder) reveals nothing.
public final class EncryptedFileBackend {
    /// Where the encryption key comes from.
    public enum KeySource: Sendable, CustomStringConvertible {
        /// A random 256-bit key in its own 0600 file, created on first use
        /// (default: `cache.key` in the cache directory).
        case keyFile(URL? = nil)
        /// A passphrase, stretched with scrypt (salt and parameters stored in each file).
        case passphrase(String)
        /// A passphrase read from an environment variable.
        case passphraseFromEnvironment(variable: String = "TOKENCACHE_PASSPHRASE")
        /// A passphrase the app supplies when the backend needs one (for example by asking the
        /// user). Called whenever the backend needs the key, so an app that prompts should
        /// remember the answer for the session.
        case passphraseProvider(@Sendable () throws -> String)
        /// A 32-byte key the app manages itself.
        case key([UInt8])
        /// A random 256-bit key sealed to this machine's TPM 2.0 (default file: `cache.key.tpm`
        /// in the cache directory, 0600), created on first use: a copy of the files on another
        /// machine cannot be decrypted. `tcti` names the TPM in tpm2-tss syntax; nil:
        /// `$TOKENCACHE_TPM_TCTI`, else `device:/dev/tpmrm0`. See docs/EncryptedFile.md.
        case tpm(sealedKeyFile: URL? = nil, tcti: String? = nil)

        public var description: String {
            switch self {
            case .keyFile(let url): "key file \(url?.path ?? "(default)")"
            case .passphrase: "passphrase"
            case .passphraseFromEnvironment(let variable): "passphrase from $\(variable)"
            case .passphraseProvider: "passphrase from the app"
            case .key: "app-supplied key"
            case .tpm(let url, let tcti): "TPM-sealed key \(url?.path ?? "(default)") via \(TPMSealedKey.tcti(tcti))"
            }
        }
    }

    /// The directory holding the cache files.
    public let directory: URL
    /// Where the key comes from.
    public let keySource: KeySource

    /// scrypt cost of newly written files: N = 2^17, r = 8, p = 1 (128 MiB; OWASP's minimum
    /// since 2023, RFC 7914's interactive 2^14 being outdated), about 0.3 s on a 2-core server
    /// (Benchmarks/results/HISTORY.md). Derived keys are cached per process, so only the first
    /// operation pays it; existing files keep the parameters in their header.
    static let scryptN: UInt64 = 1 << 17
    static let scryptR: UInt64 = 8
    static let scryptP: UInt64 = 1

    /// The most a file's header may ask of scrypt, checked before deriving anything: the header
    /// is authenticated only with the key, so a hostile one could otherwise demand any memory or time.
    /// Memory (128 * r * (N + 2) + 128 * r * p) is bounded by the 256 MiB OpenSSL is allowed, the
    /// work (N * r * p) by four times the default's.
    static let scryptMaximumN: UInt64 = 1 << 20
    static let scryptMaximumR: UInt64 = 32
    static let scryptMaximumP: UInt64 = 16
    static let scryptMaximumMemory: UInt64 = 256 << 20
    static let scryptMaximumWork: UInt64 = 4 * (1 << 17) * 8

    /// Why a header's scrypt parameters are refused, or nil when they are within bounds.
    static func scryptParametersProblem(_ kdf: CacheFileFormat.KDFParameters) -> String? {
        let (n, r, p) = (kdf.n, kdf.r, kdf.p)
        guard n > 1, n & (n - 1) == 0, n <= scryptMaximumN else { return "N = \(n) is not a power of two from 2 to 2^20" }
        guard (1...scryptMaximumR).contains(r), (1...scryptMaximumP).contains(p) else { return "r = \(r), p = \(p) (at most r = 32, p = 16)" }
        // No overflow: n <= 2^20, r <= 32, p <= 16.
        guard 128 * r * (n + 2) + 128 * r * p <= scryptMaximumMemory else { return "N = \(n), r = \(r) need more than 256 MiB" }
        guard n * r * p <= scryptMaximumWork else { return "N = \(n), r = \(r), p = \(p) need more than four times the default work" }
        guard let salt = Data(base64Encoded: kdf.salt), (8...64).contains(salt.count) else { return "the salt is not 8 to 64 bytes of base64" }
        return nil
    }

    private struct Loaded: Sendable {
        var revision: CacheRevision
        var entries: [CacheEntry]
    }
    private let loaded = Locked<[CacheGroup: Loaded]>([:])
    private let keys = Locked<[String: SymmetricKey]>([:])

    /// `$XDG_DATA_HOME/tokencache`, or `~/.local/share/tokencache`.
    public static var defaultDirectory: URL {
        let environment = ProcessInfo.processInfo.environment
        let dataHome = environment["XDG_DATA_HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? (FileIO.homeDirectory + "/.local/share")
        return URL(fileURLWithPath: dataHome).appendingPathComponent("tokencache")
    }

    /// Opens the backend. Nothing is created until the first write.
    public init(directory: URL? = nil, keySource: KeySource = .keyFile()) {
        self.directory = directory ?? Self.defaultDirectory
        self.keySource = keySource
    }

    /// The data file of a group.
    public func fileURL(for group: CacheGroup) -> URL {
        directory.appendingPathComponent("\(group.name).tkc")
    }

    /// How a group's file was encrypted, as its header says.
    public enum StoredKeyKind: String, Sendable, Hashable {
        /// A 256-bit key: the key file (or a key the app supplied).
        case key
        /// A passphrase stretched with scrypt.
        case passphrase
    }

    /// How the group's existing file was encrypted, read from its header without decrypting it
    /// (for choosing a key source and for advice; the header is authenticated only on a read).
    ///
    /// - Returns: nil when the group has no file.
    /// - Throws: ``TokenCacheError`` when the file is unsafe, unreadable or not a cache file.
    public func storedKeyKind(of group: CacheGroup) throws(TokenCacheError) -> StoredKeyKind? {
        guard let header = try Self.storedHeader(at: fileURL(for: group).path) else { return nil }
        return header.kdf == nil ? .key : .passphrase
    }

    /// A cache file's header, read without decrypting the file; nil when there is no file.
    static func storedHeader(at path: String) throws(TokenCacheError) -> CacheFileFormat.Header? {
        guard let file = try FileIO.openExisting(path) else { return nil }
        defer { close(file.descriptor) }
        let wanted = 14 + CacheFileFormat.maximumHeaderLength + OpenSSL.nonceByteCount
        var prefix = [UInt8](repeating: 0, count: wanted)
        var filled = 0
        while filled < wanted {
            let count = prefix.withUnsafeMutableBytes { Glibc.read(file.descriptor, $0.baseAddress! + filled, wanted - filled) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { throw FileIO.error("read", path) }
            if count == 0 { break }
            filled += count
        }
        return try CacheFileFormat.parseStart(Data(prefix[..<filled]), path: path).header
    }

    /// Whether `passphrase` opens the passphrase-protected cache file at `path` (its key's
    /// identifier matches the header's), for a prompt that lets a person try again; nil when
    /// there is no file. Derives the key with the file's scrypt parameters, checked first.
    /// - Throws: `fileMismatch` for a file without a passphrase; the header's errors.
    package static func passphraseOpens(_ passphrase: String, fileAt path: String) throws(TokenCacheError) -> Bool? {
        guard let header = try storedHeader(at: path) else { return nil }
        let kdf = try checkedKDF(header.kdf, path: path)
        return try deriveKey(passphrase, kdf).identifier() == header.keyID
    }

    /// The file holding the key: the key file or the TPM-sealed key; nil for a passphrase or an app's key.
    package var keyFileURL: URL? {
        switch keySource {
        case .keyFile(let url): url ?? directory.appendingPathComponent("cache.key")
        case .tpm(let url, _): url ?? directory.appendingPathComponent("cache.key.tpm")
        default: nil
        }
    }

    /// Where the highest generation seen of the group's file is remembered: beside the key file
    /// (away from the data file, where a key file is kept elsewhere), else in the cache directory.
    func generationStateURL(for group: CacheGroup) throws(TokenCacheError) -> URL {
        let folder = keyFileURL?.deletingLastPathComponent() ?? directory
        guard folder.standardizedFileURL.path != directory.standardizedFileURL.path else {
            return folder.appendingPathComponent("\(group.name).generation")
        }
        // A key file's directory may serve several cache directories: one state file per cache file.
        let tag = ASCII.hex(try OpenSSL.sha256(Array(directory.standardizedFileURL.path.utf8)).prefix(6))
        return folder.appendingPathComponent("\(group.name).\(tag).generation")
    }

    private func generationState(for group: CacheGroup) throws(TokenCacheError) -> GenerationState {
        GenerationState(path: try generationStateURL(for: group).path)
    }

    /// Accepts the group's file as it is although it is older than one this machine has already
    /// seen (``TokenCacheError/Code/fileRolledBack``), for a backup restored on purpose: the
    /// remembered generation is reset to the file's. The file is read and authenticated first,
    /// and not changed.
    ///
    /// - Throws: ``TokenCacheError`` when the file cannot be read (wrong key, damaged, unsafe).
    public func acceptRolledBackFile(for group: CacheGroup) throws(TokenCacheError) {
        try withExclusiveLock(group) { () throws(TokenCacheError) in
            let current = try read(group, keepHeader: true, lockHeld: true, rollback: .accept)
            guard let header = current.header else { return }
            try generationState(for: group).remember(header.generation, keyID: header.keyID, lowering: true)
        }
    }

    @_spi(Backend) public func location(of group: CacheGroup) -> String {
        "encrypted file \(fileURL(for: group).path) (AES-256-GCM, \(keySource))"
    }

    // MARK: CacheBackend

    @_spi(Backend) public func load(_ group: CacheGroup) throws(TokenCacheError) -> CacheSnapshot {
        let current = try read(group)
        return CacheSnapshot(entries: current.entries, revision: current.revision)
    }

    /// The group with what a listing reads of each entry (``JSONParser/Omission/listing``: no
    /// access or refresh token secret), unless a whole copy is at hand; not kept for later reads.
    @_spi(Backend) public func loadForListing(_ group: CacheGroup) throws(TokenCacheError) -> CacheSnapshot {
        let current = try read(group, forListing: true)
        return CacheSnapshot(entries: current.entries, revision: current.revision)
    }

    @_spi(Backend) public func currentRevision(of group: CacheGroup) throws(TokenCacheError) -> CacheRevision? {
        let path = fileURL(for: group).path
        let descriptor = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard descriptor >= 0 else {
            if errno == ENOENT { return Self.absent }
            // A link or a file that cannot be opened: a revision of what is there (the read refuses it).
            var info = stat()
            guard lstat(path, &info) == 0 else { throw FileIO.error("inspect", path) }
            return Self.revision(info, tag: [])
        }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw FileIO.error("inspect", path) }
        return Self.revision(info, descriptor: descriptor)
    }

    @_spi(Backend) public func apply(_ changes: [CacheChange], to group: CacheGroup,
                      expected: CacheRevision?) throws(TokenCacheError) -> CacheRevision? {
        try withExclusiveLock(group) { () throws(TokenCacheError) -> CacheRevision? in
            let current = try read(group, keepHeader: true, lockHeld: true)
            var entries: [EntityKind: [String: CacheEntry]] = [:]
            for entry in current.entries { entries[entry.kind, default: [:]][entry.key] = entry }
            for change in changes {
                switch change {
                case .upsert(let entry): entries[entry.kind, default: [:]][entry.key] = entry
                case .remove(let kind, let key): entries[kind]?[key] = nil
                }
            }
            let revision = try write(group, entries: entries.values.flatMap(\.values),
                                     after: current.header?.generation ?? 0, kdf: current.header?.kdf)
            return current.revision == expected ? revision : nil
        }
    }

    @_spi(Backend) public func removeAll(in group: CacheGroup) throws(TokenCacheError) {
        try withExclusiveLock(group) { () throws(TokenCacheError) in
            let current = try read(group, keepHeader: true, lockHeld: true)  // refuses to replace an unreadable or rolled-back file
            guard let header = current.header else { return }
            _ = try write(group, entries: [], after: header.generation, kdf: header.kdf)
        }
    }

    // MARK: Reading

    private static let absent = CacheRevision("absent")

    /// A file's revision: inode, modification time, size and its last 16 bytes, the AES-GCM tag,
    /// which every write makes anew (a fresh nonce). Inode, time and size alone can repeat: three
    /// same-size writes in one timestamp tick with an inode reused would let a reader take a
    /// stale copy as current (#44).
    private static func revision(_ info: stat, tag: some Sequence<UInt8>) -> CacheRevision {
        let hex = tag.map { byte in (byte < 16 ? "0" : "") + String(byte, radix: 16) }.joined()
        return CacheRevision("\(info.st_ino):\(info.st_mtim.tv_sec).\(info.st_mtim.tv_nsec):\(info.st_size):\(hex)")
    }

    /// ``revision(_:tag:)`` of an open file, its tag read with one pread.
    private static func revision(_ info: stat, descriptor: Int32) -> CacheRevision {
        var tag = [UInt8](repeating: 0, count: 16)
        let count = info.st_size >= 16 ? pread(descriptor, &tag, 16, off_t(info.st_size - 16)) : 0
        return revision(info, tag: tag.prefix(max(count, 0)))
    }

    struct Current {
        var entries: [CacheEntry]
        var revision: CacheRevision
        var header: CacheFileFormat.Header?
    }

    /// What a read does about a file older than the remembered generation.
    enum RollbackPolicy { case refuse, accept }

    /// Reads and decrypts the group's file (or returns the cached copy if it did not change).
    /// `forListing`: entries are read with only what a listing needs (``JSONParser/Omission/listing``:
    /// no access or refresh token secret), and what is read is not cached. `lockHeld`: the caller
    /// holds the group's lock.
    func read(_ group: CacheGroup, keepHeader: Bool = false, forListing: Bool = false,
                      lockHeld: Bool = false, rollback: RollbackPolicy = .refuse, attempt: Int = 1) throws(TokenCacheError) -> Current {
        let path = fileURL(for: group).path
        guard let file = try FileIO.openExisting(path) else {
            return Current(entries: [], revision: Self.absent, header: nil)
        }
        defer { close(file.descriptor) }
        let revision = Self.revision(file.info, descriptor: file.descriptor)
        if !keepHeader, let cached = loaded.withLock({ $0[group] }), cached.revision == revision {
            return Current(entries: cached.entries, revision: revision, header: nil)
        }
        var opened = try SealedFileReader.read(file.descriptor, path: path) { (header) throws(TokenCacheError) -> SymmetricKey in
            guard header.group == group.name else {
                throw TokenCacheError(.fileMismatch, "\(path) holds group '\(header.group)', not '\(group.name)'.",
                                      hint: "A file was copied or renamed; move it back. It was not changed")
            }
            let key = try key(for: header.kdf, creating: false, path: path)
            guard try header.keyID == key.identifier() else {
                if header.kdf != nil {
                    throw TokenCacheError(.fileAuthenticationFailed, "The passphrase given is not the one \(path) was created with.",
                                          hint: "Give the passphrase it was created with; the file was not changed")
                }
                throw TokenCacheError(.fileAuthenticationFailed, "\(path) was encrypted with a different key (\(keySource)).",
                                      hint: "Use the key or passphrase it was written with; the file was not changed")
            }
            return key
        }
        let plaintext = opened.plaintext
        // The entries hold what they need; the decrypted document is wiped before it is freed.
        defer { OpenSSL.cleanse(&opened.data, plaintext) }
        if rollback == .refuse {
            do throws(TokenCacheError) {
                try checkGeneration(opened.header, of: group, path: path, lockHeld: lockHeld)
            } catch where error.code == .fileRolledBack && !lockHeld && attempt < 5 {
                // A writer may have replaced the file, and raised the remembered generation, after
                // this read opened it. Writers do both under the group's lock: under it, a file
                // that is still the one read is a rollback; a replaced one is read again.
                let replaced = try withExclusiveLock(group) { () throws(TokenCacheError) -> Bool in
                    try currentRevision(of: group) != revision
                }
                guard replaced else { throw error }
                return try read(group, keepHeader: keepHeader, forListing: forListing, rollback: rollback, attempt: attempt + 1)
            }
        }
        let entries = try Self.decodeEntries(opened.data[plaintext], path: path, omitting: forListing ? .listing : nil)
        if !forListing { loaded.withLock { $0[group] = Loaded(revision: revision, entries: entries) } }
        return Current(entries: entries, revision: revision, header: opened.header)
    }

    /// Refuses a file older than the generation remembered for it, and remembers a newer one (a
    /// writer killed before it could, or the first read with no state file).
    private func checkGeneration(_ header: CacheFileFormat.Header, of group: CacheGroup, path: String,
                                 lockHeld: Bool) throws(TokenCacheError) {
        let state = try generationState(for: group)
        let remembered = try state.generation(keyID: header.keyID)
        if let remembered, header.generation < remembered {
            throw TokenCacheError(.fileRolledBack,
                                  "\(path) is older than one this machine has already seen (generation \(header.generation), seen \(remembered)): an older copy was put back, which could bring back removed accounts or tokens.",
                                  hint: "If you restored it on purpose, accept it with `tokencache doctor --backend file --group \(group.name) --accept-rollback` (apps: EncryptedFileBackend.acceptRolledBackFile(for:)); otherwise put the newer file back. It was not changed",
                                  reason: .fileRolledBack(group: group.name))
        }
        guard remembered.map({ header.generation > $0 }) ?? true else { return }
        // Best effort: a reader that cannot write here (read-only directory) still reads.
        if lockHeld {
            try? state.remember(header.generation, keyID: header.keyID)
        } else {
            try? withExclusiveLock(group) { () throws(TokenCacheError) in try state.remember(header.generation, keyID: header.keyID) }
        }
    }

    static func decodeEntries(_ plaintext: Data, path: String,
                              omitting omission: JSONParser.Omission? = nil) throws(TokenCacheError) -> [CacheEntry] {
        guard let root = try? JSON.decodeObject(plaintext, omitting: omission) else {
            throw TokenCacheError(.fileAuthenticationFailed, "\(path) decrypted to something that is not a cache.",
                                  hint: "Move it away; it was not changed")
        }
        var entries: [CacheEntry] = []
        entries.reserveCapacity(root.count)
        for (section, value) in root {
            guard let kind = EntityKind(section: section), case .object(let items) = value else {
                entries.append(MSALDocument.unknownMember(section, value))
                continue
            }
            for (key, item) in items {
                if case .object(let fields) = item { entries.append(CacheEntry(kind: kind, fields: fields, key: key)) }
            }
        }
        return entries
    }

    // MARK: Writing

    /// Encrypts and atomically replaces the group's file with a generation above `previous` and
    /// above any remembered (the file may have been deleted), then remembers it. Call with the
    /// group's lock held.
    func write(_ group: CacheGroup, entries: [CacheEntry], after previous: UInt64,
                       kdf existingKDF: CacheFileFormat.KDFParameters?) throws(TokenCacheError) -> CacheRevision {
        try FileIO.ensureDirectory(directory)
        let kdf = if let existingKDF { existingKDF } else { try newKDFParameters() }
        let key = try key(for: kdf, creating: true, path: fileURL(for: group).path)
        let keyID = try key.identifier()
        let state = try generationState(for: group)
        let generation = max(previous, try state.generation(keyID: keyID) ?? 0) + 1
        let header = CacheFileFormat.Header(group: group.name, keyID: keyID, generation: generation, kdf: kdf)
        let file: Data
        do {
            let plaintext = try JSON.encode(MSALDocument.object(entries))
            var nonce = [UInt8](repeating: 0, count: OpenSSL.nonceByteCount)
            try OpenSSL.randomBytes(&nonce)
            let sealed = try OpenSSL.seal(plaintext, key: key, nonce: nonce,
                                          authenticating: try CacheFileFormat.associatedData(for: header))
            file = try CacheFileFormat.encode(header: header, nonce: nonce, sealed: sealed)
        } catch let error as TokenCacheError {
            throw error
        } catch {
            throw TokenCacheError(.crypto, "The cache for \(group) could not be encoded.")
        }
        let path = fileURL(for: group).path
        FileIO.removeStaleTemporaryFiles(in: directory, prefix: ".\(group.name).tkc.tmp.")
        let info = try FileIO.atomicReplace(path, with: file, temporaryPrefix: ".\(group.name).tkc.tmp.")
        let revision = Self.revision(info, tag: file.suffix(16))
        loaded.withLock { $0[group] = Loaded(revision: revision, entries: entries) }
        // After the file is in place: a failure here leaves the state behind, never ahead of it.
        try? state.remember(generation, keyID: keyID)
        return revision
    }

    func newKDFParameters() throws(TokenCacheError) -> CacheFileFormat.KDFParameters? {
        switch keySource {
        case .passphrase, .passphraseFromEnvironment, .passphraseProvider:
            var salt = [UInt8](repeating: 0, count: 16)
            try OpenSSL.randomBytes(&salt)
            return CacheFileFormat.KDFParameters(salt: Data(salt).base64EncodedString(),
                                                 n: Self.scryptN, r: Self.scryptR, p: Self.scryptP)
        case .keyFile, .key, .tpm:
            return nil
        }
    }

    // MARK: Keys

    func key(for kdf: CacheFileFormat.KDFParameters?, creating: Bool, path: String) throws(TokenCacheError) -> SymmetricKey {
        switch keySource {
        case .key(let bytes):
            guard bytes.count == SymmetricKey.byteCount else {
                throw TokenCacheError.invalidArgument("key", "must be 32 bytes, got \(bytes.count)")
            }
            return bytes.withUnsafeBytes { SymmetricKey(copying: $0) }
        case .keyFile:
            // Checked first: for a passphrase file a missing key file is no loss, and advice to
            // restore one (or to move the cache away) would be wrong.
            guard kdf == nil else {
                throw TokenCacheError(.fileMismatch, "\(path) was created with a passphrase, not a key file, and no passphrase was given.",
                                      hint: "Read it with the passphrase it was created with (a passphrase key source); the file was not changed")
            }
            let url = keyFileURL!
            if let cached = keys.withLock({ $0[url.path] }) { return cached }
            let key = try KeyFile.load(url, creating: creating, directory: directory)
            keys.withLock { $0[url.path] = key }
            return key
        case .tpm(_, let tcti):
            guard kdf == nil else {
                throw TokenCacheError(.fileMismatch, "\(path) was created with a passphrase, not a TPM-sealed key, and no passphrase was given.",
                                      hint: "Read it with the passphrase it was created with (a passphrase key source); the file was not changed")
            }
            let url = keyFileURL!
            if let cached = keys.withLock({ $0[url.path] }) { return cached }
            let key = try KeyFile.load(url, creating: creating, directory: directory, sealing: TPMSealedKey.tcti(tcti))
            keys.withLock { $0[url.path] = key }
            return key
        case .passphrase, .passphraseFromEnvironment, .passphraseProvider:
            // Unlocked for this login session (`tokencache unlock --file`): no passphrase asked for.
            if let kdf, let key = SessionKeyCache.key(for: kdf, in: directory) { return key }
            return try passphraseKey(for: kdf, path: path)
        }
    }

    /// The key a passphrase key source derives for the file's scrypt parameters.
    private func passphraseKey(for kdf: CacheFileFormat.KDFParameters?, path: String) throws(TokenCacheError) -> SymmetricKey {
        switch keySource {
        case .key, .keyFile, .tpm:
            preconditionFailure("not a passphrase key source")
        case .passphrase(let passphrase):
            return try derive(passphrase, try Self.checkedKDF(kdf, path: path))
        case .passphraseFromEnvironment(let variable):
            guard let passphrase = ProcessInfo.processInfo.environment[variable], !passphrase.isEmpty else {
                throw TokenCacheError(.invalidArgument, "The passphrase variable $\(variable) is not set.",
                                      hint: "Export \(variable) with the cache passphrase", field: variable)
            }
            return try derive(passphrase, try Self.checkedKDF(kdf, path: path))
        case .passphraseProvider(let provide):
            let kdf = try Self.checkedKDF(kdf, path: path)  // before asking anyone for a passphrase
            let passphrase: String
            do { passphrase = try provide() } catch let error as TokenCacheError {
                throw error  // the app's own account of what went wrong (never a passphrase)
            } catch {
                throw TokenCacheError(.invalidArgument, "The app could not supply the cache passphrase.",
                                      hint: "Nothing was read or changed; try again with the passphrase", field: "passphrase")
            }
            guard !passphrase.isEmpty else {
                throw TokenCacheError.invalidArgument("passphrase", "is empty")
            }
            return try derive(passphrase, kdf)
        }
    }

    /// The file's scrypt parameters, checked before any passphrase is asked for or key derived.
    static func checkedKDF(_ kdf: CacheFileFormat.KDFParameters?, path: String) throws(TokenCacheError) -> CacheFileFormat.KDFParameters {
        guard let kdf, kdf.name == "scrypt" else {
            throw TokenCacheError(.fileMismatch, "\(path) was created with a key file (or an app's key), not a passphrase.",
                                  hint: "Read it without a passphrase, with the key it was written with; the file was not changed")
        }
        if let problem = Self.scryptParametersProblem(kdf) {
            throw TokenCacheError(.fileAuthenticationFailed,
                                  "\(path) asks for scrypt parameters beyond what swift-tokencache accepts (\(problem)): its header is damaged or was made to exhaust memory or time.",
                                  hint: "Restore it from a backup or move it away; it was not changed, and no key was derived")
        }
        return kdf
    }

    /// How many keys this backend derived with scrypt (each is kept): tests check none was for a hostile header.
    package var derivedKeyCount: Int { keys.withLock { $0.count } }

    private func derive(_ passphrase: String, _ kdf: CacheFileFormat.KDFParameters) throws(TokenCacheError) -> SymmetricKey {
        var digest = Array(passphrase.utf8)
        defer { OpenSSL.cleanse(&digest) }  // also when hashing fails
        // Cached by a hash of the passphrase, never the passphrase itself.
        let fingerprint = try OpenSSL.sha256(digest).map { String($0, radix: 16) }.joined()
        let cacheKey = "scrypt:\(kdf.salt):\(kdf.n):\(kdf.r):\(kdf.p):\(fingerprint)"
        if let cached = keys.withLock({ $0[cacheKey] }) { return cached }
        let key = try Self.deriveKey(passphrase, kdf)
        keys.withLock { $0[cacheKey] = key }
        return key
    }

    /// The scrypt key of a passphrase with a file's (checked) parameters.
    private static func deriveKey(_ passphrase: String, _ kdf: CacheFileFormat.KDFParameters) throws(TokenCacheError) -> SymmetricKey {
        let salt = Data(base64Encoded: kdf.salt) ?? Data()  // checked: valid base64
        return try OpenSSL.scrypt(passphrase: passphrase, salt: [UInt8](salt), n: kdf.n, r: kdf.r, p: kdf.p)
    }

    // MARK: Locking

    func withExclusiveLock<T>(_ group: CacheGroup, _ body: () throws(TokenCacheError) -> T) throws(TokenCacheError) -> T {
        try FileIO.ensureDirectory(directory)
        let lock = try FileLock(path: directory.appendingPathComponent("\(group.name).lock").path)
        defer { withExtendedLifetime(lock) {} }
        return try body()
    }
}

// Implements the backend protocol, which only this package's modules, tests and benchmarks see.
@_spi(Backend) extension EncryptedFileBackend: CacheBackend {}

extension AccountStore {
    /// Opens the store for a group kept in the encrypted file. Nothing is read until the first call.
    public convenience init(backend: EncryptedFileBackend, group: CacheGroup = .universalStorage, options: Options = Options()) {
        self.init(backend: backend as any CacheBackend, group: group, options: options)
    }
}
