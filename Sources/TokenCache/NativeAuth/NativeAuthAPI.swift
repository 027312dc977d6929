import FoundationEssentials
import TokenCacheCore
import TokenCachePipeline
import Logging

/// The native authentication API (Entra External ID, API V1) of one authority: form POSTs to
/// the authority + path, JSON answers. Token requests go through ``TokenEndpointClient``, so
/// token responses are parsed and saved as every other sign-in's. Each call runs on the calling
/// thread (one that may block: C's, the command line's, the Swift API's one job per step);
/// `isCancelled` stops a request not yet answered and the waits.
struct NativeAuthAPI: Sendable {
    let client: TokenEndpointClient
    let authority: Authority
    let clientID: ClientID
    /// `challenge_type` as sent: the app's methods, and always `redirect`.
    let challengeTypes: String
    /// The clock of the waits: the retry after a 5xx, the password reset's completion polls.
    let clock: any Clock<Duration>

    /// An error envelope (HTTP 400) with the native-auth fields the flows act on.
    struct Envelope: Sendable {
        var details: ServerErrorDetails
        var continuationToken: String?
        var requiredAttributes: [NativeAuthRequiredAttribute]
        var invalidAttributes: [String]

        var error: NativeAuthError { .from(details, invalidAttributes: invalidAttributes) }
    }

    /// What one call answered.
    enum Answer: Sendable {
        case success(JSONObject)
        /// `{"challenge_type": "redirect"}`: fall back to the browser.
        case redirect
        case failure(Envelope)
    }

    /// Calls an endpoint and returns its answer; the continuation token and `challenge_type`
    /// ride in `fields`. A 5xx is retried once after 0.5 s, as MSAL does, and never read as an
    /// auth answer.
    func call(_ path: String, _ fields: [String: String], isCancelled: @escaping @Sendable () -> Bool) throws(NativeAuthError) -> Answer {
        guard let url = URL(string: authority.url.absoluteString + path) else {
            throw NativeAuthError(TokenCacheError.invalidArgument("authority", "gives no URL for \(path)"))
        }
        var form = fields
        form["client_id"] = clientID.value
        var response = try post(form, to: url, isCancelled: isCancelled)
        if response.status >= 500 {
            try sleep(for: .milliseconds(500), isCancelled: isCancelled)
            response = try post(form, to: url, isCancelled: isCancelled)
        }
        client.logger.debug("Native auth step answered", metadata: ["path": .string(path), "status": .stringConvertible(response.status)])
        if response.status >= 500 || response.status == 429 {
            let details = TokenEndpointClient.errorDetails(response)
            throw NativeAuthError(TokenCacheError(.serverError, "The native-auth endpoint \(path) answered \(response.status).",
                                                  hint: "Retry later", server: details))
        }
        let object = (try? JSON.decodeObject(response.body)) ?? [:]
        if response.status == 200 {
            return object["challenge_type"]?.stringValue == "redirect" ? .redirect : .success(object)
        }
        return .failure(Envelope(
            details: TokenEndpointClient.errorDetails(response),
            continuationToken: object["continuation_token"]?.stringValue,
            requiredAttributes: Self.array(object["required_attributes"]).compactMap(NativeAuthRequiredAttribute.init),
            invalidAttributes: Self.array(object["invalid_attributes"]).compactMap { item in
                if case .object(let fields) = item { fields["name"]?.stringValue } else { item.stringValue }
            }))
    }

    /// Calls an endpoint whose only good answer is success: `redirect` is ``NativeAuthError/Reason/browserRequired``,
    /// an error envelope its typed error.
    func step(_ path: String, _ fields: [String: String], isCancelled: @escaping @Sendable () -> Bool) throws(NativeAuthError) -> JSONObject {
        switch try call(path, fields, isCancelled: isCancelled) {
        case .success(let object): return object
        case .redirect: throw .browserRequired
        case .failure(let envelope): throw envelope.error
        }
    }

