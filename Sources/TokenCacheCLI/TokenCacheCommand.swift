import ArgumentParser
import TokenCache

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

        Exit codes: 0 success; 1 error (one line saying what happened, then a hint), including a \
        sign-in that fails, times out or is cancelled; 2 nothing found (token, remove, logout; list of a group other than the default that holds nothing, or with an --account or --client that matches nothing); 64 bad arguments, including values the cache refuses (an authority that is not a URL, a client ID with spaces), an account to pick where the app has several, empty input to save, a bad TOKENCACHE_* value or config file, a passphrase file that is missing, empty or readable by others, a passphrase-protected file with no passphrase given where none can be asked, and a removal without --yes where no question can be asked.

        Examples:
          tokencache login --device-code --client 04b07795-8ddb-461a-bbee-02f9e1bf7b46 --authority https://login.microsoftonline.com/organizations --scopes "User.Read"
          tokencache list
          tokencache list --client 04b07795-8ddb-461a-bbee-02f9e1bf7b46 --json
          tokencache remove --account alice@contoso.com --client 04b07795-8ddb-461a-bbee-02f9e1bf7b46
          tokencache token --client 04b07795-... --scopes "User.Read"
        """,
        version: TokenCacheVersion.string,
        subcommands: [
            ListCommand.self, RemoveCommand.self, TokenCommand.self, PhotoCommand.self, SaveCommand.self, AgentCommand.self,
            ImportCommand.self, ExportCommand.self, DoctorCommand.self, MigrateCommand.self,
            LoginCommand.self, LogoutCommand.self,
            SignUpCommand.self, ResetPasswordCommand.self,
            GroupsCommand.self, UnlockCommand.self, StoresCommand.self,
        ]
    )

    public init() {}

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
}
