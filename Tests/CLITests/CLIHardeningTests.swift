import Foundation
import Testing
import TokenCacheTestSupport

/// The CLI binary is linked with full RELRO like libtokencache (#34 item 8): `-z now` binds every
/// symbol at start so that `-z relro` can make the whole GOT read-only. The release build (as
/// shipped) is checked by the same script in .ci/run after scripts/build-deb.sh.
@Suite("tokencache CLI: binary hardening", .harness)
struct CLIHardeningTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardizedFileURL

    func checkHardening(_ binary: URL) throws -> ProcessOutput {
        try runProcess("/bin/bash", [Self.root.appendingPathComponent("scripts/check-hardening.sh").path, binary.path])
    }

    @Test("The debug tokencache has BIND_NOW in its dynamic section and a GNU_RELRO segment; a binary linked without -z now fails the check")
    func fullRELRO() throws {
        let cli = TestEnvironment.binDirectory.appendingPathComponent("tokencache")
        let checked = try checkHardening(cli)
        #expect(checked.status == 0, "\(checked.stdout) \(checked.stderr)")
        #expect(checked.stdout.contains("full RELRO"))
        // The test helper is linked with SwiftPM's defaults: what the CLI was before.
        let helper = TestEnvironment.binDirectory.appendingPathComponent("TokenCacheTestHelper")
        let unhardened = try checkHardening(helper)
        #expect(unhardened.status == 1 && unhardened.stderr.contains("lacks BIND_NOW"), "\(unhardened.stdout) \(unhardened.stderr)")
    }
}
