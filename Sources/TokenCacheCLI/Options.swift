import ArgumentParser
import Dispatch
import FoundationEssentials
import Logging
import Synchronization
import TokenCache
@_spi(Backend) import TokenCacheCore
#if canImport(Glibc)
import Glibc
#endif

extension BackendPolicy: ExpressibleByArgument {}
extension KeySourceChoice: ExpressibleByArgument {}
extension BrokerUse: ExpressibleByArgument {}

/// Options every subcommand shares: where the cache lives. Backend, group and collection
/// default to `TOKENCACHE_*` variables, then the config file (``StoreSettings``).
struct StoreOptions: ParsableArguments {
    @Option(help: ArgumentHelp("auto (the Secret Service, else the encrypted file; a sandbox's portal keyring), secret-service or file. Default: $TOKENCACHE_BACKEND, config \"backend\", auto.",
                               valueName: "backend"))
    var backend: BackendPolicy?

    @Option(help: ArgumentHelp("The sharing group, reverse-DNS. Default: $TOKENCACHE_GROUP, config \"group\", \(CacheGroup.universalStorage.name).",
                               valueName: "name"))
    var group: String?

    @Option(help: ArgumentHelp("Secret Service collection: default (usually Login), session (in memory) or a label. Default: $TOKENCACHE_COLLECTION, config \"collection\", default.",
                               valueName: "collection"))
    var collection: String?

    @Option(help: ArgumentHelp("Encrypted file: a file (0600, yours) whose first line is the passphrase (a new file is then keyed by it). Default: $TOKENCACHE_PASSPHRASE_FILE, else asked on a terminal.",
                               valueName: "path"), completion: .file())
    var passphraseFile: String?

    @Option(help: ArgumentHelp("Encrypted file: how a new cache is keyed: key-file, tpm (sealed to this machine's TPM 2.0; $TOKENCACHE_TPM_TCTI) or passphrase. Default: $TOKENCACHE_KEY_SOURCE, config \"key_source\", tpm where cache.key.tpm exists, key-file.",
                               valueName: "source"))
    var keySource: KeySourceChoice?

    @Flag(help: ArgumentHelp("Secret Service: show an unlock or access prompt and wait up to 60 s for you (else 2 s, then locked)."))
    var allowPrompt = false

    @Flag(help: "Log what the library does to stderr (never secrets), and say when auto uses the encrypted file.")
    var verbose = false

    @Flag(help: ArgumentHelp("With --collection LABEL, create it when missing (its password is asked: add --allow-prompt)."))
    var create = false

    func validate() throws {
        if let group {
            do { _ = try CacheGroup(group) } catch {
                throw ValidationError(error.description)
            }
        }
        if collection?.isEmpty == true { throw ValidationError("--collection needs default, session or a collection's label.") }
        if passphraseFile?.isEmpty == true { throw ValidationError("--passphrase-file needs a path.") }
    }

    /// The effective backend, group, collection and passphrase file, and where each came from.
    /// - Throws: ``CLIError`` usage (exit 64) for a bad `TOKENCACHE_*` value or config file.
    func settings() throws(CLIError) -> StoreSettings {
        try StoreSettings.resolve(backend: backend, group: group, collection: collection, passphraseFile: passphraseFile, keySource: keySource)
    }

    /// Secret Service options for the collection setting and `--allow-prompt`.
    func secretServiceOptions(_ settings: StoreSettings) -> SecretServiceBackend.Options {
        Self.secretServiceOptions(settings, allowPrompt: allowPrompt, create: create)
    }

    static func secretServiceOptions(_ settings: StoreSettings, allowPrompt: Bool, create: Bool = false) -> SecretServiceBackend.Options {
        var options = SecretServiceBackend.Options()
        options.defaultMapping = collectionMapping(settings.collection.value, create: create)
        options.allowsUnlockPrompt = allowPrompt
        return options
    }

