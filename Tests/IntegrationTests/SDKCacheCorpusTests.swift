import Foundation
import Testing
@testable import TokenCache
@testable import TokenCacheCore
import TokenCacheTestSupport

/// Caches written by MSAL .NET, Java, Node, Go and Python (Fixtures/SDKCaches, origins in
/// ORIGIN.md) survive import and export through the CLI on both backends: every top-level member,
/// entry and field, and MSAL Python's `find()` counts per credential type
/// (Fixtures/sdk_cache_roundtrip.py does the comparison). The same script then moves the access
/// tokens of several files into the future and checks `tokencache token` answers what MSAL
/// Python's `acquire_token_silent` answers.
@Suite("Round trips of real SDK caches", .enabled(if: TestEnvironment.runsInteropTests), .harness)
struct SDKCacheCorpusTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Fixtures").standardizedFileURL

    static var backends: [String] { TestEnvironment.runsSecretServiceTests ? ["file", "secret-service"] : ["file"] }

    @Test("Every corpus cache round-trips with nothing lost", arguments: backends)
    func corpusRoundTrips(backend: String) throws {
        let python = try #require(TestEnvironment.python)
        var environment = ProcessInfo.processInfo.environment
        environment["CORPUS_BACKEND"] = backend
        let output = try runProcess(python, [Self.fixtures.appendingPathComponent("sdk_cache_roundtrip.py").path,
                                             TestEnvironment.binDirectory.appendingPathComponent("tokencache").path,
                                             Self.fixtures.appendingPathComponent("SDKCaches").path],
                                    environment: environment)
        let files = try FileManager.default.contentsOfDirectory(atPath: Self.fixtures.appendingPathComponent("SDKCaches").path)
            .filter { $0.hasSuffix(".json") }
        #expect(files.count >= 15)
        #expect(output.status == 0, "\(output.stdout)\(output.stderr)")
        #expect(output.stdout.contains("\(files.count) of \(files.count) passed, 0 failed"), "\(output.stdout)")
    }

    @Test("A BOM and MSAL .NET's trailing commas are accepted; malformed JSON is refused with what and where")
    func lenientLikeTheSDKs() throws {
        let store = AccountStore(backend: InMemoryBackend())
        let dotnet = Data([0xEF, 0xBB, 0xBF]) + Data(#"{"AppMetadata": {"k": {"client_id": "c", "environment": "e",},}, "Extra": [1, 2,],}"#.utf8)
        let report = try store.importMSALJSON(dotnet)
        #expect(report.imported == [.appMetadata: 1, .unknownSection: 1])
        let exported = try #require(try JSONSerialization.jsonObject(with: try store.exportMSALJSON()) as? [String: Any])
        #expect(exported["Extra"] as? [Int] == [1, 2])

        let broken = try #require(throws: TokenCacheError.self) { try store.importMSALJSON(Data(#"{"AccessToken": {"k": tru}}"#.utf8)) }
        #expect(broken.code == .invalidCacheData)
        #expect(broken.message.contains("invalid literal at byte 22"), "\(broken.message)")
        let notAnObject = try #require(throws: TokenCacheError.self) { try store.importMSALJSON(Data("[1]".utf8)) }
        #expect(notAnObject.message.contains("its top level is not an object"))
    }

    @Test("Importing the same cache twice reports that nothing changed")
    func reimportChangesNothing() throws {
        let store = AccountStore(backend: InMemoryBackend())
        let data = try Data(contentsOf: Self.fixtures.appendingPathComponent("SDKCaches/java-AAD_full_cache.json"))
        let first = try store.importMSALJSON(data)
        #expect(first.changedCount == first.importedCount && first.changedCount > 0)
        let second = try store.importMSALJSON(data)
        #expect(second.changedCount == 0)
        #expect(second.importedCount == first.importedCount)
    }
}
