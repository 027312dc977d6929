import FoundationEssentials
@_spi(Backend) import TokenCacheCore
import TokenCacheCrypto
import TokenCachePlatform
#if canImport(Glibc)
import Glibc
#endif

extension EncryptedFileBackend {
    /// What `tokencache doctor` reports about the file backend: paths, modes and whether the
    /// group's file can be read. Reads, never writes.
    package func diagnose(_ group: CacheGroup) -> [BackendDiagnosis.Check] {
        var checks: [BackendDiagnosis.Check] = []
        func describe(_ path: String, expectFile: Bool) -> (BackendDiagnosis.Check.Status, String) {
            var info = stat()
            guard lstat(path, &info) == 0 else { return (.info, "\(path) does not exist yet (created on first save)") }
            if info.st_mode & S_IFMT == S_IFLNK {
                return (.failed, "\(path) is a symbolic link: put what it points to in its place (mv, keeping the data)")
            }
            if let problem = FileIO.unsafeReason(info, expectFile: expectFile) {
                // The detail ends with what to run: doctor's fix line is this detail.
                let remedy = info.st_uid != geteuid() ? "make it yours (chown \(geteuid()) \(path))"
                    : info.st_mode & S_IFMT != (expectFile ? S_IFREG : S_IFDIR) ? "move it away; it is not the \(expectFile ? "file" : "directory") expected"
                    : expectFile && info.st_nlink > 1 ? "give it a file of its own (cp \(path) \(path).new && mv \(path).new \(path))"
                    : "run chmod \(expectFile ? "600" : "700") \(path)"
                return (.failed, "\(path): \(problem); \(remedy)")
            }
            return (.ok, "\(path) mode \(String(info.st_mode & 0o777, radix: 8))")
        }
        let directoryCheck = describe(directory.path, expectFile: false)
        checks.append(.init(name: "cache directory", status: directoryCheck.0, detail: directoryCheck.1))
        let fileCheck = describe(fileURL(for: group).path, expectFile: true)
        checks.append(.init(name: "cache file", status: fileCheck.0, detail: fileCheck.1))
        // An existing file's header says which key it needs; the key source given may differ.
        let stored = fileCheck.0 == .ok ? try? storedKeyKind(of: group) : nil
        switch (stored, keyFileURL) {
        case (.passphrase?, nil):
            checks.append(.init(name: "key source", status: .ok, detail: "passphrase (scrypt), as the file's header says"))
        case (.passphrase?, .some):
            checks.append(.init(name: "key source", status: .failed,
                                detail: "passphrase: the file was created with one, and none was given (a key file does not apply)"))
        case (_, let keyFile?):
            var info = stat()
            if fileCheck.0 != .info, lstat(keyFile.path, &info) != 0 {
                // Only a file not yet created gets its key file "on first save".
                checks.append(.init(name: "key source", status: .failed,
                                    detail: "key file: \(keyFile.path) is missing, and the existing cache file cannot be decrypted without it"))
            } else {
                let keyCheck = describe(keyFile.path, expectFile: true)
                let kind = if case .tpm = keySource { "TPM-sealed key" } else { "key file" }
                checks.append(.init(name: "key source", status: keyCheck.0, detail: "\(kind): " + keyCheck.1))
            }
        case (.key?, nil):
            let usesPassphrase = if case .key = keySource { false } else { true }
            checks.append(.init(name: "key source", status: usesPassphrase ? .failed : .info,
                                detail: usesPassphrase ? "key: the file was created with a key file (or an app's key), not a passphrase"
                                    : keySource.description))
        case (nil, nil):
            checks.append(.init(name: "key source", status: .info, detail: keySource.description))
        }
        if stored == .passphrase {
            if let held = sessionKeysHeld() {
                let keyring = held.scope == .session ? "this session's keyring" : "your user-session keyring"
                checks.append(.init(name: "session keys", status: .ok,
                                    detail: "\(held.files) passphrase key\(held.files == 1 ? "" : "s") held in \(keyring), time left \(held.expires): no passphrase is asked (`tokencache lock --file` drops them)"))
            } else {
                checks.append(.init(name: "session keys", status: .info,
                                    detail: "none held: each command needs the passphrase (`tokencache unlock --file` keeps its key for a while)"))
            }
        }
        // The TPM: needed with the TPM key source, else what --key-source tpm would use.
        let tcti: String? = if case .tpm(_, let tcti) = keySource { tcti } else { nil }
        let usesTPM = if case .tpm = keySource { true } else { false }
        switch TPMSealedKey.describe(tcti: TPMSealedKey.tcti(tcti)) {
        case .success(let tpm): checks.append(.init(name: "TPM", status: usesTPM ? .ok : .info, detail: tpm))
        case .failure(let error): checks.append(.init(name: "TPM", status: usesTPM ? .failed : .info, detail: error.message))
        }
        if fileCheck.0 == .ok {
            do {
                let count = try load(group).entries.count
                checks.append(.init(name: "decryption", status: .ok, detail: "\(count) entries readable"))
            } catch {
                // With the hint: the fix doctor prints is this detail.
                checks.append(.init(name: "decryption", status: .failed, detail: error.message + (error.hint.map { " \($0)." } ?? "")))
            }
        }
        return checks
    }
}

extension EncryptedFileBackend {
    /// Whether OpenSSL's libcrypto loads here, and which file (for `tokencache doctor`).
    package static var libcryptoStatus: (isLoadable: Bool, description: String) {
        ((try? LibCrypto.shared()) != nil, LibCrypto.description)
    }
}