    /// How the encrypted file is keyed: by the passphrase when one is given or the group's
    /// existing file was created with one (its header says), else by the key file.
    /// - Throws: `invalidArgument` (exit 64) for a passphrase file that is missing, empty or
    ///   readable by others: checked now, whether or not the cache file exists yet, unless the
    ///   Secret Service was chosen (the file is for the encrypted file only).
    static func fileKeySource(_ settings: StoreSettings, passphraseFlag: Bool = true) throws(TokenCacheError) -> EncryptedFileBackend.KeySource {
        let file = EncryptedFileBackend()
        let cachePath = file.fileURL(for: settings.group.value).path
        if let passphraseFile = settings.passphraseFile, settings.backend.value != .secretService {
            let passphrase = try Passphrase.read(passphraseFile.value, from: passphraseFile.source)
            // Asked for when the backend first needs it: a file about to be created gets the rule
            // a new passphrase typed on a terminal gets.
            return .passphraseProvider { () throws(TokenCacheError) -> String in
                if !FileManager.default.fileExists(atPath: cachePath), let weakness = Passphrase.weakness(of: passphrase) {
                    throw TokenCacheError(.invalidArgument,
                                          "The passphrase in \(passphraseFile.value) (from \(passphraseFile.source)) is too weak to create \(cachePath): \(weakness).",
                                          hint: "Put a longer passphrase in the file (at least 12 characters, several different ones), e.g. `openssl rand -base64 24`; nothing was written",
                                          field: "passphrase-file")
                }
                return passphrase
            }
        }
        // A file whose header cannot be read is reported by the read itself.
        if (try? file.storedKeyKind(of: settings.group.value)) == .passphrase {
            return Passphrase.keySource(cachePath: cachePath, flag: passphraseFlag)
        }
        let tpm = EncryptedFileBackend.KeySource.tpm(tcti: settings.tpmTCTI?.value)
        switch settings.keySource?.value {
        case .tpm?: return tpm
        case .passphrase?: return Passphrase.keySource(cachePath: cachePath, flag: passphraseFlag)
        case .keyFile?: return .keyFile()
        case nil:
            // A cache whose key was sealed to the TPM keeps using it without the option.
            return EncryptedFileBackend.defaultKeySource(tcti: settings.tpmTCTI?.value)
        }
    }

    /// Opens the account store for the chosen backend and group.
    func openStore() throws -> AccountStore {
        try openStore(account: nil)
    }

    /// A store for `account` only, where that is cheaper: on the Secret Service a lookup for
    /// one account then reads that account's items by attribute search instead of the whole
    /// group (``AccountScopedBackend``). Elsewhere, or without an account, the whole group.
    func openStore(account: String?, quiet: Bool = false) throws -> AccountStore {
        let settings = try settings()
        let cacheGroup = settings.group.value
        let (store, selection) = try AccountStore.open(group: cacheGroup, policy: settings.backend.value, logger: Self.logger(verbose: verbose, quiet: quiet),
                                                       keySource: try Self.fileKeySource(settings),
                                                       secretService: secretServiceOptions(settings), announcesFallback: false,
                                                       scopedTo: account)
        // Expected on headless machines, so not a warning on every command: doctor explains it,
        // --verbose says it in one plain sentence, and list shows where it read from.
        if selection.isFallback && verbose {
            let why = selection.reason.replacing("; using the encrypted file", with: "")
            Terminal.note("tokencache falls back to the encrypted file \(Terminal.escape(EncryptedFileBackend().fileURL(for: cacheGroup).path)): \(Terminal.escape(why)).")
        }
        keepUntilExit(store)
        return store
    }

    /// A sentence saying the other backend holds `store`'s group and how to move it, when it does
    /// (#46: accounts must not seem to vanish when the backend changed); nil otherwise.
    func otherBackendNote(for store: AccountStore) -> String? {
        guard let settings = try? settings(), let keySource = try? Self.fileKeySource(settings),
              let other = BackendSelection.otherBackend(holding: store.group, besides: store.backend, keySource: keySource,
                                                        secretService: secretServiceOptions(settings)) else { return nil }
        let here = other.policy == .file ? "secret-service" : "file"
        let name = other.policy == .file ? "The encrypted file" : "The Secret Service"
        return "\(name) also holds \(other.entries) entr\(other.entries == 1 ? "y" : "ies") of group \(store.group) (\(other.location)): "
            + "`tokencache migrate --from \(other.policy.rawValue) --to \(here)\(store.group == .universalStorage ? "" : " --group \(store.group)")` moves them here, "
            + "or `--backend \(other.policy.rawValue)` reads them there."
    }

