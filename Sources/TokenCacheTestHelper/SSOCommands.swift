import Foundation
import Synchronization
import TokenCache

/// Test-helper commands for the silent-SSO tests.
let ssoCommands: [String: HelperCommand] = [
    // app-token BACKEND AUTHORITY CLIENT ACCOUNT|- SCOPES [BROKER]: a Swift app opened from its configuration
    // (default group; TOKENCACHE_AGENT_SOCK applies; Options.broker BROKER, else never), asking
    // for the named or only account's token.
    // Prints the token, or "CODE REASON" on standard error and exits 1.
    "app-token": { arguments in
        let configuration = AppConfiguration(clientID: arguments[2], authority: arguments[1],
                                             backend: arguments[0] == "file" ? .file : .automatic)
        let scopes = arguments[4].split(separator: " ").map(String.init)
        let name = arguments[3] == "-" ? nil : arguments[3]
        var options = PublicClientApplication.Options()
        options.broker = arguments.count > 5 ? BrokerUse(rawValue: arguments[5]) ?? .never : .never
        let answer = try runAsync { [options] () async -> Result<String, TokenCacheError> in
            do throws(TokenCacheError) {
                let app = try await PublicClientApplication.open(configuration: configuration, options: options)
                return .success(try await app.acquireTokenSilent(scopes: scopes, accountNamed: name).accessToken)
            } catch {
                return .failure(error)
            }
        }
        switch answer {
        case .success(let token): print(token)
        case .failure(let error):
            FileHandle.standardError.write(Data("\(error.code) \(error.reason.name)\n".utf8))
            exit(1)
        }
    },
    // sso-acquire DIR GROUP AUTHORITY CLIENT USERNAME SCOPES force|silent READY BARRIER: opens the
    // encrypted-file cache in DIR (key file DIR/cache.key), creates READY, waits until BARRIER
    // exists (so several processes start at the same moment), then calls acquireTokenSilent
    // (with forceRefresh for `force`) and prints one JSON line: {"ok", "access_token", "ms"} or
    // {"ok": false, "code", "server_error"}.
    "sso-acquire": { arguments in
        let backend = EncryptedFileBackend(directory: URL(fileURLWithPath: arguments[0]))
        let store = AccountStore(backend: backend, group: try CacheGroup(arguments[1]))
        let clientID = arguments[3]
        let app = PublicClientApplication(clientID: clientID, authority: try Authority(arguments[2]), store: store)
        guard let account = try store.account(arguments[4], clientID: clientID) else {
            throw TokenCacheError(.notFound, "no account \(arguments[4]) for \(clientID)")
        }
        let scopes = arguments[5].split(separator: " ").map(String.init)
        let force = arguments[6] == "force"
        _ = FileManager.default.createFile(atPath: arguments[7], contents: nil)
        while !FileManager.default.fileExists(atPath: arguments[8]) { usleep(1_000) }
        let started = Date()
        let fields = try runAsync { () async -> [String: String] in
            do throws(TokenCacheError) {
                let result = try await app.acquireTokenSilent(scopes: scopes, account: account, forceRefresh: force)
                return ["access_token": result.accessToken]
            } catch {
                return ["code": "\(error.code)", "server_error": error.server?.error ?? "-"]
            }
        }
        var answer: [String: Any] = fields
        answer["ok"] = fields["access_token"] != nil
        answer["ms"] = Int(Date().timeIntervalSince(started) * 1000)
        print(String(decoding: try JSONSerialization.data(withJSONObject: answer, options: [.sortedKeys]), as: UTF8.self))
    },
]

/// Runs async work from a synchronous helper command.
func runAsync<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
    let outcome = Mutex<Result<T, any Error>?>(nil)
    let done = DispatchSemaphore(value: 0)
    Task {
        let result: Result<T, any Error>
        do { result = .success(try await body()) } catch { result = .failure(error) }
        outcome.withLock { $0 = result }
        done.signal()
    }
    done.wait()
    return try outcome.withLock { $0! }.get()
}
