import ArgumentParser
import FoundationEssentials
import TokenCache
@_spi(Backend) import TokenCacheCore

struct ListCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List cached accounts and, per client app, sign-in state and tokens (never secrets).",
        discussion: """
        A group other than the default that holds nothing is not found (exit 2), and the \
        groups present are named; so is an --account or --client that matches nothing.

        Examples:
          tokencache list
          tokencache list --account alice@contoso.com
          tokencache list --client 04b07795-8ddb-461a-bbee-02f9e1bf7b46 --json
          tokencache list --store azure-cli

        --store NAME lists another tool's MSAL cache instead (see `tokencache stores`), read \
        without its lock as its owner reads it; a store that does not exist here is not found \
        (exit 2). Its --json "group" is then the store's name and "location" where its blob lives.

        --json prints {"group", "location", "accounts": [{"username", "home_account_id", \
        "environment", "tenants", "authority_type", "name", "has_photo" (a Graph photo is cached: \
        `tokencache photo`), "clients": [{"client_id", \
        "display_name", "sign_in_state", "family_id", "refresh_token" (own|family|none), \
        "has_id_token", "access_tokens": [{"scopes", "tenant", "expires_on", "is_expired"}]}]}]}.
        """)

    @Option(help: ArgumentHelp("Only this client app (application ID).", valueName: "id"), transform: ClientIDArgument.parse)
    var client: ClientID?

    @Option(help: ArgumentHelp("Only this account (username or home account ID).", valueName: "name|home-id"))
    var account: String?

    @Option(name: .customLong("store"), help: ArgumentHelp("List another tool's MSAL cache instead (a name `tokencache stores` shows).", valueName: "name"), completion: ExternalStores.completion)
    var externalStore: String?

    @Flag(help: "Also list the accounts the identity broker on the session bus holds for --client (Microsoft's broker; never `tokencache broker`, which serves this cache).")
    var broker = false

    @Flag(help: "Print JSON with sorted keys, for scripts.")
    var json = false

    @OptionGroup(title: "Storage options") var store: StoreOptions

    func validate() throws {
        if broker && client == nil { throw ValidationError("--broker lists one client's accounts at the broker: give --client.") }
        if broker && externalStore != nil { throw ValidationError("--broker lists this cache's and the broker's accounts: drop --store.") }
    }

    func run() throws {
        try reportingErrors {
            var inventory: GroupInventory
            var fileMissing = false
            // Said on stderr; with --json only inside a failure's one line (ErrorReport).
            var otherBackend: String?
            if let externalStore {
                inventory = try ExternalStores.inventory(of: ExternalStores.access(try ExternalStores.named(externalStore), verbose: store.verbose)).1
                    .narrowed(toAccount: account, clientID: client)
            } else {
                // The pipeline decides who lists the group: the agent, or this machine's cache.
                let engine = try TokenEngine.open(store.route()) { try store.openStore() }
                inventory = try engine.inventory(clientID: client, account: account)
                if let opened = engine.answeringStore {
                    // No file yet: nothing was read from it, so the listing does not say it was.
                    if opened.backend is EncryptedFileBackend,
                       !FileManager.default.fileExists(atPath: EncryptedFileBackend().fileURL(for: opened.group).path) {
                        fileMissing = true
                    }
                    // Whether the group itself is empty, not only what the filter kept.
                    if inventory.accounts.isEmpty, try engine.inventory(clientID: nil, account: nil).accounts.isEmpty {
                        // Empty here but held by the other backend: say where (not "no such group").
                        if let note = store.otherBackendNote(for: opened) {
                            otherBackend = note
                            if !ErrorReport.json { Terminal.note(note) }
                        } else if opened.group != .universalStorage {
                            try Self.checkPresent(opened)
                        }
                    }
                }
            }
            // Held by the broker: listed apart, marked, never merged into the group's accounts.
            let brokerHeld = try broker ? Self.brokerAccounts(client: client!, store: store) : nil
            if inventory.accounts.isEmpty && (account != nil || client != nil) && (brokerHeld ?? []).isEmpty {
                // A filter that matches nothing is not an empty cache: say which filter.
                let filter = [account.map { "account '\($0)'" }, client.map { "client \($0)" }].compactMap { $0 }.joined(separator: " and ")
                let hint = "Run `tokencache list\(externalStore.map { " --store \($0)" } ?? "")` without the filter to see what is there"
                throw CLIError.notFound("Nothing in \(inventory.group) matches \(filter).",
                                        hint: ErrorReport.json ? otherBackend.map { "\($0) \(hint)" } ?? hint : hint)
            }
            keepUntilExit(inventory)
            if json {
                JSONOutput.print(brokerHeld.map { Self.json(inventory, adding: $0) } ?? inventory.jsonData())
            } else {
                var text = Self.render(inventory, heading: externalStore == nil ? "Group" : "Store", fileMissing: fileMissing)
                if let brokerHeld { text = "\(text)\n\n\(Self.render(brokerHeld))" }
                Terminal.print(text)
            }
        }
    }

    /// A group other than the default that holds nothing was most likely mistyped: not found
    /// (exit 2), naming the groups that are there.
    static func checkPresent(_ store: AccountStore) throws {
        let (location, groups) = try GroupsCommand.groups(on: store)
        guard !groups.contains(where: { $0.name == store.group.name }) else { return }
        throw CLIError.notFound("No group \(store.group) on \(location); groups present: \(groups.isEmpty ? "none" : groups.map(\.name).joined(separator: ", ")).",
                                hint: groups.isEmpty ? "Save or import into it first (tokencache save, tokencache import), or check --backend and --collection"
                                    : "Pass one of them with --group; `tokencache groups` shows what each holds")
    }

    /// The accounts the identity broker holds for `client`, through the engine (which asks only a
    /// broker other than `tokencache broker`).
    static func brokerAccounts(client: ClientID, store options: StoreOptions) throws -> [CachedAccount] {
        var settings = PublicClientApplication.Options()
        settings.broker = .always
        let engine = TokenEngine(store: try options.openStore(), options: settings)
        return try engine.brokerAccounts(clientID: client) ?? []
    }

    static func render(_ brokerHeld: [CachedAccount]) -> TerminalText {
        var lines: [TerminalText] = ["\(Terminal.bold("Held by the identity broker")) (its own cache: tokencache stores no refresh token for them)"]
        if brokerHeld.isEmpty { lines.append("No accounts.") }
        for account in brokerHeld {
            lines.append("\(Terminal.bold(account.username.isEmpty ? "(no username)" : account.username))  home account \(account.homeAccountID)  \(account.environment)  [broker]")
        }
        return join(lines)
    }

    /// `--json` with `"broker_accounts": [{"username", "home_account_id", "environment", "held_by": "broker"}]`.
    static func json(_ inventory: GroupInventory, adding brokerHeld: [CachedAccount]) -> Data {
        guard var object = try? JSON.decodeObject(inventory.jsonData()) else { return inventory.jsonData() }
        object["broker_accounts"] = .array(brokerHeld.map { account in
            .object(["username": .string(account.username), "home_account_id": .string(account.homeAccountID),
                     "environment": .string(account.environment), "held_by": "broker"])
        })
        return (try? JSON.encode(object, pretty: true)) ?? inventory.jsonData()
    }

    static func render(_ inventory: GroupInventory, heading: String = "Group", fileMissing: Bool = false, now: Date = Date()) -> TerminalText {
        let source: TerminalText = fileMissing ? "\(Terminal.dim("No file yet:")) \(inventory.location)" : "\(Terminal.dim("Read from")) \(inventory.location)"
        var lines: [TerminalText] = ["\(Terminal.bold(heading)) \(inventory.group)", source]
        if inventory.accounts.isEmpty {
            lines.append("\nNo accounts.")
            return join(lines)
        }
        for account in inventory.accounts {
            let name: TerminalText = account.name.map { "  (\($0))" } ?? ""
            lines.append("")
            lines.append("\(Terminal.bold(account.username.isEmpty ? "(no username)" : account.username))\(name)")
            lines.append("  home account \(account.homeAccountID)  \(account.environment)  \(account.authorityType)  tenants \(account.tenants.joined(separator: ", "))")
            var rows: [[TerminalText]] = []
            for client in account.clients {
                let app: TerminalText = client.displayName.map { "\($0) (\(client.clientID))" } ?? "\(client.clientID)"
                let state = TerminalText(client.signInState?.rawValue ?? "-")
                let refresh = TerminalText(client.refreshToken.rawValue + (client.familyID.map { client.refreshToken == .family ? " (family \($0))" : "" } ?? ""))
                let idToken: TerminalText = client.hasIDToken ? "yes" : "no"
                let tokens: [TerminalText] = client.accessTokens.isEmpty ? ["none"] : client.accessTokens.map { at in
                    let expiry: TerminalText = at.expiresOn.map { at.isExpired ? Terminal.red("expired") : "expires \(Terminal.localTime($0)), \(Terminal.relative($0, now: now))" } ?? "no expiry"
                    return "\(at.scopes.joined(separator: " ")) [\(at.tenant)] \(expiry)"
                }
                rows.append([app, state, refresh, idToken, tokens[0]])
                for more in tokens.dropFirst() { rows.append(["", "", "", "", more]) }
            }
            lines.append(Terminal.table(["CLIENT", "STATE", "REFRESH", "ID TOKEN", "ACCESS TOKENS"], rows))
        }
        return join(lines)
    }

    private static func join(_ lines: [TerminalText]) -> TerminalText {
        lines.dropFirst().reduce(lines[0]) { "\($0)\n\($1)" }
    }
}
