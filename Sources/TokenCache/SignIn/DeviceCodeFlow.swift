import FoundationEssentials
import TokenCacheCore
import TokenCachePipeline
import Logging

/// The device authorization grant (RFC 8628): ask for a user code, then poll the token
/// endpoint while the user signs in elsewhere. It runs on the calling thread, which must be one
/// that may block (C's, the command line's, the Swift API's one pool job): the requests, and the
/// waits between polls on ``clock``.
struct DeviceCodeFlow: Sendable {
    /// The device authorization response: what to show, and what to poll with.
    struct Authorization: Sendable {
        /// The secret polled with; never shown or logged.
        let deviceCode: String
        let message: DeviceCodeMessage
        /// The polling interval the authority asked for.
        let interval: Duration
        /// How long the code is valid (`expires_in`).
        let lifetime: Duration
    }

    let client: TokenEndpointClient
    let clientID: ClientID
    let scopes: [String]
    let isMicrosoft: Bool
    /// The clock of the polling interval and the code's expiry (tests pass a manual one; an app's
    /// own clock that cannot sleep a thread is waited on through its async sleep, bridged).
    var clock: any Clock<Duration> = ContinuousClock()
    /// How much `slow_down` adds to the interval (RFC 8628 section 3.5).
    static let slowDownIncrement: Duration = .seconds(5)
    /// The least interval honoured, whatever the authority says.
    var minimumInterval: Duration = .seconds(1)
    /// The caller's bound on the wait (``DeviceCodeParameters/timeout``); nil waits as long as the code lives.
    var timeout: Duration?

    /// Asks the device authorization endpoint for a user code.
    func start(at endpoint: URL, claims: String?, now: Date = Date(),
               isCancelled: @escaping @Sendable () -> Bool) throws(TokenCacheError) -> Authorization {
        var form = ["client_id": clientID.value, "scope": (scopes + ["openid", "profile", "offline_access"]).joined(separator: " ")]
        form["claims"] = try client.claimsParameter(claims)
        let response = try client.postBlocking(form, to: endpoint, what: "The device authorization endpoint", cancelled: isCancelled)
        guard response.status == 200 else {
            let details = TokenEndpointClient.errorDetails(response)
            throw TokenCacheError(response.status == 429 || response.status >= 500 ? .serverError : .authorizationFailed,
                                  "The device authorization endpoint refused the request (\(ServerText.errorCode(details.error)), HTTP \(response.status)).",
                                  hint: "Check the client ID, the scopes and that the app registration allows public client flows",
                                  server: details)
        }
        guard let object = try? JSON.decodeObject(response.body) else {
            throw TokenCacheError.invalidResponse("device_authorization", "is not a JSON object")
        }
        guard let deviceCode = object["device_code"]?.stringValue, !deviceCode.isEmpty else {
            throw TokenCacheError.invalidResponse("device_code", "is missing")
        }
        guard let userCode = object["user_code"]?.stringValue, !userCode.isEmpty else {
            throw TokenCacheError.invalidResponse("user_code", "is missing")
        }
        // verification_url: Microsoft's v1 endpoint's name for it.
        guard let verification = Self.webURL(object["verification_uri"]?.stringValue ?? object["verification_url"]?.stringValue) else {
            throw TokenCacheError.invalidResponse("verification_uri", "is missing or not an https URL")
        }
        guard let expiresIn = object["expires_in"]?.secondsValue, expiresIn > 0 else {
            throw TokenCacheError.invalidResponse("expires_in", "is missing or not a positive number")
        }
        let interval = max(Duration.seconds(object["interval"]?.secondsValue ?? 5), minimumInterval)
        let expiresOn = now.addingTimeInterval(expiresIn)
        let printableCode = ServerText.printable(userCode, limit: 64)
        let text = object["message"]?.stringValue.map { ServerText.printable($0) }
            ?? "To sign in, open \(verification.absoluteString) in a browser and enter the code \(printableCode)."
        let message = DeviceCodeMessage(userCode: printableCode, verificationURI: verification,
                                        verificationURIComplete: Self.webURL(object["verification_uri_complete"]?.stringValue),
                                        expiresOn: expiresOn, message: text)
        client.logger.debug("Device code issued", metadata: [
            "expires_in": .stringConvertible(Int(expiresIn)), "interval": .stringConvertible(interval.components.seconds)])
        return Authorization(deviceCode: deviceCode, message: message, interval: interval, lifetime: .seconds(expiresIn))
    }

