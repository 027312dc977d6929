import ArgumentParser
import FoundationEssentials
import TokenCache
#if canImport(Glibc)
import Glibc
#endif

struct TokenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token",
        abstract: "Print a usable cached access token, for scripts.",
        discussion: """
        Prints the access token (or, with --json, the token result) of a cached, unexpired token \
        for the client and scopes. With --refresh (and --authority), a missing or stale token is \
        obtained silently by redeeming a cached refresh token at the token endpoint - the app's \
        own, or its family's for single sign-on - and saved. Exit code 2 when there is none \
        (or the user must sign in interactively), 1 on error.

        With --sso-store NAME (or TOKENCACHE_SSO_STORES, or "single_sign_on" in the config \
        file), --refresh may also redeem a refresh token that tool keeps (see `tokencache \
        stores`) when the group has none for the account: single sign-on with Azure CLI and \
        other msal-extensions tools. Off by default. The token is saved in the group; the tool \
        gets back only the rotated refresh token, under its own lock. `tokencache doctor` shows \
        which stores are opted in. With --store NAME the token is read from that tool's cache \
        instead of the group (nothing is redeemed or written).

        Examples:
          TOKEN=$(tokencache token --client 04b07795-8ddb-461a-bbee-02f9e1bf7b46 --scopes "User.Read")
          tokencache token --client 04b07795-... --scopes "User.Read" --account alice@contoso.com --json
          tokencache token --client 04b07795-... --scopes "User.Read" --refresh --authority https://login.microsoftonline.com/organizations
          tokencache token --client 1950a258-227b-4e31-a9cf-717495945fc2 --scopes "https://management.azure.com//.default" \\
            --refresh --authority https://login.microsoftonline.com/organizations --sso-store azure-cli
          tokencache token --store azure-cli --client 04b07795-8ddb-461a-bbee-02f9e1bf7b46 --scopes "https://management.core.windows.net//.default"
        """)

    @OptionGroup var store: StoreOptions

    @Option(help: ArgumentHelp("The client app (application ID).", valueName: "id"), transform: ClientIDArgument.parse)
    var client: String

    @Option(help: ArgumentHelp("Space-separated scopes the token must carry.", valueName: "scopes"))
    var scopes: String

    @Option(help: ArgumentHelp("The account (username or home account ID); needed when the app has several.", valueName: "name|home-id"))
    var account: String?

    @Option(help: ArgumentHelp("The authority, to pick a tenant (and the cloud, when one account is at hosts of two clouds).", valueName: "url"))
    var authority: String?

    @Flag(help: "Redeem a refresh token at the token endpoint when no cached access token is usable (needs --authority).")
    var refresh = false

    @Option(name: .customLong("sso-store"), help: ArgumentHelp(
        "With --refresh, also redeem this tool's refresh token (a name `tokencache stores` shows) when the group has none: single sign-on. Repeatable; off by default.",
        valueName: "name"))
    var singleSignOnStores: [String] = []

    @Option(name: .customLong("store"), help: ArgumentHelp("Read the token from another tool's MSAL cache instead (a name `tokencache stores` shows).", valueName: "name"))
    var externalStore: String?

    @Flag(help: "Print the token result as JSON (includes the token).")
    var json = false

    func validate() throws {
        if refresh && authority == nil { throw ValidationError("--refresh needs --authority URL (where to redeem the refresh token).") }
        if !singleSignOnStores.isEmpty && !refresh { throw ValidationError("--sso-store is used by --refresh (and --authority): give them too.") }
        if refresh && externalStore != nil {
            throw ValidationError("--store only reads another tool's cache; to redeem its refresh token into the group, use --refresh --sso-store NAME instead.")
        }
        if scopeList(scopes).isEmpty { throw ValidationError("--scopes must name at least one scope.") }
    }

    struct Output: Encodable {
        var accessToken: String
        var tokenType: String
        var authorizationHeader: String
        var expiresOn: Date
        var refreshOn: Date?
        var tenantId: String?
        var scopes: [String]
        var username: String?
        var homeAccountId: String?
    }

    /// How to get a token where none is cached: in another tool's store, from that tool.
    private var signInHint: String {
        guard let externalStore else {
            return "Sign in with `tokencache login --client \(client) --authority URL --scopes …`, or with the app"
        }
        let owner = externalStore.hasPrefix("azure-cli") ? "Azure CLI (`az login`, `az account get-access-token`)" : "the tool that owns it"
        return "Store \(externalStore) is only read here: sign in or refresh with \(owner), or drop --store to use tokencache's own group"
    }

    func run() throws {
        try reportingErrors {
            if let agent = store.agent(otherStore: externalStore ?? singleSignOnStores.first) { return try run(through: agent) }
            // Only --refresh redeems anything: the stores are not looked up otherwise.
            let singleSignOn = refresh ? try SingleSignOnSetting.resolve(flag: singleSignOnStores).value : []
            let (store, place): (AccountStore, String)
            if let externalStore {
                let access = ExternalStores.access(try ExternalStores.named(externalStore), verbose: self.store.verbose)
                store = try ExternalStores.read(access)
                place = "store \(externalStore)"
            } else {
                store = try self.store.openStore(account: account)
                place = "group \(store.group)"
            }
            let authority = try self.authority.map { try Authority($0) }
            var app: PublicClientApplication?
            if refresh, let authority {
                var options = PublicClientApplication.Options()
                options.logger = store.options.logger
                options.singleSignOnStores = singleSignOn
                app = PublicClientApplication(clientID: client, authority: authority, store: store, options: options)
            }
            let candidates = if let app, !singleSignOn.isEmpty {
                try waitFor { try await app.accounts() }
            } else {
                try store.accounts(clientID: client)
            }
            // An account is a home account ID in one cloud: --authority picks the cloud. At another
            // cloud the account is still found (and then refused a token there, saying why).
            let inCloud = authority.map { authority in
                candidates.filter { Environment.canonical($0.environment) == Environment.canonical(authority.environment) }
            } ?? []
            let inScope = inCloud.isEmpty ? candidates : inCloud
            var chosen: [CachedAccount]
            if let account {
                chosen = inScope.filter { AccountName.matches(account, $0) }
                // A named account whose cached access token the client may use, though no refresh
                // token makes it one of the client's accounts (as MSAL Python finds it).
                if chosen.isEmpty, let named = try store.account(account, authority: authority) ?? store.account(account),
                   try store.signInState(of: named, clientID: client) != .signedOut {
                    chosen = [named]
                }
            } else {
                chosen = inScope
            }
            if chosen.count > 1, Set(chosen.map(\.homeAccountID)).count == 1 {
                // One home account ID at hosts of two clouds: never guessed (another host may have planted one).
                throw CLIError.usage("Account \(chosen[0].username) (\(chosen[0].homeAccountID)) is at hosts of different clouds: \(chosen.map(\.environment).joined(separator: ", ")).",
                                     hint: AccountSelector.authorityHint)
            }
            if chosen.count > 1 {
                throw CLIError.usage("Client \(client) has \(chosen.count) accounts.",
                                     hint: "Pick one with --account NAME or its home account ID: \(chosen.map { "\($0.username) (\($0.homeAccountID))" }.joined(separator: ", "))")
            }
            guard let target = chosen.first else {
                throw CLIError.notFound("No account of client \(client)\(account.map { " matches '\($0)'" } ?? "") in \(place).",
                                        hint: signInHint)
            }
            var found = try store.accessToken(clientID: client, account: target, scopes: scopeList(scopes), authority: authority)
            if found == nil, authority == nil {
                // No authority given: a token of any tenant will do when exactly one tenant has one.
                let byTenant = try store.accessTokensByTenant(clientID: client, account: target, scopes: scopeList(scopes))
                if byTenant.count > 1 {
                    throw CLIError.failed("Client \(client) has usable tokens for these scopes in \(byTenant.count) tenants: \(byTenant.compactMap(\.tenantID).joined(separator: ", ")).",
                                          hint: "Pick one with --authority https://<host>/<tenant>")
                }
                if let only = byTenant.first {
                    Terminal.note("Using the token of tenant \(Terminal.escape(only.tenantID ?? "?")) (the only tenant with one for these scopes).")
                    found = only
                }
            }
            if let app, found == nil || found?.needsRefresh() == true {
                do {
                    let scopes = scopeList(scopes)
                    found = try waitFor { try await app.acquireTokenSilent(scopes: scopes, account: target) }
                } catch let error as TokenCacheError where error.code == .interactionRequired {
                    throw CLIError.notFound(error.message, hint: CLIHints.hint(for: error))
                }
            }
            guard let result = found else {
                // A refresh token the client could redeem makes --refresh the way, not a new sign-in.
                let redeemable = try app == nil && externalStore == nil
                    && !store.refreshTokens(clientID: client, account: target).isEmpty
                throw CLIError.notFound("No usable cached access token for client \(client) and scopes \"\(scopes)\".",
                                        hint: redeemable ? "Add --refresh --authority URL to redeem the cached refresh token (no sign-in needed), or sign in again with `tokencache login`"
                                            : signInHint)
            }
            if json {
                try JSONOutput.print(Output(accessToken: result.accessToken, tokenType: result.authenticationScheme,
                                            authorizationHeader: result.authorizationHeader, expiresOn: result.expiresOn,
                                            refreshOn: result.refreshOn, tenantId: result.tenantID, scopes: result.scopes,
                                            username: result.account?.username, homeAccountId: result.account?.homeAccountID))
            } else {
                // Printed raw on purpose, for $(...): so only a token a terminal cannot act on.
                guard !result.accessToken.unicodeScalars.contains(where: Terminal.needsEscape) else {
                    throw CLIError.failed("The cached access token holds control characters, so it is not printed raw.",
                                          hint: "Use --json (escaped), or remove the account and sign in again")
                }
                StandardIO.write(Data((result.accessToken + "\n").utf8), to: STDOUT_FILENO)
            }
        }
    }
}
