import FoundationEssentials
import TokenCache
import TokenCacheCore

/// What the keeper speaks: the token agent's protocol (``AgentProtocol``: `token` and `list`,
/// whose answers carry access tokens and account details only), with two additions a keeper
/// client may send: `group`, which of the app's groups a request is for (default: the first its
/// apps file names), the operations of the keeper's own program for the user: `enroll`,
/// which hands the keeper a group's cache, `export` and `unenroll`, which give it back, and
/// `log`, any caller's own audit log.
package enum KeeperProtocol {
    /// The default socket (socket activation: `tokencache-keeper.socket`).
    package static let defaultSocket = KeeperDiscovery.defaultSocket
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
        /// The user's password, when the keeper holds the group already (adding to it needs it).
        package var password: String?

        package init(group: String, cache: String, password: String? = nil) { (self.group, self.cache, self.password) = (group, cache, password) }

        enum CodingKeys: String, CodingKey { case version, op, group, cache, password }

        // The envelope was checked already: version and op may be absent, as in every request.
        package init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            group = try container.decode(String.self, forKey: .group)
            cache = try container.decode(String.self, forKey: .cache)
            password = try container.decodeIfPresent(String.self, forKey: .password)
        }
    }

    /// A user's group as root's `--unenroll` reads it from the state directory: MSAL JSON (refresh
    /// tokens included; it never crosses the socket), the accounts and clients in it, and the stored
    /// file's revision.
    package struct Export: Codable, Sendable {
        package var version = AgentProtocol.version
        package var ok = true
        package var cache: String
        package var revision: String
        package var inventory: GroupInventory

        package init(cache: String, revision: String, inventory: GroupInventory) { (self.cache, self.revision, self.inventory) = (cache, revision, inventory) }
    }

    /// `groups`: the caller's enrolled groups (the keeper's own program only).
    package struct GroupsRequest: Codable, Sendable {
        package var version = AgentProtocol.version
        package var op = "groups"

        package init() {}
    }

    /// One enrolled group as `--list` shows it: no secret.
    package struct EnrolledGroup: Codable, Sendable, Hashable {
        package var uid: UInt32
        package var group: String
        /// Its accounts; nil when the keeper could not read it (`problem` says why).
        package var accounts: Int?
        package var problem: String?
        /// The apps the apps directory allows this group (executables, `flatpak ID`, `snap NAME`).
        package var apps: [String]
    }

    /// The answer to `groups`.
    package struct Enrolled: Codable, Sendable {
        package var version = AgentProtocol.version
        package var ok = true
        package var groups: [EnrolledGroup]
        /// The consents the caller gave (app identity and group); nil from a keeper without consent.
        package var consents: [KeeperConsents.Consent]?

        package init(groups: [EnrolledGroup], consents: [KeeperConsents.Consent]?) { (self.groups, self.consents) = (groups, consents) }
    }

    /// `consent` (with the user's password, read from their terminal) or `revoke-consent`
    /// (without): `app` may, or may no longer, use `group` of the caller's uid (SO_PEERCRED; no
    /// field names whose).
    package struct ConsentRequest: Codable, Sendable {
        package var version = AgentProtocol.version
        package var op: String
        /// The app identity, as the keeper's refusal and `--list` name it.
        package var app: String
        package var group: String
        /// The client ID the consent is for (required to consent; to withdraw, nil withdraws the
        /// app's consents for every client of the group).
        package var clientID: String?
        /// The user's password (consent only): checked with PAM, never stored or logged.
        package var password: String?

        package init(revoking: Bool, app: String, group: String, clientID: ClientID?, password: String?) {
            (op, self.app, self.group, self.clientID, self.password) = (revoking ? "revoke-consent" : "consent", app, group, clientID?.value, password)
        }

        enum CodingKeys: String, CodingKey { case version, op, app, group, clientID = "client_id", password }

        // The envelope was checked already: version and op may be absent, as in every request.
        package init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            op = try container.decodeIfPresent(String.self, forKey: .op) ?? "-"
            app = try container.decode(String.self, forKey: .app)
            group = try container.decode(String.self, forKey: .group)
            clientID = try container.decodeIfPresent(String.self, forKey: .clientID)
            password = try container.decodeIfPresent(String.self, forKey: .password)
        }
    }

    /// What became of a `consent` or `revoke-consent`: typed, so no front end reads the message.
    package enum ConsentOutcome: Codable, Sendable, Hashable {
        /// PAM accepted the password: the consent is recorded.
        case recorded
        /// The consent was withdrawn (`existed`: whether there was one).
        case revoked(existed: Bool)
        /// PAM did not accept the password (nothing recorded).
        case notAuthenticated
        /// The password was right, but PAM's account check refused the account (expired, locked).
        case accountRefused
        /// Too many failures in a row: attempts are refused, PAM not asked, for this many seconds.
        case tooManyFailures(retryAfterSeconds: Int)
        /// Another consent attempt of the uid is being checked.
        case attemptInProgress
        /// The keeper could not read its count of the uid's failed attempts just now: nothing was
        /// checked (PAM not asked); the next attempt reads it again.
        case countNotRead
        /// PAM could not be used (libpam missing, the service not configured).
        case unavailable
        /// The app may not be consented to (an interpreter, a shell, tokencache itself): nothing
        /// recorded, PAM not asked.
        case unconsentable(UnconsentableApp)
    }

    /// The answer to `consent` and `revoke-consent`.
    package struct ConsentAnswer: Codable, Sendable {
        package var version = AgentProtocol.version
        package var ok = true
        package var outcome: ConsentOutcome

        package init(outcome: ConsentOutcome) { self.outcome = outcome }
    }

    /// `log`: the newest `lines` entries of the caller's own audit log (its uid from SO_PEERCRED;
    /// no field of the request names whose).
    package struct LogRequest: Codable, Sendable {
        package var version = AgentProtocol.version
        package var op = "log"
        package var lines: Int?

        package init(lines: Int?) { self.lines = lines }

        enum CodingKeys: String, CodingKey { case version, op, lines }

        // The envelope was checked already.
        package init(from decoder: any Decoder) throws {
            lines = try decoder.container(keyedBy: CodingKeys.self).decodeIfPresent(Int.self, forKey: .lines)
        }
    }

    /// The answer to `log`: the caller's entries, oldest first (no secret).
    package struct AuditLog: Codable, Sendable {
        package var version = AgentProtocol.version
        package var ok = true
        package var entries: [KeeperAudit.Entry]

        package init(entries: [KeeperAudit.Entry]) { self.entries = entries }
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

    /// The caller's enrolled groups, with the apps allowed each, and its consents (no secrets).
    package func enrolled() throws(TokenCacheError) -> KeeperProtocol.Enrolled {
        let message = try AgentClient(path: path, trustedUIDs: [0]).exchangeMessage(KeeperProtocol.GroupsRequest())
        guard let enrolled = try? JSONDecoder().decode(KeeperProtocol.Enrolled.self, from: message) else {
            throw TokenCacheError(.agentUnavailable, "The token keeper at \(path) answered without the list of groups.", reason: .agentProtocol(path: path))
        }
        return enrolled
    }

    /// Sends a consent (with the password) or its withdrawal; returns what the keeper did.
    package func consent(_ request: KeeperProtocol.ConsentRequest) throws(TokenCacheError) -> KeeperProtocol.ConsentOutcome {
        let message = try AgentClient(path: path, trustedUIDs: [0]).exchangeMessage(request)
        guard let answer = try? JSONDecoder().decode(KeeperProtocol.ConsentAnswer.self, from: message) else {
            throw TokenCacheError(.agentUnavailable, "The token keeper at \(path) answered without the consent's outcome.", reason: .agentProtocol(path: path))
        }
        return answer.outcome
    }

    /// The newest `lines` entries of the caller's own audit log (any program of the user's may ask).
    package func log(lines: Int?) throws(TokenCacheError) -> [KeeperAudit.Entry] {
        let message = try AgentClient(path: path, trustedUIDs: [0]).exchangeMessage(KeeperProtocol.LogRequest(lines: lines))
        guard let log = try? JSONDecoder().decode(KeeperProtocol.AuditLog.self, from: message) else {
            throw TokenCacheError(.agentUnavailable, "The token keeper at \(path) answered without the audit log.", reason: .agentProtocol(path: path))
        }
        return log.entries
    }

}
