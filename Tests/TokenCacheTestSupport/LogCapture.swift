import Testing
import TokenCacheCore

/// Sends every log line of the whole test process, at trace level, to the file named by
/// `TOKENCACHE_TEST_LOG_FILE` (set by scripts/test.sh, which checks it for secrets after the run).
/// Every suite carries this trait: `prepare(for:)` runs while the test plan is built, before any
/// test body creates a logger, so no line escapes whatever `--filter` selects.
package struct CapturesLogs: SuiteTrait, TestTrait {
    package var isRecursive: Bool { true }

    package func prepare(for test: Test) async throws { _ = LogCapture.bootstrapped }
}

package enum LogCapture {
    /// LoggingSystem.bootstrap may run once per process; a static `let` runs it exactly once.
    package static let bootstrapped: Bool = LineFileLogHandler.bootstrapFromEnvironment()
}

extension Trait where Self == CapturesLogs {
    /// Capture this suite's logs (see ``CapturesLogs``).
    package static var capturesLogs: Self { Self() }
}
