import ArgumentParser
import FoundationEssentials
import TokenCache
#if canImport(Glibc)
import Glibc
#endif

extension StoreOptions {
    /// Whether the command line chose a local cache (--backend, --group, --collection,
    /// --passphrase-file, or `otherStore`: --store, --sso-store), so the token agent does not answer.
    func localCacheChosen(otherStore: String? = nil) -> Bool {
        backend != nil || group != nil || collection != nil || passphraseFile != nil || otherStore != nil
    }

    /// The token agent `TOKENCACHE_AGENT_SOCK` names, by the library's rule (``TokenEngine/agent(localCacheChosen:)``).
    func agent(otherStore: String? = nil) -> AgentClient? {
        TokenEngine.agent(localCacheChosen: localCacheChosen(otherStore: otherStore))
    }
}

extension ListCommand {
    /// The agent's group, as its policy lets it be seen.
    static func inventory(through agent: AgentClient, client: String?, account: String?) throws -> GroupInventory {
        var inventory = try agent.inventory(clientID: client, account: account)
        inventory.location = "token agent at \(agent.path) (\(inventory.location))"
        return inventory
    }
}
