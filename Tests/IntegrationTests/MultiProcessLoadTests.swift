import Foundation
import Synchronization
import Testing
@testable import EncryptedFileStore
@testable import SecretServiceStore
@testable import TokenCache
@_spi(Backend) @testable import TokenCacheCore
@testable import TokenCachePlatform
import TokenCacheTestSupport

/// Backends the load runs on: the encrypted file always; the Secret Service in the isolated
/// keyring session, and in CI always (where a missing session fails rather than skips), on the
/// default collection (on disk) and on the in-memory session collection (`@session`).
/// gnome-keyring rewrites its whole keyring file for every item stored in an on-disk
/// collection, so the session collection is where many saves measure this project rather than
/// the daemon's disk writes; both are the same daemon, bus, library and code paths.
let loadBackends = ["file"] + (TestEnvironment.runsSecretServiceTests ? ["secret-service", "secret-service@session"] : [])

@Suite("Multi-process load", .serialized, .harness)
struct MultiProcessLoadTests {
    static let helper = TestEnvironment.binDirectory.appendingPathComponent("TokenCacheTestHelper").path
    static let cli = TestEnvironment.binDirectory.appendingPathComponent("tokencache").path
    static var writers: Int { Int(TestEnvironment.environment["TOKENCACHE_LOAD_PROCESSES"] ?? "8")! }
    /// Saves per writer: TOKENCACHE_LOAD_SAVES_FILE / _SECRET_SERVICE / _SECRET_SERVICE_SESSION
    /// for one backend, else TOKENCACHE_LOAD_SAVES, else 10. (gnome-keyring rewrites its keyring
    /// file for every item stored, so the on-disk Secret Service run costs far more per save.)
    static func saves(_ backend: String) -> Int {
        let environment = TestEnvironment.environment
        let specific = "TOKENCACHE_LOAD_SAVES_" + backend.uppercased().replacingOccurrences(of: "-", with: "_").replacingOccurrences(of: "@", with: "_")
        return Int(environment[specific] ?? environment["TOKENCACHE_LOAD_SAVES"] ?? "10")!
    }

    /// `tokencache` arguments for a load backend name.
    static func cliBackend(_ backend: String) -> [String] {
        let parts = backend.split(separator: "@", maxSplits: 1).map(String.init)
        return ["--backend", parts[0]] + (parts.count > 1 ? ["--collection", parts[1]] : [])
    }

