import Foundation
import Testing
@testable import TokenCacheCLI
import TokenCacheTestSupport

/// `tokencache --version` tells a build apart (#60 item 2): the release and the commit it was built from.
@Suite("tokencache --version", .harness)
struct CLIVersionTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test("--version prints the release and the commit this build came from (HEAD or, after a later commit, its ancestor), and not 'dirty' for a clean checkout of it")
    func versionNamesTheCommit() throws {
        let output = try runProcess(TestEnvironment.binDirectory.appendingPathComponent("tokencache").path, ["--version"])
        #expect(output.status == 0, "\(output.stderr)")
        // The CLI and these tests come from one build, so they carry the same BuildInfo.
        #expect(output.stdout == "0.6.0 (commit \(BuildInfo.commit)\(BuildInfo.isDirty ? ", dirty" : ""))\n", "\(output.stdout)")
        let head = try runProcess("/usr/bin/git", ["-C", Self.root.path, "rev-parse", "--short=12", "HEAD"])
        try #require(head.status == 0, "the tests run in a git checkout: \(head.stderr)")
        // A commit made while the suite runs moves HEAD past the build's commit, which stays its ancestor.
        let ancestor = try runProcess("/usr/bin/git", ["-C", Self.root.path, "merge-base", "--is-ancestor", BuildInfo.commit, "HEAD"])
        #expect(ancestor.status == 0, "the build's commit \(BuildInfo.commit) is not HEAD \(head.stdout) or an ancestor of it")
        let clean = try runProcess("/usr/bin/git", ["-C", Self.root.path, "diff", "--quiet", "HEAD", "--"]).status == 0
        if clean && BuildInfo.commit == head.stdout.trimmingCharacters(in: .whitespacesAndNewlines) {
            #expect(!BuildInfo.isDirty, "a build of a clean checkout says 'dirty'")
        }
    }

    @Test("The release is tokencache.h's TOKENCACHE_VERSION_*, as the C library's")
    func releaseIsTheHeaders() throws {
        let header = try String(contentsOf: Self.root.appendingPathComponent("Sources/CTokenCache/include/tokencache.h"), encoding: .utf8)
        let parts = ["MAJOR", "MINOR", "PATCH"].map { part in
            header.split(separator: "\n").first { $0.hasPrefix("#define TOKENCACHE_VERSION_\(part) ") }.map { String($0.split(separator: " ").last!) } ?? "?"
        }
        #expect(parts.joined(separator: ".") == TokenCacheVersion.string)
        #expect(TokenCacheVersion.describe(release: "1.2.3", commit: "0123456789ab", isDirty: true) == "1.2.3 (commit 0123456789ab, dirty)")
    }
}
