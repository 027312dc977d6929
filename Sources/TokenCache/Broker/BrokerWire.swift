import FoundationEssentials
import TokenCacheCore
import TokenCachePipeline

/// The identity broker's session-bus interface (`com.microsoft.identity.Broker1`, as Microsoft's
/// runtime `msalruntime` speaks it; docs/BROKER.md), defined once for both sides: the client
/// (``BrokerClient``, which asks Microsoft's broker) and the provider (`tokencache broker`, whose
/// server and request parser live in the `TokenCacheBroker` module, which apps do not link).
/// Every method takes a protocol version, a correlation ID and a request in JSON, and answers JSON.
/// Pure: no bus, no store.
package enum BrokerWire {
    package static let busName = TokenEngine.brokerBusName
    package static let objectPath = "/com/microsoft/identity/broker1"
    package static let interfaceName = "com.microsoft.identity.Broker1"
    /// The protocol version MSAL's runtime sends; the broker names no lower bound.
    package static let protocolVersion = "0.0"
    /// The redirect URI MSALRuntime sends in a token request's parameters.
    package static let nativeClientRedirectURI = "https://login.microsoftonline.com/common/oauth2/nativeclient"
    /// Who answers `getLinuxBrokerVersion` when it is tokencache (`provider`; the runtime reads
    /// only `linuxBrokerVersion`): a broker client never asks its own cache through the bus.
    package static let providerName = "swift-tokencache"

    /// The interface's methods, each `(s protocolVersion, s correlationId, s requestJson) -> s`.
    package enum Method: String, CaseIterable, Sendable {
        case acquireTokenInteractively, acquireTokenSilently, getAccounts, removeAccount
        case acquirePrtSsoCookie, generateSignedHttpRequest, cancelInteractiveFlow, getLinuxBrokerVersion
    }

    /// msalruntime's `ResponseStatus`, the `status` of an error reply (its index in the runtime's
    /// `Response_Status`, docs/BROKER.md): what the runtime (and MSAL above it) does next depends
    /// on it — 2 and 13 send the app to interactive sign-in.
    package enum Status: Int, Sendable {
        case unexpected = 0
        case interactionRequired = 2
        case noNetwork = 3
        case networkTemporarilyUnavailable = 4
        case serverTemporarilyUnavailable = 5
        case apiContractViolation = 6
        case userCanceled = 7
        case incorrectConfiguration = 9
        case accountUnusable = 13
    }

    /// The members of requests and replies both sides read or write.
    package enum Key {
        // Requests.
        package static let authParameters = "authParameters"
        package static let clientID = "clientId"
        package static let redirectURI = "redirectUri"
        package static let account = "account"
        package static let requestedScopes = "requestedScopes"
        package static let authority = "authority"
        package static let username = "username"
        package static let decodedClaims = "decodedClaims"
        // Accounts.
        package static let homeAccountID = "homeAccountId"
        package static let environment = "environment"
        package static let realm = "realm"
        // Replies.
        package static let accounts = "accounts"
        package static let brokerTokenResponse = "brokerTokenResponse"
        package static let accessToken = "accessToken"
        package static let accessTokenType = "accessTokenType"
        package static let expiresOn = "expiresOn"
        package static let grantedScopes = "grantedScopes"
        package static let idToken = "idToken"
        package static let error = "error"
        package static let status = "status"
        package static let errorCode = "errorCode"
        package static let context = "context"
        package static let linuxBrokerVersion = "linuxBrokerVersion"
        package static let provider = "provider"
    }

    // MARK: Requests (what a client sends)

    /// `getAccounts`' request: MSALRuntime sends the client ID as the redirect URI here.
    package static func accountsRequest(clientID: ClientID) -> JSONObject {
        [Key.clientID: .string(clientID.value), Key.redirectURI: .string(clientID.value)]
    }

    /// `removeAccount`'s request: the account handed back whole, as the broker gave it.
    package static func removeAccountRequest(clientID: ClientID, account: JSONObject) -> JSONObject {
        [Key.account: .object(account), Key.clientID: .string(clientID.value), Key.redirectURI: .string(clientID.value)]
    }

    /// `acquireTokenSilently`'s request: every member MSALRuntime sends, with its values for a
    /// silent request of a public client.
    package static func silentTokenRequest(clientID: ClientID, authority: String, scopes: [String], account: JSONObject,
                                           username: String, claims: String?) -> JSONObject {
        let parameters: JSONObject = [
            "accessTokenToRenew": "",
            Key.account: .object(account),
            "additionalQueryParametersForAuthorization": .object([:]),
            Key.authority: .string(authority),
            "authorizationType": .integer(1),
            Key.clientID: .string(clientID.value),
            Key.decodedClaims: .string(claims ?? ""),
            "enrollmentId": "",
            "isTestMode": .bool(false),
            "password": "",
            "popParams": .null,
            Key.redirectURI: .string(nativeClientRedirectURI),
            Key.requestedScopes: .array(scopes.map(JSONValue.string)),
            Key.username: .string(username),
            "uxContextHandle": .integer(-1),
        ]
        return [Key.authParameters: .object(parameters)]
    }

    /// `getLinuxBrokerVersion`'s request.
    package static let versionRequest: JSONObject = ["msalCppVersion": .string("1.28.0")]

    // MARK: Replies (what a provider answers)

    /// An error reply: `{"error": {"status": <ResponseStatus>, "errorCode", "protocolError",
    /// "context", "tag", "tokencacheCode"}}`; `context` is the message and hint (no secrets).
    package static func errorReply(_ status: Status, code: String, context: String) -> String {
        let error: JSONObject = [
            Key.status: .integer(Int64(status.rawValue)), Key.errorCode: .integer(0), "tag": .integer(0),
            "protocolError": "", Key.context: .string(context), "tokencacheCode": .string(code),
        ]
        return write([Key.error: .object(error)])
    }

    /// An account as the runtime reads it (`getAccounts`' entries and a token reply's `account`).
    package static func accountJSON(_ account: CachedAccount) -> JSONValue {
        var object: JSONObject = [
            Key.environment: .string(account.environment), Key.homeAccountID: .string(account.homeAccountID),
            "localAccountId": .string(account.localAccountID), Key.realm: .string(account.homeTenantID ?? account.tenants.first ?? ""),
            Key.username: .string(account.username), "passwordExpiry": .integer(0),
        ]
        if let info = clientInfo(account.homeAccountID) { object["clientInfo"] = .string(info) }
        if let name = account.claims?.name { object["name"] = .string(name) }
        if let given = account.claims?.givenName { object["givenName"] = .string(given) }
        return .object(object)
    }

    /// `{"accounts": [...]}`.
    package static func accountsReply(_ accounts: [CachedAccount]) -> String {
        write([Key.accounts: .array(accounts.map(accountJSON))])
    }

    /// `{"brokerTokenResponse": {...}}`: the access token, its type (0, Bearer), expiry in
    /// milliseconds, the granted scopes, the account, its client_info and ID token. Never a
    /// refresh token: the result carries none.
    package static func tokenReply(_ result: TokenResult, account: CachedAccount) -> String {
        let expires = Int64(result.expiresOn.timeIntervalSince1970 * 1000)
        var response: JSONObject = [
            Key.accessToken: .string(result.accessToken),
            Key.accessTokenType: .integer(ASCII.equalsIgnoringCase(result.authenticationScheme, "pop") ? 1 : 0),
            Key.account: accountJSON(result.account ?? account),
            Key.expiresOn: .integer(expires), "extendedExpiresOn": .integer(expires),
            Key.grantedScopes: .string(result.scopes.joined(separator: " ")),
            Key.idToken: .string(result.idToken ?? ""),
        ]
        if let info = clientInfo(account.homeAccountID) { response["clientInfo"] = .string(info) }
        return write([Key.brokerTokenResponse: .object(response)])
    }

    /// `{"linuxBrokerVersion": ..., "provider": "swift-tokencache"}`.
    package static func versionReply(_ version: String) -> String {
        write([Key.linuxBrokerVersion: .string(version), Key.provider: .string(providerName)])
    }

    /// client_info rebuilt from a home account ID `<uid>.<utid>` (base64url JSON), as MSAL keys accounts by it.
    static func clientInfo(_ homeAccountID: String) -> String? {
        let parts = homeAccountID.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, let data = try? JSON.encode(["uid": .string(String(parts[0])), "utid": .string(String(parts[1]))]) else { return nil }
        return Base64URL.encode(data)
    }

    package static func write(_ object: JSONObject) -> String {
        // Only strings and integers are written: encoding cannot fail.
        String(decoding: (try? JSON.encode(object)) ?? Data("{}".utf8), as: UTF8.self)
    }
}
