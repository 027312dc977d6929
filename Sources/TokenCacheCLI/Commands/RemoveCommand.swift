import ArgumentParser
import FoundationEssentials
import TokenCache

struct RemoveCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove",
        abstract: "Remove an account for every app, sign one app out, or wipe the group.",
        discussion: """
        Without --client the account is removed for every app. With --client only that app is \
        signed out, as `tokencache logout` does: other apps keep the account and their single \
        sign-on, and it is not asked about (only that app's own tokens go). Removing an account \
        for every app and --all (which wipes the group) ask for confirmation on a terminal; where \
        no question can be asked (standard input or output is not a terminal) they remove nothing \
        unless --yes is given (exit 64). --dry-run shows what would go in every case.

        Examples:
          tokencache remove --account alice@contoso.com
          tokencache remove --account alice@contoso.com \\
              --client 04b07795-8ddb-461a-bbee-02f9e1bf7b46
          tokencache remove --all --dry-run
          tokencache remove --account alice@contoso.com --store azure-cli
          tokencache remove --account alice@contoso.com --all-stores --dry-run

        --store NAME removes the account from another tool's MSAL cache (see `tokencache stores`) \
        under that tool's lock, keeping everything else in it; --all-stores does so in every store \
        `tokencache stores` shows that holds the account (not in tokencache's own group). --client \
        and --all go with neither.
        """)

    @Option(help: ArgumentHelp("The account (username or home account ID).", valueName: "name|home-id"))
    var account: String?

    @Option(help: ArgumentHelp("Sign only this client app out.", valueName: "id"), transform: ClientIDArgument.parse)
    var client: ClientID?

    @Option(help: ArgumentHelp("The authority the account signed in at, to pick it when the same account is at hosts of two clouds.", valueName: "url"))
    var authority: String?

    @Option(name: .customLong("store"), help: ArgumentHelp("Remove the account from another tool's MSAL cache instead (a name `tokencache stores` shows).", valueName: "name"), completion: ExternalStores.completion)
    var externalStore: String?

    @Flag(help: "Remove the account from every other tool's MSAL cache that holds it (see `tokencache stores`).")
    var allStores = false

    @Flag(help: "Remove every entry of the group.")
    var all = false

    @Flag(help: "Do not ask for confirmation.")
    var yes = false

    @Flag(help: "Show what would be removed, and remove nothing.")
    var dryRun = false

    @OptionGroup(title: "Storage options") var store: StoreOptions

    func validate() throws {
        if all == (account != nil) { throw ValidationError("Give either --account NAME|HOME_ID or --all.") }
        if all && client != nil { throw ValidationError("--client cannot be combined with --all.") }
        if authority != nil && (all || externalStore != nil || allStores) { throw ValidationError("--authority goes with --account (and --client) only.") }
        if externalStore != nil && (all || client != nil) { throw ValidationError("--store goes with --account only (not --all or --client).") }
        if allStores && (all || client != nil || externalStore != nil) {
            throw ValidationError("--all-stores goes with --account only (not --all, --client or --store).")
        }
    }

    func run() throws {
        if let externalStore { return try removeFromExternalStores([externalStore], every: false) }
        if allStores { return try removeFromExternalStores(try ExternalStores.all().map(\.name), every: true) }
        try reportingErrors {
            store.noteLocalOnly("remove")
            let store = try store.openStore()
            let authority = try self.authority.map { try Authority($0) }
            let plan: String
            let action: () throws -> Void
            if all {
                let count = try store.allAccounts().count
                // A mistyped group holds nothing to wipe: not found (exit 2), naming those present.
                if count == 0, store.group != .universalStorage, try store.entries().isEmpty { try ListCommand.checkPresent(store) }
                plan = "wipe group \(store.group) (\(count) account\(count == 1 ? "" : "s"))"
                action = { try store.removeAll() }
            } else if let client {
                return try SignOut.run(client: client, account: account, authority: authority, in: store, dryRun: dryRun)
            } else {
                let target = try AccountSelector.find(account!, in: store, authority: authority)
                plan = "remove \(target.username) (\(target.homeAccountID)) for every app"
                action = { try store.remove(target) }
            }
            try confirmAndRun(plan, action)
        }
    }

    /// The account removed from other tools' stores, each under its lock; the plan is made from
    /// unlocked reads, each removal reads again under the lock. With `every`, stores that are
    /// absent, unreadable or without the account are passed over (and said so).
    private func removeFromExternalStores(_ names: [String], every: Bool) throws {
        try reportingErrors {
            var targets: [(access: ExternalStoreAccess, account: CachedAccount)] = []
            var unreachable: [String] = []
            defer {
                if !unreachable.isEmpty { Terminal.note("Keyring stores not read (no Secret Service here): \(unreachable.joined(separator: ", ")).") }
            }
            for name in names {
                let access = ExternalStores.access(try ExternalStores.named(name), verbose: store.verbose)
                do {
                    let (accounts, _) = try ExternalStores.inventory(of: access)
                    targets.append((access, try Self.find(account!, in: accounts, store: name)))
                } catch let error as CLIError where every && error.exitCode == 2 {
                    continue
                } catch let error as TokenCacheError where every && error.code == .noSecretService {
                    unreachable.append(name)
                } catch let error as TokenCacheError where every {
                    Terminal.note("Store \(name) was not read: \(error.message)")
                }
            }
            guard !targets.isEmpty else {
                throw CLIError.notFound("No store holds account '\(account!)'.", hint: "Run `tokencache stores` to see the stores and their accounts")
            }
            let plan = "remove " + targets.map { "\($0.account.username) (\($0.account.homeAccountID)) from store \($0.access.store.name)" }
                .joined(separator: ", ") + " for every app"
            try confirmAndRun(plan) {
                for (access, target) in targets {
                    let removed: Bool = try access.modify { (locked) throws(TokenCacheError) in
                        guard let current = try locked.account(target.homeAccountID) else { return (false, false) }
                        _ = try locked.remove(current)
                        return (true, true)
                    }
                    if !removed && !every {
                        throw CLIError.notFound("Account \(target.username) was removed from store \(access.store.name) meanwhile; nothing was changed.")
                    }
                }
            }
        }
    }

    private static func find(_ identifier: String, in accounts: AccountStore, store: String) throws -> CachedAccount {
        guard let account = try accounts.account(identifier) else {
            throw CLIError.notFound("No account '\(identifier)' in store \(store).",
                                    hint: "Run `tokencache list --store \(store)` to see its accounts")
        }
        return account
    }

    private func confirmAndRun(_ plan: String, _ action: () throws -> Void) throws {
        if dryRun {
            Terminal.print("Would \(plan).")
            return
        }
        try Terminal.confirmOrRefuse(plan, yes: yes, unchanged: "Nothing removed")
        try action()
        Terminal.print("Done: \(plan.prefix(1).uppercased() + plan.dropFirst()).")
    }
}
