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
        standard input, and stores it as MSAL does for the client, authority and scopes (the \
        --scopes asked for are stored when the response lists none). The \
        account comes from the response's client_info, else its id_token (request the openid \
        scope, and client_info=1 from Microsoft Entra). A response with neither (a refresh \
        response) is refused unless --home-account-id names the account it belongs to, which \
        must already be in the group (exit 64).

        Example:
          curl -s -d @request https://login.microsoftonline.com/contoso.onmicrosoft.com/oauth2/v2.0/token \\
            | tokencache save --client 04b07795-... \\
              --authority https://login.microsoftonline.com/contoso.onmicrosoft.com \\
              --scopes "User.Read"
        """)

    @OptionGroup var app: AppOptions

    @Option(help: ArgumentHelp("A file with the response; standard input when omitted.", valueName: "file"), completion: .file())
    var response: String?

    @Option(help: ArgumentHelp("A readable name for the app, shown by list (kept in its app metadata).", valueName: "name"))
    var displayName: String?

    @Option(help: ArgumentHelp("The account a response without client_info or id_token belongs to (it must be in the group).", valueName: "uid.utid"))
    var homeAccountId: String?

    @OptionGroup(title: "Storage options") var store: StoreOptions

    func run() throws {
        try reportingErrors {
            let (client, authority, _) = try app.request()
            let scopes = app.scopeList
            if let displayName { try AccountStore.validate(appDisplayName: displayName) }
            let body = try readResponse()
            let store = try store.openStore()
            let response = try TokenResponse(json: body)
            let result: TokenResult
            if response.clientInfo == nil && response.idToken == nil {
                // Saved without an account, the tokens would be orphans no lookup ever returns.
                guard let homeAccountId else {
                    throw CLIError.usage("The response has neither client_info nor id_token, so it names no account; nothing was saved.",
                                         hint: "Request the openid scope (and client_info=1 from Microsoft Entra), or pass --home-account-id <uid.utid> of the account it belongs to")
                }
                guard try store.allAccounts().contains(where: { $0.homeAccountID.lowercased() == homeAccountId.lowercased() }) else {
                    throw CLIError.usage("No account \(homeAccountId) is in group \(store.group); nothing was saved.",
                                         hint: "Pass the home account ID `tokencache list` shows for the account")
                }
                result = try store.save(response, clientID: client, authority: authority, scopes: scopes, homeAccountID: homeAccountId)
            } else {
                result = try store.save(response, clientID: client, authority: authority, scopes: scopes, homeAccountID: nil)
            }
            if let displayName { try store.setAppDisplayName(displayName, clientID: client, authority: authority) }
            let who = result.account.map { "\($0.username.isEmpty ? $0.homeAccountID : $0.username)" } ?? "(no account)"
            Terminal.print("Saved tokens for \(who), client \(client), scopes \(result.scopes.joined(separator: " ")), expires \(Terminal.localTime(result.expiresOn)).")
        }
    }

    /// The response body from --response or standard input, read no further than the size the
    /// library accepts (``TokenResponse/maximumSize``): a larger input is refused at the limit.
    private func readResponse() throws(CLIError) -> Data {
        let limit = TokenResponse.maximumSize
        let source = response.map { "in \($0)" } ?? "on standard input"
        let descriptor: Int32
        if let response {
            descriptor = try PathArgument.openForReading(response, unchanged: "nothing was saved",
                                                         hint: "Name the file holding the token endpoint's JSON response, or leave out --response to read standard input")
        } else {
            descriptor = STDIN_FILENO
            // Without this a terminal just sits there, and the user cannot tell why.
            if Terminal.stdinIsTerminal {
                Terminal.note("Waiting for the token response JSON on standard input (paste it, then press Ctrl-D)...")
            }
        }
        defer { if descriptor != STDIN_FILENO { close(descriptor) } }
        guard let body = StandardIO.readAll(from: descriptor, limit: limit) else {
            throw CLIError.failed("The response \(source) is larger than \(limit) bytes (\(limit >> 20) MiB), the most a token response may be; it was read no further and nothing was saved.",
                                  hint: "Pass only the JSON body of one token endpoint response (curl -s, without -i or -v)")
        }
        guard !body.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) else {
            throw CLIError.usage("The response \(source) is empty; nothing was saved.",
                                 hint: response == nil ? "Pipe the token endpoint's JSON response in, or name a file with --response FILE"
                                     : "Name the file holding the token endpoint's JSON response")
        }
        return body
    }
}
