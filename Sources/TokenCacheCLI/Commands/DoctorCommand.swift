import ArgumentParser
import FoundationEssentials
import TokenCache

struct DoctorCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "doctor",
        abstract: "Show which backend is used and why, and check everything it depends on.",
        discussion: """
        Checks the session bus, whether libsecret can be loaded, the Secret Service provider, \
        the collection mapping and lock state, the fallback file's path, permissions and key \
        source, the OpenSSL version, and that tokencache itself cannot dump core. Exits 1, with the fix in one line, when the chosen \
        backend cannot work.

        --accept-rollback first accepts the group's encrypted file although it is older than one \
        this machine has already seen (error "older than one this machine has already seen", \
        after restoring a backup on purpose): the remembered generation is reset to the file's. \
        The file is authenticated first and not changed.

        Examples:
          tokencache doctor
          tokencache doctor --backend file --json
          tokencache doctor --backend file --accept-rollback
        """)

    @OptionGroup var store: StoreOptions

    @Flag(help: "Print JSON with sorted keys, for scripts.")
    var json = false

    @Flag(help: "Accept the encrypted file although it is older than one this machine has seen (a backup restored on purpose).")
    var acceptRollback = false

    func run() throws {
        if acceptRollback {
            try reportingErrors {
                try EncryptedFileBackend().acceptRolledBackFile(for: store.cacheGroup)
            }
            Terminal.note("Accepted \(EncryptedFileBackend().fileURL(for: store.cacheGroup).path) as it is; older copies are refused again from now on.")
        }
        var diagnosis = BackendSelection.diagnose(policy: store.backend, group: store.cacheGroup, secretService: store.secretServiceOptions)
        // Read back from the kernel, not assumed: tokencache's main sets it before anything else.
        diagnosis.checks.append(CoreDumps.areDisabled
            ? .init(name: "core dumps", status: .ok, detail: "disabled for this process (not dumpable)")
            : .init(name: "core dumps", status: .warning, detail: "this process is dumpable: a core file could hold tokens"))
        if json {
            try JSONOutput.print(diagnosis)
        } else {
            Terminal.print("\(Terminal.bold("Policy")) \(diagnosis.policy.rawValue)")
            Terminal.print("\(Terminal.bold("Backend")) \(diagnosis.selected.map { TerminalText($0) } ?? Terminal.red("none usable"))")
            Terminal.print("\(Terminal.dim("Why")) \(diagnosis.reason)")
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
            if !json { Terminal.error("The \(diagnosis.policy.rawValue) backend cannot work here.", hint: diagnosis.fix) }
            throw ExitCode(1)
        }
    }
}