    /// Warnings (with --verbose, debug) to stderr; with `TOKENCACHE_LOG_FILE` set, every record
    /// at trace level appended to that file too (never secrets).
    /// With `quiet` (`token --quiet`), stderr gets nothing but what is critical; the file still everything.
    static func logger(verbose: Bool, quiet: Bool = false) -> Logger {
        // With --json (and no --verbose) stderr is for the one error line only (ErrorReport).
        let stderrLevel: Logger.Level = quiet || (ErrorReport.json && !verbose) ? .critical : verbose ? .debug : .warning
        let fileHandler = logFile
        // One handler with or without the file, so stderr is always escaped.
        var logger = Logger(label: "tokencache") { label in
            StandardErrorAndFileLogHandler(standardError: StreamLogHandler.standardError(label: label),
                                           file: fileHandler?(label), standardErrorLevel: stderrLevel)
        }
        logger.logLevel = fileHandler == nil ? stderrLevel : .trace
        return logger
    }

    /// Handlers on `TOKENCACHE_LOG_FILE`, one descriptor per process, opened on first use.
    private static let logFile: (@Sendable (String) -> LineFileLogHandler)? = {
        guard let path = ProcessInfo.processInfo.environment["TOKENCACHE_LOG_FILE"], !path.isEmpty else { return nil }
        if let factory = LineFileLogHandler.appending(to: path) { return factory }
        Terminal.error("Cannot open TOKENCACHE_LOG_FILE \(path) for appending; logging to stderr only.", hint: nil)
        return nil
    }()
}

/// The mapping a `--collection` value names: default, session or a collection's label.
func collectionMapping(_ collection: String, create: Bool = false) -> SecretServiceBackend.CollectionMapping {
    switch collection {
    case "default": .defaultCollection
    case "session": .session
    default: .dedicated(label: collection, createIfMissing: create)
    }
}

/// Records at `standardErrorLevel` and above to stderr, escaped for the terminal, and every record
/// to the log file when there is one. (MultiplexLogHandler cannot do this: setting its level
/// sets every handler's.)
struct StandardErrorAndFileLogHandler: LogHandler {
    var standardError: StreamLogHandler
    var file: LineFileLogHandler?
    let standardErrorLevel: Logger.Level
    var logLevel: Logger.Level = .trace
    var metadata: Logger.Metadata = [:] {
        didSet { standardError.metadata = metadata; file?.metadata = metadata }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        if event.level >= standardErrorLevel {
            // Records quote server answers (error codes) and cache contents: escaped for the terminal.
            var visible = event
            visible.message = "\(Terminal.escape(event.message.description))"
            visible.metadata = event.metadata?.mapValues(Self.escaped)
            standardError.log(event: visible)
        }
        file?.log(event: event)
    }

    private static func escaped(_ value: Logger.MetadataValue) -> Logger.MetadataValue {
        switch value {
        case .string(let text): .string(Terminal.escape(text))
        case .stringConvertible(let value): .string(Terminal.escape(value.description))
        case .array(let values): .array(values.map(escaped))
        case .dictionary(let values): .dictionary(values.mapValues(escaped))
        }
    }
}

/// `--client`, `--authority` and `--scopes`: the app, where it signs in and what it asks for;
/// the options of every command that signs in or stores tokens (login, save, signup, reset-password).
/// Client and authority follow the one settings chain (``RequestSettings``), as `token`'s do.
struct AppOptions: ParsableArguments {
    @Option(help: ArgumentHelp("The client app (application ID); else TOKENCACHE_CLIENT_ID or the config file's \"client\".", valueName: "id"),
            transform: ClientIDArgument.parse)
    var client: ClientID?

    @Option(help: ArgumentHelp("The authority that issues the tokens, for example https://login.microsoftonline.com/organizations (for native sign-in a CIAM one, https://contoso.ciamlogin.com); else TOKENCACHE_AUTHORITY or the config file's \"authority\".",
                               valueName: "url"))
    var authority: String?

    @Option(help: ArgumentHelp("Scopes to ask for, separated by spaces; repeatable (--scopes A --scopes B asks for both).", valueName: "scopes"))
    var scopes: [String]

