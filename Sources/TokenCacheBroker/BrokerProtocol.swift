import FoundationEssentials
import TokenCache
import TokenCacheCore

/// The provider's side of the identity broker's protocol (``BrokerWire``): the request parser
/// (untrusted JSON from any process on the bus) and the error replies the server's refusals and
/// failures become. Pure: no bus, no store.
package enum BrokerProtocol {
    private typealias Key = BrokerWire.Key

    /// A request larger than this is refused before it is parsed: real ones are a few kilobytes.
    package static let maximumRequestBytes = 64 * 1024
    /// At most this many scopes, and this many bytes in any one string of a request.
    package static let maximumScopes = 64
    package static let maximumStringBytes = 8 * 1024

    /// Why a request was refused before anything was looked up: the field at fault and what is
    /// wrong with it. Its reply is status ``BrokerWire/Status/apiContractViolation``.
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
    package static func parse(_ json: String, method: BrokerWire.Method) throws(RequestError) -> Request {
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
            request.clientID = try requiredString(object, Key.clientID)
            request.redirectURI = try string(object, Key.redirectURI)
        case .removeAccount:
            request.clientID = try requiredString(object, Key.clientID)
            request.account = try account(object, Key.account)
            guard request.account?.name != nil else { throw RequestError(Key.account, "must name the account (homeAccountId or username)") }
        case .acquireTokenSilently, .acquireTokenInteractively:
            guard case .object(let parameters)? = object[Key.authParameters] else {
                throw RequestError(Key.authParameters, object[Key.authParameters] == nil ? "is missing" : "must be an object")
            }
            request.clientID = try requiredString(parameters, Key.clientID, prefix: "authParameters.")
            request.scopes = try scopes(parameters)
            request.authority = try string(parameters, Key.authority, prefix: "authParameters.").flatMap { $0.isEmpty ? nil : $0 }
            let top = try account(object, Key.account)  // Edge and browsers put it at the top
            request.account = try account(parameters, Key.account, prefix: "authParameters.") ?? top
            request.username = try string(parameters, Key.username, prefix: "authParameters.")
            request.claims = try string(parameters, Key.decodedClaims, prefix: "authParameters.").flatMap { $0.isEmpty ? nil : $0 }
            request.redirectURI = try string(parameters, Key.redirectURI, prefix: "authParameters.")
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
        switch parameters[Key.requestedScopes] {
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
            let reference = AccountReference(homeAccountID: try string(fields, Key.homeAccountID, prefix: field).flatMap { $0.isEmpty ? nil : $0 },
                                             username: try string(fields, Key.username, prefix: field).flatMap { $0.isEmpty ? nil : $0 },
                                             environment: try string(fields, Key.environment, prefix: field))
            return reference.name == nil ? nil : reference
        default: throw RequestError(prefix + key, "must be an object")
        }
    }

    // MARK: Replies

    /// The error reply of a refused request.
    package static func errorReply(_ error: RequestError) -> String {
        BrokerWire.errorReply(.apiContractViolation, code: "invalidRequest", context: error.message)
    }

    /// The error reply of a failed one: no account or no usable token asks for interaction.
    package static func errorReply(_ error: TokenCacheError, refused: Bool = false) -> String {
        let status: BrokerWire.Status = switch error.code {
        case _ where refused || error.code == .accessDenied: .incorrectConfiguration
        case .unsupportedFlow: .incorrectConfiguration
        case .notFound, .ambiguousAccount, .interactionRequired: .interactionRequired
        case .invalidArgument: .apiContractViolation
        case .network, .timedOut: .unexpected
        default: error.server != nil ? .interactionRequired : .unexpected
        }
        return BrokerWire.errorReply(status, code: error.code.description, context: error.message + (error.hint.map { " \($0)." } ?? ""))
    }
}
