import ArgumentParser
import FoundationEssentials
import TokenCache

extension InteractiveTokenParameters.Prompt: ExpressibleByArgument {}

struct LoginCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "login",
        abstract: "Sign a user in to an app: in the browser, or with a device code.",
        discussion: """
        Opens the authority's sign-in page in a browser and waits for the redirect on a loopback \
        port, on 127.0.0.1 and ::1 (authorization code with PKCE, RFC 8252). The browser is: the \
        command in $BROWSER when set, even with no display (a colon-separated list tried in \
        turn; %s in a command is replaced by the URL, else the URL is appended; in VS Code \
        devcontainers and Codespaces it opens the host's browser and the forwarded port brings \
        the redirect back), else the desktop portal's OpenURI, else xdg-open when DISPLAY or \
        WAYLAND_DISPLAY is set. It is given only a random http://localhost:PORT/start/... page \
        that answers your user alone and redirects to the sign-in page, so other local users \
        cannot read the request from its arguments. With --device-code it prints a code to enter \
        on another device instead (RFC 8628): for SSH sessions and machines without a browser. \
        The tokens are saved in the group, so every app of the group sees the account, and apps \
        of the same family get tokens silently (`tokencache token --refresh`). For a user \
        enrolled with the token keeper (found by itself, as for `token`), the keeper redeems \
        the sign-in and keeps its refresh token; it renews an account of the group and adds \
        none (add one with --backend file, then `tokencache keeper --enroll`). Prints the \
        account signed in. Exit code 1 when the sign-in fails or is cancelled, 64 for bad arguments.

        Examples:
          tokencache login --client 04b07795-8ddb-461a-bbee-02f9e1bf7b46 \\
              --authority https://login.microsoftonline.com/organizations \\
              --scopes "User.Read"
          tokencache login --client 04b07795-... \\
              --authority https://login.microsoftonline.com/common \\
              --scopes "User.Read" --device-code
          BROWSER=firefox tokencache login --client 04b07795-... \\
              --authority https://login.microsoftonline.com/common --scopes "User.Read"
        """)

    @OptionGroup var app: AppOptions

    @Flag(help: "Sign in with a device code instead of the browser.")
    var deviceCode = false

    @Option(help: ArgumentHelp("Prefill the sign-in page with this username.", valueName: "username"))
    var loginHint: String?

    @Option(help: ArgumentHelp("Skip the home-realm page: organizations, consumers or a domain.", valueName: "hint"))
    var domainHint: String?

    @Option(help: ArgumentHelp("What the sign-in page asks: select_account, login, consent, create or none.", valueName: "prompt"))
    var prompt: InteractiveTokenParameters.Prompt?

    @Option(help: ArgumentHelp("A claims challenge (JSON) to satisfy, as a resource or a refused refresh sent it.", valueName: "json"))
    var claims: String?

    @Option(help: ArgumentHelp("Give up after this many seconds (default: 300 for the browser; for --device-code, when the code expires).", valueName: "seconds"))
    var timeout: Int?

    @Option(help: ArgumentHelp("The loopback port for the browser's redirect; 0 picks a free one.", valueName: "port"))
    var port: Int = 0

    @Flag(help: "Print the account signed in as JSON.")
    var json = false

    @OptionGroup(title: "Storage options") var store: StoreOptions

    @OptionGroup var native: NativeLoginOptions

    func validate() throws {
        try app.requireScopes()
        if let timeout, !(1...86_400).contains(timeout) { throw ValidationError("--timeout must be a number of seconds from 1 to 86400 (a day).") }
        if !(0...65535).contains(port) { throw ValidationError("--port must be 0 (any free port) or 1-65535.") }
        if deviceCode && (loginHint != nil || domainHint != nil || prompt != nil || port != 0) {
            throw ValidationError("--login-hint, --domain-hint, --prompt and --port apply to the browser sign-in, not to --device-code.")
        }
    }

    struct Output: Encodable {
        var username: String
        var homeAccountId: String
        var environment: String
        var tenantId: String?
        var clientId: String
        var scopes: [String]
        var expiresOn: Date
    }

    func run() throws {
        if native.native { return try NativeSession.reporting { try native.run(self) } }
        try reportingErrors {
            // Client and authority as `token` takes them (option, variable, config file): checked
            // before anything is opened.
            let (client, authority, settings) = try app.request()
            // Where the tokens go is the pipeline's route, as for `token`: an enrolled user's keeper redeems the sign-in.
            let route = store.route()
            let keeper = route.agent.flatMap { $0.isKeeper ? $0 : nil }
            let store = try store.openStore()
            let scopes = app.scopeList
            var options = PublicClientApplication.Options()
            // TOKENCACHE_CLIENT_CAPABILITIES or the config file's "client_capabilities", as `token` reads them.
            options.clientCapabilities = settings.capabilities
            let app = PublicClientApplication(clientID: client, authority: authority, store: store, options: options, route: route)
            let result: TokenResult
            if deviceCode {
                var parameters = DeviceCodeParameters(scopes: scopes)
                parameters.claims = claims
                parameters.timeout = timeout.map(TimeInterval.init)
                do {
                    result = try app.blockingDeviceCodeSignIn(parameters) { code in
                        // The server's own instructions, escaped: they name the URL and the code.
                        Terminal.note(Terminal.escape(code.message))
                    }
                } catch let error as TokenCacheError where error.reason == .deviceCodeTimedOut {
                    // The library's timeout is this command's --timeout: say so in its words.
                    throw TokenCacheError(.timedOut, "The device code sign-in did not finish within \(timeout ?? 0) s (--timeout); nothing was saved.",
                                          hint: "Run tokencache login again, with a larger --timeout if the user needs more time",
                                          reason: .deviceCodeTimedOut)
                }
            } else {
                var parameters = InteractiveTokenParameters(scopes: scopes)
                parameters.loginHint = loginHint
                parameters.domainHint = domainHint
                parameters.prompt = prompt
                parameters.claims = claims
                parameters.timeout = TimeInterval(timeout ?? 300)
                parameters.redirectPort = port
                parameters.browser = .systemShowingTheLink
                do {
                    result = try app.blockingInteractiveSignIn(parameters)
                } catch let error as TokenCacheError where keeper != nil && error.code == .accessDenied {
                    // Refused before the browser opened: say how this user signs in for the keeper all the same.
                    throw CLIError(message: CLIHints.message(of: error),
                                   hint: "\(error.hint.map { $0 + "; or s" } ?? "S")ign in to a local cache (`tokencache login --backend file …`) and move it to the keeper with `tokencache keeper --enroll`",
                                   exitCode: 1, cause: error)
                }
            }
            let account = result.account
            if json {
                try JSONOutput.print(Output(username: account?.username ?? "", homeAccountId: account?.homeAccountID ?? "",
                                            environment: account?.environment ?? app.authority.environment,
                                            tenantId: result.tenantID, clientId: client.value, scopes: result.scopes,
                                            expiresOn: result.expiresOn))
            } else {
                let kept = keeper.map { " in the token keeper at \(Terminal.escape($0.path))" + ($0.group.map { ", group \(Terminal.escape($0))" } ?? "") } ?? " in group \(store.group)"
                Terminal.print("Signed in as \(Terminal.escape(account?.username ?? "(no username)")) (\(Terminal.escape(account?.homeAccountID ?? "-"))) for client \(client)\(kept).")
            }
        }
    }
}