    /// The `--scopes` values split into scopes.
    var scopeList: [String] { TokenCacheCLI.scopeList(scopes) }

    /// The client and authority, from the options, else `TOKENCACHE_CLIENT_ID` and
    /// `TOKENCACHE_AUTHORITY`, else the config file; a usage error (64) when one is missing.
    func request() throws(CLIError) -> (client: ClientID, authority: Authority, settings: RequestSettings) {
        let settings = try RequestSettings.resolve(client: client, account: nil, authority: authority)
        return (try settings.requiredClient(), try settings.requiredAuthority(), settings)
    }

    /// Refuses a `--scopes` that names none: for the commands that ask for tokens (`save` need
    /// not, when the response lists its scopes).
    func requireScopes() throws {
        if scopeList.isEmpty { throw ValidationError("--scopes must name at least one scope.") }
    }
}

/// `--client ID`, refused while the command line is parsed (exit 64) as the cache would refuse it,
/// so every command takes the same client IDs.
enum ClientIDArgument {
    static func parse(_ value: String) throws -> ClientID {
        do { return try ClientID(value) } catch { throw ValidationError(error.message) }
    }
}

/// `--account NAME|HOME_ID`.
struct AccountSelector {
    /// The account named, in `authority`'s cloud when given; one name in two clouds is refused (exit 64).
    static func find(_ identifier: String, in store: AccountStore, authority: Authority? = nil) throws -> CachedAccount {
        guard let account = try store.account(identifier, authority: authority) else {
            throw CLIError.notFound("No account '\(identifier)' in group \(store.group).",
                                    hint: "Run `tokencache list` to see the cached accounts")
        }
        return account
    }
}

extension AccountSelector {
    /// How to pick one of an account's clouds on the command line.
    static let authorityHint = "Add --authority https://HOST/TENANT naming the host you signed in at (`tokencache list` shows each with its host); remove the one you do not recognise with `tokencache remove --account NAME --authority URL`"
}

/// Errors the CLI reports itself (besides library errors).
struct CLIError: Error, CustomStringConvertible {
    var message: String
    var hint: String?
    var exitCode: Int32
    /// The library error this one says in the command's words, when there is one: its code,
    /// reason and server answer are what `--json`'s error line reports.
    var cause: TokenCacheError?

    init(message: String, hint: String?, exitCode: Int32, cause: TokenCacheError? = nil) {
        (self.message, self.hint, self.exitCode, self.cause) = (message, hint, exitCode, cause)
    }

    static func notFound(_ message: String, hint: String? = nil, cause: TokenCacheError? = nil) -> CLIError {
        CLIError(message: message, hint: hint, exitCode: 2, cause: cause)
    }
    static func failed(_ message: String, hint: String? = nil, cause: TokenCacheError? = nil) -> CLIError {
        CLIError(message: message, hint: hint, exitCode: 1, cause: cause)
    }
    /// A command line that cannot be carried out as given (EX_USAGE, as ArgumentParser's own).
    static func usage(_ message: String, hint: String? = nil, cause: TokenCacheError? = nil) -> CLIError {
        CLIError(message: message, hint: hint, exitCode: 64, cause: cause)
    }
    var description: String { message }
}

/// Runs a command body, turning errors into one line plus a hint on stderr and an exit code.
/// Library hints are said as actions on this command line (``CLIHints``).
func reportingErrors(_ context: HintContext = HintContext(), _ body: () throws -> Void) throws {
    try reportedError(context) { try body() }
}

private func reportedError(_ context: HintContext, _ body: () throws -> Void) throws {
    do {
        try body()
    } catch let error as TokenCacheError {
        // A value given on the command line that the library refuses (an authority that is not a
        // URL, a client ID with spaces) is a usage error, as ArgumentParser's own are.
        let exitCode: Int32 = error.code == .invalidArgument || error.code == .ambiguousAccount ? 64 : 1
        ErrorReport.report(CLIError(message: CLIHints.message(of: error), hint: CLIHints.hint(for: error, in: context), exitCode: exitCode, cause: error))
        throw ExitCode(exitCode)
    } catch let error as CLIError {
        ErrorReport.report(error)
        throw ExitCode(error.exitCode)
    }
}

