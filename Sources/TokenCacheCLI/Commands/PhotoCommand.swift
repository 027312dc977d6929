import ArgumentParser
import FoundationEssentials
import TokenCache
#if canImport(Glibc)
import Glibc
#endif

struct PhotoCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "photo",
        abstract: "Save an account's Microsoft Graph photo to a file.",
        discussion: """
        Writes the account's photo (Graph's /me/photo/$value) to --output (mode 0600, replaced \
        if it exists) and prints its type and size. The photo is cached with the account in the \
        group for a day (`list --json` shows "has_photo"); --refresh asks Graph again. Graph is \
        called with a silent User.Read token of the client at --authority, at the account's \
        cloud's Graph host, or at TOKENCACHE_GRAPH_ENDPOINT / the config file's "graph_endpoint" \
        (https, or http on loopback). Exit code 2 when the account has no photo (nothing is \
        written) or no account matches, 1 on error.

        Examples:
          tokencache photo --client 04b07795-8ddb-461a-bbee-02f9e1bf7b46 \\
              --authority https://login.microsoftonline.com/organizations \\
              --account alice@contoso.com --output alice.jpg
        """)

    @Option(help: ArgumentHelp("The client app whose silent token calls Graph (application ID); else TOKENCACHE_CLIENT_ID or the config file's \"client\".", valueName: "id"),
            transform: ClientIDArgument.parse)
    var client: ClientID?

    @Option(help: ArgumentHelp("The authority the token comes from, for example https://login.microsoftonline.com/organizations; else TOKENCACHE_AUTHORITY or the config file's \"authority\".", valueName: "url"))
    var authority: String?

    @Option(help: ArgumentHelp("The account (username or home account ID); needed when the app has several; else TOKENCACHE_ACCOUNT or the config file's \"account\".", valueName: "name|home-id"))
    var account: String?

    @Option(help: ArgumentHelp("The file to write the image to (mode 0600).", valueName: "file"))
    var output: String

    @Flag(help: "Ask Graph again instead of using the photo cached today.")
    var refresh = false

    @OptionGroup(title: "Storage options") var store: StoreOptions

    func run() throws {
        try reportingErrors {
            // The one settings chain, as `token` follows it.
            let settings = try RequestSettings.resolve(client: client, account: account, authority: authority)
            let (client, authority, account) = (try settings.requiredClient(), try settings.requiredAuthority(), settings.account?.value)
            var options = PublicClientApplication.Options()
            options.logger = StoreOptions.logger(verbose: store.verbose)
            options.graphEndpoint = try GraphEndpointSetting.resolve()?.value
            let app = PublicClientApplication(clientID: client, authority: authority, store: try store.openStore(account: account),
                                              options: options)
            let found: AccountPhoto?
            do {
                found = try app.blockingPhoto(accountNamed: account, refresh: refresh)
            } catch let error as TokenCacheError {
                // Several accounts of the app: the way out is --account, not --authority (#59 item 5).
                if case .severalAccounts(let accounts) = error.reason.value {
                    throw CLIError.usage(error.message, hint: "Pick one with --account NAME or its home account ID: \(accounts.joined(separator: ", "))", cause: error)
                }
                // No account matches: not found (exit 2), as the command's help says.
                if error.code == .notFound { throw CLIError.notFound(CLIHints.message(of: error), hint: CLIHints.hint(for: error), cause: error) }
                throw error
            }
            guard let photo = found else {
                throw CLIError.notFound("The account has no photo (Graph answered 404); nothing was written.",
                                        hint: "Add a photo in the account's profile, then run again with --refresh")
            }
            let descriptor = open(output, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o600)
            guard descriptor >= 0 else {
                let code = errno
                throw CLIError.failed("Cannot create \(output): \(String(cString: strerror(code))).", hint: ExportCommand.createHint(output, errno: code))
            }
            defer { close(descriptor) }
            guard StandardIO.write(photo.data, to: descriptor) else {
                throw CLIError.failed("Cannot write \(output): \(String(cString: strerror(errno))).", hint: "Check the free space")
            }
            Terminal.print("Saved the photo (\(photo.contentType), \(photo.data.count) bytes) to \(output).")
        }
    }
}

/// `TOKENCACHE_GRAPH_ENDPOINT`, else the config file's "graph_endpoint": where Graph is for the
/// account photo, in the one precedence chain of every setting.
enum GraphEndpointSetting {
    static func resolve() throws(CLIError) -> Setting<URL>? {
        let config = try ConfigFile.load()
        let parse = { (text: String, source: String) throws(CLIError) -> URL in
            do throws(TokenCacheError) { return try GraphEndpoint.parse(text, source: source) } catch { throw CLIError.usage(error.message, hint: error.hint) }
        }
        let file = try config.graphEndpoint.map { text throws(CLIError) in try parse(text, "The config file \(config.path)'s \"graph_endpoint\"") }
        return try Setting.first(option: ("", nil), variable: GraphEndpoint.variable, file: (config.path, file)) { text throws(CLIError) in
            try parse(text, GraphEndpoint.variable)
        }
    }
}
