import FoundationEssentials
import Logging
import TokenCachePlatform
#if canImport(Glibc)
import Glibc
#endif

/// Reads and changes an ``ExternalStore`` the way its owner does: the blob is MSAL JSON kept
/// through the lossless codec (unknown fields and sections are written back as they were), a
/// change is a read-modify-write under every lock file the owner takes (`MSALExtensionsLock`),
/// the file is replaced atomically with mode 0600, a keyring item is replaced in place in the
/// owner's encoding, and the mtimes peers compare are moved forward. Store files and the folders
/// of store, lock and signal files pass the encrypted file's checks (this user's, not reachable by
/// others, no links) before anything is read or written.
public struct ExternalStoreAccess: Sendable {
    /// What `tokencache stores` reports about a store.
    public struct Status: Sendable, Hashable, Codable {
        /// The store's name.
        public var name: String
        /// Where its blob lives.
        public var location: String
        /// `file` or `secret-service`.
        public var kind: String
        /// Whether the blob is kept encrypted (in the keyring).
        public var encrypted: Bool
        /// Whether the file or item exists; nil when that could not be told (the keyring it
        /// would be in could not be reached).
        public var present: Bool?
        /// Whether it was read and parsed as MSAL JSON.
        public var readable: Bool
        /// Its accounts, when readable.
        public var accounts: Int?
        /// Why it is not readable (never holds cache contents).
        public var problem: String?
        /// Where the parameters come from.
        public var source: String

