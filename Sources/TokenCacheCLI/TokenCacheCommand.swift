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
        `tokencache <command> --help` shows what a command does, its own options, then the \
        storage options most commands share (--backend, --group, ...) once. Settings: the \
        option, else TOKENCACHE_*, else ~/.config/tokencache/config.json (`tokencache \
        doctor` shows which). Exit codes: 0 success, 1 error, 2 nothing found, 64 bad \
        arguments. `man tokencache` has the whole reference.
        """,
        version: TokenCacheVersion.described,
        groupedSubcommands: taskGroups.map { CommandGroup(name: $0.name, subcommands: $0.commands) }
    )

    /// The commands by task, in the order a newcomer needs them: the help's groups and the short
    /// usage's (#59 item 8).
    static let taskGroups: [(name: String, commands: [any ParsableCommand.Type])] = [
        ("Sign-in and token", [LoginCommand.self, TokenCommand.self, LogoutCommand.self, PhotoCommand.self]),
        ("Inspect and clean up", [ListCommand.self, GroupsCommand.self, StoresCommand.self, RemoveCommand.self]),
        ("Move tokens", [SaveCommand.self, ImportCommand.self, ExportCommand.self, MigrateCommand.self]),
        ("Share with other programs", [AgentCommand.self, BrokerCommand.self, KeeperCommand.self, GitCredentialCommand.self, KubectlCredentialCommand.self]),
        ("Keyring and checks", [UnlockCommand.self, LockCommand.self, DoctorCommand.self]),
        ("Entra External ID", [SignUpCommand.self, ResetPasswordCommand.self]),
    ]

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
            if code == .success { printingHelp(error) }
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
            if exitCode(for: error) == .success { printingHelp(error) }
            exit(withError: error)
        }
    }

    /// Help (`--help`, `help COMMAND`) as ArgumentParser words it, but with a usage line that
    /// says the options are optional: `tokencache list [<options>]`, not `<options>` (#59 item 8).
    /// Returns for anything else (a version, a dump).
    static func printingHelp(_ error: any Error) {
        let text = fullMessage(for: error)
        guard text.split(separator: "\n").contains(where: { $0.hasPrefix("USAGE: ") }) else { return }
        print(storageOptionsLast(optionalOptions(inUsage: text)))
        exit(withError: ExitCode.success)
    }

    /// The STORAGE OPTIONS section (``StoreOptions``, shared by most commands) after the
    /// command's own OPTIONS, where ArgumentParser puts a titled section first: what the command
    /// does, its own options, then the shared ones once (#59 item 8).
    static func storageOptionsLast(_ text: String) -> String {
        let trailing = text.reversed().prefix { $0 == "\n" }.count
        var sections = text.dropLast(trailing).split(separator: "\n\n", omittingEmptySubsequences: false)
        guard let storage = sections.firstIndex(where: { $0.hasPrefix("STORAGE OPTIONS:\n") }) else { return text }
        let moved = sections.remove(at: storage)
        guard let own = sections.firstIndex(where: { $0.hasPrefix("OPTIONS:\n") }) else { return text }
        sections.insert(moved, at: own + 1)
        return sections.joined(separator: "\n\n") + String(repeating: "\n", count: trailing)
    }

    /// The USAGE line's trailing ` <options>` as ` [<options>]`.
    static func optionalOptions(inUsage text: String) -> String {
        text.split(separator: "\n", omittingEmptySubsequences: false).map { line in
            line.hasPrefix("USAGE: ") && line.hasSuffix(" <options>") ? line.dropLast("<options>".count) + "[<options>]" : line
        }.joined(separator: "\n")
    }

    /// Whether a command line asks a command that takes `--json` for it (before any `--`).
    static func jsonRequested(_ arguments: [String]) -> Bool {
        guard let name = arguments.first,
              let command = configuration.subcommands.first(where: { $0._commandName == name }), command is any JSONReporting.Type else { return false }
        return arguments.dropFirst().prefix(while: { $0 != "--" }).contains("--json")
    }

    /// What `tokencache` alone prints: the commands by task, and where the rest is.
    static var shortUsage: String {
        let groups: [(String, [String])] = taskGroups.map { ($0.name, $0.commands.map { $0._commandName }) }
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
    static let string = "0.6.0"

    /// What `--version` prints: the release and the commit it was built from, "dirty" when the
    /// checkout had uncommitted changes (BuildInfoPlugin), so two builds of one release differ.
    static let described = describe(release: string, commit: BuildInfo.commit, isDirty: BuildInfo.isDirty)

    static func describe(release: String, commit: String, isDirty: Bool) -> String {
        "\(release) (commit \(commit)\(isDirty ? ", dirty" : ""))"
    }
}
