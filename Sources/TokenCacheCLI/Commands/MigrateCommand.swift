import ArgumentParser
import FoundationEssentials
import Logging
import TokenCache

struct MigrateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Move a group from one backend to another, losing nothing if interrupted.",
        discussion: """
        Copies every entry, reads the destination back to verify it, and only then removes the \
        copied entries from the source. Running it again after an interruption finishes the job. \
        On the Secret Service, --from-collection and --to-collection name the collection of each \
        side (default, session or a collection's label), so a group can also move between two \
        collections.

        Examples:
          tokencache migrate --from file --to secret-service
          tokencache migrate --from secret-service --from-collection session --to secret-service --to-collection default
        """)

    @Option(help: ArgumentHelp("The backend to move from: secret-service or file.", valueName: "backend"))
    var from: BackendPolicy

    @Option(help: ArgumentHelp("The backend to move to: secret-service or file.", valueName: "backend"))
    var to: BackendPolicy

    @Option(help: ArgumentHelp("The sharing group. Default: $TOKENCACHE_GROUP, else the config file's \"group\", else \(CacheGroup.universalStorage.name).",
                               valueName: "name"))
    var group: String?

    @Option(help: ArgumentHelp("With --from secret-service, the collection to move from: default, session or a collection's label.",
                               valueName: "collection"))
    var fromCollection: String = "default"

    @Option(help: ArgumentHelp("With --to secret-service, the collection to move to: default, session or a collection's label.",
                               valueName: "collection"))
    var toCollection: String = "default"

    @Flag(help: "On the Secret Service, let the provider show a prompt that needs you (an unlock dialog) and wait up to 60 s for it.")
    var allowPrompt = false

    @Flag(help: "Log what the library does.")
    var verbose = false

    func validate() throws {
        guard from != .automatic, to != .automatic else { throw ValidationError("--from and --to must be secret-service or file.") }
        guard from != to || (from == .secretService && fromCollection != toCollection) else {
            throw ValidationError(from == .file ? "--from and --to must differ."
                                  : "--from and --to are both secret-service: give different --from-collection and --to-collection.")
        }
        if fromCollection.isEmpty || toCollection.isEmpty { throw ValidationError("--from-collection and --to-collection need default, session or a collection's label.") }
        if let group {
            do { _ = try CacheGroup(group) } catch { throw ValidationError(error.description) }
        }
    }

    func run() throws {
        try reportingErrors(.migrate(collectionOption: "--from-collection or --to-collection")) {
            let logger = StoreOptions.logger(verbose: verbose)
            // The group and passphrase file as every other command resolves them.
            let settings = try StoreSettings.resolve(backend: from, group: group, collection: nil, passphraseFile: nil)
            let group = settings.group.value
            let keySource = StoreOptions.fileKeySource(settings)
            let source = try open(from, collection: fromCollection, group: group, keySource: keySource, logger: logger,
                                  hints: .migrate(collectionOption: "--from-collection"))
            let destination = try open(to, collection: toCollection, group: group, keySource: keySource, logger: logger,
                                       hints: .migrate(collectionOption: "--to-collection"))
            let report = try CacheMigration.migrate(group, from: source, to: destination)
            Terminal.print("Moved \(report.copied) entr\(report.copied == 1 ? "y" : "ies") of \(group) from \(source.location(of: group)) to \(destination.location(of: group)).")
        }
    }

    /// One side, its Secret Service collection checked up front so that an error names that
    /// side's option.
    private func open(_ policy: BackendPolicy, collection: String, group: CacheGroup,
                      keySource: EncryptedFileBackend.KeySource, logger: Logger, hints: HintContext) throws -> any CacheBackend {
        try hints.translating {
            var options = SecretServiceBackend.Options()
            options.defaultMapping = collectionMapping(collection)
            options.allowsUnlockPrompt = allowPrompt
            let backend = try BackendSelection.open(policy: policy, logger: logger, keySource: keySource, secretService: options).backend
            if let secretService = backend as? SecretServiceBackend { try secretService.checkCollection(for: group) }
            return backend
        }
    }
}
