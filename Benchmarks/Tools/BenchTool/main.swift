// In-process measurements that scripts/bench.sh drives and compares with MSAL Python
// (Benchmarks/scripts/bench.py). Each command prints one JSON object on stdout; times in ns.
//
//   bench-tool save <ss|file> GROUP RESPONSES.json CLIENT AUTHORITY   each response saved in turn
//   bench-tool file-load GROUP RUNS                                   fresh backend + load + index
//   bench-tool aes BYTES SECONDS                                      AES-256-GCM seal throughput
//   bench-tool worker <ss|file> GROUP RESPONSES.json CLIENT AUTHORITY  one of the concurrent savers
@_spi(Benchmarks) import EncryptedFileStore
import TokenCache
@_spi(Backend) import TokenCacheCore
import Foundation

func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

func printJSON(_ object: [String: Any]) {
    let data = try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
    FileHandle.standardOutput.write(data + Data("\n".utf8))
}

func backend(_ name: String) throws -> any CacheBackend {
    switch name {
    case "ss": return try SecretServiceBackend()
    case "file": return EncryptedFileBackend()
    default: throw CLIUsage.bad("backend must be ss or file")
    }
}

enum CLIUsage: Error { case bad(String) }

/// Token endpoint responses (JSON array of objects) as raw bodies.
func responses(_ path: String) throws -> [Data] {
    let array = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as! [Any]
    return try array.map { try JSONSerialization.data(withJSONObject: $0) }
}

let arguments = Array(CommandLine.arguments.dropFirst())
do {
    switch arguments.first {
    case "save", "worker":
        guard arguments.count == 6 else { throw CLIUsage.bad("save|worker <ss|file> GROUP RESPONSES CLIENT AUTHORITY") }
        let group = try CacheGroup(arguments[2])
        let bodies = try responses(arguments[3])
        let authority = try Authority(arguments[5])
        let store = AccountStore(backend: try backend(arguments[1]), group: group)
        var start = now()
        let accounts = try store.allAccounts().count  // the first load, timed apart from the saves
        let loadNs = now() - start
        var times: [UInt64] = []
        let wallStart = now()
        for body in bodies {
            start = now()
            try store.save(responseJSON: body, clientID: arguments[4], authority: authority, scopes: ["User.Read"])
            times.append(now() - start)
        }
        printJSON(["command": arguments[0], "accounts_before": accounts, "first_load_ns": loadNs, "save_ns": times,
                   "wall_ns": now() - wallStart])
    case "file-load":
        guard arguments.count == 3, let runs = Int(arguments[2]) else { throw CLIUsage.bad("file-load GROUP RUNS") }
        let group = try CacheGroup(arguments[1])
        var loadTimes: [UInt64] = []
        var listTimes: [UInt64] = []
        var entries = 0
        var accounts = 0
        for _ in 0..<runs {
            // A fresh backend each time: reads, decrypts and parses the file (no in-process reuse).
            var start = now()
            entries = try EncryptedFileBackend().load(group).entries.count
            loadTimes.append(now() - start)
            start = now()
            accounts = try AccountStore(backend: EncryptedFileBackend(), group: group).allAccounts().count
            listTimes.append(now() - start)
        }
        printJSON(["command": "file-load", "entries": entries, "accounts": accounts, "load_ns": loadTimes,
                   "load_and_accounts_ns": listTimes])
    case "aes":
        guard arguments.count == 3, let bytes = Int(arguments[1]), let seconds = Double(arguments[2]) else {
            throw CLIUsage.bad("aes BYTES SECONDS")
        }
        let key = [UInt8](repeating: 7, count: 32)
        let nonce = [UInt8](repeating: 1, count: 12)
        let plaintext = Data((0..<bytes).map { UInt8(truncatingIfNeeded: $0) })
        let sealer = AESGCMBenchmarkHook(key: key)
        let sealed = try sealer.seal(plaintext, nonce: nonce)
        guard try sealer.open(sealed, nonce: nonce) == plaintext else { throw CLIUsage.bad("round trip failed") }
        func rate(_ body: () throws -> Void) rethrows -> Double {
            let deadline = now() + UInt64(seconds * 1e9)
            var count = 0
            let start = now()
            while now() < deadline {
                try body()
                count += 1
            }
            return Double(count * bytes) / (Double(now() - start) / 1e9)
        }
        let sealRate = try rate { _ = try sealer.seal(plaintext, nonce: nonce) }
        let openRate = try rate { _ = try sealer.open(sealed, nonce: nonce) }
        printJSON(["command": "aes", "bytes": bytes, "seal_bytes_per_s": sealRate, "open_bytes_per_s": openRate])
    default:
        throw CLIUsage.bad("commands: save, worker, file-load, aes")
    }
} catch {
    FileHandle.standardError.write(Data("bench-tool: \(error)\n".utf8))
    exit(1)
}
