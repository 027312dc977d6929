import TokenCacheCore
import TokenCachePipeline

extension Clock where Duration == Swift.Duration {
    /// Sleeps the calling thread (one that may block) for `duration` on this clock: directly on a
    /// ``ThreadSleepingClock`` (the continuous clock, a test's manual one), else through the
    /// clock's async sleep, bridged (an app's own clock). False when `isCancelled` ended it first.
    func sleepBlocking(for duration: Duration, isCancelled: @escaping @Sendable () -> Bool) -> Bool {
        if let sleeping = self as? any ThreadSleepingClock { return sleeping.sleepThread(for: duration, isCancelled: isCancelled) }
        do {
            try waitFor(cancellingWhen: isCancelled) { [self] () async throws in try await sleep(for: duration) }
            return !isCancelled()
        } catch {
            return false
        }
    }
}
