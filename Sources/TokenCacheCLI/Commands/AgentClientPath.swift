import ArgumentParser
import FoundationEssentials
import TokenCache
#if canImport(Glibc)
import Glibc
#endif

extension StoreOptions {
    /// Who answers, by the pipeline's rule on what the command line named of a local cache
    /// (--group; --backend, --collection, --passphrase-file; `otherStore`: --store, --sso-store).
    func route(otherStore: String? = nil) -> EngineRoute {
        EngineRoute(namedGroup: group != nil, namedBackend: backend != nil || collection != nil || passphraseFile != nil,
                    otherStores: otherStore != nil, group: group)
    }

    /// The token agent `TOKENCACHE_AGENT_SOCK` names, or the keeper this user enrolled with, when
    /// the pipeline routes to it (``EngineRoute``).
    func agent(otherStore: String? = nil) -> AgentClient? {
        route(otherStore: otherStore).agent
    }

    /// For a command that acts on this machine's cache only (`remove`, `logout`, `groups`, `login`)
    /// while an agent would answer `token` and `list`: says so on stderr, so the user does not
    /// take the local cache for the agent's (#46).
    func noteLocalOnly(_ command: String) {
        guard let agent = agent() else { return }
        Terminal.note("tokencache \(command) acts on this machine's cache, not on "
                      + (agent.isFromEnvironment ? "the token agent's at \(Terminal.escape(agent.path)) (TOKENCACHE_AGENT_SOCK): run it where the agent runs to change the agent's group."
                         : "the token keeper's at \(Terminal.escape(agent.path)), which you enrolled with: its groups change only by --enroll and root's --unenroll."))
    }
}

extension AgentClient {
    /// Whether it is a token agent `TOKENCACHE_AGENT_SOCK` named, not the keeper (found by the
    /// route, or named there by its fixed path).
    var isFromEnvironment: Bool { AgentClient.fromEnvironment?.path == path && path != KeeperDiscovery.defaultSocket }

    /// Where it came from, for messages.
    var source: String {
        isFromEnvironment ? "the token agent at \(Terminal.escape(path)) (TOKENCACHE_AGENT_SOCK)"
            : "the token keeper at \(Terminal.escape(path)), which you enrolled with (TOKENCACHE_KEEPER=off stays local)"
    }
}
