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
        source, and the OpenSSL version. Exits 1, with the fix in one line, when the chosen \
        backend cannot work.

        Examples:
          tokencache doctor
          tokencache doctor --backend file --json
        """)

    @OptionGroup var store: StoreOptions

    @Flag(help: "Print JSON with sorted keys, for scripts.")
    var json = false

    func run() throws {
        let diagnosis = BackendSelection.diagnose(policy: store.backend, group: store.cacheGroup, secretService: store.secretServiceOptions)
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
