import Foundation
import Testing
import TokenCacheTestSupport

/// `doctor` and the commands choose the backend by one rule (#46 item 2): each case of the
/// Secret Service runs `list` and `doctor --json` in a fresh keyring session and checks they agree.
@Suite("doctor and the commands agree on the backend", .harness, .enabled(if: TestEnvironment.runsSecretServiceTests))
struct CLIBackendAgreementTests {
    /// `list`'s exit status and doctor's selected backend and reason, after `setup` ran in the session.
    func listAndDoctor(after setup: String) throws -> (list: Int, selected: String?, reason: String) {
        let tokencache = TestEnvironment.binDirectory.appendingPathComponent("tokencache").path
        let lines = try inFreshKeyring("""
            \(setup)
            '\(tokencache)' list >/dev/null 2>&1; rc=$?
            '\(tokencache)' doctor --json > "$HOME/doctor.json" 2>/dev/null
            python3 -c 'import json, sys; d = json.load(open(sys.argv[2])); print(json.dumps({"list": int(sys.argv[1]), "selected": d.get("selected"), "reason": d.get("reason", "")}))' "$rc" "$HOME/doctor.json"
            """)
        let line = try #require(lines.last)
        return (line["list"] as? Int ?? -1, line["selected"] as? String, line["reason"] as? String ?? "")
    }

    @Test("A keyring with no 'default' collection: list fails (1) and doctor selects no backend, naming the collection; neither falls back to the file")
    func noDefaultCollection() throws {
        let seen = try listAndDoctor(after: """
            dbus-send --session --print-reply --dest=org.freedesktop.secrets /org/freedesktop/secrets/collection/login \\
                org.freedesktop.Secret.Collection.Delete >/dev/null
            """)
        #expect(seen.list == 1)
        #expect(seen.selected == nil && seen.reason.contains("'default' collection") && seen.reason.contains("does not fall back"), "\(seen)")
    }

    @Test("A working keyring: list succeeds and doctor selects the Secret Service")
    func workingKeyring() throws {
        let seen = try listAndDoctor(after: ":")
        #expect(seen.list == 0)
        #expect(seen.selected?.contains("collection") == true && seen.reason.contains("Secret Service provider answers"), "\(seen)")
    }

    @Test("No session bus: list reads the encrypted file (0) and doctor selects it")
    func noBus() throws {
        let seen = try listAndDoctor(after: "unset DBUS_SESSION_BUS_ADDRESS")
        #expect(seen.list == 0)
        #expect(seen.selected?.contains("cache") == true && seen.reason.contains("using the encrypted file"), "\(seen)")
    }
}
