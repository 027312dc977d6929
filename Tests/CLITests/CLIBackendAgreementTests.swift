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

    @Test("A keyring whose 'default' collection was deleted, no display: list reads the encrypted file (0) and doctor selects it, both saying no keyring can be created here")
    func noDefaultCollection() throws {
        let seen = try listAndDoctor(after: """
            dbus-send --session --print-reply --dest=org.freedesktop.secrets /org/freedesktop/secrets/collection/login \\
                org.freedesktop.Secret.Collection.Delete >/dev/null
            """)
        #expect(seen.list == 0)
        #expect(seen.selected?.contains("cache") == true && seen.reason.contains("none can be created here")
                    && seen.reason.contains("using the encrypted file"), "\(seen)")
    }

    @Test("gnome-keyring activated without a login keyring, no display: --backend secret-service list and token fail (1) saying why and what to do; auto saves to and lists the encrypted file, saying why (--verbose, doctor)")
    func noLoginKeyringHeadless() throws {
        let tokencache = TestEnvironment.binDirectory.appendingPathComponent("tokencache").path
        let response = try TestEnvironment.temporaryDirectory().appendingPathComponent("response.json")
        defer { try? FileManager.default.removeItem(at: response.deletingLastPathComponent()) }
        try Fixtures.json(Fixtures.response(for: Fixtures.alice, tag: Fixtures.appOne)).write(to: response)
        let authority = Fixtures.authority().url.absoluteString
        let lines = try inFreshKeyring("""
            T='\(tokencache)'
            "$T" list --backend secret-service >/dev/null 2>"$HOME/list.err"; list=$?
            "$T" token --backend secret-service --client \(Fixtures.appOne) --scopes User.Read --no-refresh >/dev/null 2>"$HOME/token.err"; token=$?
            "$T" save --client \(Fixtures.appOne) --authority '\(authority)' --scopes User.Read --response '\(response.path)' --verbose >/dev/null 2>"$HOME/save.err"; save=$?
            "$T" list --json >"$HOME/auto.json" 2>"$HOME/auto.err"; auto=$?
            "$T" doctor --json >"$HOME/doctor.json" 2>/dev/null
            python3 -c 'import json, sys
            h = sys.argv[1]
            r = lambda n: open(h + "/" + n).read()
            d = json.loads(r("doctor.json"))
            print(json.dumps({"list": int(sys.argv[2]), "listErr": r("list.err"), "token": int(sys.argv[3]), "tokenErr": r("token.err"),
                              "save": int(sys.argv[4]), "saveErr": r("save.err"), "auto": int(sys.argv[5]), "autoOut": r("auto.json"),
                              "autoErr": r("auto.err"), "selected": d.get("selected"), "reason": d.get("reason", "")}))' "$HOME" $list $token $save $auto
            """, loginKeyring: false)
        let line = try #require(lines.last)
        for name in ["list", "token"] {
            let stderr = line["\(name)Err"] as? String ?? ""
            #expect(line[name] as? Int == 1, "\(name): \(line)")
            #expect(stderr.contains("no 'default' collection, and none can be created here") && stderr.contains("without a display"), "\(name): \(stderr)")
            #expect(stderr.contains("--backend file") && stderr.contains("secret-tool") && stderr.contains("Seahorse"), "\(name): \(stderr)")
        }
        #expect(line["save"] as? Int == 0, "\(line)")
        #expect(line["auto"] as? Int == 0 && (line["autoOut"] as? String)?.contains(Fixtures.alice.username) == true, "\(line)")
        let saveErr = line["saveErr"] as? String ?? ""
        #expect(saveErr.contains("falls back to the encrypted file") && saveErr.contains("none can be created here"), "auto says why (--verbose): \(saveErr)")
        #expect((line["selected"] as? String)?.contains("cache") == true && (line["reason"] as? String)?.contains("none can be created here") == true, "\(line)")
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
