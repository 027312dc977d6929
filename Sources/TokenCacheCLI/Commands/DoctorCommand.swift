import ArgumentParser
import FoundationEssentials
import TokenCache
import TokenCacheBroker

struct DoctorCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "doctor",
        abstract: "Show which backend is used and why, and check everything it depends on.",
        discussion: """
        Checks the session bus, whether libgcrypt can be loaded, the Secret Service provider, \
        the collection mapping and lock state, the fallback file's path, permissions and key \
        source, the OpenSSL version, and that tokencache itself cannot dump core. Exits 1, with the fix in one line, when the chosen \
        backend cannot work.

        Shows each effective setting (backend, group, collection, passphrase file) and where it \
        came from: an option, a TOKENCACHE_* variable, the config file or the default. For an \
        existing encrypted file, the key source is the one its header records (key file or \
        passphrase). --json has them as "settings": {"backend", "group", "collection", \
        "passphrase_file": {"value", "source"}}, the source being the option, the variable, the \
        config file's path or "default", and the config file consulted as "config_file".

        "single sign-on stores" are the other tools' caches (`tokencache stores`) whose refresh \
        tokens `token --refresh` may redeem: none unless TOKENCACHE_SSO_STORES or the config \
        file's "single_sign_on" names some (--json: "single_sign_on_stores", names joined by \
        commas, "none" when off).

        "identity broker" says who answers on the session bus as com.microsoft.identity.broker1: \
        another broker (Microsoft's, with its version; `token --broker` and apps with the broker \
        option use it), `tokencache broker` (which serves this cache), or none.

        --accept-rollback first accepts the group's encrypted file although it is older than one \
        this machine has already seen (error "older than one this machine has already seen", \
        after restoring a backup on purpose): the remembered generation is reset to the file's. \
        The file is authenticated first and not changed.

        Examples:
          tokencache doctor
          tokencache doctor --backend file --json
          tokencache doctor --backend file --accept-rollback
        """)

    @Flag(help: "Print JSON with sorted keys, for scripts.")
    var json = false

    @Flag(help: "Accept the encrypted file although it is older than one this machine has seen (a backup restored on purpose).")
    var acceptRollback = false

    @OptionGroup(title: "Storage options") var store: StoreOptions

    func run() throws {
        var settings: StoreSettings!
        var singleSignOn: Setting<[ExternalStore]>!
        try reportingErrors {
            settings = try store.settings()
            singleSignOn = try SingleSignOnSetting.resolve(flag: [])
        }
        let group = settings.group.value
        if acceptRollback {
            try reportingErrors {
                try EncryptedFileBackend(keySource: try StoreOptions.fileKeySource(settings)).acceptRolledBackFile(for: group)
            }
            Terminal.note("Accepted \(EncryptedFileBackend().fileURL(for: group).path) as it is; older copies are refused again from now on.")
        }
        var keySource: EncryptedFileBackend.KeySource!
        try reportingErrors { keySource = try StoreOptions.fileKeySource(settings) }
        var diagnosis = BackendSelection.diagnose(policy: settings.backend.value, group: group, keySource: keySource,
                                                  secretService: store.secretServiceOptions(settings))
        if let file = settings.passphraseFile {
            // The library knows only that the app supplies a passphrase: say where it comes from.
            for index in diagnosis.checks.indices where diagnosis.checks[index].name == "key source"
                && diagnosis.checks[index].detail == keySource.description {
                diagnosis.checks[index].detail = "passphrase from \(file.value) (\(file.source))"
            }
        }
        if let agent = store.agent() {
            // `token` and `list` ask the agent, not the backend above (#46): say so, and whether it answers.
            do {
                let seen = try agent.inventory()
                diagnosis.checks.insert(.init(name: agent.isFromEnvironment ? "token agent" : "token keeper", status: .ok,
                                              detail: "\(agent.source) answers (group \(seen.group), \(seen.accounts.count) account\(seen.accounts.count == 1 ? "" : "s") it shows): token and list ask it; the backend above is this machine's own cache"), at: 0)
            } catch {
                diagnosis.checks.insert(.init(name: agent.isFromEnvironment ? "token agent" : "token keeper", status: .warning,
                                              detail: "\(agent.source) does not answer: \(error.message)"), at: 0)
            }
        }
        diagnosis.checks.append(Self.brokerCheck())
        // Read back from the kernel, not assumed: tokencache's main sets it before anything else.
        diagnosis.checks.append(CoreDumps.areDisabled
            ? .init(name: "core dumps", status: .ok, detail: "disabled for this process (not dumpable)")
            : .init(name: "core dumps", status: .warning, detail: "this process is dumpable: a core file could hold tokens"))
        for store in singleSignOn.value {
            diagnosis.checks.append(.init(name: "single sign-on with \(store.name)", status: .info,
                                          detail: "token --refresh may redeem its refresh tokens (\(store.location))"))
        }
        let shown = Self.settingRows(settings) + [("single sign-on stores", singleSignOn.value.isEmpty ? "none"
            : singleSignOn.value.map(\.name).joined(separator: ","), singleSignOn.source)]
        if json {
            try JSONOutput.print(Report(diagnosis: diagnosis, settings: shown.reduce(into: [:]) {
                $0[$1.name.replacing(" ", with: "_").replacing("-", with: "_")] = Report.Setting(value: $1.value, source: $1.source.jsonValue)
            }, configFile: settings.configPath))
        } else {
            Terminal.print("\(Terminal.bold("Policy")) \(diagnosis.policy.rawValue)")
            Terminal.print("\(Terminal.bold("Backend")) \(diagnosis.selected.map { TerminalText($0) } ?? Terminal.red("none usable"))")
            Terminal.print("\(Terminal.dim("Why")) \(diagnosis.reason)")
            Terminal.print(Terminal.table(["SETTING", "VALUE", "FROM"], shown.map {
                [TerminalText($0.name), TerminalText($0.value), TerminalText($0.source.description)]
            }))
            if !diagnosis.checks.isEmpty {
                Terminal.print(Terminal.table(["CHECK", "STATUS", "DETAIL"], diagnosis.checks.map { check in
                    let status: TerminalText = switch check.status {
                    case .ok: Terminal.green("ok")
                    case .failed: Terminal.red("failed")
                    case .warning: "warning"
                    case .info: "info"
                    }
                    return [TerminalText(check.name), status, TerminalText(check.detail)]
                }))
            }
        }
        if !diagnosis.isUsable {
            // With --json the report is on stdout and the failure one JSON line on stderr.
            try reportingErrors {
                throw CLIError.failed("The \(diagnosis.policy.rawValue) backend cannot work here.",
                                      hint: diagnosis.problem.flatMap { CLIHints.hint(for: $0) } ?? diagnosis.fix, cause: diagnosis.problem)
            }
        }
    }

    /// Who answers as the identity broker on the session bus, and what that means for `token --broker`.
    static func brokerCheck() -> BackendDiagnosis.Check {
        let name = "identity broker"
        // Nobody owns the name: said without calling it, which would start an installed broker (#59 item 10).
        if (try? BrokerBus.nameHasOwner()) == false {
            if let failure = BrokerCommand.lastFailure() {
                return .init(name: name, status: .warning, detail: "none on the session bus (\(BrokerWire.busName)); the last start of `tokencache broker` failed: \(failure)")
            }
            return .init(name: name, status: .info, detail: "none on the session bus (\(BrokerWire.busName)): `token --broker always` fails, `--broker when-available` uses this cache")
        }
        do {
            switch try BrokerClient.onSessionBus(timeoutSeconds: 5).owner() {
            case .broker(let version)?:
                return .init(name: name, status: .ok, detail: "a broker (version \(version)) answers on \(BrokerWire.busName): `token --broker` and apps with the broker option get their tokens from it")
            case .ourProvider?:
                return .init(name: name, status: .info, detail: "`tokencache broker` answers on \(BrokerWire.busName): broker-enabled MSAL apps get this cache's accounts; `token --broker` uses this cache")
            case nil:
                return .init(name: name, status: .info, detail: "none on the session bus (\(BrokerWire.busName)): `token --broker always` fails, `--broker when-available` uses this cache")
            }
        } catch {
            if let failure = BrokerCommand.lastFailure() {
                return .init(name: name, status: .warning, detail: "does not answer (\(error.message)); the last start of `tokencache broker` failed: \(failure)")
            }
            return .init(name: name, status: .info, detail: "not asked: \(error.message)")
        }
    }

    /// Each effective setting, its value and where it came from.
    static func settingRows(_ settings: StoreSettings) -> [(name: String, value: String, source: SettingSource)] {
        [("backend", settings.backend.value.rawValue, settings.backend.source),
         ("group", settings.group.value.name, settings.group.source),
         ("collection", settings.collection.value, settings.collection.source),
         ("passphrase file", settings.passphraseFile?.value ?? "none", settings.passphraseFile?.source ?? .defaultValue),
         ("key-source", settings.keySource?.value.rawValue ?? "key-file (tpm where cache.key.tpm exists)", settings.keySource?.source ?? .defaultValue),
         ("tpm-tcti", settings.tpmTCTI?.value ?? "device:/dev/tpmrm0", settings.tpmTCTI?.source ?? .defaultValue)]
    }

    /// `doctor --json`: the diagnosis with the settings beside it.
    struct Report: Encodable {
        struct Setting: Encodable {
            var value: String
            var source: String
        }
        var diagnosis: BackendDiagnosis
        var settings: [String: Setting]
        var configFile: String

        enum CodingKeys: String, CodingKey { case settings, configFile }

        func encode(to encoder: any Encoder) throws {
            try diagnosis.encode(to: encoder)
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(settings, forKey: .settings)
            try container.encode(configFile, forKey: .configFile)
        }
    }
}
