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
          tokencache token --client 04b07795-... --scopes "User.Read" \\
              --account alice@contoso.com --json
          tokencache token --client 04b07795-... --scopes "User.Read" --refresh \\
              --authority https://login.microsoftonline.com/organizations
          tokencache token --client 1950a258-227b-4e31-a9cf-717495945fc2 --scopes "https://management.azure.com//.default" \\
            --refresh --authority https://login.microsoftonline.com/organizations --sso-store azure-cli
          tokencache token --store azure-cli \\
              --client 04b07795-8ddb-461a-bbee-02f9e1bf7b46 \\
              --scopes "https://management.core.windows.net//.default"
        """)

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

    @Option(name: .customLong("store"), help: ArgumentHelp("Read the token from another tool's MSAL cache instead (a name `tokencache stores` shows).", valueName: "name"), completion: ExternalStores.completion)
    var externalStore: String?

    @Flag(help: "Print the token result as JSON (includes the token).")
    var json = false

    @OptionGroup var store: StoreOptions

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

    /// `--json`'s error line: `{"error": {"code", "reason", "message", "hint"}}`.
    struct ErrorOutput: Encodable {
        struct Detail: Encodable { var code, reason, message: String; var hint: String? }
        var error: Detail
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
            let localCacheChosen = store.localCacheChosen(otherStore: externalStore ?? singleSignOnStores.first)
            var options = PublicClientApplication.Options()
            options.logger = StoreOptions.logger(verbose: store.verbose)
            // Only --refresh redeems anything: the stores are not looked up otherwise.
            options.singleSignOnStores = refresh ? try SingleSignOnSetting.resolve(flag: singleSignOnStores).value : []
            let engine = try TokenEngine.open(localCacheChosen: localCacheChosen, options: options) {
                if let externalStore {
                    return try ExternalStores.read(ExternalStores.access(try ExternalStores.named(externalStore), verbose: store.verbose))
                }
                return try store.openStore(account: account)
            }
            var request = TokenRequest(clientID: client, scopes: scopeList(scopes), account: account,
                                       authority: try authority.map { try Authority($0) })
            request.redeemsRefreshTokens = refresh
            let asked = request
            let result: TokenResult
            do {
                result = try waitFor { try await engine.token(asked) }
            } catch let error as TokenCacheError {
                throw translated(error)
            }
            if json {
                try JSONOutput.print(Output(accessToken: result.accessToken, tokenType: result.authenticationScheme,
                                            authorizationHeader: result.authorizationHeader, expiresOn: result.expiresOn,
                                            refreshOn: result.refreshOn, tenantId: result.tenantID, scopes: result.scopes,
                                            username: result.account?.username, homeAccountId: result.account?.homeAccountID))
            } else {
                // Printed raw on purpose, for $(...): so only a token a terminal cannot act on.
                guard !result.accessToken.unicodeScalars.contains(where: Terminal.needsEscape) else {
                    throw CLIError.failed("The access token holds control characters, so it is not printed raw.",
                                          hint: "Use --json (escaped), or remove the account and sign in again")
                }
                StandardIO.write(Data((result.accessToken + "\n").utf8), to: STDOUT_FILENO)
            }
        }
    }

    /// The engine's error as this command reports it: nothing to hand out is exit 2 (as scripts
    /// test for), a choice to make or a value the library refuses is a usage error (64); with --json also one JSON line on
    /// standard error with the code and reason, for scripts.
    private func translated(_ error: TokenCacheError) -> Error {
        var message = error.message
        if case .noAccount = error.reason, let externalStore {
            message = "No account of client \(client)\(account.map { " matches '\($0)'" } ?? "") in store \(externalStore)."
        }
        let hint = hint(for: error)
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            let detail = ErrorOutput.Detail(code: "\(error.code)", reason: error.reason.name, message: message, hint: hint)
            if let line = try? encoder.encode(ErrorOutput(error: detail)) {
                StandardIO.write(JSONOutput.terminalSafe(line) + Data("\n".utf8), to: STDERR_FILENO)
            }
        }
        switch error.code {
        case .notFound, .interactionRequired: return CLIError.notFound(message, hint: hint)
        case .ambiguousAccount, .invalidArgument: return CLIError.usage(message, hint: hint)
        default: return CLIError.failed(message, hint: hint)
        }
    }

    /// The engine's reasons in this command's options.
    private func hint(for error: TokenCacheError) -> String? {
        switch error.reason {
        case .noUsableToken(refreshable: true) where externalStore == nil:
            "Add --refresh --authority URL to redeem the cached refresh token (no sign-in needed), or sign in again with `tokencache login`"
        case .noAccount, .noUsableToken: signInHint
        case .severalAccounts(let accounts): "Pick one with --account NAME or its home account ID: \(accounts.joined(separator: ", "))"
        case .tokensInSeveralTenants: "Pick one with --authority https://<host>/<tenant>"
        default: CLIHints.hint(for: error)
        }
    }
}
