import ArgumentParser
import FoundationEssentials
import TokenCache
#if canImport(Glibc)
import Glibc
#endif

/// `login --native`: the options, and the sign-in run in place of the browser's.
struct NativeLoginOptions: ParsableArguments {
    @Flag(help: "Sign in natively (Entra External ID): an email code or a password, asked for here instead of in a browser.")
    var native = false

    @Option(help: ArgumentHelp("With --native: the user's email address.", valueName: "email"))
    var username: String?

    @Option(help: ArgumentHelp("With --native: a file (mode 0600) whose first line is the password; without it a password is asked for on the terminal.", valueName: "path"), completion: .file())
    var passwordFile: String?

    func validate() throws {
        if !native && (username != nil || passwordFile != nil) { throw ValidationError("--username and --password-file apply to --native.") }
        if native && username == nil { throw ValidationError("--native needs --username EMAIL.") }
    }

    /// Signs in natively for `login`: a code from the terminal or standard input, or a password;
    /// falls back to the browser when the server asks for it.
    func run(_ login: LoginCommand) throws {
        if login.deviceCode || login.prompt != nil || login.domainHint != nil || login.claims != nil {
            throw CLIError.usage("--native does not take --device-code, --prompt, --domain-hint or --claims.")
        }
        // The password file first: bad input is refused before any store is opened.
        let password = try passwordFile.map { path throws(TokenCacheError) in try Passphrase.read(path, from: .flag("--password-file"), what: "password") }
        let session = try NativeSession(store: login.store, app: login.app, types: [.oob, .password])
        let scopes = login.app.scopeList, username = username ?? ""
        let account: NativeAuthAccount
        do {
            switch try session.step({ app in try app.blockingSignIn(username: username, password: password, scopes: scopes) }) {
            case .completed(let signedIn): account = signedIn
            case .codeRequired(let state): account = try session.submitCodes(to: state.sentTo) { code in try state.blockingSubmitCode(code) }
            case .passwordRequired(let state):
                let typed = try NativeSession.password(prompt: "Password for \(Terminal.escape(username)): ", flag: "--password-file")
                account = try session.step { _ in try state.blockingSubmitPassword(typed) }
            }
        } catch let error as NativeAuthError where error.reason == .browserRequired {
            Terminal.note("The server needs the browser for this sign-in; opening it.")
            var parameters = InteractiveTokenParameters(scopes: scopes)
            parameters.loginHint = username
            parameters.timeout = TimeInterval(login.timeout ?? 300)
            parameters.redirectPort = login.port
            parameters.browser = .systemShowingTheLink
            account = try session.step { app in try app.blockingSignInWithBrowser(parameters) }
        }
        try session.report(account, what: "Signed in", scopes: scopes, json: login.json)
    }
}

