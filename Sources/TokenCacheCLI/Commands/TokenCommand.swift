import ArgumentParser
import FoundationEssentials
import TokenCache
#if canImport(Glibc)
import Glibc
#endif

struct TokenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token",
        abstract: "Print an access token for scripts: cached, or refreshed silently.",
        discussion: """
        Prints the access token (or, with --json, the token result) for the client and scopes: \
        a cached, unexpired one, or - when it is missing or stale - one obtained silently by \
        redeeming a cached refresh token (the app's own, or its family's for single sign-on) and \
        saved, as `gh auth token` and `az account get-access-token` do. The refresh goes to \
        --authority, else TOKENCACHE_AUTHORITY or the config file's "authority", else the \
        account's own host and tenant (where its refresh token was issued). --no-refresh keeps \
        it to the cache. The client and account can come from TOKENCACHE_CLIENT_ID and \
        TOKENCACHE_ACCOUNT (or "client" and "account" in the config file) too. On success \
        stdout has the token and stderr nothing. Exit code 2 when there is no token (the user \
        must sign in), 64 when the request is ambiguous (several accounts or tenants), 1 on error.

        With --sso-store NAME (or TOKENCACHE_SSO_STORES, or "single_sign_on" in the config \
        file), a refresh may also redeem a refresh token that tool keeps (see `tokencache \
        stores`) when the group has none for the account: single sign-on with Azure CLI and \
        other msal-extensions tools. Off by default. The token is saved in the group; the tool \
        gets back only the rotated refresh token, under its own lock. `tokencache doctor` shows \
        which stores are opted in. With --store NAME the token is read from that tool's cache \
        instead of the group (nothing is redeemed or written).

        Continuous access evaluation: TOKENCACHE_CLIENT_CAPABILITIES=cp1 (or "client_capabilities": \
        ["cp1"] in the config file) declares that the caller handles claims challenges; every \
        refresh then sends it merged into the claims parameter, as MSAL does. When a resource \
        answers 401 with an insufficient_claims challenge, pass its WWW-Authenticate value with \
        --challenge (or the decoded claims with --claims): the cached token is skipped and the \
        refresh carries the claims. A refresh refused for more (multi-factor authentication) \
        exits 2; --json's error line has the claims under server.claims for `tokencache login --claims`.

        Examples:
          TOKEN=$(tokencache token --client 04b07795-8ddb-461a-bbee-02f9e1bf7b46 \\
              --scopes "User.Read")
          export TOKENCACHE_CLIENT_ID=04b07795-8ddb-461a-bbee-02f9e1bf7b46
          tokencache token --scopes "User.Read" --account alice@contoso.com --json
          tokencache token --scopes "User.Read" --no-refresh
          H=$(curl -sI https://api.example.com/ | sed -n 's/^www-authenticate: //Ip')
          tokencache token --scopes "User.Read" --challenge "$H"
          tokencache token --client 1950a258-227b-4e31-a9cf-717495945fc2 \\
            --scopes "https://management.azure.com//.default" --sso-store azure-cli
          tokencache token --store azure-cli \\
            --client 04b07795-8ddb-461a-bbee-02f9e1bf7b46 \\
            --scopes "https://management.core.windows.net//.default"
        """)

    @Option(help: ArgumentHelp("The client app (application ID); else TOKENCACHE_CLIENT_ID or the config file's \"client\".", valueName: "id"),
            transform: ClientIDArgument.parse)
    var client: ClientID?

    @Option(help: ArgumentHelp("Scopes the token must carry, separated by spaces; repeatable (--scopes A --scopes B needs both).", valueName: "scopes"))
    var scopes: [String]

    @Option(help: ArgumentHelp("The account (username or home account ID), needed when the app has several; else TOKENCACHE_ACCOUNT or the config file's \"account\".", valueName: "name|home-id"))
    var account: String?

    @Option(help: ArgumentHelp("The authority: picks the tenant (and the cloud) and where to refresh; else TOKENCACHE_AUTHORITY, the config file's \"authority\", or the account's own.", valueName: "url"))
    var authority: String?

    @Flag(inversion: .prefixedNo, help: "Refresh a missing or stale token silently (the default), or keep to the cache.")
    var refresh: Bool?

    @Option(name: .customLong("sso-store"), help: ArgumentHelp(
        "Also redeem this tool's refresh token (a name `tokencache stores` shows) when the group has none: single sign-on. Repeatable; off by default.",
        valueName: "name"))
    var singleSignOnStores: [String] = []

    @Option(name: .customLong("store"), help: ArgumentHelp("Read the token from another tool's MSAL cache instead (a name `tokencache stores` shows).", valueName: "name"), completion: ExternalStores.completion)
    var externalStore: String?

    @Option(help: ArgumentHelp("A claims challenge (decoded JSON) to answer: the cached token is skipped and the refresh carries the claims.", valueName: "json"))
    var claims: String?

    @Option(help: ArgumentHelp("A resource's WWW-Authenticate value with an insufficient_claims challenge: refresh with its claims (as --claims).", valueName: "header"))
    var challenge: String?

    @Option(help: ArgumentHelp("Ask the identity broker on the session bus (Microsoft's, on an enrolled machine): always (fail without one), when-available, or never (the default); `tokencache broker` itself is never asked.", valueName: "when"))
    var broker: BrokerUse = .never

    @Flag(help: "Print the token result as JSON (includes the token).")
    var json = false

    @Flag(help: "Print nothing but the token or the error (no notes); not with --verbose.")
    var quiet = false

    /// Whether a missing or stale token is refreshed: by default, except from another tool's store.
    var refreshes: Bool { refresh ?? (externalStore == nil) }

    @OptionGroup(title: "Storage options") var store: StoreOptions

    func validate() throws {
        if !singleSignOnStores.isEmpty && refresh == false { throw ValidationError("--sso-store is used when refreshing: drop --no-refresh.") }
        if refresh == true && externalStore != nil {
            throw ValidationError("--store only reads another tool's cache; to redeem its refresh token into the group, use --sso-store NAME instead.")
        }
        if quiet && store.verbose { throw ValidationError("--quiet and --verbose contradict each other: give one.") }
        if scopeList(scopes).isEmpty { throw ValidationError("--scopes must name at least one scope.") }
        if claims != nil && challenge != nil { throw ValidationError("--claims and --challenge both give the claims: pass one.") }
        if (claims != nil || challenge != nil) && (refresh == false || externalStore != nil) {
            throw ValidationError("--claims and --challenge need a refresh: drop --no-refresh and --store.")
        }
        if let challenge, ClaimsChallenge(wwwAuthenticate: challenge) == nil {
            throw ValidationError("--challenge has no claims challenge (Bearer error=\"insufficient_claims\" with claims=\"...\"): pass the resource's whole WWW-Authenticate value.")
        }
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

    /// The token's tenant: its ID token's `tid`, else the tenant it is cached under unless that
    /// is a generic path segment (`organizations`), which names no tenant.
    static func tenant(of result: TokenResult) -> String? {
        result.idTokenClaims?.tenantID ?? result.tenantID.flatMap { AccountStore.genericRealms.contains($0.lowercased()) ? nil : $0 }
    }

    /// How to get a token where none is cached: in another tool's store, from that tool. The
    /// `login` suggested keeps this command line's --backend and --group, so it signs in where
    /// this command looked.
    private func signInHint(client: ClientID, authority: Authority? = nil) -> String {
        guard let externalStore else {
            let at = authority?.url.absoluteString ?? "https://login.microsoftonline.com/organizations"
            let backend = store.backend.map { " --backend \($0.rawValue)" } ?? ""
            let group = store.group.map { " --group \($0)" } ?? ""
            return "Sign in with `tokencache login --client \(client) --authority \(at) --scopes \"\(scopeList(scopes).joined(separator: " "))\"\(backend)\(group)`, or with the app"
        }
        let owner = externalStore.hasPrefix("azure-cli") ? "Azure CLI (`az login`, `az account get-access-token`)" : "the tool that owns it"
        return "Store \(externalStore) is only read here: sign in or refresh with \(owner), or drop --store to use tokencache's own group"
    }

    func run() throws {
        try reportingErrors {
            let settings = try RequestSettings.resolve(client: client, account: account, authority: authority)
            let client = try settings.requiredClient()
            let account = settings.account?.value
            let route = store.route(otherStore: externalStore ?? singleSignOnStores.first)
            var options = PublicClientApplication.Options()
            options.logger = StoreOptions.logger(verbose: store.verbose, quiet: quiet)
            // Only a refresh redeems anything: the stores are not looked up otherwise.
            options.singleSignOnStores = refreshes ? try SingleSignOnSetting.resolve(flag: singleSignOnStores).value : []
            options.broker = broker
            var group: AccountStore?
            let engine = try TokenEngine.open(route, options: options) {
                if let externalStore {
                    return try ExternalStores.read(ExternalStores.access(try ExternalStores.named(externalStore), verbose: store.verbose))
                }
                group = try store.openStore(account: account, quiet: quiet)
                return group!
            }
            var request = TokenRequest(clientID: client, scopes: scopeList(scopes), account: account, authority: settings.authority?.value)
            request.redeemsRefreshTokens = refreshes
            request.claims = claims ?? challenge.flatMap { ClaimsChallenge(wwwAuthenticate: $0)?.claims }
            request.forceRefresh = request.claims != nil
            request.clientCapabilities = settings.capabilities
            let asked = request
            let result: TokenResult
            do {
                result = try engine.blockingToken(asked)
            } catch let error as TokenCacheError {
                // No account here, while the other backend holds the group: say so (#46); with
                // --json inside the error line's hint (stderr holds that line only).
                var note: String?
                if case .noAccount = error.reason, let group { note = store.otherBackendNote(for: group) }
                if let note, !json { Terminal.note(note) }
                throw translated(error, client: client, account: account, authority: asked.authority, note: json ? note : nil)
            }
            if json {
                try JSONOutput.print(Output(accessToken: result.accessToken, tokenType: result.authenticationScheme,
                                            authorizationHeader: result.authorizationHeader, expiresOn: result.expiresOn,
                                            refreshOn: result.refreshOn, tenantId: Self.tenant(of: result), scopes: result.scopes,
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
    /// test for), a choice to make or a value the library refuses is a usage error (64); with
    /// --json the one error line carries the code and reason (``ErrorReport``).
    private func translated(_ error: TokenCacheError, client: ClientID, account: String?, authority: Authority?, note: String? = nil) -> Error {
        var message = CLIHints.message(of: error)
        if case .noAccount = error.reason, let externalStore {
            message = "No account of client \(client)\(account.map { " matches '\($0)'" } ?? "") in store \(externalStore)."
        }
        var hint = hint(for: error, client: client, authority: authority)
        if let note { hint = note + (hint.map { " \($0)" } ?? "") }
        switch error.code {
        case .notFound, .interactionRequired: return CLIError.notFound(message, hint: hint, cause: error)
        case .ambiguousAccount: return CLIError.usage(message, hint: hint, cause: error)
        // Reported as every command reports it (64 for a value refused).
        default: return CLIError(message: message, hint: hint, exitCode: error.code == .invalidArgument ? 64 : 1, cause: error)
        }
    }

    /// The engine's reasons in this command's options.
    private func hint(for error: TokenCacheError, client: ClientID, authority: Authority?) -> String? {
        switch error.reason.value {
        // Through the token agent, only the agent's own --authority refreshes (#59 item 5): a
        // request's --authority is refused by an agent started without one.
        case .noUsableToken where externalStore == nil && store.agent(otherStore: singleSignOnStores.first) != nil:
            store.agent(otherStore: singleSignOnStores.first)?.isFromEnvironment == false
                ? "The token keeper refreshes at the authority the account was saved at: ask an administrator to check the keeper's journal"
                : "The token agent (TOKENCACHE_AGENT_SOCK) refreshes only at the authority it was started with: restart it with `tokencache agent --authority URL`, or sign in again where it runs"
        case .noUsableToken(refreshable: true) where externalStore == nil:
            refresh == false ? "Drop --no-refresh to redeem the cached refresh token (no sign-in needed), or sign in again with `tokencache login`"
                : "Add --authority URL to redeem the cached refresh token (no sign-in needed), or sign in again with `tokencache login`"
        case .noAccount, .noUsableToken, .refreshTokenRejected, .noRefreshToken: signInHint(client: client, authority: authority)
        case .severalAccounts(let accounts): "Pick one with --account NAME or its home account ID: \(accounts.joined(separator: ", "))"
        case .tokensInSeveralTenants: "Pick one with --authority https://<host>/<tenant>"
        default: CLIHints.hint(for: error)
        }
    }
}
