import ArgumentParser
import FoundationEssentials
import TokenCache

extension InteractiveTokenParameters.Prompt: ExpressibleByArgument {}

struct LoginCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "login",
        abstract: "Sign a user in to an app: in the browser, or with a device code.",
        discussion: """
        Opens the authority's sign-in page in the system browser (the desktop portal's OpenURI, \
        else xdg-open, which honours $BROWSER) and waits for the redirect on a loopback port \
        (authorization code with PKCE, RFC 8252). With --device-code it prints a code to enter \
        on another device instead (RFC 8628): for SSH sessions and machines without a browser. \
        The tokens are saved in the group, so every app of the group sees the account, and apps \
        of the same family get tokens silently (`tokencache token --refresh`). Prints the \
        account signed in. Exit code 1 when the sign-in fails or is cancelled, 64 for bad arguments.

        Examples:
          tokencache login --client 04b07795-8ddb-461a-bbee-02f9e1bf7b46 --authority https://login.microsoftonline.com/organizations --scopes "User.Read"
          tokencache login --client 04b07795-... --authority https://login.microsoftonline.com/common --scopes "User.Read" --device-code
        """)

    @OptionGroup var store: StoreOptions

    @Option(help: ArgumentHelp("The client app (application ID).", valueName: "id"))
    var client: String

    @Option(help: ArgumentHelp("The authority to sign in at.", valueName: "url"))
    var authority: String

    @Option(help: ArgumentHelp("Space-separated scopes to ask for.", valueName: "scopes"))
    var scopes: String

    @Flag(help: "Sign in with a device code instead of the browser.")
    var deviceCode = false

    @Option(help: ArgumentHelp("Prefill the sign-in page with this username.", valueName: "username"))
    var loginHint: String?

    @Option(help: ArgumentHelp("Skip the home-realm page: organizations, consumers or a domain.", valueName: "hint"))
    var domainHint: String?

    @Option(help: ArgumentHelp("What the sign-in page asks: select_account, login, consent, create or none.", valueName: "prompt"))
    var prompt: InteractiveTokenParameters.Prompt?

    @Option(help: ArgumentHelp("Give up after this many seconds.", valueName: "seconds"))
    var timeout: Int = 300

    @Option(help: ArgumentHelp("The loopback port for the browser's redirect; 0 picks a free one.", valueName: "port"))
    var port: Int = 0

    @Flag(help: "Print the account signed in as JSON.")
    var json = false

    func validate() throws {
        if scopeList(scopes).isEmpty { throw ValidationError("--scopes must name at least one scope.") }
        if timeout <= 0 { throw ValidationError("--timeout must be a positive number of seconds.") }
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
        try reportingErrors {
            let store = try store.openStore()
            let app = PublicClientApplication(clientID: client, authority: try Authority(authority), store: store)
            try AccountStore.validate(clientID: client)
            let scopes = scopeList(scopes)
            let result: TokenResult
            if deviceCode {
                let parameters = DeviceCodeParameters(scopes: scopes)
                result = try waitFor {
                    try await app.acquireTokenWithDeviceCode(parameters) { code in
                        // The server's own instructions, escaped: they name the URL and the code.
                        Terminal.note(Terminal.escape(code.message))
                    }
                }
            } else {
                var parameters = InteractiveTokenParameters(scopes: scopes)
                parameters.loginHint = loginHint
                parameters.domainHint = domainHint
                parameters.prompt = prompt
                parameters.timeout = TimeInterval(timeout)
                parameters.redirectPort = port
                parameters.browser = .custom { url in
                    Terminal.note("Opening the sign-in page in your browser. If none opens, visit on this machine:\n  \(Terminal.escape(url.absoluteString))")
                    try await BrowserOpener.system.open(url)
                }
                result = try waitFor { [parameters] in try await app.acquireToken(parameters) }
            }
            let account = result.account
            if json {
                try JSONOutput.print(Output(username: account?.username ?? "", homeAccountId: account?.homeAccountID ?? "",
                                            environment: account?.environment ?? app.authority.environment,
                                            tenantId: result.tenantID, clientId: client, scopes: result.scopes,
                                            expiresOn: result.expiresOn))
            } else {
                Terminal.print("Signed in as \(Terminal.escape(account?.username ?? "(no username)")) (\(Terminal.escape(account?.homeAccountID ?? "-"))) for client \(client) in group \(store.group).")
            }
        }
    }
}

struct LogoutCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "logout",
        abstract: "Sign an app out of an account; other apps stay signed in.",
        discussion: """
        The same as `tokencache remove --account NAME --client ID --yes`: the app's own tokens \
        are removed and it no longer lists the account; other apps of the group keep the account \
        and their single sign-on. Without --account, the app's only account. To remove an \
        account for every app, use `tokencache remove --account NAME`.

        Examples:
          tokencache logout --client 04b07795-8ddb-461a-bbee-02f9e1bf7b46
          tokencache logout --client 04b07795-... --account alice@contoso.com
        """)

    @OptionGroup var store: StoreOptions

    @Option(help: ArgumentHelp("The client app to sign out (application ID).", valueName: "id"))
    var client: String

    @Option(help: ArgumentHelp("The account (username or home account ID); needed when the app has several.", valueName: "name|home-id"))
    var account: String?

    func validate() throws {
        do { try AccountStore.validate(clientID: client) } catch { throw ValidationError("--client: \(error.message)") }
    }

    func run() throws {
        try reportingErrors {
            let store = try store.openStore()
            let signedIn = try store.accounts(clientID: client)
            let target: CachedAccount
            if let account {
                guard let match = signedIn.first(where: { AccountSelector.names(account, username: $0.username, homeAccountID: $0.homeAccountID) }) else {
                    throw CLIError.notFound("Client \(client) is not signed in to '\(account)' in group \(store.group); nothing was changed.",
                                            hint: signedIn.isEmpty ? "Run `tokencache list --client \(client)` to see its accounts"
                                                : "Its accounts: \(signedIn.map(\.username).joined(separator: ", "))")
                }
                target = match
            } else {
                guard signedIn.count == 1 else {
                    throw signedIn.isEmpty
                        ? CLIError.notFound("Client \(client) is not signed in to any account in group \(store.group); nothing was changed.",
                                            hint: "Run `tokencache list` to see which clients are signed in")
                        : CLIError.usage("Client \(client) is signed in to \(signedIn.count) accounts.",
                                         hint: "Pick one with --account: \(signedIn.map(\.username).joined(separator: ", "))")
                }
                target = signedIn[0]
            }
            try store.signOut(target, clientID: client)
            Terminal.print("Signed client \(client) out of \(Terminal.escape(target.username)); other apps stay signed in.")
        }
    }
}
