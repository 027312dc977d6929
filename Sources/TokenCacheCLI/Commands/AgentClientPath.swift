import ArgumentParser
import FoundationEssentials
import TokenCache
#if canImport(Glibc)
import Glibc
#endif

extension StoreOptions {
    /// The token agent `TOKENCACHE_AGENT_SOCK` names, unless the command line chooses a local
    /// cache (--backend, --group, --collection, --passphrase-file, or `otherStore`: --store, --sso-store).
    func agent(otherStore: String? = nil) -> AgentClient? {
        guard backend == nil, group == nil, collection == nil, passphraseFile == nil, otherStore == nil else { return nil }
        return AgentClient.fromEnvironment
    }
}

extension TokenCommand {
    /// `token` through the agent: it looks up or refreshes on its side and answers the access
    /// token only; printed as the local path prints it.
    func run(through agent: AgentClient) throws {
        let answer = Result { () throws(TokenCacheError) in
            try agent.token(clientID: client, scopes: scopeList(scopes), account: account, authority: authority)
        }
        // Nothing to hand out is "not found" (exit 2), as on the local path.
        if case .failure(let error) = answer, error.code == .interactionRequired || error.code == .notFound {
            throw CLIError.notFound(error.message, hint: error.hint)
        }
        let token = try answer.get()
        if json {
            try JSONOutput.print(Output(accessToken: token.accessToken, tokenType: token.tokenType,
                                        authorizationHeader: "\(token.tokenType) \(token.accessToken)",
                                        expiresOn: Date(timeIntervalSince1970: TimeInterval(token.expiresOn)),
                                        refreshOn: token.refreshOn.map { Date(timeIntervalSince1970: TimeInterval($0)) },
                                        tenantId: token.tenantID, scopes: token.scopes, username: token.username,
                                        homeAccountId: token.homeAccountID))
        } else {
            // Printed raw on purpose, for $(...): so only a token a terminal cannot act on.
            guard !token.accessToken.unicodeScalars.contains(where: Terminal.needsEscape) else {
                throw CLIError.failed("The agent's access token holds control characters, so it is not printed raw.", hint: "Use --json (escaped)")
            }
            StandardIO.write(Data((token.accessToken + "\n").utf8), to: STDOUT_FILENO)
        }
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
