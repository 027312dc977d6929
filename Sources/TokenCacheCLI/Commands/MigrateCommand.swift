import ArgumentParser
import FoundationEssentials
import Logging
@_spi(Backend) import TokenCache
import TokenCacheAdmin
@_spi(Backend) import TokenCacheCore

struct MigrateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Move a group from one backend to another, losing nothing if interrupted, or copy another tool's MSAL cache into a group.",
        discussion: """
        Copies every entry, reads the destination back to verify it, and only then removes the \
        copied entries from the source. Running it again after an interruption finishes the job. \
        On the Secret Service, --from-collection and --to-collection name the collection of each \
        side (default, session or a collection's label), so a group can also move between two \
        collections. Inside a Flatpak or Snap sandbox, --to sandbox moves the group into the \
        app's file keyring keyed by the Secret portal (which --backend auto uses there, and \
        libsecret and oo7 code of the app read), from the host's Secret Service (the app needs \
        --talk-name=org.freedesktop.secrets for that) or the encrypted file.

        --from-store NAME (instead of --from) copies another tool's MSAL cache (a name \
        `tokencache stores` shows, such as azure-cli) into the group on --to, unknown fields \
        included, and verifies the copy by reading the group back. The source is not changed \
        unless --remove-source is given (below). Entries already in the group stay.

        --to-store NAME (instead of --to) copies the store into another tool's store, under that \
        store's lock, creating it when it does not exist yet (the file with mode 0600, the \
        keyring item with its owner's schema, attributes and label), and verifies the copy by \
        reading it back. --configure-azure-cli (with --to-store azure-cli-encrypted-2.91, the \
        item released Azure CLI up to 2.91 reads, or azure-cli-encrypted, the item of Azure \
        CLI's main branch; `az version` tells) then sets `[core] encrypt_token_cache = true` in \
        Azure CLI's config file, so Azure CLI reads the keyring item from now on.

        --remove-source (with --from-store, into a group or a store) deletes the source only \
        after the copy was verified, only if it still holds exactly what was copied (re-read \
        under its owner's lock), and asks first on a terminal (--yes elsewhere).

        Examples:
          tokencache migrate --from file --to secret-service
          # inside a Flatpak or Snap
          tokencache migrate --from secret-service --to sandbox
          tokencache migrate --from secret-service --from-collection session \\
              --to secret-service --to-collection default
          tokencache migrate --from-store azure-cli --to secret-service
          tokencache migrate --from-store azure-cli \\
              --to-store azure-cli-encrypted-2.91 --configure-azure-cli \\
              --remove-source

        --to-key-source (alone) re-encrypts every group of the encrypted file with another key \
        source: key-file, tpm (sealed to this machine's TPM 2.0) or passphrase. Each group is \
        read back with the new key before the old key file or sealed key is removed. To a \
        passphrase, the new passphrase is asked for on a terminal, or read from the file \
        TOKENCACHE_PASSPHRASE_FILE names. The key source already in use is nothing to do.
          tokencache migrate --to-key-source tpm
          TOKENCACHE_PASSPHRASE_FILE=~/.pass \\
              tokencache migrate --to-key-source passphrase

        --dry-run says what would be moved, copied or re-encrypted, and changes nothing.
        """)

    @Flag(help: "Say what would be moved, copied or re-encrypted, and change nothing.")
    var dryRun = false

    @Option(name: .customLong("to-key-source"),
            help: ArgumentHelp("Re-encrypt the encrypted file's groups with this key source instead: key-file, tpm or passphrase.", valueName: "source"))
    var toKeySource: KeySourceChoice?

    @Option(help: ArgumentHelp("The backend to move from: secret-service or file.", valueName: "backend"),
            completion: .list(["secret-service", "file"]), transform: Self.concreteBackend)
    var from: BackendPolicy?

    @Option(name: .customLong("from-store"),
            help: ArgumentHelp("Copy another tool's MSAL cache instead (a name `tokencache stores` shows); it is left as it was unless --remove-source is given.", valueName: "name"),
            completion: ExternalStores.completion)
    var fromStore: String?

    @Option(help: ArgumentHelp("The backend to move to: secret-service, file, or sandbox (inside a Flatpak or Snap: the app's file keyring keyed by the Secret portal, which auto uses there).",
                               valueName: "backend"),
            completion: .list(["secret-service", "file", "sandbox"]), transform: Self.destination)
    var to: Destination?

    /// Where --to points: a backend, or the sandboxed app's portal-keyed file keyring.
    enum Destination: Equatable {
        case backend(BackendPolicy)
        case sandboxKeyring

        /// The policy settings resolve with; inside a sandbox `auto` is the sandbox keyring.
        var policy: BackendPolicy { if case .backend(let policy) = self { policy } else { .automatic } }
    }

    private static func destination(_ value: String) throws -> Destination {
        value == "sandbox" ? .sandboxKeyring : .backend(try concreteBackend(value))
    }

    /// A migration names both sides: `auto` would move a group onto whichever backend answers.
    private static func concreteBackend(_ value: String) throws -> BackendPolicy {
        guard let policy = BackendPolicy(argument: value), policy != .automatic else {
            throw ValidationError("'\(value)' is not secret-service or file (a migration names both sides).")
        }
        return policy
    }

    @Option(name: .customLong("to-store"),
            help: ArgumentHelp("With --from-store, copy into another tool's store instead (created when missing).", valueName: "name"),
            completion: ExternalStores.completion)
    var toStore: String?

    @Flag(help: "With --to-store azure-cli-encrypted-2.91 or azure-cli-encrypted, set encrypt_token_cache = true in Azure CLI's config once the copy is verified.")
    var configureAzureCli = false

    @Flag(help: "With --from-store, delete the source store once the copy is verified.")
    var removeSource = false

    @Flag(help: "Do not ask before deleting the source (needed where no question can be asked).")
    var yes = false

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
        if toKeySource != nil {
            guard from == nil, to == nil, fromStore == nil, toStore == nil else { throw ValidationError("--to-key-source goes alone: it changes the encrypted file's key, not its backend.") }
            return
        }
        guard (to == nil) != (toStore == nil) else { throw ValidationError("Give --to (a backend) or --to-store (another tool's store), one of them.") }
        if toStore != nil && fromStore == nil { throw ValidationError("--to-store copies a store: give --from-store NAME too.") }
        if configureAzureCli && !["azure-cli-encrypted-2.91", "azure-cli-encrypted"].contains(toStore ?? "") {
            throw ValidationError("--configure-azure-cli goes with --to-store azure-cli-encrypted-2.91 (Azure CLI up to 2.91) or azure-cli-encrypted (Azure CLI's main branch).")
        }
        if removeSource && fromStore == nil { throw ValidationError("--remove-source goes with --from-store; --from removes what it moved already.") }
        if let fromStore, fromStore == toStore { throw ValidationError("--from-store and --to-store must differ.") }
        if fromStore != nil {
            guard from == nil else { throw ValidationError("Give --from or --from-store, not both.") }
            if toCollection.isEmpty { throw ValidationError("--to-collection needs default, session or a collection's label.") }
            return
        }
        guard let from else { throw ValidationError("Give --from (a backend) or --from-store (another tool's cache).") }
        guard from != .automatic else { throw ValidationError("--from and --to must be secret-service or file.") }
        guard .backend(from) != to || (from == .secretService && fromCollection != toCollection) else {
            throw ValidationError(from == .file ? "--from and --to must differ."
                                  : "--from and --to are both secret-service: give different --from-collection and --to-collection.")
        }
        if fromCollection.isEmpty || toCollection.isEmpty { throw ValidationError("--from-collection and --to-collection need default, session or a collection's label.") }
    }

    func run() throws {
        if let toKeySource { return try changeKeySource(to: toKeySource) }
        if let fromStore, let toStore { return try copy(fromStore, toStore: toStore) }
        if let fromStore { return try copy(fromStore) }
        guard let from, let to else { return }
        try reportingErrors(.migrate(collectionOption: "--from-collection or --to-collection")) {
            let logger = StoreOptions.logger(verbose: verbose)
            // The group and passphrase file as every other command resolves them.
            let settings = try StoreSettings.resolve(backend: from, group: group, collection: nil, passphraseFile: nil)
            let group = settings.group.value
            let keySource = try StoreOptions.fileKeySource(settings)
            let source = try open(from, collection: fromCollection, group: group, keySource: keySource, logger: logger,
                                  hints: .migrate(collectionOption: "--from-collection"))
            let destination = try open(to, collection: toCollection, group: group, keySource: keySource, logger: logger,
                                       hints: .migrate(collectionOption: "--to-collection"))
            if dryRun {
                let count = try source.load(group).entries.count
                Terminal.print("Would move \(count) entr\(count == 1 ? "y" : "ies") of \(group) from \(source.location(of: group)) to \(destination.location(of: group)); nothing was changed.")
                return
            }
            let report = try CacheMigration.migrate(group, from: source, to: destination)
            Terminal.print("Moved \(report.copied) entr\(report.copied == 1 ? "y" : "ies") of \(group) from \(source.location(of: group)) to \(destination.location(of: group)).")
            // What later commands read: the backend setting without this command's --from.
            if case .backend(let moved) = to, moved != .automatic,
               let warning = Self.readersElsewhere(moved, settings: try StoreSettings.resolve(backend: nil, group: nil, collection: nil, passphraseFile: nil)) {
                Terminal.warning(warning)
            }
        }
    }

    /// Re-encrypts the encrypted file with another key source (the library reads each group back first).
    private func changeKeySource(to choice: KeySourceChoice) throws {
        try reportingErrors(.migrate(collectionOption: "--from-collection")) {
            let settings = try StoreSettings.resolve(backend: .file, group: group, collection: nil, passphraseFile: nil)
            // The current key as the cache's files say; to a passphrase, a passphrase file is the new one.
            var now = settings
            now.keySource = nil
            if choice == .passphrase { now.passphraseFile = nil }
            // migrate has no --passphrase-file: its hints name the variable only.
            let current = try StoreOptions.fileKeySource(now, passphraseFlag: false)
            let directory = EncryptedFileBackend().fileURL(for: settings.group.value).deletingLastPathComponent().path
            // The key source in use already: nothing to do (a passphrase may be changed, so it is asked for).
            switch (choice, current) {
            case (.keyFile, .keyFile), (.tpm, .tpm):
                Terminal.print("Nothing to do: the encrypted file (\(directory)) is keyed by its \(choice == .tpm ? "TPM-sealed key" : "key file") already; nothing was changed.")
                return
            default: break
            }
            if dryRun {
                Terminal.print("Would re-encrypt every group of the encrypted file (\(directory)) from \(current) to \(choice.rawValue), reading each back before the old key goes; nothing was changed.")
                return
            }
            let new: EncryptedFileBackend.KeySource = switch choice {
            case .keyFile: .keyFile()
            case .tpm: .tpm(tcti: settings.tpmTCTI?.value)
            case .passphrase: if let file = settings.passphraseFile {
                .passphrase(try Passphrase.read(file.value, from: file.source))
            } else {
                Passphrase.newKeySource(directory: directory)
            }
            }
            let result = try EncryptedFileBackend(keySource: current).changeKeySource(to: new)
            if result.groups == 0 {
                Terminal.print("Nothing to do: every group of the encrypted file (\(directory)) reads with \(new) already; nothing was re-encrypted.")
            } else {
                Terminal.print("Re-encrypted \(result.groups) group\(result.groups == 1 ? "" : "s") from \(current) to \(new); every one read back.")
            }
        }
    }

    /// A warning when the commands will not read the backend the group was moved to (#46): the
    /// backend setting names another one, or `auto` picks another one here.
    static func readersElsewhere(_ moved: BackendPolicy, settings: StoreSettings) -> String? {
        let set = settings.backend
        let how = "set TOKENCACHE_BACKEND=\(moved.rawValue) or \"backend\": \"\(moved.rawValue)\" in the config file (or pass --backend \(moved.rawValue))"
        if set.value == .automatic {
            guard !BackendSelection.automaticChooses(moved) else { return nil }
            return "The automatic backend (\(set.source)) does not read the \(moved == .file ? "encrypted file" : "Secret Service") here, so commands will not see the moved accounts: \(how)."
        }
        guard set.value != moved else { return nil }
        return "The backend setting (\(set.source)) is \(set.value.rawValue), not \(moved.rawValue), so commands will not see the moved accounts: \(how)."
    }

    /// Copies another tool's cache into the group and verifies it; the source is only read.
    /// Read without the owner's lock, as its readers do: the blob is one whole write (a torn read
    /// is retried) and what is verified is that snapshot, so no lock file is made beside it.
    private func copy(_ storeName: String) throws {
        guard let to else { return }
        try reportingErrors(.migrate(collectionOption: "--to-collection")) {
            let logger = StoreOptions.logger(verbose: verbose)
            let external = ExternalStores.access(try ExternalStores.named(storeName), verbose: verbose)
            let source = try ExternalStores.read(external, everything: true)
            let json = try source.exportMSALJSON()
            let settings = try StoreSettings.resolve(backend: to.policy, group: group, collection: nil, passphraseFile: nil)
            let group = settings.group.value
            let backend = try open(to, collection: toCollection, group: group, keySource: try StoreOptions.fileKeySource(settings),
                                   logger: logger, hints: .migrate(collectionOption: "--to-collection"))
            if dryRun {
                let count = try source.entries().count
                Terminal.print("Would copy \(count) entr\(count == 1 ? "y" : "ies") of \(external.store.name) (\(external.store.location)) into \(group) on \(backend.location(of: group))\(removeSource ? ", then delete the source" : ""); nothing was changed.")
                return
            }
            var options = AccountStore.Options()
            options.logger = logger
            let destination = AccountStore(backend: backend, group: group, options: options)
            keepUntilExit(destination)
            let copied = try CacheMigration.copy(msalJSON: json, into: destination)
            let name = external.store.name, location = external.store.location
            Terminal.print("Copied \(copied) entr\(copied == 1 ? "y" : "ies") of \(name) (\(location)) into \(group) on \(backend.location(of: group)); verified.")
            if removeSource {
                try removeVerifiedSource(external, copied: try source.entries())
                return
            }
            Terminal.print("The source was not changed.")
            let collection = to == .backend(.secretService) && toCollection != "default" ? " --collection \(toCollection)" : ""
            var removal = "Once you have checked the copy (tokencache list --backend \(to.policy.rawValue)\(collection) --group \(group)), remove the source yourself: `tokencache remove --store \(name) --account NAME --yes` removes an account under its owner's lock"
            removal += external.store.isEncrypted ? "." : ", or delete \(location)."
            if name == "azure-cli" {
                removal += " Azure CLI can keep its cache in the keyring instead of this plaintext file: `tokencache migrate --from-store azure-cli --to-store azure-cli-encrypted-2.91 --configure-azure-cli` (Azure CLI up to 2.91; azure-cli-encrypted for later layouts; needs a desktop keyring) moves it there and turns on Azure CLI's core.encrypt_token_cache for you, as `az config set core.encrypt_token_cache=true` would (Azure CLI falls back to the plaintext file whenever libsecret fails)."
            }
            Terminal.print(TerminalText(removal))
        }
    }

    /// Copies one store into another under the destination's lock (creating it when missing),
    /// verifies the copy read back, then optionally points Azure CLI at it and deletes the source.
    private func copy(_ sourceName: String, toStore targetName: String) throws {
        try reportingErrors {
            let source = ExternalStores.access(try ExternalStores.named(sourceName), verbose: verbose)
            let target = ExternalStores.access(try ExternalStores.named(targetName), verbose: verbose)
            let azureDirectory = ExternalStore.azureConfigDirectory(home: ConfigFile.homeDirectory)
            if configureAzureCli { try checkAzureCLICanSwitch(to: targetName, configDirectory: azureDirectory) }
            let entries = try ExternalStores.read(source, everything: true).entries()
            if dryRun {
                Terminal.print("Would copy \(entries.count) entr\(entries.count == 1 ? "y" : "ies") of \(sourceName) into \(targetName) (\(target.store.location))\(configureAzureCli ? ", set Azure CLI's encrypt_token_cache" : "")\(removeSource ? ", then delete the source" : ""); nothing was changed.")
                return
            }
            let (changed, keptNewer) = try target.modify(creatingIfMissing: true) { (theirs) throws(TokenCacheError) -> (write: Bool, result: (Int, [CacheEntry])) in
                let outcome = try CacheMigration.merge(entries, into: theirs)
                return (outcome.changed > 0, outcome)
            }
            // Read back from the store itself, as its owner will read it.
            guard let written = try target.read() else {
                throw TokenCacheError(.migrationNotVerified, "Store \(targetName) could not be read back after the copy.",
                                      hint: "The source was not changed; run the migration again")
            }
            let keptKeys = Set(keptNewer.map { "\($0.kind.rawValue)/\($0.key)" })
            try CacheMigration.verify(entries.filter { !keptKeys.contains("\($0.kind.rawValue)/\($0.key)") }, in: try written.entries(),
                                      destination: "store \(targetName) (\(target.store.location))")
            let newer = keptNewer.isEmpty ? "" : "; \(keptNewer.count) newer entr\(keptNewer.count == 1 ? "y" : "ies") already there kept"
            Terminal.print("Copied \(entries.count) entr\(entries.count == 1 ? "y" : "ies") of \(sourceName) into \(targetName) (\(target.store.location)), \(changed) changed\(newer); verified.")
            if configureAzureCli {
                let changedConfig = try AzureCLIConfiguration.enableEncryptedTokenCache(configDirectory: azureDirectory)
                let state = changedConfig ? "set" : "was already set"
                Terminal.print(TerminalText("Azure CLI now keeps its token cache in the keyring: encrypt_token_cache = true \(state) in \(AzureCLIConfiguration.path(configDirectory: azureDirectory))."))
                if let override = StoreSettings.environment("AZURE_CORE_ENCRYPT_TOKEN_CACHE") {
                    Terminal.note("AZURE_CORE_ENCRYPT_TOKEN_CACHE=\(Terminal.escape(override)) in this environment overrides the config file for Azure CLI.")
                }
                if targetName == "azure-cli-encrypted-2.91" {
                    Terminal.note("Azure CLI up to 2.91 keeps service-principal secrets in this same keyring item: a later `az login --service-principal` replaces this token cache.")
                }
            }
            if removeSource {
                try removeVerifiedSource(source, copied: entries)
            } else {
                Terminal.print("The source was not changed; --remove-source deletes it once you have checked the copy.")
            }
        }
    }

    /// Refuses, before anything is copied, a switch Azure CLI would lose by: its config file
    /// cannot be edited safely here, or (up to 2.91, where they share the item) it keeps
    /// service-principal secrets in plaintext that the switch would hide.
    private func checkAzureCLICanSwitch(to targetName: String, configDirectory: String) throws {
        try AzureCLIConfiguration.checkEditable(configDirectory: configDirectory)
        let secrets = configDirectory + "/service_principal_entries.json"
        if targetName == "azure-cli-encrypted-2.91", FileManager.default.fileExists(atPath: secrets) {
            throw CLIError.usage("Azure CLI up to 2.91 keeps service-principal secrets in the same keyring item as its token cache: with encryption on, those in \(secrets) would no longer be found. Nothing was copied.",
                                 hint: "Sign the service principals out first (az logout --username APP_ID), or copy without --configure-azure-cli")
        }
    }

    /// Deletes a store whose copy was verified, after asking (or with --yes), only if it still
    /// holds what was copied.
    private func removeVerifiedSource(_ source: ExternalStoreAccess, copied: [CacheEntry]) throws {
        let plan = "delete \(source.store.name) (\(source.store.location)), whose copy was verified"
        try Terminal.confirmOrRefuse(plan, yes: yes, unchanged: "The copy was verified; the source was not deleted")
        try source.delete(ifStillHolding: copied)
        Terminal.print(TerminalText("Deleted \(source.store.name) (\(source.store.location))."))
    }

    /// The destination: a backend, or the sandbox keyring (which has no collections).
    private func open(_ destination: Destination, collection: String, group: CacheGroup,
                      keySource: EncryptedFileBackend.KeySource, logger: Logger, hints: HintContext) throws -> any CacheBackend {
        guard case .backend(let policy) = destination else { return try hints.translating { try BackendSelection.openSandboxKeyring() } }
        return try open(policy, collection: collection, group: group, keySource: keySource, logger: logger, hints: hints)
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