struct SignUpCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "signup",
        abstract: "Sign a new user up natively (Entra External ID), then sign them in.",
        discussion: """
        Creates the account with an email code (and, with --password-file, a password), asks on \
        the terminal for any attribute the user flow requires that no --attribute gave (elsewhere \
        it fails naming them), and signs the new user in: the tokens are saved in the group. The \
        code is asked for on a terminal, and read as one line from standard input otherwise (a \
        wrong code reads the next line). Codes and passwords are never printed. Without \
        --password-file only email-code accounts are offered (challenge types oob redirect).

        Examples:
          tokencache signup --client 11111111-... \\
              --authority https://contoso.ciamlogin.com --scopes User.Read \\
              --username new@contoso.com --attribute displayName="New User"
          tokencache signup --client 11111111-... \\
              --authority https://contoso.ciamlogin.com --scopes User.Read \\
              --username new@contoso.com --password-file ~/.pw
        """)

    @OptionGroup var app: AppOptions

    @Option(help: ArgumentHelp("The new user's email address.", valueName: "email"))
    var username: String

    @Option(help: ArgumentHelp("A file (mode 0600) whose first line is the new password: an email + password account.", valueName: "path"), completion: .file())
    var passwordFile: String?

    @Option(name: .customLong("attribute"), help: ArgumentHelp("A user attribute the user flow collects (repeatable).", valueName: "name=value"))
    var attributes: [String] = []

    @Flag(help: "Print the account signed in as JSON.")
    var json = false

    @OptionGroup(title: "Storage options") var store: StoreOptions

    func validate() throws {
        try app.requireScopes()
        for attribute in attributes where !attribute.contains("=") || attribute.hasPrefix("=") {
            throw ValidationError("--attribute takes NAME=VALUE, not '\(attribute)'.")
        }
    }

    func run() throws {
        try NativeSession.reporting {
            let session = try NativeSession(store: store, app: app,
                                            types: passwordFile == nil ? [.oob] : [.oob, .password])
            let password = try passwordFile.map { path throws(TokenCacheError) in try Passphrase.read(path, from: .flag("--password-file"), what: "password") }
            var given: [String: String] = [:]
            for attribute in attributes {
                let parts = attribute.split(separator: "=", maxSplits: 1).map(String.init)
                given[parts[0]] = parts.count > 1 ? parts[1] : ""
            }
            let username = username, scopes = app.scopeList
            var result = try session.step { app in try app.blockingSignUp(username: username, password: password, attributes: given) }
            while true {
                switch result {
                case .codeRequired(let state):
                    result = try session.submitCodes(to: state.sentTo) { code in try state.blockingSubmitCode(code) }
                case .passwordRequired(let state):
                    let typed = try NativeSession.password(prompt: "New password for \(Terminal.escape(username)): ", flag: "--password-file")
                    result = try session.step { _ in try state.blockingSubmitPassword(typed) }
                case .attributesRequired(let state):
                    let answers = try Self.ask(state.requiredAttributes)
                    result = try session.step { _ in try state.blockingSubmitAttributes(answers) }
                case .completed(let state):
                    let account = try session.step { _ in try state.blockingSignIn(scopes: scopes) }
                    try session.report(account, what: "Signed up and signed in", scopes: scopes, json: json)
                    return
                }
            }
        }
    }

    /// The required attributes, asked for on a terminal; elsewhere an error naming them.
    static func ask(_ required: [NativeAuthRequiredAttribute]) throws -> [String: String] {
        guard Terminal.stdinIsTerminal else {
            throw CLIError.usage("The user flow requires these attributes: \(required.map(\.name).joined(separator: ", ")).",
                                 hint: "Give each with --attribute NAME=VALUE")
        }
        var answers: [String: String] = [:]
        for attribute in required {
            let pattern = attribute.regex.map { ", matching \($0)" } ?? ""
            StandardIO.write(Data("\(Terminal.escape(attribute.name)) (\(Terminal.escape(attribute.type + pattern))): ".utf8), to: STDERR_FILENO)
            answers[attribute.name] = readLine(strippingNewline: true) ?? ""
        }
        return answers
    }
}

struct ResetPasswordCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reset-password",
        abstract: "Reset a user's password natively (Entra External ID), then sign them in.",
        discussion: """
        Emails the user a code, asks for it (on a terminal, or one line from standard input), sets \
        the password from --new-password-file, waits for the reset to complete and signs the user \
        in: the tokens are saved in the group. Codes and passwords are never printed.

        Example:
          tokencache reset-password --client 11111111-... \\
              --authority https://contoso.ciamlogin.com --scopes User.Read \\
              --username user@contoso.com --new-password-file ~/.pw
        """)

    @OptionGroup var app: AppOptions

    @Option(help: ArgumentHelp("The user's email address.", valueName: "email"))
    var username: String

    @Option(help: ArgumentHelp("A file (mode 0600) whose first line is the new password.", valueName: "path"), completion: .file())
    var newPasswordFile: String

    @Flag(help: "Print the account signed in as JSON.")
    var json = false

    @OptionGroup(title: "Storage options") var store: StoreOptions

    func validate() throws {
        try app.requireScopes()
    }

    func run() throws {
        try NativeSession.reporting {
            let session = try NativeSession(store: store, app: app, types: [.oob, .password])
            let password = try Passphrase.read(newPasswordFile, from: .flag("--new-password-file"), what: "password")
            let username = username, scopes = app.scopeList
            let code = try session.step { app in try app.blockingResetPassword(username: username) }
            let newPassword = try session.submitCodes(to: code.sentTo) { typed in try code.blockingSubmitCode(typed) }
            let after = try session.step { _ in try newPassword.blockingSubmitNewPassword(password) }
            let account = try session.step { _ in try after.blockingSignIn(scopes: scopes) }
            try session.report(account, what: "Password reset; signed in", scopes: scopes, json: json)
        }
    }
}

