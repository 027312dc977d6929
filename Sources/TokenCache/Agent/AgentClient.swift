#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import FoundationEssentials
import TokenCacheCore

/// A client of a token agent (`tokencache agent`), found through `TOKENCACHE_AGENT_SOCK`: asks
/// for access tokens and the group's inventory over the agent's socket. Calls block; make them
/// off the cooperative pool.
package struct AgentClient: Sendable {
    /// The environment variable naming the agent's socket.
    package static let environmentVariable = "TOKENCACHE_AGENT_SOCK"
    /// Bound on each request, in seconds (the agent may refresh at the token endpoint meanwhile).
    package static let timeoutSeconds = 90

    /// The socket's path.
    package let path: String

    package init(path: String) { self.path = path }

    /// The agent `TOKENCACHE_AGENT_SOCK` names, when it is set and not empty.
    package static var fromEnvironment: AgentClient? {
        guard let value = getenv(environmentVariable), case let path = String(cString: value), !path.isEmpty else { return nil }
        return AgentClient(path: path)
    }

    /// Sends one request and returns the agent's answer, or throws its error.
    package func send(_ request: AgentProtocol.Request) throws(TokenCacheError) -> AgentProtocol.Response {
        let socket = try UnixSocket.connect(path)
        socket.setTimeouts(seconds: Self.timeoutSeconds)
        guard socket.write(all: AgentProtocol.encode(request)), let message = AgentProtocol.readMessage(from: socket) else {
            throw TokenCacheError(.agentUnavailable, "The token agent at \(path) closed the connection without an answer.",
                                  hint: "Check that it still runs (its terminal or log says why)", reason: .agentProtocol(path: path))
        }
        guard let response = try? JSONDecoder().decode(AgentProtocol.Response.self, from: message) else {
            throw TokenCacheError(.agentUnavailable, "The token agent at \(path) answered outside protocol version \(AgentProtocol.version).",
                                  hint: "Use a tokencache of the same release on both sides", reason: .agentProtocol(path: path))
        }
        if let failure = response.error { throw failure.error }
        return response
    }

    /// An access token from the agent.
    package func token(clientID: String, scopes: [String], account: String? = nil, authority: String? = nil,
                       forceRefresh: Bool = false) throws(TokenCacheError) -> AgentProtocol.Token {
        let response = try send(AgentProtocol.Request(operation: .token, clientID: clientID, scopes: scopes, account: account,
                                                      authority: authority, forceRefresh: forceRefresh ? true : nil))
        guard let token = response.token else { throw Self.missing("token", path) }
        return token
    }

    /// The agent's group as it lets this user see it (accounts and clients, never secrets).
    package func inventory(clientID: String? = nil, account: String? = nil) throws(TokenCacheError) -> GroupInventory {
        guard let inventory = try send(AgentProtocol.Request(operation: .list, clientID: clientID, account: account)).inventory else {
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
