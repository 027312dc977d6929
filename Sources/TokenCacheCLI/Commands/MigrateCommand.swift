import ArgumentParser
import FoundationEssentials
import Logging
import TokenCache

struct MigrateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Move a group from one backend to another, losing nothing if interrupted, or copy another tool's MSAL cache into a group.",
        discussion: """
        Copies every entry, reads the destination back to verify it, and only then removes the \
        copied entries from the source. Running it again after an interruption finishes the job. \
        On the Secret Service, --from-collection and --to-collection name the collection of each \
        side (default, session or a collection's label), so a group can also move between two \
        collections.

        --from-store NAME (instead of --from) copies another tool's MSAL cache (a name \
        `tokencache stores` shows, such as azure-cli) into the group on --to, unknown fields \
        included, and verifies the copy by reading the group back. The source is never changed \
        or deleted: remove it yourself once you have checked the copy. Entries already in the \
        group stay.

        Examples:
          tokencache migrate --from file --to secret-service
          tokencache migrate --from secret-service --from-collection session --to secret-service --to-collection default
          tokencache migrate --from-store azure-cli --to secret-service
        """)

    @Option(help: ArgumentHelp("The backend to move from: secret-service or file.", valueName: "backend"))
    var from: BackendPolicy?

    @Option(name: .customLong("from-store"),
            help: ArgumentHelp("Copy another tool's MSAL cache instead (a name `tokencache stores` shows); it is left as it was.", valueName: "name"))
    var fromStore: String?

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
        if let group {
            do { _ = try CacheGroup(group) } catch { throw ValidationError(error.description) }
        }
        guard to != .automatic else { throw ValidationError("--to must be secret-service or file.") }
        if fromStore != nil {
            guard from == nil else { throw ValidationError("Give --from or --from-store, not both.") }
            if toCollection.isEmpty { throw ValidationError("--to-collection needs default, session or a collection's label.") }
            return
        }
        guard let from else { throw ValidationError("Give --from (a backend) or --from-store (another tool's cache).") }
        guard from != .automatic else { throw ValidationError("--from and --to must be secret-service or file.") }
        guard from != to || (from == .secretService && fromCollection != toCollection) else {
            throw ValidationError(from == .file ? "--from and --to must differ."
                                  : "--from and --to are both secret-service: give different --from-collection and --to-collection.")
        }
        if fromCollection.isEmpty || toCollection.isEmpty { throw ValidationError("--from-collection and --to-collection need default, session or a collection's label.") }
    }

    func run() throws {
        if let fromStore { return try copy(fromStore) }
        guard let from else { return }
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

    /// Copies another tool's cache into the group and verifies it; the source is only read.
    /// Read without the owner's lock, as its readers do: the blob is one whole write (a torn read
    /// is retried) and what is verified is that snapshot, so no lock file is made beside it.
    private func copy(_ storeName: String) throws {
        try reportingErrors(.migrate(collectionOption: "--to-collection")) {
            let logger = StoreOptions.logger(verbose: verbose)
            let external = ExternalStores.access(try ExternalStores.named(storeName), verbose: verbose)
            let (source, _) = try ExternalStores.inventory(of: external)
            let json = try source.exportMSALJSON()
            let settings = try StoreSettings.resolve(backend: to, group: group, collection: nil, passphraseFile: nil)
            let group = settings.group.value
            let backend = try open(to, collection: toCollection, group: group, keySource: StoreOptions.fileKeySource(settings),
                                   logger: logger, hints: .migrate(collectionOption: "--to-collection"))
            var options = AccountStore.Options()
            options.logger = logger
            let destination = AccountStore(backend: backend, group: group, options: options)
            keepUntilExit(destination)
            let copied = try CacheMigration.copy(msalJSON: json, into: destination)
            let name = external.store.name, location = external.store.location
            Terminal.print("Copied \(copied) entr\(copied == 1 ? "y" : "ies") of \(name) (\(location)) into \(group) on \(backend.location(of: group)); verified. The source was not changed.")
            let collection = to == .secretService && toCollection != "default" ? " --collection \(toCollection)" : ""
            var removal = "Once you have checked the copy (tokencache list --backend \(to.rawValue)\(collection) --group \(group)), remove the source yourself: `tokencache remove --store \(name) --account NAME --yes` removes an account under its owner's lock"
            removal += external.store.isEncrypted ? "." : ", or delete \(location)."
            if name == "azure-cli" {
                removal += " Azure CLI can keep its cache in the keyring instead of this plaintext file: `az config set core.encrypt_token_cache=true` (it falls back to the plaintext file whenever libsecret fails)."
            }
            Terminal.print(TerminalText(removal))
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
