import FoundationEssentials
import TokenCacheCore
import TokenCacheCrypto
import TokenCachePlatform
#if canImport(Glibc)
import Glibc
#endif

extension EncryptedFileBackend {
    /// Re-encrypts every group in the directory with another key source (key file ↔ TPM ↔
    /// passphrase), then removes the old key file or sealed key.
    ///
    /// Each group is rewritten under its lock and read back with a fresh backend on the new key
    /// source; a copy that does not read back whole is replaced by the original file again. The
    /// old key is removed only after every group read back, so an interrupted run loses nothing:
    /// running it again skips the groups already on the new key.
    ///
    /// - Returns: the backend on the new key source, and how many groups were re-encrypted.
    /// - Throws: ``TokenCacheError`` `migrationNotVerified` when a copy did not read back (the
    ///   group was restored), or the error of reading with either key source.
    public func changeKeySource(to newSource: KeySource) throws(TokenCacheError) -> (backend: EncryptedFileBackend, groups: Int) {
        let target = EncryptedFileBackend(directory: directory, keySource: newSource)
        var changed = 0
        for group in try groupsInDirectory() {
            try withExclusiveLock(group) { () throws(TokenCacheError) in
                // Already on the new key (an interrupted run, or another group sharing the key): nothing to do.
                if (try? target.read(group, keepHeader: true, lockHeld: true)) != nil { return }
                let current = try read(group, keepHeader: true, lockHeld: true)
                guard let header = current.header else { return }
                let path = fileURL(for: group).path
                guard let original = try? Data(contentsOf: fileURL(for: group)) else { throw FileIO.error("read", path) }
                _ = try target.write(group, entries: current.entries, after: header.generation, kdf: try target.newKDFParameters())
                let readBack = try? EncryptedFileBackend(directory: directory, keySource: newSource).read(group, keepHeader: true, lockHeld: true)
                guard let readBack, Set(readBack.entries) == Set(current.entries) else {
                    _ = try FileIO.atomicReplace(path, with: original, temporaryPrefix: ".\(group.name).tkc.tmp.")
                    throw TokenCacheError(.migrationNotVerified, "\(path) did not read back whole with the new key source (\(newSource)); the original was put back.",
                                          hint: "Nothing was lost; the old key was kept")
                }
                changed += 1
            }
        }
        // Every group reads with the new key: only now does the old one go.
        if let old = keyFileURL, old.standardizedFileURL != target.keyFileURL?.standardizedFileURL {
            if unlink(old.path) != 0 && errno != ENOENT { throw FileIO.error("remove", old.path) }
        }
        return (target, changed)
    }

    /// Derives the keys of the directory's passphrase-protected files once, with this backend's
    /// passphrase key source, and keeps them in the kernel's session keyring for `timeout`
    /// seconds (0: until the session ends): later processes of the login session (the CLI,
    /// apps through any interface) read those files without a passphrase. Nothing is written
    /// to disk; ``lockSession()`` drops them. Each key is checked against its file first.
    ///
    /// - Returns: how many files the keys open.
    /// - Throws: `invalidArgument` when no file is passphrase-protected; the read's error for a
    ///   wrong passphrase.
    public func unlockSession(timeout: UInt32) throws(TokenCacheError) -> Int {
        var keys: [(kdf: CacheFileFormat.KDFParameters, key: SymmetricKey)] = []
        for group in try groupsInDirectory() {
            guard case .passphrase? = try storedKeyKind(of: group) else { continue }
            // Read whole: the passphrase is checked against the file, not only derived.
            guard let kdf = try read(group, keepHeader: true).header?.kdf else { continue }
            if keys.contains(where: { $0.kdf.salt == kdf.salt }) { continue }
            keys.append((kdf, try key(for: kdf, creating: false, path: fileURL(for: group).path)))
        }
        guard !keys.isEmpty else {
            throw TokenCacheError(.invalidArgument, "No cache file in \(directory.path) is protected by a passphrase: there is nothing to unlock.",
                                  hint: "A key-file or TPM cache needs no unlocking", field: "file")
        }
        try SessionKeyCache.store(keys, for: directory, timeout: timeout)
        return keys.count
    }

    /// Which keyring ``unlockSession(timeout:)`` keeps keys in from this process: its own
    /// session keyring, or the user-session keyring where the session keyring is that per-user
    /// default (docker exec, su, many CI shells), so that the keys outlive the command.
    package static var sessionKeyringScope: SessionKeyCache.Scope { SessionKeyCache.scope }

    /// The keys ``unlockSession(timeout:)`` keeps for this directory, as the kernel lists them:
    /// how many files they open, in which keyring, and the time left ("59m", "perm"); nil when none.
    package func sessionKeysHeld() -> (files: Int, scope: SessionKeyCache.Scope, expires: String)? {
        SessionKeyCache.held(for: directory)
    }

    /// Drops the keys ``unlockSession(timeout:)`` kept for this directory from the session
    /// keyring. - Returns: false when none were kept.
    @discardableResult
    public func lockSession() throws(TokenCacheError) -> Bool {
        try SessionKeyCache.drop(for: directory)
    }

    /// The key source of a program that names none (the C and Python interfaces, the CLI
    /// without `--key-source`): the TPM where the directory's sealed key exists or
    /// `TOKENCACHE_KEY_SOURCE` is `tpm`, else the key file. `tcti` as in ``KeySource/tpm(sealedKeyFile:tcti:)``.
    /// A `group` whose file is passphrase-protected gets a passphrase source that only the
    /// session keyring serves (``unlockSession(timeout:)``): a library cannot ask.
    package static func defaultKeySource(directory: URL? = nil, tcti: String? = nil, group: CacheGroup? = nil) -> KeySource {
        if let group, (try? EncryptedFileBackend(directory: directory).storedKeyKind(of: group)) == .passphrase {
            return .passphraseProvider {
                throw TokenCacheError(.invalidArgument, "The cache is protected by a passphrase, and this login session holds no key for it.",
                                      hint: "Run `tokencache unlock --file` in this session first", field: "passphrase")
            }
        }
        let tpm = KeySource.tpm(tcti: tcti)
        if SecureEnvironment.value("TOKENCACHE_KEY_SOURCE") == "tpm" { return tpm }
        let sealed = EncryptedFileBackend(directory: directory, keySource: tpm).keyFileURL
        return sealed.map { FileManager.default.fileExists(atPath: $0.path) } == true ? tpm : .keyFile()
    }

    /// The groups with a file in the directory.
    func groupsInDirectory() throws(TokenCacheError) -> [CacheGroup] {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory.path) else { return [] }
        return names.filter { $0.hasSuffix(".tkc") && !$0.hasPrefix(".") }.sorted()
            .compactMap { try? CacheGroup(String($0.dropLast(4))) }
    }
}
