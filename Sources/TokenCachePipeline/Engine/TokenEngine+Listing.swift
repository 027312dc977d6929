import TokenCacheCore

extension TokenEngine {
    /// The group as whoever answers this engine's token requests lists it (the one agent-or-local
    /// choice, ``source``): the agent's, as its policy lets it be seen, or the store's; narrowed to
    /// `account` and `clientID` when given. The CLI's `list` and the servers' listings come from here.
    package func inventory(clientID: ClientID?, account: String?) throws(TokenCacheError) -> GroupInventory {
        switch source {
        case .agent(let agent):
            var inventory = try agent.inventory(clientID: clientID, account: account)
            inventory.location = "token agent at \(agent.path) (\(inventory.location))"
            return inventory
        case .store(let store):
            return try store.inventory().narrowed(toAccount: account, clientID: clientID)
        }
    }

    /// The store that answers, nil when the agent does: what a front end may say about the local
    /// cache (a file not made yet, the other backend holding the group) applies only then.
    package var answeringStore: AccountStore? {
        if case .store(let store) = source { return store }
        return nil
    }
}
