import FoundationEssentials
import TokenCacheCore
import TokenCacheDBus
import TokenCachePipeline

/// The identity broker on the session bus (`com.microsoft.identity.broker1`), asked as Microsoft's
/// own runtime (MSALRuntime 0.20.7, behind MSAL Python, .NET and Node) asks it, request for
/// request as measured on a private bus (docs/BROKER.md): each method takes a protocol
/// version, a correlation ID and a request in JSON, and answers JSON (docs/BROKER.md has every
/// shape). Microsoft's broker (`microsoft-identity-broker`, on Intune-enrolled machines) holds
/// its accounts and device-bound tokens itself: nothing it answers is saved in this cache, and
/// no refresh token ever crosses the bus.
///
/// Blocking calls, each bounded: the engine runs them off the cooperative pool.
package final class BrokerClient: Sendable {
    private typealias Key = BrokerWire.Key

    /// Who answers on the name.
    package enum Owner: Sendable, Equatable {
        /// Another broker (Microsoft's), with the version it reports.
        case broker(version: String)
        /// `tokencache broker`: the same cache this process reads.
        case ourProvider
    }

    private let connection: SessionBusStrings
    /// Bound on one silent call (the broker may refresh over the network).
    let timeoutMilliseconds: Int32

    private init(connection: SessionBusStrings, timeoutMilliseconds: Int32) {
        self.connection = connection
        self.timeoutMilliseconds = timeoutMilliseconds
    }

    /// A client on the session bus, without asking anything yet.
    /// - Throws: `noSessionBus` (reason `TokenCacheError.Reason.brokerUnavailable(name:)`).
    package static func onSessionBus(timeoutSeconds: Double = 60) throws(TokenCacheError) -> BrokerClient {
        let bus: SessionBusStrings
        do { bus = try SessionBusStrings.connect() } catch {
            throw TokenCacheError(.noSessionBus, "No D-Bus session bus (\(error.message)): the identity broker cannot be asked.",
                                  hint: "Run it inside the desktop session, or use this cache instead of the broker",
                                  reason: .brokerUnavailable(name: BrokerWire.busName))
        }
        return BrokerClient(connection: bus, timeoutMilliseconds: Int32(max(1, min(timeoutSeconds * 1000, Double(Int32.max)))))
    }

    // MARK: The methods

    /// Who owns the broker's name (a service file may start it), or nil when nobody answers.
    package func owner() throws(TokenCacheError) -> Owner? {
        let reply: JSONObject
        do {
            reply = try call(.getLinuxBrokerVersion, BrokerWire.versionRequest)
        } catch where error.reason == .brokerUnavailable(name: BrokerWire.busName) {
            return nil
        }
        if reply[Key.provider]?.stringValue == BrokerWire.providerName { return .ourProvider }
        return .broker(version: reply[Key.linuxBrokerVersion]?.stringValue ?? "unknown")
    }

    /// The accounts the broker lets `clientID` use, each kept whole to be handed back.
    package func accounts(clientID: ClientID) throws(TokenCacheError) -> [BrokerAccount] {
        let reply = try call(.getAccounts, BrokerWire.accountsRequest(clientID: clientID))
        guard case .array(let list)? = reply[Key.accounts] else { return [] }
        return list.compactMap { value in
            guard case .object(let object) = value else { return nil }
            return BrokerAccount(object)
        }
    }

    /// An access token for `account` without user interaction: the broker's cache, or its refresh.
    /// - Throws: `interactionRequired` or `serverError` (reason `TokenCacheError.Reason.brokerRefused(status:code:)`).
    package func token(clientID: ClientID, authority: Authority, scopes: [String], account: BrokerAccount,
                       claims: String?) throws(TokenCacheError) -> TokenResult {
        let reply = try call(.acquireTokenSilently, BrokerWire.silentTokenRequest(
            clientID: clientID, authority: authority.url.absoluteString, scopes: scopes, account: account.object,
            username: account.username, claims: claims))
        return try Self.tokenResult(reply, account: account)
    }

    /// Signs `account` out of `clientID` at the broker.
    package func removeAccount(clientID: ClientID, account: BrokerAccount) throws(TokenCacheError) {
        _ = try call(.removeAccount, BrokerWire.removeAccountRequest(clientID: clientID, account: account.object))
    }

    // MARK: Replies

    /// A `brokerTokenResponse` as a result, or the broker's error as a typed one.
    static func tokenResult(_ reply: JSONObject, account: BrokerAccount) throws(TokenCacheError) -> TokenResult {
        guard case .object(let response)? = reply[Key.brokerTokenResponse],
              let accessToken = response[Key.accessToken]?.stringValue, !accessToken.isEmpty,
              let expiresOnMilliseconds = response[Key.expiresOn]?.secondsValue else {
            throw TokenCacheError(.invalidTokenResponse, "The identity broker answered without an access token.",
                                  hint: "Update the broker, or report its version (tokencache doctor)",
                                  reason: .brokerRefused(status: -1, code: nil))
        }
        let replied = (response[Key.account]).flatMap { value -> BrokerAccount? in
            guard case .object(let object) = value else { return nil }
            return BrokerAccount(object)
        } ?? account
        let scopes = (response[Key.grantedScopes]?.stringValue ?? "").split(separator: " ").map(String.init)
        let scheme = response[Key.accessTokenType].flatMap { value -> String? in
            if case .integer(let type) = value { return type == 0 ? "Bearer" : "pop" }
            return nil
        } ?? "Bearer"
        return TokenResult(accessToken: accessToken, authenticationScheme: scheme,
                           expiresOn: Date(timeIntervalSince1970: expiresOnMilliseconds / 1000), refreshOn: nil,
                           tenantID: replied.realm, scopes: scopes, account: replied.cachedAccount, cachedAt: nil,
                           idToken: response[Key.idToken]?.stringValue, isFromCache: false)
    }

    /// The broker's error object (`{"error": {"status": …}}`) as a typed error.
    static func brokerError(_ error: JSONObject) -> TokenCacheError {
        let status: Int = if case .integer(let value)? = error[Key.status] { Int(value) } else { -1 }
        let code: String? = switch error[Key.errorCode] {
        case .integer(let value)?: String(value)
        case .string(let value)?: value
        default: nil
        }
        let context = error[Key.context]?.stringValue.map { ": " + String($0.prefix(200)) } ?? ""
        // The runtime's ResponseStatus (BrokerWire.Status, docs/BROKER.md): InteractionRequired and
        // AccountUnusable send MSAL to an interactive sign-in; NoNetwork and the two temporarily
        // unavailable statuses are the network's, not the user's (signing in again would not help).
        let needsUser = [BrokerWire.Status.interactionRequired, .accountUnusable].map(\.rawValue).contains(status)
        let network = [BrokerWire.Status.noNetwork, .networkTemporarilyUnavailable, .serverTemporarilyUnavailable].map(\.rawValue).contains(status)
        return TokenCacheError(needsUser ? .interactionRequired : network ? .network : .serverError,
                               "The identity broker refused the request (status \(status)\(code.map { ", error \($0)" } ?? ""))\(context).",
                               hint: needsUser ? "Sign in interactively through the broker"
                                   : network ? "Check the network connection, then try again" : "Try again, or see the broker's log",
                               reason: .brokerRefused(status: status, code: code))
    }

    // MARK: The bus

    /// One method call: `(s protocolVersion, s correlationId, s request) -> (s reply)`. A reply
    /// with an `error` member is thrown as the broker's error.
    func call(_ method: BrokerWire.Method, _ request: JSONObject) throws(TokenCacheError) -> JSONObject {
        let body: String
        do { body = String(decoding: try JSON.encode(request), as: UTF8.self) } catch {
            throw TokenCacheError(.invalidArgument, "The broker request could not be written as JSON.")
        }
        let correlationID = UUID().uuidString.lowercased()
        let replyText: String
        do {
            replyText = try connection.call(busName: BrokerWire.busName, path: BrokerWire.objectPath, interface: BrokerWire.interfaceName,
                                            method: method.rawValue, strings: [BrokerWire.protocolVersion, correlationID, body],
                                            timeoutMilliseconds: timeoutMilliseconds)
        } catch {
            throw Self.busError(error, method: method)
        }
        let reply: JSONObject
        do { reply = try JSON.decodeObject(Data(replyText.utf8)) } catch {
            throw TokenCacheError(.invalidTokenResponse, "The identity broker's answer to \(method) is not a JSON object.",
                                  hint: "Update the broker, or report its version (tokencache doctor)",
                                  reason: .brokerRefused(status: -1, code: nil))
        }
        if case .object(let error)? = reply[Key.error] { throw Self.brokerError(error) }
        return reply
    }
}

