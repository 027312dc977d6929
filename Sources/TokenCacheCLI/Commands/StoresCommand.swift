import ArgumentParser
import FoundationEssentials
import TokenCache

struct StoresCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stores",
        abstract: "Show which other tools' MSAL caches exist here (Azure CLI, azure-identity, Azure PowerShell, azureauth), with their account counts (never secrets).",
        discussion: """
        The built-in stores: azure-cli (~/.azure/msal_token_cache.json, or under \
        $AZURE_CONFIG_DIR; plaintext), azure-cli-encrypted-2.91 (the Secret Service item released \
        Azure CLI, up to 2.91, keeps with core.encrypt_token_cache), azure-cli-encrypted (the \
        item of Azure CLI's main branch: schema "Microsoft Azure CLI"), azure-identity-python and azure-identity-python-cae \
        (Secret Service), dotnet-identity-service (Azure.Identity .NET and Azure PowerShell, \
        Secret Service, base64), azureauth (Secret Service, base64), and the plaintext fallbacks \
        azure-identity-python[-cae]-plaintext and dotnet-identity-service[-cae]-plaintext; more \
        under "stores" in the config file. When both Azure CLI's file and its keyring item \
        exist (Azure CLI falls back to the file whenever libsecret fails), a note says which \
        changed last. `list --store NAME` lists a store's accounts and `remove --store NAME` \
        removes one under the owner's lock. Backend, group and collection options are not used.

        Examples:
          tokencache stores
          tokencache stores --json

        --json prints {"stores": [{"name", "kind" (file|secret-service), "encrypted", "present" \
        (null when it could not be told: the keyring was not reached), "readable", "accounts", \
        "problem", "location", "source"}]}.
        """)

    @Flag(help: "Print JSON with sorted keys, for scripts.")
    var json = false

    @Flag(help: "Log what the library does (to stderr; never secrets).")
    var verbose = false

    struct Output: Encodable {
        var stores: [ExternalStoreAccess.Status]
    }

    /// Azure CLI's plaintext file beside its keyring item: which one it wrote last, by the
    /// file's mtime against the keyring's signal file.
    static func splitBrain(_ stores: [ExternalStore], _ statuses: [ExternalStoreAccess.Status]) -> String? {
        let present = Set(statuses.filter { $0.present == true }.map(\.name))
        guard present.contains("azure-cli"),
              let encrypted = ["azure-cli-encrypted-2.91", "azure-cli-encrypted"].first(where: present.contains),
              case .file(let file, _)? = stores.first(where: { $0.name == "azure-cli" })?.persistence,
              case .secretService(let item)? = stores.first(where: { $0.name == encrypted })?.persistence,
              let signal = item.signalFiles.first else { return nil }
        func modified(_ path: String) -> Date? {
            (try? FileManager.default.attributesOfItem(atPath: path))?[.modificationDate] as? Date
        }
        let newer = switch (modified(file), modified(signal)) {
        case (let file?, let signal?) where file > signal: "the plaintext file changed last"
        case (_?, _?): "the keyring item changed last"
        default: "which changed last is unknown (no signal file)"
        }
        return "Both Azure CLI's plaintext file and its keyring item exist (it falls back to the file when libsecret fails): \(newer)."
    }

    func run() throws {
        try reportingErrors {
            let stores = try ExternalStores.all()
            var keyring: SecretServiceBackend?
            var keyringProblem: String?
            if stores.contains(where: \.isEncrypted) {
                do { keyring = try SecretServiceBackend() } catch { keyringProblem = (error as? TokenCacheError)?.message ?? "\(error)" }
            }
            if let keyring { keepUntilExit(keyring) }
            let logger = StoreOptions.logger(verbose: verbose)
            let statuses = stores.map { ExternalStoreAccess($0, secretService: keyring, logger: logger).status() }
            if json {
                try JSONOutput.print(Output(stores: statuses))
                return
            }
            Terminal.print(Terminal.table(["STORE", "KIND", "PRESENT", "READABLE", "ACCOUNTS", "WHERE"], statuses.map { status in
                // Absent and unreachable differ: an unreachable keyring may well hold the store.
                let present: TerminalText = switch status.present { case true?: "yes"; case false?: "no"; case nil: "unknown" }
                let readable: TerminalText = status.present == true ? (status.readable ? "yes" : "no") : "-"
                return [TerminalText(status.name), status.encrypted ? "keyring" : "plaintext file", present,
                        readable, status.accounts.map { "\($0)" } ?? "-", TerminalText(status.location)]
            }))
            if let note = Self.splitBrain(stores, statuses) { Terminal.note(note) }
            if let keyringProblem { Terminal.note("Keyring stores were not checked: \(keyringProblem)") }
            for (store, status) in zip(stores, statuses) where !(keyringProblem != nil && store.isEncrypted) {
                if let problem = status.problem { Terminal.note("\(status.name): \(problem)") }
            }
        }
    }
}
