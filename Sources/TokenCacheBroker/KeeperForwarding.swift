import FoundationEssentials
import TokenCache
import TokenCacheAgent
import TokenCacheCore

/// An app's broker call as the identity broker forwards it to the token keeper (#62,
/// docs/KEEPER.md "Through the identity broker"): the keeper identifies the app itself from its
/// pid and start time, trusting the broker only because it is the keeper's own program talking
/// to a genuine bus daemon, and answers with the app's access token, ID token and account, never
/// a refresh token. The pid and start time, not a pidfd, name the app: the broker read the start
/// time while its pidfd pinned the process, and the keeper's socket receives no descriptors.
package struct KeeperForwardRequest: Codable, Sendable, Hashable {
    /// What the app asked.
    package enum Inner: String, Codable, Sendable {
        /// `acquireTokenSilently` (and the cached part of `acquireTokenInteractively`).
        case token
        /// `getAccounts`.
        case accounts
    }

    /// The keeper's operation for a forwarded call.
    package static let operation = "forward"

    package var version = AgentProtocol.version
    package var op = KeeperForwardRequest.operation
    package var inner: Inner
    /// The app's pid, as the bus daemon said it.
    package var appPID: Int32
    /// The app's start time (/proc/PID/stat field 22), read while its pidfd pinned it.
    package var appStarted: UInt64
    package var clientID: String
    package var scopes: [String]?
    /// The account the app named (username or home account ID).
    package var account: String?
    package var authority: String?
    package var claims: String?
    package var clientCapabilities: [String]?
    package var forceRefresh: Bool?

    package init(inner: Inner, appPID: Int32, appStarted: UInt64, clientID: ClientID, scopes: [String]? = nil, account: String? = nil,
                 authority: String? = nil, claims: String? = nil, clientCapabilities: [String]? = nil, forceRefresh: Bool? = nil) {
        (self.inner, self.appPID, self.appStarted, self.clientID, self.scopes) = (inner, appPID, appStarted, clientID.value, scopes)
        (self.account, self.authority, self.claims, self.clientCapabilities, self.forceRefresh) = (account, authority, claims, clientCapabilities, forceRefresh)
    }

    enum CodingKeys: String, CodingKey {
        case version, op, inner, appPID = "app_pid", appStarted = "app_started", clientID = "client_id", scopes, account, authority, claims,
             clientCapabilities = "client_capabilities", forceRefresh = "force_refresh"
    }

    /// The app's request as the keeper's token answer takes it.
    package var tokenRequest: AgentProtocol.Request {
        AgentProtocol.Request(operation: .token, clientID: clientID, scopes: scopes, account: account, authority: authority,
                              forceRefresh: forceRefresh, claims: claims, clientCapabilities: clientCapabilities)
    }
}
