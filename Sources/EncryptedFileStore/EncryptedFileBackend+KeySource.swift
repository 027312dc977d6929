import FoundationEssentials
import TokenCacheCore
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

    /// The key source of a program that names none (the C and Python interfaces, the CLI
    /// without `--key-source`): the TPM where the directory's sealed key exists or
    /// `TOKENCACHE_KEY_SOURCE` is `tpm`, else the key file. `tcti` as in ``KeySource/tpm(sealedKeyFile:tcti:)``.
    package static func defaultKeySource(directory: URL? = nil, tcti: String? = nil) -> KeySource {
        let tpm = KeySource.tpm(tcti: tcti)
        if ProcessInfo.processInfo.environment["TOKENCACHE_KEY_SOURCE"] == "tpm" { return tpm }
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
