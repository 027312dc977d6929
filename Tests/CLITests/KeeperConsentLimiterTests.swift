import Synchronization
import Testing
// The CLI's module links the keeper (the only one: scripts/check-module-graph.sh); its package API is visible here.
import TokenCacheKeeper
import TokenCacheTestSupport

/// The keeper's consent back-off, on a clock the test moves (no sleep).
@Suite("Token keeper consent back-off", .harness)
struct KeeperConsentLimiterTests {
    @Test("Three failures in a row refuse a uid's attempts (PAM not asked) until the back-off has passed on the keeper's clock; other uids are not held back; a success clears the count; one attempt of a uid at a time")
    func backOffFollowsTheClock() throws {
        let clock = TestClock()
        let limiter = ConsentLimiter(backoff: .seconds(60), now: { clock.now.withLock { $0 } })
        for _ in 0..<ConsentLimiter.limit {
            try limiter.begin(uid: 1000)
            limiter.end(uid: 1000, succeeded: false)
        }
        #expect(throws: ConsentLimiter.Refusal.tooManyFailures(retryAfter: .seconds(60))) { try limiter.begin(uid: 1000) }
        try limiter.begin(uid: 1001)  // another uid is not held back
        #expect(throws: ConsentLimiter.Refusal.attemptInProgress) { try limiter.begin(uid: 1001) }
        limiter.end(uid: 1001, succeeded: true)

        clock.now.withLock { $0 = .seconds(59) }
        #expect(throws: ConsentLimiter.Refusal.tooManyFailures(retryAfter: .seconds(1))) { try limiter.begin(uid: 1000) }
        clock.now.withLock { $0 = .seconds(60) }
        try limiter.begin(uid: 1000)  // the back-off has passed: one more attempt, counted afresh
        limiter.end(uid: 1000, succeeded: false)
        try limiter.begin(uid: 1000)
        limiter.end(uid: 1000, succeeded: true)  // a success clears the count
        for _ in 0..<(ConsentLimiter.limit - 1) {
            try limiter.begin(uid: 1000)
            limiter.end(uid: 1000, succeeded: false)
        }
        try limiter.begin(uid: 1000)
        limiter.end(uid: 1000, succeeded: true)
    }
}

/// A clock the test sets.
private final class TestClock: Sendable {
    let now = Mutex<Duration>(.zero)
}