/// An account as the broker describes it (`homeAccountId`, `environment`, `realm`, `username`,
/// `localAccountId`, …), kept whole: the broker wants it back as it gave it.
package struct BrokerAccount: Sendable, Hashable {
    package let object: JSONObject
    package var homeAccountID: String { object[BrokerWire.Key.homeAccountID]?.stringValue ?? "" }
    package var environment: String { object[BrokerWire.Key.environment]?.stringValue ?? "" }
    package var username: String { object[BrokerWire.Key.username]?.stringValue ?? "" }
    package var realm: String? { object[BrokerWire.Key.realm]?.stringValue }

    init?(_ object: JSONObject) {
        guard let home = object[BrokerWire.Key.homeAccountID]?.stringValue, !home.isEmpty else { return nil }
        self.object = object
    }

    /// The account as this library's accounts are, for the engine's choice and for callers.
    package var cachedAccount: CachedAccount {
        CachedAccount(homeAccountID: homeAccountID, environment: environment, username: username)
    }
}

extension BrokerClient {
    /// A failed bus call as a typed error: nobody owns the name, no answer in time, or the broker failed.
    static func busError(_ failure: SessionBusStrings.Failure, method: BrokerWire.Method) -> TokenCacheError {
        switch failure.remote {
        case "org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.NameHasNoOwner":
            TokenCacheError(.backendUnavailable, "No identity broker answers on the session bus (\(BrokerWire.busName)).",
                            hint: "Install and enrol Microsoft's identity broker, start `tokencache broker`, or use this cache without the broker",
                            reason: .brokerUnavailable(name: BrokerWire.busName))
        case "org.freedesktop.DBus.Error.NoReply", "org.freedesktop.DBus.Error.Timeout":
            TokenCacheError(.timedOut, "The identity broker did not answer \(method) in time.",
                            hint: "Try again; see the broker's log", reason: .brokerRefused(status: -1, code: nil))
        default:
            TokenCacheError(.serverError, "The identity broker failed \(method): \(failure.message)",
                            hint: "See the broker's log", reason: .brokerRefused(status: -1, code: failure.remote))
        }
    }
}