    /// Polls the token endpoint until the user finished, declined, the code expired or
    /// ``timeout`` passed (both counted on ``clock`` from the first poll's wait, just after the
    /// code was shown), or `isCancelled` says so.
    func poll(_ authorization: Authorization, tokenEndpoint: URL, claims: String? = nil,
              isCancelled: @escaping @Sendable () -> Bool) throws(TokenCacheError) -> TokenResponse {
        let expired = clock.deadline(after: authorization.lifetime)
        let left = timeout.map { clock.countdown(from: $0) }
        var interval = authorization.interval
        while true {
            // Woken at the timeout itself, not at the next poll after it.
            guard clock.sleepBlocking(for: left.map { min(interval, max($0(), .zero)) } ?? interval, isCancelled: isCancelled) else {
                throw Self.cancelled
            }
            if let timeout, let left, left() <= .zero {
                throw Self.timedOut(timeout)
            }
            if expired() {
                throw Self.expired
            }
            // The claims go with the code's redemption too, as MSAL's acquire_token_by_device_flow sends them.
            var grant = ["grant_type": "urn:ietf:params:oauth:grant-type:device_code", "device_code": authorization.deviceCode]
            if let claims { grant["claims"] = claims }
            let outcome = try client.redeemBlocking(grant: grant, clientID: clientID, scopes: scopes, at: tokenEndpoint,
                                                    isMicrosoft: isMicrosoft, cancelled: isCancelled)
            if isCancelled() { throw Self.cancelled }
            switch outcome {
            case .tokens(let response):
                return response
            case .rejected(let details):
                switch details.error {
                case "authorization_pending":
                    continue
                case "slow_down":
                    interval += Self.slowDownIncrement
                    client.logger.debug("Device code polling slowed down", metadata: ["interval": .stringConvertible(interval.components.seconds)])
                case "expired_token", "code_expired":
                    throw Self.expired
                case "access_denied", "authorization_declined":
                    throw TokenCacheError(.accessDenied, "The user declined the sign-in.",
                                          hint: "Start the sign-in again if that was a mistake", server: details)
                default:
                    throw SignInErrors.rejected(details, what: "device code")
                }
            }
        }
    }

    static let cancelled = TokenCacheError(.cancelled, "The device code sign-in was cancelled; nothing was saved.",
                                           hint: "Start the sign-in again when the user is ready")
    /// The caller's timeout passed first; the code itself was still valid.
    static func timedOut(_ timeout: Duration) -> TokenCacheError {
        TokenCacheError(.timedOut, "The device code sign-in did not finish within \(timeout.components.seconds) s (the sign-in's timeout); nothing was saved.",
                        hint: "Start the sign-in again, with a longer timeout if the user needs more time", reason: .deviceCodeTimedOut)
    }
    static let expired = TokenCacheError(.timedOut, "The device code expired before the user finished signing in; nothing was saved.",
                                         hint: "Start the sign-in again and enter the new code sooner")

    /// An https URL (http only on loopback), for pages shown to the user.
    static func webURL(_ text: String?) -> URL? {
        guard let text, let url = URL(string: text), let host = url.host, !host.isEmpty,
              url.scheme == "https" || (url.scheme == "http" && Authority.isLoopback(host)) else { return nil }
        return url
    }
}

/// Errors shared by both sign-in flows.
enum SignInErrors {
    /// The token endpoint refused a code: throttling and server faults are `serverError`
    /// (retry), anything else `authorizationFailed` with the server's details.
    static func rejected(_ details: ServerErrorDetails, what: String) -> TokenCacheError {
        let code = ServerText.errorCode(details.error)
        if details.httpStatus == 429 || details.httpStatus >= 500 {
            return TokenCacheError(.serverError, "The token endpoint answered \(details.httpStatus) (\(code)) to the \(what).",
                                   hint: details.retryAfter.map { "Retry the sign-in after \($0) s" } ?? "Retry the sign-in later", server: details)
        }
        return TokenCacheError(.authorizationFailed, "The token endpoint refused the \(what) (\(code)); nothing was saved.",
                               hint: "Start the sign-in again; if it keeps failing, check the app registration (client ID, redirect URI, public client flows)",
                               server: details)
    }
}
