import Dispatch
import TokenCacheCore
import TokenCacheHTTP
import TokenCachePlatform
import FoundationEssentials
import Logging

/// Talks to an authority's token endpoint: OpenID discovery and the refresh-token,
/// authorization-code and device-code grants.
package final class TokenEndpointClient: Sendable {
    package let transport: any HTTPTransport
    package let timeout: TimeInterval
    package let logger: Logger
    /// The app's client capabilities (`cp1`), merged into the `claims` of every request (``ClaimsRequest``).
    package let capabilities: [String]
    /// Discovered endpoints per authority: this client's own, or a cache it shares (``Discovered``).
    private let endpoints: Discovered

    /// Endpoints discovered per authority, shared by the clients given it (one app's, or a process's).
    package typealias Discovered = Locked<[String: Endpoints]>

    package init(transport: any HTTPTransport, timeout: TimeInterval, logger: Logger, capabilities: [String] = [],
                 sharing discovered: Discovered = Discovered([:])) {
        self.transport = transport
        self.timeout = timeout
        self.logger = logger
        self.capabilities = capabilities
        endpoints = discovered
    }

    /// The `claims` parameter of a request carrying the caller's `claims`: merged with the capabilities.
    package func claimsParameter(_ claims: String?) throws(TokenCacheError) -> String? {
        try ClaimsRequest.merged(capabilities: capabilities, claims: claims)
    }

    /// The endpoints OpenID discovery gives for an authority.
    package struct Endpoints: Sendable {
        /// `token_endpoint`.
        package var token: URL
        /// `authorization_endpoint`, when discovery gave a usable one.
        package var authorization: URL?
        /// `device_authorization_endpoint`, when discovery gave a usable one.
        package var deviceAuthorization: URL?
    }

    /// The token endpoint of an authority, from OpenID discovery (cached per process), on the caller's thread.
    package func tokenEndpointBlocking(for authority: Authority, cancelled: @escaping @Sendable () -> Bool = { false }) throws(TokenCacheError) -> URL {
        try endpointsBlocking(for: authority, cancelled: cancelled).token
    }

    /// The endpoints this client discovered for an authority already (or was told), without a request.
    package func knownEndpoints(for authority: Authority) -> Endpoints? {
        endpoints.withLock { $0[authority.url.absoluteString] }
    }

    /// Records an authority's endpoints learnt from another's discovery: a domain's discovery
    /// names its tenant ID's endpoints (``TokenEngine/tenantAuthority(of:discoveringWith:)``).
    package func remember(_ found: Endpoints, for authority: Authority) {
        endpoints.withLock { known in
            if known[authority.url.absoluteString] == nil { known[authority.url.absoluteString] = found }
        }
    }

    /// The endpoints of an authority, from OpenID discovery (cached per process). Each must be
    /// https (http only on loopback) and, for Microsoft authorities (Entra, B2C, AD FS), on the
    /// authority's host or an alias of it: codes and tokens go only where they were issued.
    package func endpoints(for authority: Authority) async throws(TokenCacheError) -> Endpoints {
        if let known = knownEndpoints(for: authority) { return known }
        let request = try discoveryRequest(for: authority)
        return try discovered(try await send(request, what: "OpenID discovery"), for: authority, at: request.url)
    }

    /// ``endpoints(for:)`` on the caller's thread (``sendBlocking(_:what:cancelled:)``), for blocking callers.
    package func endpointsBlocking(for authority: Authority,
                                   cancelled: @escaping @Sendable () -> Bool = { false }) throws(TokenCacheError) -> Endpoints {
        if let known = knownEndpoints(for: authority) { return known }
        let request = try discoveryRequest(for: authority)
        return try discovered(try sendBlocking(request, what: "OpenID discovery", cancelled: cancelled), for: authority, at: request.url)
    }

    /// The OpenID discovery request of an authority.
    private func discoveryRequest(for authority: Authority) throws(TokenCacheError) -> HTTPRequest {
        let base = authority.url.absoluteString
        let discovery = switch authority.kind {
        case .aad, .b2c: "\(base)/v2.0/.well-known/openid-configuration"
        case .adfs, .oidc: "\(base)/.well-known/openid-configuration"
        }
        guard let url = URL(string: discovery) else {
            throw TokenCacheError.invalidArgument("authority", "'\(base)' gives no discovery URL")
        }
        return HTTPRequest(url: url, headers: ["Accept": "application/json"], timeout: timeout)
    }

    /// The endpoints a discovery answer at `url` gives, checked and cached for `authority`.
    private func discovered(_ response: HTTPResponse, for authority: Authority, at url: URL) throws(TokenCacheError) -> Endpoints {
        let document = response.status == 200 ? try? JSON.decodeObject(response.body) : nil
        func usable(_ field: String) -> URL? {
            guard let text = document?[field]?.stringValue, let endpoint = URL(string: text), let host = endpoint.host,
                  endpoint.scheme == "https" || Authority.isLoopback(host) else { return nil }
            return authority.kind == .oidc || Environment.authority(authority, accepts: host) ? endpoint : nil
        }
        guard let tokenURL = usable("token_endpoint") else {
            throw TokenCacheError(response.status >= 500 ? .serverError : .invalidArgument,
                                  "OpenID discovery at \(url.absoluteString) gave no usable token_endpoint (HTTP \(response.status)).",
                                  hint: "Check the authority URL, or configure the token endpoint explicitly", field: "authority",
                                  reason: .tokenEndpointNotFound(authority: authority.url.absoluteString))
        }
        let found = Endpoints(token: tokenURL, authorization: usable("authorization_endpoint"),
                              deviceAuthorization: usable("device_authorization_endpoint"))
        endpoints.withLock { $0[authority.url.absoluteString] = found }
        return found
    }

    /// The outcome of a token request: tokens, or the server's error.
    package enum Outcome: Sendable {
        case tokens(TokenResponse)
        case rejected(ServerErrorDetails)
    }

    /// Redeems a grant (`grant` holds `grant_type` and the grant's own fields: a refresh token,
    /// an authorization code with its verifier, a device code); every grant shares the client
    /// fields, the scopes and the response handling.
    package func redeem(grant: [String: String], clientID: ClientID, scopes: [String], at endpoint: URL,
                isMicrosoft: Bool) async throws(TokenCacheError) -> Outcome {
        let request = try grantRequest(grant, clientID: clientID, scopes: scopes, at: endpoint, isMicrosoft: isMicrosoft)
        return try outcome(of: try await send(request, what: "The token endpoint"))
    }

    /// Redeems a refresh token, on the caller's thread; `cancelled` true aborts the transfer until
    /// the server's answer begins (libcurl's transport), and one not sent yet never starts.
    package func redeemBlocking(refreshToken: String, clientID: ClientID, scopes: [String], claims: String? = nil, at endpoint: URL,
                                isMicrosoft: Bool, cancelled: @escaping @Sendable () -> Bool = { false }) throws(TokenCacheError) -> Outcome {
        var grant = ["grant_type": "refresh_token", "refresh_token": refreshToken]
        if let claims { grant["claims"] = claims }
        return try redeemBlocking(grant: grant, clientID: clientID, scopes: scopes, at: endpoint, isMicrosoft: isMicrosoft, cancelled: cancelled)
    }

    /// ``redeem(grant:clientID:scopes:at:isMicrosoft:)`` on the caller's thread, as ``redeemBlocking(refreshToken:clientID:scopes:claims:at:isMicrosoft:cancelled:)``.
    package func redeemBlocking(grant: [String: String], clientID: ClientID, scopes: [String], at endpoint: URL,
                                isMicrosoft: Bool, cancelled: @escaping @Sendable () -> Bool = { false }) throws(TokenCacheError) -> Outcome {
        let request = try grantRequest(grant, clientID: clientID, scopes: scopes, at: endpoint, isMicrosoft: isMicrosoft)
        return try outcome(of: try sendBlocking(request, what: "The token endpoint", cancelled: cancelled))
    }

    /// A grant's request: the grant's fields with the client's, the scopes and the claims.
    private func grantRequest(_ grant: [String: String], clientID: ClientID, scopes: [String], at endpoint: URL,
                              isMicrosoft: Bool) throws(TokenCacheError) -> HTTPRequest {
        var form = grant
        form["claims"] = try claimsParameter(grant["claims"])
        form["client_id"] = clientID.value
        form["scope"] = (scopes + ["openid", "profile", "offline_access"]).joined(separator: " ")
        if isMicrosoft { form["client_info"] = "1" }
        let grantType = grant["grant_type"] ?? "-"
        logger.debug(grantType == "refresh_token" ? "Redeeming refresh token" : "Redeeming grant", metadata: [
            "grant_type": .string(grantType), "endpoint": .string(endpoint.absoluteString), "client_id": .string(clientID.value)])
        return formRequest(form, to: endpoint)
    }

    /// A token request's outcome: the tokens, or the server's refusal.
    private func outcome(of response: HTTPResponse) throws(TokenCacheError) -> Outcome {
        if response.status == 200 {
            return .tokens(try TokenResponse(json: response.body))
        }
        let details = Self.errorDetails(response)
        logger.debug("Token endpoint refused the request", metadata: [
            "error": .string(details.error), "suberror": .string(details.suberror ?? "-"), "status": .stringConvertible(response.status)])
        return .rejected(details)
    }

    /// POSTs a form (`application/x-www-form-urlencoded`) and returns the answer, whatever its
    /// status, on the caller's thread (``sendBlocking(_:what:cancelled:)``).
    package func postBlocking(_ form: [String: String], to endpoint: URL, what: String,
                              cancelled: @escaping @Sendable () -> Bool = { false }) throws(TokenCacheError) -> HTTPResponse {
        try sendBlocking(formRequest(form, to: endpoint), what: what, cancelled: cancelled)
    }

    /// A form POST (`application/x-www-form-urlencoded`) to `endpoint`.
    private func formRequest(_ form: [String: String], to endpoint: URL) -> HTTPRequest {
        HTTPRequest(method: "POST", url: endpoint,
                    headers: ["Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"],
                    body: Data(Self.formEncode(form).utf8), timeout: timeout)
    }

    /// An OAuth error response's fields (RFC 6749 5.2, with Microsoft's additions).
    package static func errorDetails(_ response: HTTPResponse) -> ServerErrorDetails {
        let object = (try? JSON.decodeObject(response.body)) ?? [:]
        let codes: [Int] = if case .array(let values)? = object["error_codes"] {
            values.compactMap { if case .integer(let code) = $0 { Int(code) } else { nil } }
        } else { [] }
        return ServerErrorDetails(
            error: object["error"]?.stringValue ?? "http_\(response.status)",
            suberror: object["suberror"]?.stringValue,
            errorDescription: object["error_description"]?.stringValue,
            errorCodes: codes,
            claims: object["claims"]?.stringValue,
            httpStatus: response.status,
            retryAfter: response.headers["retry-after"].flatMap { Int($0) })
    }

    private func send(_ request: HTTPRequest, what: String) async throws(TokenCacheError) -> HTTPResponse {
        do {
            return try await Self.withDeadline(seconds: timeout + Self.backstopMargin) { [transport] in try await transport.send(request) }
        } catch {
            throw Self.failure(error, of: request, what: what)
        }
    }

    /// ``send(_:what:)`` on the caller's thread: directly with a ``BlockingHTTPTransport`` (libcurl,
    /// whose own timer bounds the transfer), else through the app's own async transport, the one
    /// bridge left (``waitFor(cancellingWhen:_:)``, whose task `cancelled` cancels; never call
    /// this from async code).
    package func sendBlocking(_ request: HTTPRequest, what: String,
                              cancelled: @escaping @Sendable () -> Bool = { false }) throws(TokenCacheError) -> HTTPResponse {
        // Asked before anything is sent, whichever transport: a cancelled refresh sends no refresh token.
        if cancelled() { throw Self.cancelledBeforeSending(what) }
        guard let blocking = transport as? any BlockingHTTPTransport else {
            return try waitFor(cancellingWhen: cancelled) { () async throws(TokenCacheError) in try await self.send(request, what: what) }
        }
        do {
            return try blocking.sendBlocking(request, cancelled: cancelled)
        } catch {
            throw Self.failure(error, of: request, what: what)
        }
    }

    private static func cancelledBeforeSending(_ what: String) -> TokenCacheError {
        TokenCacheError(.cancelled, "Cancelled before its request (\(what)) was sent; nothing was changed.",
                        hint: "Retry when the token is needed again")
    }

    /// The error for a request that got no answer: the transport's own typed one (libcurl
    /// missing), else `network`, naming the host.
    private static func failure(_ error: any Error, of request: HTTPRequest, what: String) -> TokenCacheError {
        if let typed = error as? TokenCacheError { return typed }
        return TokenCacheError(.network, "\(what) at \(request.url.host ?? "?") did not answer: \(describe(error)).",
                               hint: "Check the network connection and retry; the cache was not changed")
    }

    /// The transport enforces the request's own timeout (``CurlTransport``: libcurl's timer, from
    /// the transfer's start); the backstop below only catches a transport that ignores it.
    package static let backstopMargin: TimeInterval = 10

    /// Runs `operation`, giving up `seconds` after it started even if it ignores cancellation
    /// (an app's own transport may not honour the request's timeout). The time counts from the
    /// moment the operation runs, not from the call: time spent waiting for a thread is not the
    /// server's. Cancelling the calling task cancels the operation.
    package static func withDeadline<T: Sendable>(seconds: TimeInterval,
                                          _ operation: @escaping @Sendable () async throws -> T) async throws -> T {
        let work = Locked<Task<Void, Never>?>(nil)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
                let outcome = OneShot(continuation)
                let task = Task {
                    // A Dispatch timer, not a Task: it fires even when the cooperative pool is busy.
                    let backstop = DispatchWorkItem {
                        outcome.resume(.failure(HTTPTransportError(.timedOut, detail: "no answer within \(seconds) s")))
                        work.withLock { $0 }?.cancel()
                    }
                    DispatchQueue.global().asyncAfter(deadline: .now() + seconds, execute: backstop)
                    defer { backstop.cancel() }
                    do { outcome.resume(.success(try await operation())) } catch { outcome.resume(.failure(error)) }
                }
                work.withLock { $0 = task }
                if Task.isCancelled { task.cancel() }  // cancelled before `work` was set
            }
        } onCancel: {
            work.withLock { $0 }?.cancel()
        }
    }

    private static func describe(_ error: any Error) -> String {
        (error as? HTTPTransportError)?.description ?? "network error"
    }

    package static func formEncode(_ form: [String: String]) -> String {
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