    /// Redeems a native grant (`oob`, `password`, `continuation_token`) at `/oauth2/v2.0/token`
    /// with the scopes and `client_info`.
    func token(_ grant: [String: String], scopes: [String], isCancelled: @escaping @Sendable () -> Bool) throws(NativeAuthError) -> TokenResponse {
        guard let url = URL(string: authority.url.absoluteString + "/oauth2/v2.0/token") else {
            throw NativeAuthError(TokenCacheError.invalidArgument("authority", "gives no token URL"))
        }
        let outcome: TokenEndpointClient.Outcome
        do {
            outcome = try client.redeemBlocking(grant: grant, clientID: clientID, scopes: scopes, at: url, isMicrosoft: true, cancelled: isCancelled)
        } catch {
            throw NativeAuthError(error)
        }
        switch outcome {
        case .tokens(let response): return response
        case .rejected(let details):
            if let failure = PublicClientApplication.transientFailure(details) { throw NativeAuthError(failure) }
            throw NativeAuthError.from(details)
        }
    }

    private func post(_ form: [String: String], to url: URL, isCancelled: @escaping @Sendable () -> Bool) throws(NativeAuthError) -> HTTPResponse {
        do {
            return try client.postBlocking(form, to: url, what: "The native-auth endpoint", cancelled: isCancelled)
        } catch {
            throw NativeAuthError(error)
        }
    }

    /// Waits on ``clock`` on the calling thread (``Clock/sleepBlocking(for:isCancelled:)``).
    /// - Throws: `cancelled` when `isCancelled` ends it first.
    func sleep(for duration: Duration, isCancelled: @escaping @Sendable () -> Bool) throws(NativeAuthError) {
        guard clock.sleepBlocking(for: duration, isCancelled: isCancelled) else { throw NativeAuthJob.cancelled }
    }

    private static func array(_ value: JSONValue?) -> [JSONValue] {
        if case .array(let items)? = value { items } else { [] }
    }
}

extension JSONObject {
    /// The answer's `continuation_token`, which every step but the last must carry.
    func continuationToken(_ step: String) throws(NativeAuthError) -> String {
        guard let token = self["continuation_token"]?.stringValue, !token.isEmpty else {
            throw NativeAuthError(TokenCacheError.invalidResponse("continuation_token", "is missing from the \(step) answer"))
        }
        return token
    }
}

/// An attribute the sign-up user flow requires, as the server describes it.
public struct NativeAuthRequiredAttribute: Sendable, Hashable {
    /// The attribute's name, for example `displayName` or `extension_<app>_age`.
    public let name: String
    /// Its type, for example `string`.
    public let type: String
    /// Whether it must be given.
    public let isRequired: Bool
    /// The pattern a value must match, when the user flow sets one.
    public let regex: String?

    init?(_ value: JSONValue) {
        guard case .object(let fields) = value, let name = fields["name"]?.stringValue else { return nil }
        self.name = name
        self.type = fields["type"]?.stringValue ?? "string"
        if case .bool(let required)? = fields["required"] { isRequired = required } else { isRequired = true }
        if case .object(let options)? = fields["options"] { regex = options["regex"]?.stringValue } else { regex = nil }
    }
}

/// Runs a native-auth step's blocking body for the async API: one job of the blocking pool,
/// whose task's cancellation stops a request not yet answered and the waits.
enum NativeAuthJob {
    static func run<T: Sendable>(_ work: @escaping @Sendable (_ isCancelled: @escaping @Sendable () -> Bool) throws(NativeAuthError) -> T) async throws(NativeAuthError) -> T {
        let outcome: Result<T, NativeAuthError>
        do throws(TokenCacheError) {
            outcome = try await TokenRedeemer.cancellably { (isCancelled) throws(TokenCacheError) -> Result<T, NativeAuthError> in
                do throws(NativeAuthError) { return .success(try work(isCancelled)) } catch { return .failure(error) }
            }
        } catch {
            throw NativeAuthError(error)
        }
        return try outcome.get()
    }

    static let cancelled = NativeAuthError(TokenCacheError(.cancelled, "The native-auth step was cancelled; nothing was saved.",
                                                           hint: "Take the step again when the user is ready"))
}
