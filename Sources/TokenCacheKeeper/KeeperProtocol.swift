import FoundationEssentials
import TokenCache
import TokenCacheCore

/// What the keeper speaks: the token agent's protocol (``AgentProtocol``: `token` and `list`,
/// whose answers carry access tokens and account details only), with two additions a keeper
/// client may send: `group`, which of the app's groups a request is for (default: the first its
/// apps file names), and the operation `enroll`, which hands the keeper a group's cache.
package enum KeeperProtocol {
    /// The default socket (socket activation: `tokencache-keeper.socket`).
    package static let defaultSocket = "/run/tokencache/keeper.sock"
    /// The default state directory.
    package static let defaultStateDirectory = "/var/lib/tokencache"
    /// The default apps directory.
    package static let defaultAppsDirectory = "/etc/tokencache/apps.d"

    /// The fields the keeper reads before deciding how to decode the rest.
    package struct Envelope: Decodable, Sendable {
        package var version: Int?
        package var op: String?
        package var group: String?
    }

    /// `enroll`: the caller's group as MSAL JSON, stored under the caller's uid (SO_PEERCRED).
    package struct Enrollment: Codable, Sendable {
        package var version = AgentProtocol.version
        package var op = "enroll"
        package var group: String
        /// The group's MSAL unified JSON (refresh tokens included: this crosses the socket once, inward).
        package var cache: String

        package init(group: String, cache: String) { (self.group, self.cache) = (group, cache) }

        enum CodingKeys: String, CodingKey { case version, op, group, cache }

        // The envelope was checked already: version and op may be absent, as in every request.
        package init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            group = try container.decode(String.self, forKey: .group)
            cache = try container.decode(String.self, forKey: .cache)
        }
    }

    /// A refusal of the keeper's: `accessDenied`, saying what is missing and who can add it.
    package static func refused(_ what: String, hint: String) -> TokenCacheError {
        TokenCacheError(.accessDenied, "The token keeper refused: \(what).", hint: hint)
    }
}

/// A client of the keeper's socket for what the agent's client does not send (`enroll`). It
/// trusts a socket and a listener of root's only (the agent client's checks), so nothing reaches a fake keeper.
package struct KeeperClient: Sendable {
    package let path: String

    package init(path: String) { self.path = path }

    /// Sends `enrollment`; returns the group as the keeper read it back (accounts and clients, no secrets).
    package func enroll(_ enrollment: KeeperProtocol.Enrollment) throws(TokenCacheError) -> GroupInventory {
        guard let inventory = try AgentClient(path: path, trustedUIDs: [0]).exchange(enrollment).inventory else {
            throw TokenCacheError(.agentUnavailable, "The token keeper at \(path) answered without the group it stored.", reason: .agentProtocol(path: path))
        }
        return inventory
    }
}
