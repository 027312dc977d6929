import FoundationEssentials
import TokenCacheCore
import TokenCachePlatform

/// An HTTP request, as the token client sends it.
public struct HTTPRequest: Sendable {
    /// "GET" or "POST".
    public var method: String
    /// Where to send it (http or https).
    public var url: URL
    /// Header fields.
    public var headers: [String: String]
    /// The body, for POST.
    public var body: Data?
    /// Bound on the whole exchange, in seconds.
    public var timeout: TimeInterval

    /// Creates a request.
    public init(method: String = "GET", url: URL, headers: [String: String] = [:], body: Data? = nil, timeout: TimeInterval = 30) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
    }
}

/// An HTTP response, as the token client needs it.
public struct HTTPResponse: Sendable {
    /// The status code.
    public var status: Int
    /// Header fields, names lower-cased.
    public var headers: [String: String]
    /// The body.
    public var body: Data

    public init(status: Int, headers: [String: String], body: Data) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}

/// Why no HTTP response arrived.
public struct HTTPTransportError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure.
    public enum Kind: Sendable, Hashable {
        case timedOut
        case connectionRefused
        case hostNotFound
        /// The TLS handshake or certificate check failed.
        case tls
        /// The transport was cancelled.
        case cancelled
        /// The response was larger than the transport accepts.
        case responseTooLarge
        /// Anything else.
        case other
    }

    /// What kind of failure.
    public var kind: Kind
    /// The HTTP stack's own words, for people (never holds request bodies or tokens).
    public var detail: String

    /// Creates an error.
    public init(_ kind: Kind, detail: String) {
        self.kind = kind
        self.detail = detail
    }

    public var description: String {
        switch kind {
        case .timedOut: "timed out"
        case .connectionRefused: "connection refused"
        case .hostNotFound: "host not found"
        case .tls: "TLS failed (\(detail))"
        case .cancelled: "cancelled"
        case .responseTooLarge: "response too large"
        case .other: "network error (\(detail))"
        }
    }
}

/// Sends the token client's HTTP requests. The default is ``CurlTransport`` (libcurl, TLS
/// verified against the system's trust store); apps with their own HTTP stack can supply one.
public protocol HTTPTransport: Sendable {
    /// Sends a request and returns the response, or throws when no response arrived
    /// (preferably an ``HTTPTransportError``).
    func send(_ request: HTTPRequest) async throws -> HTTPResponse
}

/// A transport that can also send on the caller's thread (``CurlTransport``): the token
/// pipeline's blocking callers (C, the command line, the servers) then cross no thread for a
/// request, where an app's own async transport needs a bridge.
package protocol BlockingHTTPTransport: HTTPTransport {
    /// Sends a request on this thread and returns the response, or throws when none arrived
    /// (an ``HTTPTransportError``). `cancelled` is asked while the transfer runs: true aborts it.
    func sendBlocking(_ request: HTTPRequest, cancelled: @escaping @Sendable () -> Bool) throws -> HTTPResponse
}
