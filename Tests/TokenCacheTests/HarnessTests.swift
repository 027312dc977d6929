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

@Suite("Test threads", .harness)
struct TestThreadsTests {
    @Test("Work given to the test threads starts at once while more jobs than the old fixed pool of eight block")
    func neverQueues() async throws {
        let blocking = 24
        let started = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<blocking {
                group.addTask(executorPreference: TestThreads.shared) { started.signal(); release.wait() }
            }
            // The bound is a hang guard, reached only when jobs queue (the blocked ones never end without `release`).
            let allStarted = try await offThePool { (0..<blocking).allSatisfy { _ in started.wait(timeout: .now() + 60) == .success } }
            for _ in 0..<blocking { release.signal() }
            try await group.waitForAll()
            #expect(allStarted, "a job waited in the test threads' queue behind blocked ones")
        }
        #expect(TestThreads.shared.threadCount >= blocking)
    }
}
