import ArgumentParser
import FoundationEssentials
import TokenCache

struct MigrateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Move a group from one backend to another, losing nothing if interrupted.",
        discussion: """
        Copies every entry, reads the destination back to verify it, and only then removes the \
        copied entries from the source. Running it again after an interruption finishes the job.

        Example:
          tokencache migrate --from file --to secret-service
        """)

    @Option(help: ArgumentHelp("The backend to move from: secret-service or file.", valueName: "backend"))
    var from: BackendPolicy

    @Option(help: ArgumentHelp("The backend to move to: secret-service or file.", valueName: "backend"))
    var to: BackendPolicy

    @Option(help: ArgumentHelp("The sharing group. Default: $TOKENCACHE_GROUP, else the config file's \"group\", else \(CacheGroup.universalStorage.name).",
                               valueName: "name"))
    var group: String?

    @Flag(help: "Log what the library does.")
    var verbose = false

    func validate() throws {
        guard from != .automatic, to != .automatic else { throw ValidationError("--from and --to must be secret-service or file.") }
        guard from != to else { throw ValidationError("--from and --to must differ.") }
        if let group {
            do { _ = try CacheGroup(group) } catch { throw ValidationError(error.description) }
        }
    }

    func run() throws {
        try reportingErrors {
            let logger = StoreOptions.logger(verbose: verbose)
            // The group, collection and passphrase file as every other command resolves them.
            let settings = try StoreSettings.resolve(backend: from, group: group, collection: nil, passphraseFile: nil)
            let group = settings.group.value
            let keySource = StoreOptions.fileKeySource(settings)
            let secretService = StoreOptions.secretServiceOptions(settings, allowPrompt: false)
            let source = try BackendSelection.open(policy: from, logger: logger, keySource: keySource, secretService: secretService).backend
            let destination = try BackendSelection.open(policy: to, logger: logger, keySource: keySource, secretService: secretService).backend
            let report = try CacheMigration.migrate(group, from: source, to: destination)
            Terminal.print("Moved \(report.copied) entr\(report.copied == 1 ? "y" : "ies") of \(group) from \(source.location(of: group)) to \(destination.location(of: group)).")
        }
    }
}
