import FoundationEssentials
import TokenCacheCore

/// The token agent's wire protocol, version 1 (docs/AGENT.md): each message is a 4-byte
/// big-endian length followed by that many bytes of one UTF-8 JSON object. A client sends a
/// request and reads one response; it may send more on the same connection.
///
/// Responses carry access tokens only: no type here has a field for a refresh token, a key or a
/// passphrase. The token keeper's answers to the identity broker's forwarded requests add the ID
/// token and the account's details (``Token/idToken``, ``AccountDetails``), which a broker reply
/// must carry: an ID token says who signed in and grants no API access.
package enum AgentProtocol {
    /// The version this side speaks.
    package static let version = 1
    /// The largest message either side accepts.
    package static let maximumMessageBytes = 1 << 20

    /// What a client asks for.
    package struct Request: Codable, Sendable, Hashable {
        package enum Operation: String, Codable, Sendable {
            /// An access token for a client, scopes and (optionally) account and authority.
            case token
            /// The group's accounts and clients, as `tokencache list` shows them (no secrets).
            case list
            /// The agent's log of requests.
            case requests
        }
        package var version = AgentProtocol.version
        package var operation: Operation
        package var clientID: String?
        package var scopes: [String]?
        package var account: String?
        package var authority: String?
        package var forceRefresh: Bool?
        /// A claims challenge (decoded JSON): the agent skips its cached token and refreshes with it.
        package var claims: String?
        /// The caller's client capabilities (`cp1`), merged into `claims` of the agent's refresh.
        package var clientCapabilities: [String]?
        /// Which of the caller's groups the token keeper answers from (a group the caller named and
        /// enrolled); a token agent, which serves one group, is sent none.
        package var group: String?

        package init(operation: Operation, clientID: String? = nil, scopes: [String]? = nil, account: String? = nil,
                     authority: String? = nil, forceRefresh: Bool? = nil, claims: String? = nil, clientCapabilities: [String]? = nil,
                     group: String? = nil) {
            self.group = group
            self.operation = operation
            self.clientID = clientID
            self.scopes = scopes
            self.account = account
            self.authority = authority
            self.forceRefresh = forceRefresh
            self.claims = claims
            self.clientCapabilities = clientCapabilities
        }

        enum CodingKeys: String, CodingKey {
            case version, operation = "op", clientID = "client_id", scopes, account, authority, forceRefresh = "force_refresh",
                 claims, clientCapabilities = "client_capabilities", group
        }
    }

    /// An access token as the agent hands it out.
    package struct Token: Codable, Sendable, Hashable {
        package var accessToken: String
        package var tokenType: String
        /// Seconds since 1970.
        package var expiresOn: Int64
        package var refreshOn: Int64?
        package var tenantID: String?
        package var scopes: [String]
        package var username: String?
        package var homeAccountID: String?
        /// The ID token issued with the token or cached for its account: only in the token keeper's
        /// answer to a forwarded broker request.
        package var idToken: String?
        /// The token's account: only in the token keeper's answer to a forwarded broker request.
        package var account: AccountDetails?

        enum CodingKeys: String, CodingKey {
            case accessToken = "access_token", tokenType = "token_type", expiresOn = "expires_on", refreshOn = "refresh_on"
            case tenantID = "tenant_id", scopes, username, homeAccountID = "home_account_id", idToken = "id_token", account
        }

        package init(_ result: TokenResult) {
            accessToken = result.accessToken
            tokenType = result.authenticationScheme
            expiresOn = Int64(result.expiresOn.timeIntervalSince1970)
            refreshOn = result.refreshOn.map { Int64($0.timeIntervalSince1970) }
            tenantID = result.tenantID
            scopes = result.scopes
            username = result.account?.username
            homeAccountID = result.account?.homeAccountID
        }

        /// The token keeper's answer to a forwarded broker request: with the ID token and the account's details.
        package init(forBroker result: TokenResult, account: CachedAccount) {
            self.init(result)
            idToken = result.idToken
            self.account = AccountDetails(result.account ?? account)
        }

        /// The token as this side's types hold it, of `account` (the keeper's details when it sent them).
        package func result(of account: CachedAccount) -> TokenResult {
            TokenResult(accessToken: accessToken, authenticationScheme: tokenType, expiresOn: Date(timeIntervalSince1970: TimeInterval(expiresOn)),
                        refreshOn: refreshOn.map { Date(timeIntervalSince1970: TimeInterval($0)) }, tenantID: tenantID, scopes: scopes,
                        account: self.account?.cachedAccount ?? account, cachedAt: nil, idToken: idToken)
        }
    }

    /// An account as a broker reply names it (no secret): what the token keeper tells the identity
    /// broker, which answers apps from the keeper's store (``CachedAccount`` on both sides).
    package struct AccountDetails: Codable, Sendable, Hashable {
        package var homeAccountID: String
        package var environment: String
        package var localAccountID: String
        package var tenants: [String]
        package var username: String
        package var name: String?
        package var givenName: String?

        enum CodingKeys: String, CodingKey {
            case homeAccountID = "home_account_id", environment, localAccountID = "local_account_id", tenants, username, name,
                 givenName = "given_name"
        }

        package init(_ account: CachedAccount) {
            (homeAccountID, environment, localAccountID) = (account.homeAccountID, account.environment, account.localAccountID)
            (tenants, username, name, givenName) = (account.tenants, account.username, account.claims?.name, account.claims?.givenName)
        }

        /// The account as this side's types hold it (its claims: the name and given name alone).
        package var cachedAccount: CachedAccount {
            var claims: JSONObject = [:]
            if let name { claims["name"] = .string(name) }
            if let givenName { claims["given_name"] = .string(givenName) }
            return CachedAccount(homeAccountID: homeAccountID, environment: environment, username: username, localAccountID: localAccountID,
                                 tenants: tenants, claims: claims.isEmpty ? nil : IDTokenClaims(claims))
        }
    }

    /// One line of the agent's request log: who asked for what, and what they got (never a token).
    package struct LoggedRequest: Codable, Sendable, Hashable {
        /// Seconds since 1970.
        package var time: Int64
        /// `socket` or `managed-identity`.
        package var channel: String
        package var pid: Int32?
        package var uid: UInt32?
        package var command: String?
        package var operation: String
        package var clientID: String?
        package var scopes: [String]?
        package var account: String?
        /// `granted`, or `refused: …` / `failed: …` with the reason.
        package var outcome: String

        package init(time: Int64, channel: String, pid: Int32?, uid: UInt32?, command: String?, operation: String,
                     clientID: String?, scopes: [String]?, account: String?, outcome: String) {
            (self.time, self.channel, self.pid, self.uid, self.command) = (time, channel, pid, uid, command)
            (self.operation, self.clientID, self.scopes, self.account, self.outcome) = (operation, clientID, scopes, account, outcome)
        }

        enum CodingKeys: String, CodingKey {
            case time, channel, pid, uid, command, operation = "op", clientID = "client_id", scopes, account, outcome
        }
    }

    /// A device code as the user sees it (RFC 8628): the code to enter and where; never the
    /// device code the token endpoint is polled with, which stays with the token keeper.
    package struct DeviceCode: Codable, Sendable, Hashable {
        package var userCode: String
        package var verificationURI: String
        package var verificationURIComplete: String?
        /// Seconds since 1970.
        package var expiresOn: Int64
        package var message: String

        package init(userCode: String, verificationURI: String, verificationURIComplete: String?, expiresOn: Int64, message: String) {
            (self.userCode, self.verificationURI, self.verificationURIComplete) = (userCode, verificationURI, verificationURIComplete)
            (self.expiresOn, self.message) = (expiresOn, message)
        }

        enum CodingKeys: String, CodingKey {
            case userCode = "user_code", verificationURI = "verification_uri", verificationURIComplete = "verification_uri_complete",
                 expiresOn = "expires_on", message
        }
    }

    /// An error as it crosses the socket: the `TokenCacheError` code's name, reason, message and hint.
    package struct Failure: Codable, Sendable, Hashable {
        package var code: String
        package var reason: TokenCacheError.Reason
        package var message: String
        package var hint: String?
        /// The identity provider's error response, when the error is its answer (no token: the
        /// error, its codes, description and claims challenge), so a typed front end (native
        /// authentication's reasons) reads it as it would read the provider's own.
        package var server: ServerError?

        package init(_ error: TokenCacheError) {
            code = error.code.description
            reason = error.reason
            message = error.message
            hint = error.hint
            server = error.server.map(ServerError.init)
        }

        enum CodingKeys: String, CodingKey { case code, reason, message, hint, server }

        package init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            code = try container.decode(String.self, forKey: .code)
            // A reason this side does not know (a newer agent's) is no reason to drop the error.
            reason = (try? container.decodeIfPresent(TokenCacheError.Reason.self, forKey: .reason)) ?? .unspecified
            message = try container.decode(String.self, forKey: .message)
            hint = try container.decodeIfPresent(String.self, forKey: .hint)
            server = try? container.decodeIfPresent(ServerError.self, forKey: .server)
        }

        package var error: TokenCacheError { TokenCacheError(.init(named: code), message, hint: hint, server: server?.details, reason: reason) }
    }

    /// ``ServerErrorDetails`` as they cross the socket.
    package struct ServerError: Codable, Sendable, Hashable {
        package var error: String
        package var suberror: String?
        package var errorDescription: String?
        package var errorCodes: [Int]?
        package var claims: String?
        package var httpStatus: Int
        package var retryAfter: Int?

        package init(_ details: ServerErrorDetails) {
            (error, suberror, errorDescription, errorCodes) = (details.error, details.suberror, details.errorDescription, details.errorCodes)
            (claims, httpStatus, retryAfter) = (details.claims, details.httpStatus, details.retryAfter)
        }

        enum CodingKeys: String, CodingKey {
            case error, suberror, errorDescription = "error_description", errorCodes = "error_codes", claims, httpStatus = "http_status",
                 retryAfter = "retry_after"
        }

        package var details: ServerErrorDetails {
            ServerErrorDetails(error: error, suberror: suberror, errorDescription: errorDescription, errorCodes: errorCodes ?? [], claims: claims,
                               httpStatus: httpStatus, retryAfter: retryAfter)
        }
    }

    /// What the agent answers: `ok` with one of the payloads, or an error.
    package struct Response: Codable, Sendable, Hashable {
        package var version = AgentProtocol.version
        package var ok: Bool
        package var token: Token?
        package var inventory: GroupInventory?
        package var requests: [LoggedRequest]?
        /// A client's accounts: the token keeper's answer to a forwarded broker `getAccounts`.
        package var accounts: [AccountDetails]?
        /// What to show the user of a device code sign-in the token keeper runs: the first of its
        /// two answers (``KeeperDeviceCodeSignIn``); the token follows.
        package var deviceCode: DeviceCode?
        package var error: Failure?

        package init(token: Token? = nil, inventory: GroupInventory? = nil, requests: [LoggedRequest]? = nil, accounts: [AccountDetails]? = nil,
                     deviceCode: DeviceCode? = nil) {
            ok = true
            self.deviceCode = deviceCode
            self.token = token
            self.inventory = inventory
            self.requests = requests
            self.accounts = accounts
        }

        package init(_ error: TokenCacheError) {
            ok = false
            self.error = Failure(error)
        }

        enum CodingKeys: String, CodingKey { case version, ok, token, inventory, requests, accounts, deviceCode = "device_code", error }
    }

    // MARK: Framing

    package static func encode(_ value: some Encodable) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Every type here encodes; a failure would be a programming error.
        let body = Array((try? encoder.encode(value)) ?? Data("{}".utf8))
        let length = UInt32(body.count)
        return [UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)] + body
    }

    /// Reads one message's bytes; nil when the peer closed, timed out, did not send it whole by
    /// `deadline`, or announced a length outside the protocol's bounds.
    package static func readMessage(from socket: SocketDescriptor, by deadline: ReadDeadline? = nil) -> Data? {
        guard let head = socket.read(exactly: 4, by: deadline) else { return nil }
        let length = Int(head[0]) << 24 | Int(head[1]) << 16 | Int(head[2]) << 8 | Int(head[3])
        guard length > 0, length <= maximumMessageBytes, let body = socket.read(exactly: length, by: deadline) else { return nil }
        return Data(body)
    }

    /// The version a message declares (1 when it declares none).
    package struct Versioned: Decodable {
        package var version: Int?
    }
}
