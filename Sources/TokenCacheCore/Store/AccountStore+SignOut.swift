import FoundationEssentials

extension AccountStore {
    /// The account `clientID` is to be signed out of: the one named (username or home account
    /// ID), or without a name the client's only account; in `authority`'s cloud when given. Only
    /// an account the client is signed in to qualifies — a recorded signed-in state or tokens of
    /// its own: a family app that merely could use it, or one signed out already, would otherwise
    /// leave a phantom signed-out row and report success on a typo. The one rule of every front
    /// end (the CLI's `logout` and `remove --client`, C's `tokencache_store_sign_out`).
    /// - Throws: `notFound` with reason ``TokenCacheError/Reason/noAccount`` (no such account, or
    ///   the client is signed in to none) or ``TokenCacheError/Reason/clientNotSignedIn``;
    ///   `ambiguousAccount` with reason ``TokenCacheError/Reason/severalAccounts`` or
    ///   ``TokenCacheError/Reason/accountInSeveralClouds``.
    package func signOutTarget(clientID: ClientID, account name: String?, authority: Authority? = nil) throws(TokenCacheError) -> CachedAccount {
        var inventory = try inventory()
        if let authority {
            let cloud = Environment.canonical(authority.environment)
            inventory.accounts.removeAll { Environment.canonical($0.environment) != cloud }
        }
        func isClient(_ id: String) -> Bool { id.lowercased() == clientID.value.lowercased() }
        let accounts = inventory.accounts.filter { Self.signedInClients($0).contains(where: isClient) }
        let listing = accounts.map { "\($0.username) (\($0.homeAccountID))" }
        guard let name else {
            guard accounts.count == 1, let only = accounts.first else {
                if accounts.isEmpty {
                    let signedIn = inventory.accounts.flatMap { account in Self.signedInClients(account).map { "\($0) to \(account.username)" } }
                    throw TokenCacheError(.notFound, "Client \(clientID) is not signed in to any account in group \(group); nothing was changed.",
                                          hint: signedIn.isEmpty ? "No client is signed in here" : "Signed in here: \(signedIn.joined(separator: ", "))",
                                          reason: .noAccount)
                }
                throw TokenCacheError(.ambiguousAccount, "Client \(clientID) is signed in to \(accounts.count) accounts; nothing was changed.",
                                      hint: "Name one by username or home account ID: \(listing.joined(separator: ", "))",
                                      reason: .severalAccounts(accounts: listing))
            }
            return try account(described: only)
        }
        // Among the client's own accounts first: two accounts may share a username (a personal
        // and a work account, two clouds), and the client's is the one meant.
        let named = accounts.filter { AccountName.matches(name, username: $0.username, homeAccountID: $0.homeAccountID) }
        if named.count > 1, Set(named.map(\.homeAccountID)).count == 1 {
            let hosts = named.map(\.environment)
            throw TokenCacheError(.ambiguousAccount, "Client \(clientID) is signed in to '\(name)' at hosts of different clouds: \(hosts.joined(separator: ", ")); nothing was changed.",
                                  hint: "Pass the authority of the one meant", reason: .accountInSeveralClouds(hosts: hosts))
        }
        if named.count > 1 {
            let names = named.map { "\($0.username) (\($0.homeAccountID))" }
            throw TokenCacheError(.ambiguousAccount, "Client \(clientID) is signed in to \(named.count) accounts named '\(name)'; nothing was changed.",
                                  hint: "Name one by its home account ID: \(names.joined(separator: ", "))", reason: .severalAccounts(accounts: names))
        }
        if let only = named.first { return try account(described: only) }
        guard let target = try account(name, authority: authority) else {
            throw TokenCacheError(.notFound, "No account '\(name)' in group \(group); nothing was changed.",
                                  hint: accounts.isEmpty ? "No account of this group has client \(clientID) signed in"
                                      : "Client \(clientID) is signed in to: \(listing.joined(separator: ", "))",
                                  reason: .noAccount)
        }
        let described = inventory.accounts.first { $0.homeAccountID == target.homeAccountID && $0.environment == target.environment }
        let clients = described.map(Self.signedInClients) ?? []
        let signedOut = described?.clients.contains { isClient($0.clientID) && $0.signInState == .signedOut } ?? false
        throw TokenCacheError(.notFound, signedOut ? "Client \(clientID) is signed out of \(target.username) already; nothing was changed."
                                                   : "Client \(clientID) never signed in to \(target.username); nothing was changed.",
                              hint: clients.isEmpty ? "No client is signed in to this account" : "Clients signed in to it: \(clients.joined(separator: ", "))",
                              reason: .clientNotSignedIn(signedOut: signedOut, clients: clients))
    }

    /// The clients signed in to an account: a recorded signed-in state, or tokens of their own
    /// and no recorded sign-out.
    private static func signedInClients(_ account: GroupInventory.Account) -> [String] {
        account.clients.filter { client in
            client.signInState != .signedOut
                && (client.signInState == .signedIn || client.hasIDToken || client.refreshToken == .own || !client.accessTokens.isEmpty)
        }.map(\.clientID)
    }

    /// The account an inventory row describes (a home account ID in the row's cloud).
    private func account(described row: GroupInventory.Account) throws(TokenCacheError) -> CachedAccount {
        guard let found = try allAccounts().first(where: { $0.homeAccountID == row.homeAccountID && $0.environment == row.environment }) else {
            throw TokenCacheError(.notFound, "Account \(row.username) was removed meanwhile; nothing was changed.", reason: .noAccount)
        }
        return found
    }
}
