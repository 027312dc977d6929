import Foundation
@testable import TokenCachePipeline
import TokenCacheCore

/// An in-process identity provider's answers behind a transport that also sends blocking, as
/// libcurl's does for blocking callers: each send through ``sendBlocking(_:cancelled:)`` runs
/// `answer` on the caller's thread and is counted, so a test can tell those sends from the async
/// bridge's.
final class SendingOnTheCallersThread: BlockingHTTPTransport {
    private let answer: @Sendable (HTTPRequest) throws -> HTTPResponse
    private let blockingSends = Locked(0)

    /// - Parameter answer: the provider's answer to one request (it notes the request itself, if the test needs it).
    init(_ answer: @escaping @Sendable (HTTPRequest) throws -> HTTPResponse) { self.answer = answer }

    /// How many requests were sent on the caller's thread.
    var sentBlocking: Int { blockingSends.withLock { $0 } }

    func send(_ request: HTTPRequest) async throws -> HTTPResponse { try answer(request) }

    func sendBlocking(_ request: HTTPRequest, cancelled: @escaping @Sendable () -> Bool) throws -> HTTPResponse {
        blockingSends.withLock { $0 += 1 }
        return try answer(request)
    }
}
