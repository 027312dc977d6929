import ArgumentParser
import FoundationEssentials
import TokenCache
#if canImport(Glibc)
import Glibc
#endif

/// The `tokencache` admin tool: inspect and clear what apps cached, and let shell tools share
/// sign-in with Swift apps.
@available(macOS 10.15, macCatalyst 13, iOS 13, tvOS 13, watchOS 6, *)
public struct TokenCacheCommand: ParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "tokencache",
        abstract: "Sign in, inspect, share and clear MSAL token caches kept in the Secret Service, an encrypted file, or a sandboxed app's portal-keyed keyring.",
        discussion: """
        Every subcommand but migrate and stores takes --backend auto|secret-service|file, --group NAME, \
        --collection default|session|LABEL, --create, --allow-prompt, --passphrase-file PATH and --verbose. Backend, group \
        and collection come from the first of: the option; TOKENCACHE_BACKEND, TOKENCACHE_GROUP, \
        TOKENCACHE_COLLECTION; the config file $XDG_CONFIG_HOME/tokencache/config.json \
        (~/.config/tokencache/config.json), a JSON object with any of "backend", "group", \
        "collection" and "stores"; the default. `doctor` shows each and where it came from. When auto falls \
        back to the encrypted file (no usable Secret Service), --verbose says so in one line and \
        `doctor` explains why; other output stays quiet about it.

        Passphrase-protected encrypted files: --passphrase-file PATH or \
        TOKENCACHE_PASSPHRASE_FILE=PATH names a file of mode 0600 whose first line is the \
        passphrase; without either, a file created with a passphrase asks for it when standard \
        input is a terminal.

        Environment: TOKENCACHE_LOG_FILE=PATH appends the library's log at trace level to PATH \
        (mode 0600; never secrets); TOKENCACHE_LIBGCRYPT_PATH, \
        TOKENCACHE_LIBCRYPTO_PATH and TOKENCACHE_LIBCURL_PATH override where libgcrypt, \
        OpenSSL's libcrypto and libcurl are loaded from (ignored when tokencache runs setuid, \
        setgid or with file capabilities; without them each is opened by absolute path from the \
        system library directory, never from beside the executable).

        Output: names and other text read from the cache or sent by a server are printed with \
        control characters (C0, DEL, C1, bidirectional overrides) made visible, as \\u{1B}; \
        --json output escapes them as \\u001b. `token` refuses to print an access token holding one.

        Other tools' MSAL caches (Azure CLI, azure-identity, Azure PowerShell, azureauth, and \
        those declared under "stores" in the config file, as name: {"file": PATH} or name: \
        {"libsecret": {"schema", "attributes", "label", "collection", "signal", "encoding": \
        raw|base64|detect, "match_schema"}}, each with an optional "lock" PATH): `stores` shows \
        which exist, `list --store NAME` and `remove --account X --store NAME` work on one under \
        its owner's lock.

        Client, account and authority (--client, --account, --authority of login, logout, photo, \
        save, signup, reset-password and token) come from the first of: the option; \
        TOKENCACHE_CLIENT_ID, TOKENCACHE_ACCOUNT, TOKENCACHE_AUTHORITY; the config file's "client", \
        "account", "authority". The filters of list and remove and what agent and broker serve \
        are never taken from them.

        Errors: "error: " and a line saying what happened, then "hint: " and what to do; with \
        --json, exactly one JSON line on stderr instead, {"error": {"code", "reason", "message", \
        "hint", "exit_code", "server"}}. `tokencache` alone prints a short usage (exit 64).

        Exit codes: 0 success; 1 error (one line saying what happened, then a hint), including a \
        sign-in that fails, times out or is cancelled, and a removal answered "n" ("Nothing removed."); 2 nothing found (token, remove, logout; list of a group other than the default that holds nothing, or with an --account or --client that matches nothing); 64 bad arguments, including values the cache refuses (an authority that is not a URL, a client ID with spaces), an argument that is not UTF-8, an account to pick where the app has several, empty input to save, a bad TOKENCACHE_* value or config file, any path named that cannot be used as given (missing, a directory, unreadable, an --output that exists; a passphrase file that is empty or readable by others), a passphrase-protected file with no passphrase given where none can be asked, and a removal without --yes where no question can be asked. `man tokencache` says more (EXIT STATUS).

        Examples:
          tokencache login --device-code \\
              --client 04b07795-8ddb-461a-bbee-02f9e1bf7b46 \\
              --authority https://login.microsoftonline.com/organizations \\
              --scopes "User.Read"
          tokencache list
          tokencache list --client 04b07795-8ddb-461a-bbee-02f9e1bf7b46 --json
          tokencache remove --account alice@contoso.com \\
              --client 04b07795-8ddb-461a-bbee-02f9e1bf7b46
          tokencache token --client 04b07795-... --scopes "User.Read"
        """,
        version: TokenCacheVersion.described,
        subcommands: [
            ListCommand.self, RemoveCommand.self, TokenCommand.self, PhotoCommand.self, SaveCommand.self, AgentCommand.self, BrokerCommand.self,
            ImportCommand.self, ExportCommand.self, DoctorCommand.self, MigrateCommand.self,
            LoginCommand.self, LogoutCommand.self,
            SignUpCommand.self, ResetPasswordCommand.self,
            GroupsCommand.self, UnlockCommand.self, LockCommand.self, StoresCommand.self, GitCredentialCommand.self, KubectlCredentialCommand.self,
        ]
    )

    public init() {}

    /// ArgumentParser's own errors start as the CLI's do: one prefix, `error:`.
    public static var _errorPrefix: String { "error: " }

    /// Parses and runs the command line. Without arguments: a short usage on stderr, exit 64.
    /// A command taking `--json` run with it reports any failure, ArgumentParser's too, as one
    /// JSON line on stderr (``ErrorReport``).
    public static func main() {
        let arguments = Array(CommandLine.arguments.dropFirst())
        if arguments.isEmpty {
            StandardIO.write(Data(shortUsage.utf8), to: STDERR_FILENO)
            exit(withError: ExitCode(64))
        }
        let command: any ParsableCommand
        do {
            command = try parseAsRoot(arguments)
        } catch {
            let code = exitCode(for: error)
            let message = self.message(for: error)
            // A broker the bus starts with options it refuses: said where doctor shows it (#59 item 10).
            if arguments.first == "broker", code != .success, !message.isEmpty,
               !arguments.contains(where: { ["--install", "--uninstall", "--list-requests", "-h", "--help"].contains($0) }) {
                BrokerCommand.recordFailure(message)
            }
            guard code != .success, !message.isEmpty, jsonRequested(arguments) else { exit(withError: error) }
            ErrorReport.reportAsJSON(true)
            ErrorReport.report(CLIError(message: message, hint: "Run `tokencache \(arguments[0]) --help` for its options", exitCode: code.rawValue))
            exit(withError: ExitCode(code.rawValue))
        }
        ErrorReport.reportAsJSON((command as? any JSONReporting)?.json ?? false)
        do {
            var command = command
            try command.run()
        } catch {
            exit(withError: error)
        }
    }

    /// Whether a command line asks a command that takes `--json` for it (before any `--`).
    static func jsonRequested(_ arguments: [String]) -> Bool {
        guard let name = arguments.first,
              let command = configuration.subcommands.first(where: { $0._commandName == name }), command is any JSONReporting.Type else { return false }
        return arguments.dropFirst().prefix(while: { $0 != "--" }).contains("--json")
    }

    /// What `tokencache` alone prints: the commands by task, and where the rest is.
    static var shortUsage: String {
        let groups: [(String, [String])] = [
            ("Sign in and get tokens", ["login", "token", "logout", "photo"]),
            ("See and clean up", ["list", "groups", "stores", "remove"]),
            ("Move tokens", ["save", "import", "export", "migrate"]),
            ("Share with other programs", ["agent", "broker", "git-credential", "kubectl-credential"]),
            ("Keyring, key and checks", ["unlock", "lock", "doctor"]),
            ("Entra External ID", ["signup", "reset-password"]),
        ]
        let named = Set(groups.flatMap(\.1))
        let rest = configuration.subcommands.map { $0._commandName }.filter { !named.contains($0) }
        let all = groups + (rest.isEmpty ? [] : [("Other", rest)])
        let width = all.map(\.0.count).max() ?? 0
        return "usage: tokencache <command> [<options>]\n\n"
            + all.map { "  " + $0.0 + ":" + String(repeating: " ", count: width - $0.0.count + 2) + $0.1.joined(separator: ", ") }.joined(separator: "\n")
            + "\n\n`tokencache <command> --help` shows a command's options; `tokencache --help` shows everything.\n"
    }

    /// Refuses (exit 64), before anything is read or written, a command line that cannot be taken
    /// as given: an argument that is not valid UTF-8 (parsed, it would reach the commands
    /// rewritten, a path naming another file), or a mistyped subcommand, with the one meant.
    public static func refuseUnusableArguments(_ arguments: [String] = Array(CommandLine.arguments.dropFirst())) {
        ErrorReport.reportAsJSON(jsonRequested(arguments))
        if let argument = PathArgument.argumentNotUTF8() {
            ErrorReport.report(.usage("The argument '\(argument)' is not valid UTF-8; nothing was done.",
                                      hint: "tokencache takes paths and names in UTF-8 only: rename the file, or choose a UTF-8 name"))
            exit(withError: ExitCode(64))
        }
        if let word = arguments.first, let meant = subcommand(meantBy: word) {
            Terminal.error("'\(word)' is not a tokencache command.", hint: "Did you mean `tokencache \(meant)`? `tokencache --help` lists the commands")
            exit(withError: ExitCode(64))
        }
    }

    /// The subcommand a word that names none was probably meant to be: the nearest name within
    /// two edits (one for short words), when only one is that near.
    package static func subcommand(meantBy word: String) -> String? {
        let names = configuration.subcommands.map { $0._commandName } + ["help"]
        guard !word.hasPrefix("-"), !names.contains(word) else { return nil }
        return nearest(to: word, among: names)
    }

    /// The name a mistyped word was probably meant to be: the nearest within two edits (one for
    /// short words), when only one is that near.
    package static func nearest(to word: String, among names: [String]) -> String? {
        let limit = word.count <= 4 ? 1 : 2
        let near = names.map { ($0, editDistance(word.lowercased(), $0)) }.filter { $0.1 <= limit }
        guard let best = near.min(by: { $0.1 < $1.1 }), near.filter({ $0.1 == best.1 }).count == 1 else { return nil }
        return best.0
    }

    /// Levenshtein distance, with a swap of two neighbours counting as one edit (`lsit` → `list`).
    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        var rows = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in 0...a.count { rows[i][0] = i }
        for j in 0...b.count { rows[0][j] = j }
        for i in stride(from: 1, through: a.count, by: 1) {
            for j in stride(from: 1, through: b.count, by: 1) {
                rows[i][j] = min(rows[i - 1][j] + 1, rows[i][j - 1] + 1, rows[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] { rows[i][j] = min(rows[i][j], rows[i - 2][j - 2] + 1) }
            }
        }
        return rows[a.count][b.count]
    }

    /// Whether a command line may open the cache on the Secret Service: it names a subcommand
    /// (each opens the cache), asks for no help, and does not choose `--backend file` (nor,
    /// without `--backend`, `TOKENCACHE_BACKEND=file`).
    ///
    /// Decided from the raw arguments before they are parsed, so that `main` can start the
    /// connection meanwhile (``SecretServiceBackend/connectInBackground(callTimeout:)``); a
    /// wrong guess (such as the config file choosing the file) costs only a connection left unused.
    public static func mayUseSecretService(_ arguments: [String]) -> Bool {
        mayUseSecretService(arguments, backendVariable: StoreSettings.environment(StoreSettings.backendVariable))
    }

    /// ``mayUseSecretService(_:)`` with `TOKENCACHE_BACKEND`'s value given.
    package static func mayUseSecretService(_ arguments: [String], backendVariable: String?) -> Bool {
        guard let subcommand = arguments.first,
              configuration.subcommands.contains(where: { $0._commandName == subcommand }) else { return false }
        let options = arguments.dropFirst()
        if options.contains(where: { ["-h", "--help", "-help", "--help-hidden"].contains($0) }) { return false }
        if options.contains("--backend=file") { return false }
        if zip(options, options.dropFirst()).contains(where: { $0 == "--backend" && $1 == "file" }) { return false }
        let choosesBackend = options.contains { $0 == "--backend" || $0.hasPrefix("--backend=") }
        return choosesBackend || backendVariable != "file"
    }
}

enum TokenCacheVersion {
    /// The release: the same as the C library's (tokencache.h's TOKENCACHE_VERSION_*) and the package's.
    static let string = "0.5.0"

    /// What `--version` prints: the release and the commit it was built from, "dirty" when the
    /// checkout had uncommitted changes (BuildInfoPlugin), so two builds of one release differ.
    static let described = describe(release: string, commit: BuildInfo.commit, isDirty: BuildInfo.isDirty)

    static func describe(release: String, commit: String, isDirty: Bool) -> String {
        "\(release) (commit \(commit)\(isDirty ? ", dirty" : ""))"
    }
}