/// What the native commands share: the app, steps run to completion, codes read, errors reported.
struct NativeSession {
    let app: NativeAuthPublicClientApplication
    /// Where the sign-in was saved: `group NAME`, or the token keeper.
    let place: String
    let client: ClientID

    init(store storeOptions: StoreOptions, app options: AppOptions, types: Set<NativeAuthPublicClientApplication.ChallengeType>) throws {
        // Client and authority in the one settings chain, as `token` follows it.
        let client = try RequestSettings.resolve(client: options.client, account: nil, authority: nil).requiredClient()
        let authority = try RequestSettings.authorityText(option: options.authority)
        // The pipeline's route, as for `login` in the browser: an enrolled user's keeper redeems the sign-in.
        let route = storeOptions.route()
        let store = try storeOptions.openStore()
        self.app = try NativeAuthPublicClientApplication(clientID: client, authority: authority, challengeTypes: types, store: store, route: route)
        self.place = route.agent?.isKeeper == true ? "the token keeper" : "group \(store.group)"
        self.client = client
    }

    /// Runs one network step to completion, on this thread (the library's blocking steps).
    func step<T>(_ operation: (NativeAuthPublicClientApplication) throws -> T) throws -> T {
        try operation(app)
    }

    /// Asks for the emailed code and submits it; a wrong code asks again (reads the next line),
    /// at most three times.
    func submitCodes<T>(to sentTo: String, _ submit: (String) throws -> T) throws -> T {
        for attempt in 1...3 {
            if Terminal.stdinIsTerminal {
                StandardIO.write(Data("Enter the code emailed to \(Terminal.escape(sentTo)): ".utf8), to: STDERR_FILENO)
            }
            guard let line = readLine(strippingNewline: true), !line.isEmpty else {
                throw CLIError.failed("No code was entered; nothing was saved.",
                                      hint: "Run the command again and type the code emailed to \(sentTo) (or give it as a line on standard input)")
            }
            do {
                return try submit(line)
            } catch let error as NativeAuthError where error.reason == .invalidCode && attempt < 3 {
                Terminal.note("That code is wrong or was replaced; enter the latest code.")
            }
        }
        throw CLIError.failed("The code was wrong three times; nothing was saved.", hint: "Run the command again for a new code")
    }

    /// A password typed without echo on the terminal; elsewhere an error naming the flag.
    static func password(prompt: String, flag: String) throws -> String {
        guard Terminal.stdinIsTerminal else {
            throw CLIError.usage("A password is needed, and standard input is not a terminal to ask on.",
                                 hint: "Give it with \(flag) PATH (a file of mode 0600 whose first line is the password)")
        }
        guard let typed = Passphrase.hiddenLine(prompt: prompt) else {
            throw CLIError.failed("No password was entered; nothing was saved.", hint: "Run the command again and type the password")
        }
        return typed
    }

    struct Output: Encodable {
        var username: String
        var homeAccountId: String
        var environment: String
        var clientId: String
        var scopes: [String]
        var expiresOn: Date
    }

    /// Prints the account signed in (never a token, code or password).
    func report(_ account: NativeAuthAccount, what: String, scopes: [String], json: Bool) throws {
        let token = try account.blockingAccessToken(scopes: scopes)
        if json {
            try JSONOutput.print(Output(username: account.username, homeAccountId: account.account.homeAccountID,
                                        environment: account.account.environment, clientId: client.value, scopes: token.scopes,
                                        expiresOn: token.expiresOn))
        } else {
            Terminal.print("\(what) as \(Terminal.escape(account.username)) (\(Terminal.escape(account.account.homeAccountID))) for client \(client) in \(place).")
        }
    }

    static func cliError(_ error: NativeAuthError) -> any Error {
        if case .tokenCache(let underlying) = error.reason { return underlying }
        let usage: Bool = switch error.reason { case .invalidUsername: true; default: false }
        return usage ? CLIError.usage(error.message, hint: error.hint) : CLIError.failed(error.message, hint: error.hint)
    }

    /// Runs a command's body, a ``NativeAuthError`` becoming the CLI's error (exit 1, 64 for a
    /// bad username, or the cache error's own code).
    static func reporting(_ body: () throws -> Void) throws {
        try reportingErrors {
            do { try body() } catch let error as NativeAuthError { throw cliError(error) }
        }
    }
}