        /// `present` is always written (null when unknown): scripts must not read a missing
        /// key as "absent".
        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(name, forKey: .name)
            try container.encode(location, forKey: .location)
            try container.encode(kind, forKey: .kind)
            try container.encode(encrypted, forKey: .encrypted)
            try container.encode(present, forKey: .present)
            try container.encode(readable, forKey: .readable)
            try container.encodeIfPresent(accounts, forKey: .accounts)
            try container.encodeIfPresent(problem, forKey: .problem)
            try container.encode(source, forKey: .source)
        }
    }

    /// The store.
    public let store: ExternalStore
    private let secretService: SecretServiceBackend?
    private let logger: Logger

    /// Access to `store`; `secretService` is needed for keyring stores (nil: they report
    /// `noSecretService`).
    public init(_ store: ExternalStore, secretService: SecretServiceBackend?, logger: Logger = Logger(label: "tokencache")) {
        self.store = store
        self.secretService = secretService
        self.logger = logger
    }

    /// The store's accounts and tokens in an in-memory account store, read without the lock (as
    /// the owners' readers do); nil when the file or item does not exist.
    /// - Throws: `invalidCacheData` when the blob is not MSAL JSON; keyring or file errors.
    ///
    /// With `everything`, a blob holding entries that are not JSON objects (which the account
    /// store cannot hold) is refused with `invalidCacheData`, for callers that copy the store
    /// and may delete it afterwards.
    package func read(everything: Bool = false) throws(TokenCacheError) -> AccountStore? {
        guard let (accounts, report) = try unlockedRead() else { return nil }
        if everything, !report.skipped.isEmpty { throw Self.unkeptEntries(report, in: store) }
        return accounts
    }

    private static func unkeptEntries(_ report: ImportReport, in store: ExternalStore) -> TokenCacheError {
        TokenCacheError(.invalidCacheData, "Store \(store.name) holds \(report.skipped.count) entries that are not JSON objects, which a copy would lose; nothing was changed.",
                        hint: "Let its owner rewrite the cache (sign in again there)")
    }

    /// Owners write files in place (truncate, then write), so a read without the lock can see
    /// half a blob: parsed up to three times 0.25 s apart, as msal-extensions' readers retry.
    private func unlockedRead() throws(TokenCacheError) -> (AccountStore, ImportReport)? {
        var attempt = 1
        while true {
            do {
                guard let blob = try loadBlob() else { return nil }
                return try accountStore(blob.json)
            } catch where error.code == .invalidCacheData && attempt < 3 {
                attempt += 1
                usleep(250_000)
            }
        }
    }

    /// Locks, reads, lets `change` modify the accounts, and writes the result back when it
    /// returns true; the locks are released in every case. Nothing is written when the blob
    /// holds anything the codec could not keep.
    ///
    /// With `creatingIfMissing`, a store that does not exist yet starts empty and is created as
    /// its owner creates it: the file with mode 0600 (its folder 0700 when missing), the keyring
    /// item in its collection with the owner's schema, attributes and label.
    /// - Throws: `notFound` when the store does not exist (and is not to be created); `timedOut`
    ///   when a lock is held too long; `invalidCacheData`; keyring and file errors; whatever
    ///   `change` throws.
    package func modify<Result>(creatingIfMissing: Bool = false,
                               _ change: (AccountStore) throws(TokenCacheError) -> (write: Bool, result: Result)) throws(TokenCacheError) -> Result {
        try withOwnerLocks(creatingFolders: creatingIfMissing,
                           otherwise: "Let its owner sign in first (azureauth creates a lock file per tenant), then retry") { () throws(TokenCacheError) -> Result in
            try modifyLocked(creatingIfMissing: creatingIfMissing, change)
        }
    }

    private func modifyLocked<Result>(creatingIfMissing: Bool,
                                      _ change: (AccountStore) throws(TokenCacheError) -> (write: Bool, result: Result)) throws(TokenCacheError) -> Result {
        let loaded = try loadBlob()
        guard let blob = loaded ?? (creatingIfMissing ? Blob(json: Data("{}".utf8), encoding: newEncoding) : nil) else {
            throw TokenCacheError(.notFound, "Store \(store.name) does not exist (\(store.location)).",
                                  hint: "Run `tokencache stores` to see which stores exist here")
        }
        let (accounts, report) = try accountStore(blob.json)
        let outcome = try change(accounts)
        guard outcome.write else { return outcome.result }
        guard report.skipped.isEmpty else { throw Self.unkeptEntries(report, in: store) }
        let json = try accounts.exportMSALJSON()
        try saveBlob(json, encoding: blob.encoding, creating: loaded == nil)
        return outcome.result
    }

    /// Deletes the store under its owner's lock, only if it still holds exactly `expected` (the
    /// entries a caller copied): the file, or the keyring item its readers find (its signal
    /// files are touched so that they notice). Nothing happens when it does not exist.
    /// - Throws: `migrationNotVerified` when the store changed since (its owner wrote to it:
    ///   nothing is deleted); `invalidArgument` when no lock file is known; keyring and file errors.
    package func delete(ifStillHolding expected: [CacheEntry]) throws(TokenCacheError) {
        try withOwnerLocks(otherwise: "Delete it with its owner's own command") { () throws(TokenCacheError) in
            try deleteLocked(ifStillHolding: expected)
        }
    }

    private func deleteLocked(ifStillHolding expected: [CacheEntry]) throws(TokenCacheError) {
        guard let blob = try loadBlob() else { return }
        let (current, report) = try accountStore(blob.json)
        let held = try current.entries()
        let copied = Dictionary(expected.map { ("\($0.kind.rawValue)/\($0.key)", $0.fields) }, uniquingKeysWith: { first, _ in first })
        guard report.skipped.isEmpty, held.count == copied.count,
              held.allSatisfy({ copied["\($0.kind.rawValue)/\($0.key)"] == $0.fields })
        else {
            throw TokenCacheError(.migrationNotVerified, "Store \(store.name) changed since it was copied (its owner wrote to it); it was not deleted.",
                                  hint: "Run the migration again: it copies the new content, then deletes")
        }
        switch store.persistence {
        case .file(let path, let signal):
            if let signal { try Self.checkSignal(signal) }
            guard unlink(path) == 0 || errno == ENOENT else { throw FileIO.error("delete", path) }
            if let signal { try FileIO.touch(signal) }
        case .secretService(let item):
            let keyring = try keyring()
            for signal in item.signalFiles { try Self.checkSignal(signal) }
            // The item read above, the one its owner finds; any other is not this copy's to delete.
            if let found = try keyring.findExternalItem(attributeSets: [item.attributes] + item.alternativeAttributes,
                                                        schema: item.matchesSchema ? item.schema : nil) {
                try keyring.deleteExternalItem(found)
            }
            for signal in item.signalFiles { try FileIO.touch(signal) }
        }
    }

    /// Runs `body` holding every lock file of the store, as its owner's writers take them,
    /// released in reverse order whatever happens. A store with no known lock file is never
    /// changed here: `invalidArgument` with `otherwise` as the hint.
    private func withOwnerLocks<Result>(creatingFolders: Bool = false, otherwise hint: String,
                                        _ body: () throws(TokenCacheError) -> Result) throws(TokenCacheError) -> Result {
        guard !store.lockFiles.isEmpty else {
            throw TokenCacheError(.invalidArgument, "No lock file is known for store \(store.name), so it is never changed here.",
                                  hint: hint)
        }
        for path in store.lockFiles { try Self.checkFolder(of: path, creating: creatingFolders) }
        var locks: [MSALExtensionsLock] = []
        defer { for lock in locks.reversed() { lock.release() } }
        for path in store.lockFiles { locks.append(try MSALExtensionsLock.acquire(path, logger: logger)) }
        return try body()
    }

    /// How a store created here is encoded: as its owner writes it.
    private var newEncoding: ExternalStore.BlobEncoding {
        if case .secretService(let item) = store.persistence, item.encoding == .base64 { return .base64 }
        return .raw
    }

    /// The folder check of a signal file, and the file itself, when present, a regular file of
    /// this user's: checked before the write it signals, so a refusal changes nothing.
    private static func checkSignal(_ path: String, creating: Bool = false) throws(TokenCacheError) {
        try checkFolder(of: path, creating: creating)
        var info = stat()
        if lstat(path, &info) == 0 { try FileIO.checkOwnRegularFile(info, path: path) }
    }

    /// Refuses the folder `path` is in when it is a link, another user's or writable by others
    /// (the encrypted file's rule: anyone who can write there can swap the file); with
    /// `creating`, creates it first (0700) when missing. False when it does not exist.
    @discardableResult
    private static func checkFolder(of path: String, creating: Bool = false) throws(TokenCacheError) -> Bool {
        guard let slash = path.lastIndex(of: "/"), slash != path.startIndex else { return true }
        if creating { try createFolder(of: path) }
        return try FileIO.checkDirectory(String(path[..<slash]), purpose: "folder of \(path)", recreatable: false)
    }

    /// The folder `path` is in, created (0700, parents included) when missing.
    private static func createFolder(of path: String) throws(TokenCacheError) {
        guard let slash = path.lastIndex(of: "/"), slash != path.startIndex else { return }
        let folder = String(path[..<slash])
        var info = stat()
        if stat(folder, &info) == 0 { return }
        try createFolder(of: folder)
        guard mkdir(folder, 0o700) == 0 || errno == EEXIST else { throw FileIO.error("create the folder", folder) }
    }

    /// Whether the store exists here, whether it can be read, and its account count.
    public func status() -> Status {
        var status = Status(name: store.name, location: store.location, kind: store.isEncrypted ? "secret-service" : "file",
                            encrypted: store.isEncrypted, present: false, readable: false, source: store.source)
        do {
            guard let (accounts, _) = try unlockedRead() else { return status }
            status.present = true
            status.accounts = try accounts.allAccounts().count
            status.readable = true
        } catch {
            switch error.code {
            case .invalidCacheData, .keyringLocked, .fileSystem, .unsafeFile: status.present = true
            default: status.present = nil
            }
            status.problem = error.message
        }
        return status
    }

    // MARK: Blob

    private struct Blob {
        var json: Data
        /// `.raw` or `.base64`: as read.
        var encoding: ExternalStore.BlobEncoding
    }

    private func accountStore(_ json: Data) throws(TokenCacheError) -> (store: AccountStore, report: ImportReport) {
        // An empty blob is an empty cache, as msal-extensions reads it.
        let isEmpty = json.allSatisfy { $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }
        let entries: [CacheEntry], report: ImportReport
        do {
            (entries, report) = try AccountStore.parseMSALJSON(isEmpty ? Data("{}".utf8) : json)
        } catch where error.code == .invalidCacheData {
            // The parser speaks of an import; here it is the owner's cache, read where it lives.
            throw TokenCacheError(.invalidCacheData, "Store \(store.name) (\(store.location)) is not a readable MSAL cache: \(error.message)",
                                  hint: "Its owner rewrites it at its next sign-in; nothing was read or changed here")
        }
        // The entries under the owner's keys, as they are: written back, only what changed differs.
        let group = CacheGroup.universalStorage
        return (AccountStore(backend: InMemoryBackend(group: group, entries: entries), group: group), report)
    }

    private func loadBlob() throws(TokenCacheError) -> Blob? {
        switch store.persistence {
        case .file(let path, _):
            // An empty file is no cache: it is a keyring store's signal file at the same path.
            guard let data = try Self.readFile(path), !data.isEmpty else { return nil }
            return Blob(json: data, encoding: .raw)
        case .secretService(let item):
            let keyring = try keyring()
            guard let found = try keyring.findExternalItem(attributeSets: [item.attributes] + item.alternativeAttributes,
                                                           schema: item.matchesSchema ? item.schema : nil) else { return nil }
            var secret = try keyring.readExternalSecret(found)
            defer { for index in secret.indices { secret[index] = 0 } }
            return try Self.decode(secret, declared: item.encoding, store: store.name)
        }
    }

    private func saveBlob(_ json: Data, encoding: ExternalStore.BlobEncoding, creating: Bool) throws(TokenCacheError) {
        switch store.persistence {
        case .file(let path, let signal):
            try Self.checkFolder(of: path, creating: creating)
            if let signal { try Self.checkSignal(signal) }
            if creating {
                var info = stat()
                if lstat(path, &info) != 0 {
                    // msal-extensions' FilePersistence creates the file with mode 0600.
                    _ = try FileIO.atomicReplace(path, with: json, temporaryPrefix: ".\(store.name).tokencache-", mode: 0o600)
                    if let signal { try FileIO.touch(signal) }
                    return
                }
            }
            try Self.replaceFile(path, with: json)
            if let signal { try FileIO.touch(signal) }
        case .secretService(let item):
            let keyring = try keyring()
            let secret = encoding == .base64 ? Data(json.base64EncodedString().utf8) : json
            for signal in item.signalFiles { try Self.checkSignal(signal, creating: creating) }
            guard let found = try keyring.findExternalItem(attributeSets: [item.attributes] + item.alternativeAttributes,
                                                           schema: item.matchesSchema ? item.schema : nil) else {
                guard creating else {
                    throw TokenCacheError(.notFound, "The keyring item of store \(store.name) was deleted meanwhile; nothing was written.",
                                          hint: "Retry; `tokencache stores` shows whether the store still exists")
                }
                try keyring.createExternalItem(collection: item.collection, schema: item.schema, attributes: item.attributes,
                                               label: item.label, secret: secret)
                for signal in item.signalFiles { try FileIO.touch(signal) }
                return
            }
            try keyring.replaceExternalSecret(found, with: secret)
            // Only after the keyring write succeeded (Python's order): a touch says "changed".
            for signal in item.signalFiles { try FileIO.touch(signal) }
        }
    }

    private func keyring() throws(TokenCacheError) -> SecretServiceBackend {
        guard let secretService else {
            throw TokenCacheError(.noSecretService, "Store \(store.name) is kept in the Secret Service, which cannot be reached here.",
                                  hint: "Run inside the desktop session where the keyring is")
        }
        return secretService
    }

    /// Raw JSON (starts with `{` after white space or a BOM) or base64 of it.
    private static func decode(_ secret: [UInt8], declared: ExternalStore.BlobEncoding, store: String) throws(TokenCacheError) -> Blob {
        let first = secret.first { $0 != 0x20 && $0 != 0x0A && $0 != 0x0D && $0 != 0x09 }
        if declared != .base64 && (first == nil || first == UInt8(ascii: "{") || first == 0xEF) {
            return Blob(json: Data(secret), encoding: .raw)
        }
        let text = String(decoding: secret.filter { $0 != 0x0A && $0 != 0x0D }, as: UTF8.self)
        guard let decoded = Data(base64Encoded: text) else {
            if declared == .base64, first == UInt8(ascii: "{") { return Blob(json: Data(secret), encoding: .raw) }
            throw TokenCacheError(.invalidCacheData, "The keyring item of store \(store) is neither MSAL JSON nor base64 of it.",
                                  hint: "Check the store's encoding in the config file; nothing was changed")
        }
        return Blob(json: decoded, encoding: .base64)
    }

    // MARK: Files

    /// The file's content, nil when it or its folder does not exist. The encrypted file's checks
    /// (`FileIO.openExisting(_:emptyMayBeReadable:)`): a link, another user's file or one others
    /// can read or write is refused with `unsafeFile`, and so is such a folder.
    private static func readFile(_ path: String) throws(TokenCacheError) -> Data? {
        guard try checkFolder(of: path), let file = try FileIO.openExisting(path, emptyMayBeReadable: true) else { return nil }
        defer { close(file.descriptor) }
        return try FileIO.readAll(file.descriptor, path: path)
    }

    /// Atomically (temporary file, fsync, rename) with mode 0600 and this user as owner; the file
    /// there must pass the checks of ``readFile(_:)`` (a link is refused, never replaced).
    private static func replaceFile(_ path: String, with data: Data) throws(TokenCacheError) {
        guard let file = try FileIO.openExisting(path, emptyMayBeReadable: true) else { throw FileIO.error("inspect", path, code: ENOENT) }
        close(file.descriptor)
        let name = path.split(separator: "/").last.map(String.init) ?? "cache"
        let prefix = ".\(name).tokencache-"
        // Under the owner's lock no writer of ours is live: a temporary file left is a killed one's.
        let directory = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? "."
        FileIO.removeStaleTemporaryFiles(in: URL(fileURLWithPath: directory), prefix: prefix)
        // 0600 whatever the mode was (msal-extensions creates it so); owned by us (checked above).
        _ = try FileIO.atomicReplace(path, with: data, temporaryPrefix: prefix, mode: 0o600)
        // rename keeps the coarse kernel time; peers compare with their fine wall clock.
        try FileIO.touch(path)
    }
}
