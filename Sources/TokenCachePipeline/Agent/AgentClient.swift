#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import CLinux
import FoundationEssentials
import TokenCacheCore

/// A client of a token agent (`tokencache agent`), found through `TOKENCACHE_AGENT_SOCK`: asks
/// for access tokens and the group's inventory over the agent's socket. Calls block; make them
/// off the cooperative pool.
///
/// Before sending anything it checks that the agent is the user's own (``AgentTrust``): a socket
/// another user could have put there, or whose listener runs as another user, is refused with
/// `agentUnavailable` (reason `agentUntrusted`), and nothing of the request leaves the process.
package struct AgentClient: Sendable {
    /// The environment variable naming the agent's socket.
    package static let environmentVariable = "TOKENCACHE_AGENT_SOCK"
    /// The environment variable naming one more user ID whose agent is trusted (a container whose
    /// user differs from the host's, with the host agent's socket mounted in).
    package static let trustedUIDVariable = "TOKENCACHE_AGENT_UID"
    /// Bound on each request, in seconds (the agent may refresh at the token endpoint meanwhile).
    package static let timeoutSeconds = 90

    /// The socket's path.
    package let path: String
    /// The user IDs whose agent is trusted: this process's real user, and the one
    /// `TOKENCACHE_AGENT_UID` names.
    package let trustedUIDs: Set<UInt32>

    /// The group every request names (the token keeper's, for a group the caller named); nil for
    /// a token agent, which serves one group.
    package let group: String?

    /// Whether it is the token keeper, which redeems an app's sign-in itself (its refresh token
    /// stays there: ``redeem(_:)``); a token agent does not, and an app signs in locally beside it.
    package let isKeeper: Bool

    package init(path: String, trustedUIDs: Set<UInt32> = AgentClient.trustedUIDsFromEnvironment, group: String? = nil, isKeeper: Bool = false) {
        self.path = path
        self.trustedUIDs = trustedUIDs
        self.group = group
        self.isKeeper = isKeeper
    }

    /// The agent `TOKENCACHE_AGENT_SOCK` names, when it is set and not empty. Read with
    /// `secure_getenv`: a setuid or setgid program ignores it.
    package static var fromEnvironment: AgentClient? {
        guard let value = tc_secure_getenv(environmentVariable), case let path = String(cString: value), !path.isEmpty else { return nil }
        return AgentClient(path: path)
    }

    /// This user, and the user `TOKENCACHE_AGENT_UID` names (read with `secure_getenv`).
    package static var trustedUIDsFromEnvironment: Set<UInt32> {
        var uids: Set<UInt32> = [getuid()]
        if let value = tc_secure_getenv(trustedUIDVariable), let uid = UInt32(String(cString: value)) { uids.insert(uid) }
        return uids
    }

    /// Sends one request and returns the agent's answer, or throws its error.
    /// - Throws: `agentUnavailable` with reason `agentUntrusted` when the socket or its listener
    ///   may be another user's: nothing was sent.
    package func send(_ request: AgentProtocol.Request) throws(TokenCacheError) -> AgentProtocol.Response {
        try exchange(request)
    }

    /// Sends one message of the protocol's framing (a request, or a token keeper's `enroll`) and
    /// returns the answer, or throws its error, after the same trust checks as ``send(_:)``.
    package func exchange(_ request: some Encodable) throws(TokenCacheError) -> AgentProtocol.Response {
        try roundTrip(request).response
    }

    /// Sends `request` as ``exchange(_:)`` does (the same trust checks, framing and thrown
    /// error) and returns the answer's bytes, for answers with fields the agent's `Response` has not
    /// (the token keeper's `export`).
    package func exchangeMessage(_ request: some Encodable) throws(TokenCacheError) -> Data {
        try roundTrip(request).message
    }

    /// Sends `request` as ``exchange(_:)`` does, for an answer that comes in two: a device code
    /// sign-in the token keeper runs. `onDeviceCode` gets the first (what to show the user, on the
    /// calling thread); the call then waits for the token as long as the code lives, and ends when
    /// `isCancelled` says so (closing the connection, which stops the keeper's polling).
    package func exchange(_ request: some Encodable, onDeviceCode: (AgentProtocol.DeviceCode) -> Void,
                          isCancelled: @escaping @Sendable () -> Bool) throws(TokenCacheError) -> AgentProtocol.Response {
        try roundTrip(request, takesDeviceCode: true, onDeviceCode: onDeviceCode, isCancelled: isCancelled).response
    }

    private func roundTrip(_ request: some Encodable, takesDeviceCode: Bool = false, onDeviceCode: (AgentProtocol.DeviceCode) -> Void = { _ in },
                           isCancelled: @escaping @Sendable () -> Bool = { false }) throws(TokenCacheError) -> (response: AgentProtocol.Response, message: Data) {
        try AgentTrust.checkPath(path, trusting: trustedUIDs)
        let socket = try UnixSocket.connect(path)
        try AgentTrust.checkPeer(of: socket, at: path, trusting: trustedUIDs)
        socket.setTimeouts(seconds: Self.timeoutSeconds)
        guard socket.write(all: AgentProtocol.encode(request)) else { throw closed() }
        // Set by a device code's first answer: the keeper answers by the code's expiry (this bound is for a keeper that stopped).
        var giveUp: ContinuousClock.Instant?
        while true {
            if let giveUp {
                // Waiting for the user: a second at a time, to hear the caller's cancellation.
                while !socket.waitReadable(milliseconds: 1000) {
                    if isCancelled() { throw TokenCacheError(.cancelled, "The device code sign-in was cancelled; nothing was saved.", hint: "Start the sign-in again when the user is ready") }
                    if ContinuousClock.now > giveUp {
                        throw TokenCacheError(.timedOut, "The token keeper at \(path) did not answer by the device code's expiry; nothing was saved here.",
                                              hint: "Start the sign-in again; if it repeats, check the keeper's journal", reason: .deviceCodeTimedOut)
                    }
                }
            }
            guard let message = AgentProtocol.readMessage(from: socket) else { throw closed() }
            guard let response = try? JSONDecoder().decode(AgentProtocol.Response.self, from: message) else {
                throw TokenCacheError(.agentUnavailable, "The token agent at \(path) answered outside protocol version \(AgentProtocol.version).",
                                      hint: "Use a tokencache of the same release on both sides", reason: .agentProtocol(path: path))
            }
            if let failure = response.error { throw AgentTrust.asAgentsAnswer(failure.error, path: path) }
            if takesDeviceCode, giveUp == nil, let code = response.deviceCode, response.token == nil {
                onDeviceCode(code)
                let lifetime = max(code.expiresOn - Int64(Date().timeIntervalSince1970), 0) + Int64(Self.timeoutSeconds)
                giveUp = ContinuousClock.now + .seconds(lifetime)
                continue
            }
            return (response, message)
        }
    }

    private func closed() -> TokenCacheError {
        TokenCacheError(.agentUnavailable, "The token agent at \(path) closed the connection without an answer.",
                        hint: "Check that it still runs (its terminal or log says why)", reason: .agentProtocol(path: path))
    }

    /// An access token from the agent; with `claims` (a claims challenge) it refreshes, carrying them.
    package func token(clientID: ClientID, scopes: [String], account: String? = nil, authority: String? = nil,
                       forceRefresh: Bool = false, claims: String? = nil,
                       clientCapabilities: [String] = []) throws(TokenCacheError) -> AgentProtocol.Token {
        let response = try send(AgentProtocol.Request(operation: .token, clientID: clientID.value, scopes: scopes, account: account,
                                                      authority: authority, forceRefresh: forceRefresh ? true : nil, claims: claims,
                                                      clientCapabilities: clientCapabilities.isEmpty ? nil : clientCapabilities, group: group))
        guard let token = response.token else { throw Self.missing("token", path) }
        return token
    }

    /// The agent's group as it lets this user see it (accounts and clients, never secrets).
    package func inventory(clientID: ClientID? = nil, account: String? = nil) throws(TokenCacheError) -> GroupInventory {
        guard let inventory = try send(AgentProtocol.Request(operation: .list, clientID: clientID?.value, account: account, group: group)).inventory else {
            throw Self.missing("inventory", path)
        }
        return inventory
    }

    /// The agent's log of requests, oldest first.
    package func requests() throws(TokenCacheError) -> [AgentProtocol.LoggedRequest] {
        guard let requests = try send(AgentProtocol.Request(operation: .requests)).requests else { throw Self.missing("requests", path) }
        return requests
    }

    private static func missing(_ field: String, _ path: String) -> TokenCacheError {
        TokenCacheError(.agentUnavailable, "The token agent at \(path) answered without the \(field).",
                        hint: "Use a tokencache of the same release on both sides", reason: .agentProtocol(path: path))
    }
}