struct LogoutCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "logout",
        abstract: "Sign an app out of an account; other apps stay signed in.",
        discussion: """
        The same as `tokencache remove --account NAME --client ID`: the app's own tokens \
        are removed and it no longer lists the account; other apps of the group keep the account \
        and their single sign-on (a family refresh token the app saved stays, as MSAL keeps it: \
        it is the family's). Without --account, the app's only account. It never asks (only \
        that app's tokens go); --dry-run shows what would go. Exit 2 when the app is not signed \
        in to the account. To remove an account for every app, use `tokencache remove --account NAME`.

        Examples:
          tokencache logout --client 04b07795-8ddb-461a-bbee-02f9e1bf7b46
          tokencache logout --client 04b07795-... --account alice@contoso.com
        """)

    @Option(help: ArgumentHelp("The client app to sign out (application ID); else TOKENCACHE_CLIENT_ID or the config file's \"client\".", valueName: "id"),
            transform: ClientIDArgument.parse)
    var client: ClientID?

    @Option(help: ArgumentHelp("The account (username or home account ID); needed when the app has several; else TOKENCACHE_ACCOUNT or the config file's \"account\".", valueName: "name|home-id"))
    var account: String?

    @Option(help: ArgumentHelp("The authority the account signed in at, to pick it when the same account is at hosts of two clouds; else TOKENCACHE_AUTHORITY or the config file's \"authority\".", valueName: "url"))
    var authority: String?

    @Flag(help: "Show what would be signed out, and change nothing.")
    var dryRun = false

    @Flag(help: "Accepted, as `remove` takes it: signing one app out never asks.")
    var yes = false

    @OptionGroup(title: "Storage options") var store: StoreOptions

    func run() throws {
        try reportingErrors {
            // The one settings chain, as `token` follows it.
            let settings = try RequestSettings.resolve(client: client, account: account, authority: authority)
            let client = try settings.requiredClient()
            store.noteLocalOnly("logout")
            let store = try store.openStore()
            try SignOut.run(client: client, account: settings.account?.value, authority: settings.authority?.value, in: store, dryRun: dryRun)
        }
    }
}

extension BrowserOpener {
    /// The system browser, then the link on the terminal, said once a browser was asked for (the
    /// link dies with this process on failure); on the calling thread.
    static let systemShowingTheLink = BrowserOpener(here: { url throws(TokenCacheError) in
        try BrowserOpener.openSystemBrowser(url)
        Terminal.note("Opened the sign-in page in your browser. If none appeared, visit on this machine:\n  \(Terminal.escape(url.absoluteString))")
    })
}
