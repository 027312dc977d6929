import Dispatch
import TokenCacheCore
import TokenCachePlatform

/// Runs blocking cache work — D-Bus calls, file I/O, file locks — on `BlockingPool.shared`, so
/// an async caller never holds one of Swift's cooperative threads while it waits (the pool has
/// one thread per core; a blocked one stalls every other task of the app).
package enum BlockingWork {
    /// A task cancelled before the work starts gets `cancelled` and the work never runs; work
    /// that started runs to its end. With `cancellable` false it runs anyway (saving what a
    /// server issued: a rotated refresh token must not be lost).
    /// - Throws: what `work` throws, `cancelled`, or `overloaded` when the pool is at its ceiling.
    package static func run<T: Sendable>(file: StaticString = #fileID, line: UInt = #line, cancellable: Bool = true,
                                         _ work: @escaping @Sendable () throws(TokenCacheError) -> T) async throws(TokenCacheError) -> T {
        try await BlockingPool.shared.run("\(file):\(line)", cancellable: cancellable, work)
    }
}

/// Runs async work to completion on the cooperative pool and blocks the calling thread until it
/// is done: the one bridge for callers that are blocking by contract, the C interface (whose
/// header forbids calling it from Swift async code) and the command line (which runs on the main
/// thread without an async main, whose `dispatch_main` ends that thread with `pthread_exit`).
/// Never call it from async code: it would hold a cooperative thread the work may need.
package func waitFor<T: Sendable, Failure: Error>(_ work: @escaping @Sendable () async throws(Failure) -> T) throws(Failure) -> T {
    try waitFor(cancellingWhen: nil, work)
}

/// ``waitFor(_:)`` whose task is cancelled once `isCancelled` says so (asked every 50 ms while
/// it waits), then waited for to its end: for a blocking caller whose own caller may cancel it.
package func waitFor<T: Sendable, Failure: Error>(cancellingWhen isCancelled: (@Sendable () -> Bool)?,
                                                  _ work: @escaping @Sendable () async throws(Failure) -> T) throws(Failure) -> T {
    let outcome = AwaitedOutcome<T, Failure>()
    let task = Task.detached {
        do throws(Failure) { outcome.result = .success(try await work()) } catch { outcome.result = .failure(error) }
        outcome.done.signal()
    }
    var finished = false
    while let isCancelled, !finished {
        if outcome.done.wait(timeout: .now() + .milliseconds(50)) == .success { finished = true } else if isCancelled() { task.cancel(); break }
    }
    if !finished { outcome.done.wait() }
    return try outcome.result!.get()
}

/// What ``waitFor(_:)``'s task produced.
private final class AwaitedOutcome<T, Failure: Error>: @unchecked Sendable {
    // @unchecked: written once by the task before `done` signals, read only after the wait.
    var result: Result<T, Failure>?
    let done = DispatchSemaphore(value: 0)
}
