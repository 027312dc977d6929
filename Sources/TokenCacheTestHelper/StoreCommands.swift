import Foundation
import TokenCache
#if canImport(Glibc)
import Glibc
@_spi(Backend) import TokenCacheCore
#endif

/// Test-helper commands for the Store tests: name -> command taking the remaining arguments.
let storeCommands: [String: HelperCommand] = [
    // load-writer BACKEND GROUP PREFIX COUNT: saves COUNT token responses of distinct accounts
    // (PREFIX-i@load.example) through the account store, one save after the other, on the file
    // backend (in $XDG_DATA_HOME) or the Secret Service. A save that timed out is made again, as
    // its error's hint says (up to 3 times: a daemon starved of CPU answers late, #56 failure F).
    // Prints how many saves succeeded, the timeouts retried, the errors by code, and the wall time.
    "load-writer": { arguments in
        let store = try loadStore(arguments[0], arguments[1])
        let prefix = arguments[2], count = Int(arguments[3])!
        let authority = try Authority("https://login.microsoftonline.com/11111111-1111-1111-1111-111111111111")
        var saved = 0, retriedTimeouts = 0
        var errors: [String: Int] = [:]
        let start = ContinuousClock.now
        for index in 0..<count {
            for attempt in 1...4 {
                do {
                    try store.save(helperResponse(username: "\(prefix)-\(index)@load.example"), clientID: "load-client",
                                   authority: authority, scopes: ["User.Read"])
                    saved += 1
                } catch let error as TokenCacheError where error.code == .timedOut && attempt < 4 {
                    retriedTimeouts += 1
                    continue
                } catch {
                    errors[code(error), default: 0] += 1
                }
                break
            }
        }
        printJSON(["saved": saved, "retriedTimeouts": retriedTimeouts, "errors": errors,
                   "seconds": milliseconds(ContinuousClock.now - start) / 1e3])
    },
    // load-reader BACKEND GROUP STOPFILE: reads the group over and over (all accounts, then each
    // account's token) until STOPFILE exists, and at least once whole (up to 3 tries after it: a
    // reader that started late still reads). Prints the number of reads, the reads that timed out
    // (read again by the next round), the errors by code, and the entities it found incomplete (an
    // account without its tokens: a torn read).
    "load-reader": { arguments in
        let store = try loadStore(arguments[0], arguments[1])
        var reads = 0, torn = 0, seen = 0, timeouts = 0
        var errors: [String: Int] = [:]
        var triesAfterStop = 0
        while true {
            if FileManager.default.fileExists(atPath: arguments[2]) {
                if reads > 0 || triesAfterStop == 3 { break }
                triesAfterStop += 1
            }
            do {
                let accounts = try store.allAccounts()
                for account in accounts.suffix(5)
                where try store.accessToken(clientID: "load-client", account: account, scopes: ["User.Read"]) == nil {
                    torn += 1
                }
                seen = max(seen, accounts.count)
                reads += 1
            } catch let error as TokenCacheError where error.code == .timedOut {
                timeouts += 1
            } catch {
                errors[code(error), default: 0] += 1
            }
            usleep(2_000)  // a busy reader, not a spinning one: the writers need the CPU
        }
        printJSON(["reads": reads, "timeouts": timeouts, "errors": errors, "torn": torn, "maxAccountsSeen": seen])
    },
]

/// BACKEND is a policy name, or `secret-service@session` for the in-memory session collection.
func loadStore(_ backend: String, _ group: String) throws -> AccountStore {
    let parts = backend.split(separator: "@", maxSplits: 1).map(String.init)
    guard let policy = BackendPolicy(rawValue: parts[0]) else { throw HelperUsageError(message: "unknown backend \(backend)") }
    var options = SecretServiceBackend.Options()
    if parts.count > 1 && parts[1] == "session" { options.defaultMapping = .session }
    return AccountStore(selection: try BackendSelection.open(policy: policy, secretService: options), group: try CacheGroup(group))
}

struct HelperUsageError: Error { var message: String }