    @Test("8 writer processes saving distinct accounts (10 saves each unless TOKENCACHE_LOAD_PROCESSES, TOKENCACHE_LOAD_SAVES[_FILE|_SECRET_SERVICE|_SECRET_SERVICE_SESSION] say otherwise), with 2 reader processes and `tokencache list` running meanwhile: every save present, no torn or corrupt entity, no error (a call the daemon did not answer in time is retried, as its hint says)",
          arguments: loadBackends)
    func writersReadersAndList(backend: String) throws {
        let dataHome = try TestEnvironment.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dataHome) }
        let group = "org.swift-tokencache.load-\(UUID().uuidString.prefix(8).lowercased())"
        let environment = TestEnvironment.environment.merging(["XDG_DATA_HOME": dataHome.path, "NO_COLOR": "1"]) { $1 }
        let stop = dataHome.appendingPathComponent("stop").path
        let (writers, saves) = (Self.writers, Self.saves(backend))

        let results = Mutex<[String: ProcessOutput]>([:])
        let lists = Mutex<[ProcessOutput]>([])
        let workers = DispatchGroup(), readers = DispatchGroup()
        let start = ContinuousClock.now
        for reader in 0..<2 {
            DispatchQueue.global().async(group: readers) {
                let output = try? runProcess(Self.helper, ["load-reader", backend, group, stop], environment: environment)
                results.withLock { $0["reader\(reader)"] = output }
            }
        }
        // `tokencache list` over and over until the writers are done, and until one listed the
        // group (up to 3 runs after: with few saves the first runs may all come before the first).
        DispatchQueue.global().async(group: readers) {
            var listed = false, runsAfterStop = 0
            while true {
                if FileManager.default.fileExists(atPath: stop) {
                    if listed || runsAfterStop == 3 { break }
                    runsAfterStop += 1
                }
                if let output = try? runProcess(Self.cli, ["list", "--json", "--verbose", "--group", group] + Self.cliBackend(backend),
                                                environment: environment) {
                    lists.withLock { $0.append(output) }
                    listed = listed || output.status == 0
                }
            }
        }
        for writer in 0..<writers {
            DispatchQueue.global().async(group: workers) {
                let output = try? runProcess(Self.helper, ["load-writer", backend, group, "w\(writer)", "\(saves)"],
                                             environment: environment)
                results.withLock { $0["writer\(writer)"] = output }
            }
        }
        workers.wait()
        let wall = ContinuousClock.now - start
        _ = FileManager.default.createFile(atPath: stop, contents: nil)
        readers.wait()

        let outputs = results.withLock { $0 }
        for writer in 0..<writers {
            let output = try #require(outputs["writer\(writer)"])
            #expect(output.status == 0, "writer \(writer): \(output.stderr)")
            let json = try #require(try JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [String: Any])
            #expect(json["saved"] as? Int == saves, "writer \(writer): \(output.stdout)")
            #expect((json["errors"] as? [String: Any])?.isEmpty == true, "writer \(writer): \(output.stdout)")
        }
        var reads = 0, timeouts = 0
        for writer in 0..<writers {
            let json = try JSONSerialization.jsonObject(with: Data(try #require(outputs["writer\(writer)"]).stdout.utf8)) as? [String: Any]
            timeouts += json?["retriedTimeouts"] as? Int ?? 0
        }
        for reader in 0..<2 {
            let output = try #require(outputs["reader\(reader)"])
            #expect(output.status == 0, "reader \(reader): \(output.stderr)")
            let json = try #require(try JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [String: Any])
            #expect((json["errors"] as? [String: Any])?.isEmpty == true, "reader \(reader): \(output.stdout)")
            #expect(json["torn"] as? Int == 0, "reader \(reader): \(output.stdout)")
            #expect(json["reads"] as? Int ?? 0 > 0, "reader \(reader) never read the group: \(output.stdout)")
            reads += json["reads"] as? Int ?? 0
            timeouts += json["timeouts"] as? Int ?? 0
        }
        let listRuns = lists.withLock { $0 }
        #expect(!listRuns.isEmpty)
        // Timeouts are retried, not the whole story: `list`, as each reader above, must have been served too.
        var listed = 0
        for list in listRuns {
            // Before the first save the group holds nothing, which list reports as not found.
            if list.status == 2 && list.stderr.contains("No group \(group) on") { continue }
            // A call the starved daemon did not answer in time is a typed error the user retries (#56 failure F).
            let lastLine = list.stderr.split(separator: "\n").last.map(String.init) ?? ""
            let error = (try? JSONSerialization.jsonObject(with: Data(lastLine.utf8)) as? [String: Any])?["error"] as? [String: Any]
            if list.status != 0 && error?["code"] as? String == "timedOut" { timeouts += 1; continue }
            #expect(list.status == 0, "tokencache list: \(list.stderr)")
            #expect((try? JSONSerialization.jsonObject(with: Data(list.stdout.utf8))) != nil, "tokencache list printed no JSON")
            listed += list.status == 0 ? 1 : 0
        }
        #expect(listed > 0, "no tokencache list run listed the group")

        // Every save is there, whole: one account, access token, refresh token and ID token each.
        let policy = try #require(BackendPolicy(rawValue: String(backend.prefix { $0 != "@" })))
        var secretService = SecretServiceBackend.Options()
        if backend.hasSuffix("@session") { secretService.defaultMapping = .session }
        let store = AccountStore(selection: try BackendSelection.open(policy: policy, fileDirectory: dataHome.appendingPathComponent("tokencache"),
                                                                      secretService: secretService),
                                 group: try CacheGroup(group))
        let exported = try #require(try JSONSerialization.jsonObject(with: try store.exportMSALJSON()) as? [String: [String: Any]])
        for section in ["Account", "AccessToken", "RefreshToken", "IdToken"] {
            #expect(exported[section]?.count == writers * saves, "\(section): \(exported[section]?.count ?? 0)")
        }
        var missing = 0
        for writer in 0..<writers {
            for index in 0..<saves {
                guard let account = try store.account("w\(writer)-\(index)@load.example"),
                      let token = try store.accessToken(clientID: "load-client", account: account, scopes: ["User.Read"]),
                      token.accessToken.hasPrefix("secret-at-"),
                      try store.refreshToken(clientID: try ClientID("load-client"), account: account) != nil else { missing += 1; continue }
            }
        }
        #expect(missing == 0)
        let seconds = Double(wall.components.seconds) + Double(wall.components.attoseconds) / 1e18
        print("LOAD \(backend): \(writers) processes x \(saves) saves = \(writers * saves) saves in \(String(format: "%.1f", seconds)) s"
              + " (\(String(format: "%.1f", Double(writers * saves) / seconds)) saves/s), \(reads) reads by 2 readers,"
              + " \(listRuns.count) tokencache list runs, \(timeouts) calls timed out (retried), missing \(missing)")
        try store.removeAll()
    }
}
