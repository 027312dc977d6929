import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

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

/// Sends the token client's HTTP requests. The default uses URLSession (TLS verified by the
/// system); apps with their own HTTP stack can supply one.
public protocol HTTPTransport: Sendable {
    /// Sends a request and returns the response, or throws when no response arrived.
    func send(_ request: URLRequest) async throws -> HTTPResponse
}

/// The default transport: an ephemeral URLSession (no cookies, no disk cache).
public struct URLSessionTransport: HTTPTransport {
    private let session: URLSession

    /// Creates a transport.
    public init() {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpCookieStorage = nil
        configuration.urlCache = nil
        configuration.timeoutIntervalForRequest = 30
        session = URLSession(configuration: configuration)
    }

    public func send(_ request: URLRequest) async throws -> HTTPResponse {
        let (data, response) = try await session.data(for: request)
        guard let http = response as? HTTPURLResponse else { throw URLError(.badServerResponse) }
        var headers: [String: String] = [:]
        for (name, value) in http.allHeaderFields {
            if let name = name as? String, let value = value as? String { headers[name.lowercased()] = value }
        }
        return HTTPResponse(status: http.statusCode, headers: headers, body: data)
    }
}
