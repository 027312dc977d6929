import Dispatch

/// Runs blocking cache work — D-Bus calls, file I/O, file locks — on a Dispatch thread, so an
/// async caller never holds one of Swift's cooperative threads while it waits (the pool has one
/// thread per core; a blocked one stalls every other task of the app).
enum BlockingWork {
    private static let queue = DispatchQueue(label: "org.swift-tokencache.blocking", attributes: .concurrent)

    static func run<T: Sendable>(_ work: @escaping @Sendable () throws(TokenCacheError) -> T) async throws(TokenCacheError) -> T {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<T, TokenCacheError>, Never>) in
            queue.async {
                do throws(TokenCacheError) { continuation.resume(returning: .success(try work())) } catch {
                    continuation.resume(returning: .failure(error))
                }
            }
        }
        return try result.get()
    }
}
