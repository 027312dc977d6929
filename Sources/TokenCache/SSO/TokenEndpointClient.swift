import Dispatch
import EncryptedFileStore
import SecretServiceStore
import TokenCacheCore
import TokenCachePlatform
import FoundationEssentials
import Logging

/// Talks to an authority's token endpoint: OpenID discovery and the refresh-token grant.
final class TokenEndpointClient: Sendable {
    let transport: any HTTPTransport
    let timeout: TimeInterval
    let logger: Logger
    private let endpoints = Locked<[String: URL]>([:])

    init(transport: any HTTPTransport, timeout: TimeInterval, logger: Logger) {
        self.transport = transport
        self.timeout = timeout
        self.logger = logger
    }

    /// The token endpoint of an authority, from OpenID discovery (cached per process).
    func tokenEndpoint(for authority: Authority) async throws(TokenCacheError) -> URL {
        let cacheKey = authority.url.absoluteString
        if let known = endpoints.withLock({ $0[cacheKey] }) { return known }
        let base = authority.url.absoluteString
        let discovery = switch authority.kind {
        case .aad, .b2c: "\(base)/v2.0/.well-known/openid-configuration"
        case .adfs, .oidc: "\(base)/.well-known/openid-configuration"
        }
        guard let url = URL(string: discovery) else {
            throw TokenCacheError.invalidArgument("authority", "'\(base)' gives no discovery URL")
        }
        let request = HTTPRequest(url: url, headers: ["Accept": "application/json"], timeout: timeout)
        let response = try await send(request, what: "OpenID discovery")
        guard response.status == 200,
              let document = try? JSON.decodeObject(response.body),
              let endpoint = document["token_endpoint"]?.stringValue,
              let endpointURL = URL(string: endpoint),
              endpointURL.scheme == "https" || Authority.isLoopback(endpointURL.host ?? "") else {
            throw TokenCacheError(response.status >= 500 ? .serverError : .invalidArgument,
                                  "OpenID discovery at \(url.absoluteString) gave no usable token_endpoint (HTTP \(response.status)).",
                                  hint: "Check the authority URL, or configure the token endpoint explicitly", field: "authority")
        }
        endpoints.withLock { $0[cacheKey] = endpointURL }
        return endpointURL
    }

    /// The outcome of a token request: tokens, or the server's error.
    enum Outcome: Sendable {
        case tokens(TokenResponse)
        case rejected(ServerErrorDetails)
    }

    /// Redeems a refresh token.
    func redeem(refreshToken: String, clientID: String, scopes: [String], claims: String? = nil, at endpoint: URL,
                isMicrosoft: Bool) async throws(TokenCacheError) -> Outcome {
        var form = [
            "grant_type": "refresh_token",
            "client_id": clientID,
            "refresh_token": refreshToken,
            "scope": (scopes + ["openid", "profile", "offline_access"]).joined(separator: " "),
        ]
        if isMicrosoft { form["client_info"] = "1" }
        if let claims { form["claims"] = claims }
        let request = HTTPRequest(method: "POST", url: endpoint,
                                  headers: ["Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"],
                                  body: Data(Self.formEncode(form).utf8), timeout: timeout)
        logger.debug("Redeeming refresh token", metadata: ["endpoint": .string(endpoint.absoluteString), "client_id": .string(clientID)])
        let response = try await send(request, what: "The token endpoint")
        if response.status == 200 {
            return .tokens(try TokenResponse(json: response.body))
        }
        let object = (try? JSON.decodeObject(response.body)) ?? [:]
        let codes: [Int] = if case .array(let values)? = object["error_codes"] {
            values.compactMap { if case .integer(let code) = $0 { Int(code) } else { nil } }
        } else { [] }
        let details = ServerErrorDetails(
            error: object["error"]?.stringValue ?? "http_\(response.status)",
            suberror: object["suberror"]?.stringValue,
            errorDescription: object["error_description"]?.stringValue,
            errorCodes: codes,
            claims: object["claims"]?.stringValue,
            httpStatus: response.status,
            retryAfter: response.headers["retry-after"].flatMap { Int($0) })
        logger.debug("Token endpoint refused the request", metadata: [
            "error": .string(details.error), "suberror": .string(details.suberror ?? "-"), "status": .stringConvertible(response.status)])
        return .rejected(details)
    }

    private func send(_ request: HTTPRequest, what: String) async throws(TokenCacheError) -> HTTPResponse {
        do {
            return try await Self.withDeadline(seconds: timeout) { [transport] in try await transport.send(request) }
        } catch let error as TokenCacheError {
            throw error  // the transport's own typed error (libcurl missing)
        } catch {
            let host = request.url.host ?? "?"
            throw TokenCacheError(.network, "\(what) at \(host) did not answer: \(Self.describe(error)).",
                                  hint: "Check the network connection and retry; the cache was not changed")
        }
    }

    /// Runs `operation`, giving up after `seconds` even if the operation ignores cancellation
    /// (an app's own transport may not honour the request's timeout).
    static func withDeadline<T: Sendable>(seconds: TimeInterval,
                                          _ operation: @escaping @Sendable () async throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let outcome = OneShot(continuation)
            let work = Task {
                do { outcome.resume(.success(try await operation())) } catch { outcome.resume(.failure(error)) }
            }
            // A Dispatch timer, not a Task: it fires even when the cooperative pool is busy.
            DispatchQueue.global().asyncAfter(deadline: .now() + seconds) {
                outcome.resume(.failure(HTTPTransportError(.timedOut, detail: "no answer within \(seconds) s")))
                work.cancel()
            }
        }
    }

    private static func describe(_ error: any Error) -> String {
        (error as? HTTPTransportError)?.description ?? "network error"
    }

    static func formEncode(_ form: [String: String]) -> String {
        form.sorted { $0.key < $1.key }.map { "\(ASCII.percentEncoded($0.key))=\(ASCII.percentEncoded($0.value))" }
            .joined(separator: "&")
    }
}

/// A continuation resumed by whichever of several racers finishes first.
private final class OneShot<T: Sendable>: Sendable {
    private let continuation: Locked<CheckedContinuation<T, any Error>?>

    init(_ continuation: CheckedContinuation<T, any Error>) { self.continuation = Locked(continuation) }

    func resume(_ result: Result<T, any Error>) {
        continuation.withLock { stored in
            defer { stored = nil }
            return stored
        }?.resume(with: result)
    }
}
