import ArgumentParser
import FoundationEssentials
import TokenCache
#if canImport(Glibc)
import Glibc
#endif

enum CacheFormat: String, ExpressibleByArgument, CaseIterable {
    case msalJSON = "msal-json"
}

struct ImportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Import an MSAL unified JSON cache (MSAL Python, msal-extensions, Azure CLI).",
        discussion: """
        Entries are matched on their fields, so importing twice changes nothing (and says so). \
        Where the group holds the same token written later (a refresh token rotated since the \
        file was saved), the group's is kept and the count said: an older copy never brings \
        back a refresh token the server no longer accepts. Nothing another SDK wrote is dropped: unknown fields and sections, app-only tokens and \
        entries with empty secrets are kept and exported as they are. Only entries that are not \
        JSON objects are skipped, each listed with the reason. A UTF-8 byte-order mark and MSAL \
        .NET's trailing commas are accepted. A file whose credential sections (AccessToken, \
        RefreshToken, IdToken, Account, AppMetadata) are not objects is refused, and nothing is \
        imported: no SDK could read it back.

        Examples:
          tokencache import --format msal-json ~/.azure/msal_token_cache.json
          ssh host cat .azure/msal_token_cache.json \\
            | tokencache import -
        """)

    @Option(help: "The file format.")
    var format: CacheFormat = .msalJSON

    @Argument(help: ArgumentHelp("The cache file; - for standard input.", valueName: "file"), completion: .file())
    var file: String

    @OptionGroup(title: "Storage options") var store: StoreOptions

    func run() throws {
        try reportingErrors {
            let limit = AccountStore.maximumImportSize
            guard let data = try PathArgument.read(file, limit: limit, unchanged: "nothing was imported",
                                                   hint: "Name the MSAL JSON cache file to import, or - for standard input") else {
                throw CLIError.failed("\(file == "-" ? "Standard input" : file) holds more than \(limit >> 20) MiB, more than a token cache; nothing was imported.",
                                      hint: "Name the MSAL JSON cache file to import")
            }
            let store = try store.openStore()
            let report = try store.importMSALJSON(data)
            let count = report.importedCount - (report.imported[.unknownSection] ?? 0)
            let entries = "\(count) entr\(count == 1 ? "y" : "ies")"
            if report.changedCount == 0 && report.keptNewerCount == 0 {
                Terminal.print("Nothing changed: the \(entries) of the file were already in \(store.group).")
            } else {
                Terminal.print("Imported \(entries) into \(store.group) (\(report.changedCount) new or changed).")
            }
            if report.keptNewerCount > 0 {
                let kept = report.keptNewerCount
                Terminal.print("Kept \(kept) newer entr\(kept == 1 ? "y" : "ies") of \(store.group) in place of the file's older ones (a refresh token rotated since, a later access token).")
            }
            if let kept = report.imported[.unknownSection], kept > 0 {
                Terminal.print("Kept \(kept) top-level member\(kept == 1 ? "" : "s") this tool does not use (other SDKs' data) as \(kept == 1 ? "it is" : "they are").")
            }
            for skipped in report.skipped {
                Terminal.print("Skipped \(skipped.section)\(skipped.key.map { " \($0)" } ?? ""): \(skipped.reason)")
            }
        }
    }
}

struct ExportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Export the group as MSAL unified JSON. The output holds secrets.",
        discussion: """
        With --output the file is created with mode 0600 (an existing file is refused). Writing \
        secrets to a terminal prints a warning first.

        Example:
          tokencache export --format msal-json --output cache.json
        """)

    @Option(help: "The file format.")
    var format: CacheFormat = .msalJSON

    @Option(help: ArgumentHelp("Write to this file (mode 0600) instead of standard output.", valueName: "file"), completion: .file())
    var output: String?

    @OptionGroup(title: "Storage options") var store: StoreOptions

    func run() throws {
        try reportingErrors {
            let store = try store.openStore()
            let data = try store.exportMSALJSON()
            if let output {
                let descriptor = open(output, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
                guard descriptor >= 0 else {
                    let code = errno
                    throw CLIError(message: "Cannot create \(output): \(String(cString: strerror(code)).lowercased()); nothing was written.",
                                   hint: Self.createHint(output, errno: code), exitCode: PathArgument.isPathProblem(code) ? 64 : 1)
                }
                defer { close(descriptor) }
                guard StandardIO.write(data, to: descriptor), fsync(descriptor) == 0 else {
                    throw CLIError.failed("Cannot write \(output): \(String(cString: strerror(errno))).",
                                          hint: "Check the free space; delete the partial file, it holds secrets")
                }
                Terminal.print("Exported group \(store.group) to \(output) (mode 0600). It holds secrets: delete it when done.")
            } else {
                if Terminal.stdoutIsTerminal {
                    Terminal.warning("the export below holds tokens; anyone who sees it can use them")
                }
                JSONOutput.print(data)
            }
        }
    }

    /// What to do when --output cannot be created, by why.
    static func createHint(_ path: String, errno code: Int32) -> String {
        let directory = path.contains("/") ? String(path[..<path.lastIndex(of: "/")!]) : "."
        switch code {
        case EEXIST: return "Choose a path that does not exist yet: export never overwrites a file"
        case ENOENT, ENOTDIR: return "Create the directory first (mkdir -p \(directory.isEmpty ? "/" : directory)), or choose a file in an existing directory"
        case EACCES, EPERM, EROFS: return "Choose a file in a directory you can write to"
        case ELOOP: return "Choose a path that is not a symbolic link"
        default: return "Choose another path for --output"
        }
    }
}
