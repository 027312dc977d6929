import Foundation
import TokenCache
#if canImport(Glibc)
import Glibc
@_spi(Backend) import TokenCacheCore
#endif

/// Test-helper commands for the encrypted-file tests.
let encryptedFileCommands: [String: HelperCommand] = [
    // file-writer DIR GROUP PREFIX COUNT [tpm]: saves COUNT entries with keys PREFIX-i, one
    // read-modify-write each, as a separate process would; with tpm, keyed by the TPM that
    // TOKENCACHE_TPM_TCTI names.
    "file-writer": { arguments in
        let directory = URL(fileURLWithPath: arguments[0])
        let group = try CacheGroup(arguments[1])
        let prefix = arguments[2]
        let count = Int(arguments[3])!
        let backend = EncryptedFileBackend(directory: directory, keySource: arguments.count > 4 && arguments[4] == "tpm" ? .tpm() : .keyFile())
        for index in 0..<count {
            let entry = CacheEntry(kind: .appMetadata, fields: [
                "client_id": .string("\(prefix)-\(index)"), "environment": "login.microsoftonline.com",
                "padding": .string(String(repeating: "p", count: 2_000)),
            ], key: "\(prefix)-\(index)")
            _ = try backend.apply([.upsert(entry)], to: group, expected: nil)
        }
    },
    // file-write-limited DIR GROUP BYTES: with the file-size limit (RLIMIT_FSIZE) set to BYTES,
    // as on a full disk, tries to save a large entry and prints the error code it got.
    "file-write-limited": { arguments in
        let directory = URL(fileURLWithPath: arguments[0])
        let group = try CacheGroup(arguments[1])
        signal(SIGXFSZ, SIG_IGN)
        var limit = rlimit(rlim_cur: rlim_t(arguments[2])!, rlim_max: rlim_t.max)
        setrlimit(Int32(RLIMIT_FSIZE.rawValue), &limit)
        let entry = CacheEntry(kind: .appMetadata, fields: [
            "client_id": "big", "environment": "e", "padding": .string(String(repeating: "p", count: 1 << 20)),
        ], key: "big")
        do {
            _ = try EncryptedFileBackend(directory: directory).apply([.upsert(entry)], to: group, expected: nil)
            print("written")
        } catch {
            print((error as? TokenCacheError).map { "\($0.code)" } ?? "untyped")
            FileHandle.standardError.write(Data("\(error)\n".utf8))
        }
    },
    // file-write-unprivileged DIR GROUP: saves an entry as an ordinary user and prints the error
    // code it got. Run as root, it first becomes `nobody` (65534), since root writes into any
    // directory whatever its mode; the caller hands the cache directory to that user.
    "file-write-unprivileged": { arguments in
        if getuid() == 0 {
            guard setgroups(0, nil) == 0, setgid(65534) == 0, setuid(65534) == 0 else { throw HelperUsageError(message: "cannot drop root") }
        }
        let entry = CacheEntry(kind: .appMetadata, fields: ["client_id": "ro", "environment": "e"], key: "ro")
        let backend = EncryptedFileBackend(directory: URL(fileURLWithPath: arguments[0]))
        let group = try CacheGroup(arguments[1])
        // It can read the cache: the only thing in the way of a write is the directory's mode.
        do { _ = try backend.load(group) } catch {
            print("unreadable")
            FileHandle.standardError.write(Data("\(error)\n".utf8))
            return
        }
        do {
            _ = try backend.apply([.upsert(entry)], to: group, expected: nil)
            print("written")
        } catch {
            print((error as? TokenCacheError).map { "\($0.code)" } ?? "untyped")
            FileHandle.standardError.write(Data("\(error)\n".utf8))
        }
    },
    // file-fuzz-seeds DIR: writes the seed corpus of the encrypted-file fuzz target (real files for
    // group org.swift-tokencache.fuzz under the fuzz key, 0xF7 x 32) as DIR/seed-N.tkc.
    "file-fuzz-seeds": { arguments in
        let output = URL(fileURLWithPath: arguments[0])
        let work = output.appendingPathComponent("work")
        let group = try CacheGroup("org.swift-tokencache.fuzz")
        let backend = EncryptedFileBackend(directory: work, keySource: .key([UInt8](repeating: 0xF7, count: 32)))
        let store = AccountStore(backend: backend, group: group)
        func snapshot(_ index: Int) throws {
            try FileManager.default.copyItem(at: backend.fileURL(for: group), to: output.appendingPathComponent("seed-\(index).tkc"))
        }
        _ = try backend.apply([], to: group, expected: nil)
        try snapshot(0)
        _ = try backend.apply([.upsert(CacheEntry(kind: .appMetadata, fields: ["client_id": "c", "environment": "e", "family_id": "1"],
                                                  key: "appmetadata-e-c"))], to: group, expected: nil)
        try snapshot(1)
        try store.save(helperResponse(username: "fuzz@contoso.com"), clientID: "client-f",
                       authority: try Authority("https://login.microsoftonline.com/common"), scopes: ["User.Read"])
        try snapshot(2)
        try FileManager.default.removeItem(at: work)
    },
]
