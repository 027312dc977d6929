import Foundation
import Logging
import Testing
import TokenCacheCore

/// The trait every suite carries:
/// - Every log line of the whole test process goes, at trace level, to the file named by
///   `TOKENCACHE_TEST_LOG_FILE` (set by scripts/test.sh, which checks it for secrets after the
///   run). `prepare(for:)` runs while the test plan is built, before any test body creates a
///   logger, so no line escapes whatever `--filter` selects.
/// - Each test runs on ``TestThreads``, never on Swift's cooperative pool. Many tests block
///   (they wait for the programs they run); on the cooperative pool (one thread per core, two
///   here) two such tests stalled every task of the process for up to 58 s, and the library's
///   awaits and timers with it (measured with ``StallProbe``, docs/ARCHITECTURE.md).
package struct Harness: SuiteTrait, TestTrait, TestScoping {
    package var isRecursive: Bool { true }

    package func prepare(for test: Test) async throws {
        _ = LogCapture.bootstrapped
        _ = StallProbe.started
    }

    package func scopeProvider(for test: Test, testCase: Test.Case?) -> Harness? {
        test.isSuite || testCase == nil ? nil : self
    }

    package func provideScope(for test: Test, testCase: Test.Case?,
                              performing function: @Sendable () async throws -> Void) async throws {
        try await withTaskExecutorPreference(TestThreads.shared) { try await function() }
    }
}

extension Trait where Self == Harness {
    /// Logs captured, the test run off the cooperative pool (see ``Harness``).
    package static var harness: Self { Self() }
}

package enum LogCapture {
    /// LoggingSystem.bootstrap may run once per process; a static `let` runs it exactly once.
    package static let bootstrapped: Bool = LineFileLogHandler.bootstrapFromEnvironment()
}

/// The threads tests run on (``Harness``). A job never waits in a queue: when no thread is idle,
/// a new one starts, so a test's body and each of its continuations run as soon as Swift Testing
/// schedules them, however many other tests block on the programs they run. A fixed set (eight,
/// until #56) made a test wait behind others while its time limit and its own deadlines counted:
/// a test that takes 0.3 s alone hit a 60 s limit on a new machine. How many tests run at once is
/// Swift Testing's parallelization width (scripts/test.sh), not this pool's size.
package final class TestThreads: TaskExecutor, @unchecked Sendable {
    // @unchecked: `jobs`, `idle` and `count` are only touched with `condition` locked.
    package static let shared = TestThreads(ceiling: 512)
    /// More threads than this means jobs that never finish pile up (a test that blocks forever
    /// and starts more work): the run stops with that message instead of growing without end.
    private let ceiling: Int
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    /// Threads waiting for a job; each queued job has one (`jobs.count <= idle` at all times).
    private var idle = 0
    private var count = 0

    private init(ceiling: Int) {
        self.ceiling = ceiling
    }

    package func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.withLock {
            jobs.append(job)
            if jobs.count <= idle {
                condition.signal()
            } else {
                precondition(count < ceiling, "TestThreads: \(ceiling) test threads are busy; a test blocks forever or starts work without end")
                count += 1
                startThread(index: count)
            }
        }
    }

    private func startThread(index: Int) {
        let thread = Thread { [self] in
            while true {
                let job = condition.withLock {
                    idle += 1
                    while jobs.isEmpty { condition.wait() }
                    idle -= 1
                    return jobs.removeFirst()
                }
                job.runSynchronously(on: asUnownedTaskExecutor())
            }
        }
        thread.name = "test-\(index)"
        thread.start()
    }

    /// Threads started so far (for the test of this pool).
    package var threadCount: Int { condition.withLock { count } }
}

/// A diagnostic, on when `TOKENCACHE_TEST_STALL_PROBE` names a directory: every 100 ms it times
/// how long a task takes to start on the cooperative pool and a block on Dispatch's global
/// queue, logs lags over 500 ms, and while a lag lasts over 3 s writes every thread's stack
/// (gdb) to the directory, twice at most per lag: what holds the threads.
package enum StallProbe {
    package static let started: Bool = {
        guard let directory = ProcessInfo.processInfo.environment["TOKENCACHE_TEST_STALL_PROBE"], !directory.isEmpty else { return false }
        let logger = Logger(label: "tokencache.test.stall")
        Thread {
            while true {
                usleep(100_000)
                let start = ContinuousClock.now
                let task = DispatchSemaphore(value: 0), dispatch = DispatchSemaphore(value: 0)
                let taskAt = Locked<ContinuousClock.Instant?>(nil), dispatchAt = Locked<ContinuousClock.Instant?>(nil)
                Task.detached { taskAt.withLock { $0 = .now }; task.signal() }
                DispatchQueue.global().async { dispatchAt.withLock { $0 = .now }; dispatch.signal() }
                var dumps = 0
                while task.wait(timeout: .now() + 3) == .timedOut && dumps < 2 {
                    dumps += 1
                    dumpStacks(to: "\(directory)/stall-\(getpid())-\(Int(Date().timeIntervalSince1970))-\(dumps).txt")
                }
                task.wait()
                dispatch.wait()
                let taskLag = taskAt.withLock { $0! } - start, dispatchLag = dispatchAt.withLock { $0! } - start
                if taskLag > .milliseconds(500) || dispatchLag > .milliseconds(500) {
                    logger.debug("Stall", metadata: ["task": "\(taskLag)", "dispatch": "\(dispatchLag)"])
                }
            }
        }.start()
        return true
    }()

    private static func dumpStacks(to file: String) {
        guard FileManager.default.createFile(atPath: file, contents: nil), let output = FileHandle(forWritingAtPath: file) else { return }
        let gdb = Process()
        gdb.executableURL = URL(fileURLWithPath: "/usr/bin/gdb")
        gdb.arguments = ["-p", "\(getpid())", "-batch", "-ex", "thread apply all bt 40"]
        gdb.standardOutput = output
        gdb.standardError = FileHandle.nullDevice
        try? gdb.run()
        gdb.waitUntilExit()
    }
}