/// How a failure is said on stderr: `error:` and `hint:` lines for people, or, for a command run
/// with `--json`, exactly one JSON line and nothing else (what `… 2>&1 >/dev/null | jq` reads):
/// `{"error": {"code", "reason", "message", "hint", "exit_code", "server"}}`.
enum ErrorReport {
    private static let jsonMode = Atomic<Bool>(false)

    /// Whether this run reports failures as one JSON line: the parsed command has `--json` set.
    static var json: Bool { jsonMode.load(ordering: .relaxed) }

    /// Set once, before the command runs (``TokenCacheCommand/main()``).
    static func reportAsJSON(_ on: Bool) { jsonMode.store(on, ordering: .relaxed) }

    /// `--json`'s error line.
    struct Line: Encodable {
        struct Detail: Encodable {
            /// A ``TokenCacheError/Code`` name; for a failure the CLI finds itself, by its exit code:
            /// notFound (2), invalidArgument (64) or failed (1).
            var code: String
            /// A ``TokenCacheError/Reason`` name ("unspecified" when there is none).
            var reason: String
            var message: String
            var hint: String?
            var exitCode: Int32
            var server: Server?
            enum CodingKeys: String, CodingKey { case code, reason, message, hint, exitCode = "exit_code", server }
        }
        /// The identity provider's answer: `error`, `suberror`, `error_codes`, `error_description`.
        struct Server: Encodable {
            var error: String
            var suberror: String?
            var errorCodes: [Int]
            var errorDescription: String?
            /// A claims challenge to sign in with (a refresh refused for multi-factor authentication).
            var claims: String?
            enum CodingKeys: String, CodingKey {
                case error, suberror, errorCodes = "error_codes", errorDescription = "error_description", claims
            }
            init(_ details: ServerErrorDetails) {
                (error, suberror, errorCodes, errorDescription) = (details.error, details.suberror, details.errorCodes, details.errorDescription)
                claims = details.claims
            }
        }
        var error: Detail
    }

    /// Says `error` on stderr, as a JSON line with `--json`, else as `error:` and `hint:` lines.
    static func report(_ error: CLIError) {
        guard json else { return Terminal.error(error.message, hint: error.hint) }
        let code = error.cause.map { "\($0.code)" } ?? (error.exitCode == 2 ? "notFound" : error.exitCode == 64 ? "invalidArgument" : "failed")
        writeLine(Line(error: .init(code: code, reason: error.cause?.reason.name ?? "unspecified", message: error.message, hint: error.hint,
                                    exitCode: error.exitCode, server: error.cause?.server.map(Line.Server.init))))
    }

    /// One line of JSON on stderr, with sorted keys and terminal-safe escapes.
    static func writeLine(_ line: Line) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        if let data = try? encoder.encode(line) {
            StandardIO.write(JSONOutput.terminalSafe(data) + Data("\n".utf8), to: STDERR_FILENO)
        }
    }
}

/// A command that takes `--json`: its failures are one JSON line on stderr (``ErrorReport``).
protocol JSONReporting {
    var json: Bool { get }
}

/// Splits a `--scopes "A B"` value.
func scopeList(_ text: String) -> [String] {
    text.split(whereSeparator: { $0 == " " || $0 == "," }).map(String.init)
}

/// Every scope of a repeated `--scopes`, in order, each once.
func scopeList(_ values: [String]) -> [String] {
    var seen = Set<String>()
    return values.flatMap { scopeList($0) }.filter { seen.insert($0).inserted }
}

/// Keeps a value until the process exits: every store a command opens, and large results. Freeing
/// a large cache's object graph is measurable work, and the process ends right after (nothing
/// in their teardown needs to run before exit).
func keepUntilExit(_ value: any Sendable) {
    keptUntilExit.withLock { $0.append(value) }
}

private let keptUntilExit = Mutex<[any Sendable]>([])

extension ListCommand: JSONReporting {}
extension TokenCommand: JSONReporting {}
extension LoginCommand: JSONReporting {}
extension SignUpCommand: JSONReporting {}
extension ResetPasswordCommand: JSONReporting {}
extension DoctorCommand: JSONReporting {}
extension GroupsCommand: JSONReporting {}
extension StoresCommand: JSONReporting {}
extension AgentCommand: JSONReporting {}
extension BrokerCommand: JSONReporting {}
