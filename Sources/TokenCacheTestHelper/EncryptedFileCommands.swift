import Foundation
import TokenCache
#if canImport(Glibc)
import Glibc
#endif

/// Test-helper commands for the encrypted-file tests.
let encryptedFileCommands: [String: HelperCommand] = [
    // file-writer DIR GROUP PREFIX COUNT: saves COUNT entries with keys PREFIX-i, one
    // read-modify-write each, as a separate process would.
    "file-writer": { arguments in
        let directory = URL(fileURLWithPath: arguments[0])
        let group = try CacheGroup(arguments[1])
        let prefix = arguments[2]
        let count = Int(arguments[3])!
        let backend = EncryptedFileBackend(directory: directory)
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
]
