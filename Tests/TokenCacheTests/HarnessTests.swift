import Foundation
import Testing
import TokenCacheTestSupport

@Suite("Test harness", .harness)
struct HarnessTests {
    @Test("Secret Service tests run inside an isolated session, never against the real HOME",
          .enabled(if: TestEnvironment.runsSecretServiceTests))
    func isolatedKeyringSession() throws {
        #expect(TestEnvironment.hasTestKeyring, "run the suite through scripts/test.sh")
        let home = ProcessInfo.processInfo.environment["HOME"] ?? ""
        #expect(home.hasPrefix("/tmp/tokencache-test."))
        #expect(ProcessInfo.processInfo.environment["DBUS_SESSION_BUS_ADDRESS"] != nil)
    }
}
