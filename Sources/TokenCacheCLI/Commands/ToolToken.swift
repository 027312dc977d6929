import ArgumentParser
import FoundationEssentials
import TokenCache
#if canImport(Glibc)
import Glibc
#endif

/// The options and the token request of the developer tools' helpers (`git-credential`,
/// `kubectl-credential`, #61): the same ``TokenRequest`` as `tokencache token`, answered by the
/// same ``TokenEngine`` (the agent when `TOKENCACHE_AGENT_SOCK` is set); the helpers only
/// translate their tool's protocol.
struct ToolTokenOptions: ParsableArguments {
    /// Azure CLI's public client: in Microsoft's app family, accepted by Azure DevOps and AKS.
    static let azureCLIClient = "04b07795-8ddb-461a-bbee-02f9e1bf7b46"

    @Option(help: ArgumentHelp("The client app (application ID); else TOKENCACHE_CLIENT_ID or the config file's \"client\", else Azure CLI's (\(azureCLIClient)).", valueName: "id"),
            transform: ClientIDArgument.parse)
    var client: ClientID?

    @Option(help: ArgumentHelp("Scopes of the token, separated by spaces; default the tool's resource (Azure DevOps for git, AKS for kubectl).", valueName: "scopes"))
    var scopes: [String] = []

    @Option(help: ArgumentHelp("The account (username or home account ID); else TOKENCACHE_ACCOUNT or the config file's \"account\", else the client's only one.", valueName: "name|home-id"))
    var account: String?

    @Option(help: ArgumentHelp("The authority: tenant and where to refresh; else TOKENCACHE_AUTHORITY, the config file's \"authority\", or the account's own.", valueName: "url"))
    var authority: String?

    @OptionGroup(title: "Storage options") var store: StoreOptions

    func validate() throws {
        if !scopes.isEmpty && scopeList(scopes).isEmpty { throw ValidationError("--scopes must name at least one scope.") }
    }

    /// The token request `token` would make for these options (scopes: `defaultScope` unless
    /// --scopes), and the engine that answers it.
    func request(defaultScope: String) throws -> (TokenEngine, TokenRequest) {
        let settings = try RequestSettings.resolve(client: client, account: account, authority: authority)
        let client = try settings.client?.value ?? ClientID(Self.azureCLIClient)
        let account = settings.account?.value
        var options = PublicClientApplication.Options()
        options.logger = StoreOptions.logger(verbose: store.verbose, quiet: !store.verbose)
        let engine = try TokenEngine.open(store.route(), options: options) {
            try store.openStore(account: account, quiet: true)
        }
        var request = TokenRequest(clientID: client, scopes: scopes.isEmpty ? [defaultScope] : scopeList(scopes),
                                   account: account, authority: settings.authority?.value)
        request.clientCapabilities = settings.capabilities
        return (engine, request)
    }

    /// The token, cached or refreshed silently. With no account in this cache and `signIn`
    /// allowed, a device code sign-in shown on the terminal (/dev/tty) when there is one;
    /// otherwise the engine's error in the CLI's words (2: the user must sign in).
    func token(defaultScope: String, signIn: Bool, tool: String) throws -> TokenResult {
        let (engine, request) = try request(defaultScope: defaultScope)
        do throws(TokenCacheError) {
            return try engine.blockingToken(request)
        } catch {
            // The agent's cache is elsewhere: a sign-in here would not reach it.
            guard case .noAccount = error.reason, store.agent() == nil else {
                throw CLIError(message: CLIHints.message(of: error), hint: CLIHints.hint(for: error),
                               exitCode: error.code == .notFound ? 2 : 1, cause: error)
            }
            return try deviceCodeSignIn(request, signIn: signIn, tool: tool)
        }
    }

    /// No account yet: a device code sign-in shown on the terminal, when there is one and it may be used.
    private func deviceCodeSignIn(_ request: TokenRequest, signIn: Bool, tool: String) throws -> TokenResult {
        let login = "sign in with `tokencache login --device-code --client \(request.clientID.value) --scopes \"\(request.scopes.joined(separator: " "))\"`"
        guard signIn else { throw CLIError.notFound("No account signed in for \(tool) (and \(tool) allows no sign-in here): \(login).") }
        let tty = open("/dev/tty", O_WRONLY | O_NOCTTY | O_CLOEXEC)
        guard tty >= 0 else { throw CLIError.notFound("No account signed in for \(tool) (no terminal to sign in on): \(login).") }
        defer { close(tty) }
        let authority = try request.authority ?? Authority("https://login.microsoftonline.com/organizations")
        let app = PublicClientApplication(clientID: request.clientID, authority: authority, store: try store.openStore(account: nil, quiet: true))
        let parameters = DeviceCodeParameters(scopes: request.scopes)
        do throws(TokenCacheError) {
            return try app.blockingDeviceCodeSignIn(parameters) { code in
                StandardIO.write(Data("tokencache (\(tool)): \(Terminal.escape(code.message))\n".utf8), to: tty)
            }
        } catch {
            throw CLIError.failed("Sign-in for \(tool) failed: \(CLIHints.message(of: error))", cause: error)
        }
    }

    /// Runs a helper's body; a failure is one line on stderr (`tokencache: message (hint)`),
    /// which git and kubectl show as they are, and the CLI's exit code.
    static func reportingOnOneLine(_ body: () throws -> Void) throws {
        let failure: CLIError
        do {
            return try body()
        } catch {
            switch error {
            case let error as CLIError: failure = error
            case let error as TokenCacheError:
                failure = CLIError(message: CLIHints.message(of: error), hint: CLIHints.hint(for: error),
                                   exitCode: error.code == .invalidArgument ? 64 : 1, cause: error)
            default: throw error
            }
        }
        let hint = failure.hint.map { " (\($0))" } ?? ""
        StandardIO.write(Data("tokencache: \(Terminal.escape(failure.message + hint))\n".utf8), to: STDERR_FILENO)
        throw ExitCode(failure.exitCode)
    }

    /// A token the tool's server refused: when it is the cached one, a forced refresh replaces
    /// it (the account and its refresh token stay).
    func replace(refused: String, defaultScope: String) throws {
        let (engine, request) = try request(defaultScope: defaultScope)
        var cachedOnly = request
        cachedOnly.redeemsRefreshTokens = false
        guard let cached = try? engine.blockingToken(cachedOnly), cached.accessToken == refused else { return }
        var forced = request
        forced.forceRefresh = true
        do throws(TokenCacheError) {
            _ = try engine.blockingToken(forced)
        } catch {
            throw CLIError(message: "The refused token could not be replaced: \(CLIHints.message(of: error))", hint: CLIHints.hint(for: error),
                           exitCode: 1, cause: error)
        }
    }
}
