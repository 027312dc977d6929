import FoundationEssentials
import TokenCacheCore

/// The identity broker's session-bus protocol (`com.microsoft.identity.Broker1`, as Microsoft's
/// runtime `msalruntime` speaks it; docs/BROKER.md): every method takes a protocol version, a
/// correlation ID and a request in JSON, and answers JSON. This is the request parser and the
/// reply writer; the server (`tokencache broker`) and a client share it. Pure: no bus, no store.
package enum BrokerProtocol {
    package static let busName = "com.microsoft.identity.broker1"
    package static let objectPath = "/com/microsoft/identity/broker1"
    package static let interfaceName = "com.microsoft.identity.Broker1"

    /// A request larger than this is refused before it is parsed: real ones are a few kilobytes.
    package static let maximumRequestBytes = 64 * 1024
    /// At most this many scopes, and this many bytes in any one string of a request.
    package static let maximumScopes = 64
    package static let maximumStringBytes = 8 * 1024

    /// The interface's methods, each `(s protocolVersion, s correlationId, s requestJson) -> s`.
    package enum Method: String, CaseIterable, Sendable {
        case acquireTokenInteractively, acquireTokenSilently, getAccounts, removeAccount
        case acquirePrtSsoCookie, generateSignedHttpRequest, cancelInteractiveFlow, getLinuxBrokerVersion
    }

    /// msalruntime's `ResponseStatus`, the `status` of an error reply: what the runtime (and MSAL
    /// above it) does next depends on it — 2 sends the app to interactive sign-in.
    package enum Status: Int, Sendable {
        case unexpected = 0
        case interactionRequired = 2
        case apiContractViolation = 6
        case userCanceled = 7
        case incorrectConfiguration = 9
        case accountUnusable = 13
    }

    /// Why a request was refused before anything was looked up: the field at fault and what is
    /// wrong with it. Its reply is status ``Status/apiContractViolation``.
    package struct RequestError: Error, Sendable, Equatable {
        package var field: String?
        package var problem: String
        package init(_ field: String?, _ problem: String) { (self.field, self.problem) = (field, problem) }
        package var message: String { field.map { "Request field '\($0)' \(problem)." } ?? "The request \(problem)." }
    }

    /// An account as a request names it (`authParameters.account`, or `account` at the top).
    package struct AccountReference: Sendable, Equatable {
        package var homeAccountID: String?
        package var username: String?
        package var environment: String?
        /// The name the store looks it up by: the home account ID, else the username.
        package var name: String? { homeAccountID ?? username }
    }

    /// A request, as far as this broker reads it; fields it does not use are ignored, fields it
    /// uses must have their JSON types.
    package struct Request: Sendable, Equatable {
        package var clientID: String?
        package var scopes: [String] = []
        package var authority: String?
        package var account: AccountReference?
        package var username: String?
        /// `decodedClaims`, when not empty: a claims challenge.
        package var claims: String?
        package var redirectURI: String?

        /// The account named by reference or by username.
        package var accountName: String? { account?.name ?? username.flatMap { $0.isEmpty ? nil : $0 } }
    }

    /// Parses `json` as a request of `method`: size, UTF-8, a JSON object, the fields `method`
    /// needs with their types. Never traps.
    package static func parse(_ json: String, method: Method) throws(RequestError) -> Request {
        let bytes = json.utf8.count
        guard bytes <= maximumRequestBytes else {
            throw RequestError(nil, "is \(bytes) bytes, over the broker's limit of \(maximumRequestBytes)")
        }
        let object: JSONObject
        do {
            object = try JSON.decodeObject(Data(json.utf8))
        } catch {
            throw RequestError(nil, "is not a JSON object")
        }
        var request = Request()
        switch method {
        case .getAccounts:
            request.clientID = try requiredString(object, "clientId")
            request.redirectURI = try string(object, "redirectUri")
        case .removeAccount:
            request.clientID = try requiredString(object, "clientId")
            request.account = try account(object, "account")
            guard request.account?.name != nil else { throw RequestError("account", "must name the account (homeAccountId or username)") }
        case .acquireTokenSilently, .acquireTokenInteractively:
            guard case .object(let parameters)? = object["authParameters"] else {
                throw RequestError("authParameters", object["authParameters"] == nil ? "is missing" : "must be an object")
            }
            request.clientID = try requiredString(parameters, "clientId", prefix: "authParameters.")
            request.scopes = try scopes(parameters)
            request.authority = try string(parameters, "authority", prefix: "authParameters.").flatMap { $0.isEmpty ? nil : $0 }
            let top = try account(object, "account")  // Edge and browsers put it at the top
            request.account = try account(parameters, "account", prefix: "authParameters.") ?? top
            request.username = try string(parameters, "username", prefix: "authParameters.")
            request.claims = try string(parameters, "decodedClaims", prefix: "authParameters.").flatMap { $0.isEmpty ? nil : $0 }
            request.redirectURI = try string(parameters, "redirectUri", prefix: "authParameters.")
            if method == .acquireTokenSilently, request.scopes.isEmpty {
                throw RequestError("authParameters.requestedScopes", "must name at least one scope")
            }
        case .getLinuxBrokerVersion, .acquirePrtSsoCookie, .generateSignedHttpRequest, .cancelInteractiveFlow:
            break
        }
        return request
    }

    private static func checked(_ value: String, _ field: String) throws(RequestError) -> String {
        guard value.utf8.count <= maximumStringBytes else { throw RequestError(field, "is longer than \(maximumStringBytes) bytes") }
        guard !value.unicodeScalars.contains(where: { $0.value < 0x20 }) else { throw RequestError(field, "contains control characters") }
        return value
    }

    private static func string(_ object: JSONObject, _ key: String, prefix: String = "") throws(RequestError) -> String? {
        switch object[key] {
        case nil, .null?: return nil
        case .string(let value)?: return try checked(value, prefix + key)
        default: throw RequestError(prefix + key, "must be a string")
        }
    }

    private static func requiredString(_ object: JSONObject, _ key: String, prefix: String = "") throws(RequestError) -> String {
        guard let value = try string(object, key, prefix: prefix) else { throw RequestError(prefix + key, "is missing") }
        guard !value.isEmpty else { throw RequestError(prefix + key, "is empty") }
        return value
    }

    private static func scopes(_ parameters: JSONObject) throws(RequestError) -> [String] {
        let field = "authParameters.requestedScopes"
        switch parameters["requestedScopes"] {
        case nil, .null?: return []
        case .array(let values)?:
            guard values.count <= maximumScopes else { throw RequestError(field, "names more than \(maximumScopes) scopes") }
            var scopes: [String] = []
            for value in values {
                guard case .string(let scope) = value else { throw RequestError(field, "must be an array of strings") }
                let checked = try checked(scope, field)
                guard !checked.isEmpty, !checked.contains(" ") else { throw RequestError(field, "holds an empty scope or one with a space") }
                scopes.append(checked)
            }
            return scopes
        default: throw RequestError(field, "must be an array of strings")
        }
    }

    private static func account(_ object: JSONObject, _ key: String, prefix: String = "") throws(RequestError) -> AccountReference? {
        switch object[key] {
        case nil, .null?: return nil
        case .object(let fields)?:
            let field = prefix + key + "."
            let reference = AccountReference(homeAccountID: try string(fields, "homeAccountId", prefix: field).flatMap { $0.isEmpty ? nil : $0 },
                                             username: try string(fields, "username", prefix: field).flatMap { $0.isEmpty ? nil : $0 },
                                             environment: try string(fields, "environment", prefix: field))
            return reference.name == nil ? nil : reference
        default: throw RequestError(prefix + key, "must be an object")
        }
    }

    // MARK: Replies

    /// An error reply: `{"error": {"status": <ResponseStatus>, "errorCode", "protocolError",
    /// "context", "tag", "tokencacheCode"}}`; `context` is the message and hint (no secrets).
    package static func errorReply(_ status: Status, code: String, context: String) -> String {
        let error: JSONObject = [
            "status": .integer(Int64(status.rawValue)), "errorCode": .integer(0), "tag": .integer(0),
            "protocolError": "", "context": .string(context), "tokencacheCode": .string(code),
        ]
        return write(["error": .object(error)])
    }

    /// The error reply of a refused request.
    package static func errorReply(_ error: RequestError) -> String {
        errorReply(.apiContractViolation, code: "invalidRequest", context: error.message)
    }

    /// The error reply of a failed one: no account or no usable token asks for interaction.
    package static func errorReply(_ error: TokenCacheError, refused: Bool = false) -> String {
        let status: Status = switch error.code {
        case _ where refused || error.code == .accessDenied: .incorrectConfiguration
        case .unsupportedFlow: .incorrectConfiguration
        case .notFound, .ambiguousAccount, .interactionRequired: .interactionRequired
        case .invalidArgument: .apiContractViolation
        case .network, .timedOut: .unexpected
        default: error.server != nil ? .interactionRequired : .unexpected
        }
        return errorReply(status, code: error.code.description, context: error.message + (error.hint.map { " \($0)." } ?? ""))
    }

    /// An account as the runtime reads it (`getAccounts`' entries and a token reply's `account`).
    package static func accountJSON(_ account: CachedAccount) -> JSONValue {
        var object: JSONObject = [
            "environment": .string(account.environment), "homeAccountId": .string(account.homeAccountID),
            "localAccountId": .string(account.localAccountID), "realm": .string(account.homeTenantID ?? account.tenants.first ?? ""),
            "username": .string(account.username), "passwordExpiry": .integer(0),
        ]
        if let info = clientInfo(account.homeAccountID) { object["clientInfo"] = .string(info) }
        if let name = account.claims?.name { object["name"] = .string(name) }
        if let given = account.claims?.givenName { object["givenName"] = .string(given) }
        return .object(object)
    }

    /// `{"accounts": [...]}`.
    package static func accountsReply(_ accounts: [CachedAccount]) -> String {
        write(["accounts": .array(accounts.map(accountJSON))])
    }

    /// `{"brokerTokenResponse": {...}}`: the access token, its type (0, Bearer), expiry in
    /// milliseconds, the granted scopes, the account, its client_info and ID token. Never a
    /// refresh token: the result carries none.
    package static func tokenReply(_ result: TokenResult, account: CachedAccount) -> String {
        let expires = Int64(result.expiresOn.timeIntervalSince1970 * 1000)
        var response: JSONObject = [
            "accessToken": .string(result.accessToken),
            "accessTokenType": .integer(ASCII.equalsIgnoringCase(result.authenticationScheme, "pop") ? 1 : 0),
            "account": accountJSON(result.account ?? account),
            "expiresOn": .integer(expires), "extendedExpiresOn": .integer(expires),
            "grantedScopes": .string(result.scopes.joined(separator: " ")),
            "idToken": .string(result.idToken ?? ""),
        ]
        if let info = clientInfo(account.homeAccountID) { response["clientInfo"] = .string(info) }
        return write(["brokerTokenResponse": .object(response)])
    }

    /// client_info rebuilt from a home account ID `<uid>.<utid>` (base64url JSON), as MSAL keys accounts by it.
    static func clientInfo(_ homeAccountID: String) -> String? {
        let parts = homeAccountID.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, let data = try? JSON.encode(["uid": .string(String(parts[0])), "utid": .string(String(parts[1]))]) else { return nil }
        return Base64URL.encode(data)
    }

    /// Who answers `getLinuxBrokerVersion` when it is tokencache (`provider`; the runtime reads
    /// only `linuxBrokerVersion`): a broker client never asks its own cache through the bus.
    package static let providerName = "swift-tokencache"

    /// `{"linuxBrokerVersion": ..., "provider": "swift-tokencache"}`.
    package static func versionReply(_ version: String) -> String {
        write(["linuxBrokerVersion": .string(version), "provider": .string(providerName)])
    }

    package static func write(_ object: JSONObject) -> String {
        // Only strings and integers are written: encoding cannot fail.
        String(decoding: (try? JSON.encode(object)) ?? Data("{}".utf8), as: UTF8.self)
    }
}
