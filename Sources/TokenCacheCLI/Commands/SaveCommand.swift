import ArgumentParser
import FoundationEssentials
import Glibc
import TokenCache

struct SaveCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "save",
        abstract: "Store an OAuth 2.0 token endpoint response, so any tool can share its sign-in.",
        discussion: """
        Reads the JSON body of a token endpoint response from --response FILE, or from \
        standard input, and stores it as MSAL does for the client, authority and scopes.

        Example:
          curl -s -d @request https://login.microsoftonline.com/contoso.onmicrosoft.com/oauth2/v2.0/token \\
            | tokencache save --client 04b07795-... --authority https://login.microsoftonline.com/contoso.onmicrosoft.com --scopes "User.Read"
        """)

    @OptionGroup var store: StoreOptions

    @Option(help: ArgumentHelp("The client app (application ID) the tokens were issued to.", valueName: "id"))
    var client: String

    @Option(help: ArgumentHelp("The authority the tokens came from.", valueName: "url"))
    var authority: String

    @Option(help: ArgumentHelp("The scopes requested (used when the response lists none).", valueName: "scopes"))
    var scopes: String

    @Option(help: ArgumentHelp("A file with the response; standard input when omitted.", valueName: "file"))
    var response: String?

    @Option(help: ArgumentHelp("A readable name for the app, shown by list (kept in its app metadata).", valueName: "name"))
    var displayName: String?

    func run() throws {
        try reportingErrors {
            let authority = try Authority(authority)
            if let displayName { try AccountStore.validate(appDisplayName: displayName) }
            let body: Data
            if let response {
                guard let data = FileManager.default.contents(atPath: response) else {
                    throw CLIError.failed("Cannot read \(response).", hint: "Check the path and permissions")
                }
                body = data
            } else {
                body = StandardIO.readAll(from: STDIN_FILENO)
            }
            let store = try store.openStore()
            let result = try store.save(responseJSON: body, clientID: client, authority: authority, scopes: scopeList(scopes))
            if let displayName { try store.setAppDisplayName(displayName, clientID: client, authority: authority) }
            let who = result.account.map { "\($0.username.isEmpty ? $0.homeAccountID : $0.username)" } ?? "(no account)"
            Terminal.print("Saved tokens for \(who), client \(client), scopes \(result.scopes.joined(separator: " ")), expires \(Terminal.localTime(result.expiresOn)).")
        }
    }
}
