import Foundation
import Testing
@testable import SecretServiceStore
@testable import TokenCache
@testable import TokenCacheCLI
@testable import TokenCacheCore
import TokenCacheTestSupport

/// Issue #27 items 6, 8 and 9: hints that name something the CLI can do, `save` stopping at the
/// size limit, `groups`, `unlock`, `list` of a group that holds nothing, and `migrate` between
/// collections.
@Suite("tokencache CLI: limits, groups and hints", .harness)
struct CLIDiscoverabilityTests {
    static var binary: String { TestEnvironment.binDirectory.appendingPathComponent("tokencache").path }
    static let authority = "https://login.microsoftonline.com/\(Fixtures.tenantA)"

    @Test("save fed by a process that writes forever stops at the 1 MiB limit: exit 1, the limit named, nothing saved",
          arguments: ["stdin", "file"])
    func saveStopsAtTheLimit(source: String) throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        _ = try cli.save(Fixtures.alice, client: Fixtures.appOne)
        let before = try cli.run(["list", "--json"]).stdout
        // `yes` never stops and /dev/zero never ends: only a reader that stops at the limit exits
        // (timeout turns reading forever into status 124).
        let save = "timeout 30 \"$0\" save --backend file --group \"$1\" --client \(Fixtures.appOne) --authority \(Self.authority) --scopes User.Read"
        let script = source == "stdin" ? "yes | \(save)" : "\(save) --response /dev/zero"
        let output = try runProcess("/bin/bash", ["-c", script, Self.binary, cli.group], environment: cli.environment)
        #expect(output.status == 1, "\(output.status): \(output.stderr)")
        let expected = source == "stdin" ? "The response on standard input is larger than 1048576 bytes" : "The response in /dev/zero is larger than 1048576 bytes"
        #expect(output.stderr.hasPrefix("error: \(expected)"), "\(output.stderr)")
        #expect(output.stderr.contains("hint: Pass only the JSON body of one token endpoint response"), "\(output.stderr)")
        #expect(output.stdout.isEmpty)
        #expect(try cli.run(["list", "--json"]).stdout == before)
    }

    @Test("save with a terminal on standard input says it is waiting for the response JSON; through a pipe it does not")
    func saveSaysItWaits() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        // script(1) gives save a terminal; the response and Ctrl-D (end of input) are typed into it.
        let save = "\"$0\" save --backend file --group \"$1\" --client \(Fixtures.appOne) --authority \(Self.authority) --scopes User.Read"
        let typed = #"(sleep 0.5; printf '{"access_token":"x"}\n\004') | timeout 20 script -qec "$2" /dev/null"#
        let terminal = try runProcess("/bin/bash", ["-c", typed, Self.binary, cli.group, save.replacing("$0", with: Self.binary).replacing("$1", with: cli.group)],
                                      environment: cli.environment)
        #expect(terminal.stdout.contains("Waiting for the token response JSON on standard input (paste it, then press Ctrl-D)"), "\(terminal.stdout)")
        // The response names no account: refused as any such response (exit 64), after it was read.
        #expect(terminal.status == 64 && terminal.stdout.contains("names no account"), "\(terminal.status) \(terminal.stdout)")
        let piped = try cli.run(["save", "--client", Fixtures.appOne, "--authority", Self.authority, "--scopes", "User.Read"],
                                input: Data(#"{"access_token":"x"}"#.utf8))
        #expect(piped.status == 64 && !piped.stderr.contains("Waiting"), "\(piped.stderr)")
    }

    @Test("save of a response just under the limit is not refused for its size")
    func saveUnderTheLimit() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        var response = Fixtures.response(for: Fixtures.alice, tag: Fixtures.appOne)
        let size = Fixtures.json(response).count
        response["padding"] = String(repeating: "x", count: TokenResponse.maximumSize - size - 32)
        let body = Fixtures.json(response)
        #expect(body.count <= TokenResponse.maximumSize && body.count > TokenResponse.maximumSize - 64 * 1024)
        let output = try cli.run(["save", "--client", Fixtures.appOne, "--authority", Fixtures.authority().url.absoluteString,
                                  "--scopes", "User.Read"], input: body)
        #expect(output.status == 0, "\(output.stderr)")
    }

    @Test("groups lists each group present with its accounts and tokens, as a table and as JSON", arguments: cliBackends)
    func groups(backend: String) throws {
        let cli = try CLI(backend: backend)
        defer { cli.cleanUp() }
        _ = try cli.save(Fixtures.alice, client: Fixtures.appOne)
        _ = try cli.save(Fixtures.alice, client: Fixtures.appTwo)
        _ = try cli.save(Fixtures.bob, client: Fixtures.appOne)
        let table = try cli.run(["groups"])
        #expect(table.status == 0, "\(table.stderr)")
        let row = try #require(table.stdout.split(separator: "\n").first { $0.contains(cli.group) }, "\(table.stdout)")
        let cells = row.split(separator: " ").map(String.init)
        #expect(cells.count == 6 && Array(cells.prefix(5)) == [cli.group, "2", "3", "3", "3"] && Int(cells[5]) != nil, "\(row)")
        let json = try cli.run(["groups", "--json"])
        #expect(json.status == 0, "\(json.stderr)")
        let document = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect((document["location"] as? String)?.isEmpty == false)
        let groups = try #require(document["groups"] as? [[String: Any]])
        let mine = try #require(groups.first { $0["name"] as? String == cli.group })
        #expect(mine["accounts"] as? Int == 2 && mine["access_tokens"] as? Int == 3 && mine["refresh_tokens"] as? Int == 3
                && mine["id_tokens"] as? Int == 3, "\(mine)")
        #expect((mine["entries"] as? Int ?? 0) >= 11, "\(mine)")
        #expect(!json.stdout.contains("rt-") && !json.stdout.contains("at-\(Fixtures.alice.uid)"))
    }

    @Test("list of a group that holds nothing exits 2 naming the groups present and --group; --json the same", arguments: cliBackends)
    func listUnknownGroup(backend: String) throws {
        let cli = try CLI(backend: backend)
        defer { cli.cleanUp() }
        _ = try cli.save(Fixtures.alice, client: Fixtures.appOne)
        let unknown = cli.group + ".unknown"
        for json in [false, true] {
            let output = try cli.run(["list", "--backend", backend, "--group", unknown] + (json ? ["--json"] : []), withGroup: false)
            #expect(output.status == 2, "\(output.stderr)")
            #expect(output.stdout.isEmpty, "\(output.stdout)")
            var lines = output.stderr.split(separator: "\n").map(String.init)
            if json {
                // With --json the same error is one JSON line (#59 item 2).
                let error = (try JSONSerialization.jsonObject(with: Data(output.stderr.utf8)) as? [String: Any])?["error"] as? [String: Any]
                #expect(lines.count == 1 && error?["code"] as? String == "notFound", "\(output.stderr)")
                lines = ["error: " + (error?["message"] as? String ?? ""), "hint: " + (error?["hint"] as? String ?? "")]
            }
            #expect(lines.first?.hasPrefix("error: No group \(unknown) on ") == true, "\(output.stderr)")
            #expect(lines.first?.contains("groups present: ") == true && lines.first?.contains(cli.group + ",") == true
                    || lines.first?.hasSuffix(cli.group + ".") == true, "\(output.stderr)")
            #expect(lines.last?.hasPrefix("hint: Pass one of them with --group") == true, "\(output.stderr)")
        }
        // The default group is never "unknown": empty, it lists no accounts.
        if backend == "file" {
            let standard = try cli.run(["list", "--backend", "file"], withGroup: false)
            #expect(standard.status == 0 && standard.stdout.contains("No accounts."), "\(standard.stderr)")
        }
    }

    @Test("export into a missing directory says to create it; onto an existing file, to choose a new path (both exit 64, a path problem)")
    func exportHints() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        _ = try cli.save(Fixtures.alice, client: Fixtures.appOne)
        let missing = try cli.run(["export", "--output", cli.dataHome.path + "/no/such/dir/cache.json"])
        #expect(missing.status == 64)
        #expect(missing.stderr.contains("hint: Create the directory first (mkdir -p \(cli.dataHome.path)/no/such/dir)"), "\(missing.stderr)")
        let existing = cli.dataHome.appendingPathComponent("there.json")
        try Data().write(to: existing)
        let taken = try cli.run(["export", "--output", existing.path])
        #expect(taken.status == 64)
        #expect(taken.stderr.contains("hint: Choose a path that does not exist yet"), "\(taken.stderr)")
    }

    @Test("migrate without a session bus gives a hint for migrate (no --backend, which it rejects); exit 1")
    func migrateHint() throws {
        var cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        cli.environmentOverrides["DBUS_SESSION_BUS_ADDRESS"] = ""
        let output = try cli.run(["migrate", "--from", "file", "--to", "secret-service", "--group", cli.group])
        #expect(output.status == 1, "\(output.stderr)")
        #expect(output.stderr.contains("hint: Run the migration inside the desktop session"), "\(output.stderr)")
        #expect(!output.stderr.contains("--backend"), "\(output.stderr)")
        let same = try cli.run(["migrate", "--from", "file", "--to", "file", "--group", cli.group])
        #expect(same.status == 64 && same.stderr.contains("--from and --to must differ"), "\(same.stderr)")
    }

    @Test("A dedicated collection that does not exist: exit 1, the hint names --create and --collection default",
          .enabled(if: TestEnvironment.runsSecretServiceTests))
    func missingCollectionHint() throws {
        let cli = try CLI(backend: "secret-service")
        defer { cli.cleanUp() }
        let output = try cli.run(["list", "--collection", "No such keyring \(cli.group)"])
        #expect(output.status == 1, "\(output.stderr)")
        #expect(output.stderr.contains("hint: Add --create to create it"), "\(output.stderr)")
        #expect(output.stderr.contains("--collection default") && !output.stderr.contains("allow creation")
                && !output.stderr.contains("mapping"), "\(output.stderr)")
    }

    @Test("migrate moves a group between two Secret Service collections (session to default) and back",
          .enabled(if: TestEnvironment.runsSecretServiceTests))
    func migrateBetweenCollections() throws {
        let cli = try CLI(backend: "secret-service")
        defer { _ = try? cli.run(["remove", "--all", "--yes", "--collection", "session"]); cli.cleanUp() }
        let response = Fixtures.response(for: Fixtures.alice, tag: Fixtures.appOne)
        let saved = try cli.run(["save", "--client", Fixtures.appOne, "--authority", Fixtures.authority().url.absoluteString,
                                 "--scopes", "User.Read", "--collection", "session"], input: Fixtures.json(response))
        #expect(saved.status == 0, "\(saved.stderr)")
        let moved = try cli.run(["migrate", "--from", "secret-service", "--from-collection", "session",
                                 "--to", "secret-service", "--to-collection", "default", "--group", cli.group])
        #expect(moved.status == 0, "\(moved.stderr)")
        #expect(moved.stdout.contains("from Secret Service, in-memory collection alias 'session'"), "\(moved.stdout)")
        #expect(try cli.run(["list"]).stdout.contains(Fixtures.alice.username))
        #expect(try cli.run(["list", "--collection", "session"]).status == 2)
        let same = try cli.run(["migrate", "--from", "secret-service", "--to", "secret-service", "--group", cli.group])
        #expect(same.status == 64 && same.stderr.contains("--from-collection and --to-collection"), "\(same.stderr)")
    }

    @Test("unlock on an unlocked collection says so and exits 0", .enabled(if: TestEnvironment.runsSecretServiceTests))
    func unlockUnlocked() throws {
        let cli = try CLI(backend: "secret-service")
        defer { cli.cleanUp() }
        let output = try cli.run(["unlock"])
        #expect(output.status == 0, "\(output.stderr)")
        #expect(output.stdout.hasPrefix("Collection /org/freedesktop/secrets/collection/") && output.stdout.contains("is already unlocked"),
                "\(output.stdout)")
    }

    @Test("A locked keyring: list exits 1 naming `tokencache unlock` and --allow-prompt where a display is; without one (SSH) list, unlock and doctor say the prompt cannot be shown here and name the ways out: the desktop, --backend file, the token agent",
          .enabled(if: TestEnvironment.runsSecretServiceTests))
    func lockedKeyringHints() throws {
        let report = #"python3 -c 'import json,sys; print(json.dumps({"step": sys.argv[1], "status": int(sys.argv[2]), "stderr": sys.argv[3]}))'"#
        let results = try inFreshKeyring("""
            T='\(Self.binary)'
            $H ss-save org.example.cli-locked alice@contoso.com c1 > /dev/null
            collection=$(dbus-send --session --print-reply --dest=org.freedesktop.secrets /org/freedesktop/secrets \\
                org.freedesktop.Secret.Service.ReadAlias string:default | awk '/object path/ {print $3}' | tr -d '"')
            dbus-send --session --print-reply --dest=org.freedesktop.secrets /org/freedesktop/secrets \\
                org.freedesktop.Secret.Service.Lock array:objpath:$collection > /dev/null
            err=$(DISPLAY=:987 "$T" list --backend secret-service --group org.example.cli-locked 2>&1 >/dev/null); \(report) list-display $? "$err"
            unset DISPLAY WAYLAND_DISPLAY
            err=$("$T" list --backend secret-service --group org.example.cli-locked 2>&1 >/dev/null); \(report) list $? "$err"
            err=$("$T" unlock --group org.example.cli-locked 2>&1 >/dev/null); \(report) unlock $? "$err"
            err=$("$T" doctor --backend secret-service --group org.example.cli-locked 2>&1 >/dev/null); \(report) doctor $? "$err"
            """)
        func step(_ name: String) throws -> (status: Int?, stderr: String) {
            let step = try #require(results.first { $0["step"] as? String == name }, "\(results)")
            return (step["status"] as? Int, step["stderr"] as? String ?? "")
        }
        let withDisplay = try step("list-display")
        #expect(withDisplay.status == 1 && withDisplay.stderr.contains("is locked")
                && withDisplay.stderr.contains("hint: Run `tokencache unlock` (or add --allow-prompt)"), "\(withDisplay)")
        let wayOut = "hint: This session has no display for the keyring's unlock prompt (as over SSH): run `tokencache unlock` in the desktop session, use --backend file, or use the desktop's cache through the token agent"
        let list = try step("list")
        #expect(list.status == 1 && list.stderr.contains("is locked") && list.stderr.contains(wayOut), "\(list)")
        let unlock = try step("unlock")
        #expect(unlock.status == 1 && unlock.stderr.contains("its unlock prompt cannot be shown here: this session has no display")
                && !unlock.stderr.contains("dismissed") && unlock.stderr.contains(wayOut), "\(unlock)")
        // doctor's fix line says the same CLI action, not the library's wording.
        let doctor = try step("doctor")
        #expect(doctor.status == 1 && doctor.stderr.contains(wayOut), "\(doctor)")
    }

    @Test("Library hints are said as CLI actions: no API names, no 'allow creation', no 'default mapping', no HTTPTransport")
    func hintsNameCLIActions() {
        let library: [TokenCacheError] = [
            SecretServiceBackend.locked("/org/freedesktop/secrets/collection/login"),
            SecretServiceBackend.missingAlias("session"),
            TokenCacheError(.collectionMissing, "No Secret Service collection is labelled 'Work'.",
                            hint: "Create it in your keyring manager, allow creation, or use the default mapping",
                            reason: .collectionMissing(label: "Work")),
            TokenCacheError(.promptDismissed, "Creating the collection 'Work' needs a password prompt, which was dismissed or could not be shown.",
                            hint: "Use the default mapping (items in the default collection, tagged with the group), which never prompts",
                            reason: .createCollectionPromptDismissed(label: "Work")),
            TokenCacheError(.libcurlMissing, "libcurl is not installed.",
                            hint: "Install it (Debian/Ubuntu: apt-get install libcurl4), or pass your own HTTPTransport",
                            reason: .libraryMissing(name: "libcurl", install: "Debian/Ubuntu: apt-get install libcurl4")),
            TokenCacheError(.fileRolledBack, "x is older than one this machine has already seen.",
                            hint: "If you restored it on purpose, accept it with `tokencache doctor --backend file --accept-rollback` (apps: EncryptedFileBackend.acceptRolledBackFile(for:)); otherwise put the newer file back. It was not changed",
                            reason: .fileRolledBack(group: "org.example.app")),
            TokenCacheError(.interactionRequired, "No refresh token is cached for this account and app.", hint: "Sign the user in interactively",
                            reason: .noRefreshToken),
            TokenCacheError(.serverError, "The token endpoint refused every refresh token (invalid_client).",
                            hint: "Check the app registration (client ID, authority)", reason: .clientRejected),
        ]
        for error in library {
            let hint = CLIHints.hint(for: error) ?? ""
            #expect(!hint.isEmpty, "\(error.code)")
            for phrase in ["allow creation", "mapping", "HTTPTransport", "apps:", "(for:)", "the user in interactively", "app registration (client ID"] {
                #expect(!hint.contains(phrase), "\(error.code): \(hint)")
            }
        }
        #expect(CLIHints.hint(for: library[4]) == "Install it (Debian/Ubuntu: apt-get install libcurl4), or leave out --refresh: cached tokens need no libcurl")
        let migrate = CLIHints.hint(for: TokenCacheError(.libgcryptMissing, "libgcrypt could not be loaded.",
                                                         hint: "Install it (Debian/Ubuntu: apt-get install libgcrypt20), or use the encrypted-file backend (--backend file)",
                                                         reason: .libraryMissing(name: "libgcrypt", install: "Debian/Ubuntu: apt-get install libgcrypt20")),
                                    in: .migrate(collectionOption: "--to-collection"))
        #expect(migrate == "Install it (Debian/Ubuntu: apt-get install libgcrypt20); the migration needs it")
    }

    @Test("The CLI's hint follows the error's reason, not its text: one code, different reasons, different hints")
    func hintsFollowReasonNotText() {
        // The same code and the same words; only the reason differs.
        func browser(_ reason: TokenCacheError.Reason) -> String? {
            CLIHints.hint(for: TokenCacheError(.browserUnavailable, "No browser: no display, nothing in BROWSER.", hint: "x", reason: reason))
        }
        let noDisplay = browser(.noDisplay), variable = browser(.browserCommandFailed), other = browser(.xdgOpenFailed)
        #expect(noDisplay?.hasPrefix("Run `tokencache login` again with --device-code: it signs in") == true, "\(noDisplay ?? "")")
        #expect(variable?.hasPrefix("Fix BROWSER") == true, "\(variable ?? "")")
        #expect(other?.contains("xdg-settings set default-web-browser") == true, "\(other ?? "")")
        #expect(Set([noDisplay, variable, other]).count == 3)

        func collection(_ reason: TokenCacheError.Reason) -> String? {
            CLIHints.hint(for: TokenCacheError(.collectionMissing, "The collection 'session' is labelled 'default'.", hint: "x", reason: reason),
                          in: .migrate(collectionOption: "--from-collection"))
        }
        #expect(collection(.collectionMissing(label: "Work"))?.hasPrefix("Add --create") == true)
        #expect(collection(.sessionCollectionUnsupported)?.hasPrefix("This Secret Service provider has no in-memory session collection: use --from-collection default") == true)
        #expect(collection(.defaultCollectionMissing)?.hasPrefix("Log in to the desktop once") == true)
        #expect(collection(.defaultCollectionUncreatable)?.hasPrefix("No keyring can be created here (no display") == true)
        // The missing default collection's prompt dismissed: no "use the default mapping", which is the one missing.
        let defaultDismissed = CLIHints.hint(for: TokenCacheError(.promptDismissed, "x", hint: "x", reason: .createCollectionPromptDismissed(label: "Default keyring")))
        #expect(defaultDismissed?.contains("--allow-prompt") == true && defaultDismissed?.contains("--backend file") == true
                    && defaultDismissed?.contains("never prompts") == false, "\(defaultDismissed ?? "")")
        // No reason: the library's own hint, whatever the message says.
        #expect(collection(.unspecified) == "x")

        let dismissed = CLIHints.hint(for: TokenCacheError(.promptDismissed, "Creating the collection 'W' ...", hint: "x", reason: .unlockPromptDismissed))
        #expect(dismissed?.hasPrefix("Run `tokencache unlock` in your desktop session") == true, "\(dismissed ?? "")")
        let timedOut = CLIHints.hint(for: TokenCacheError(.timedOut, "Nobody answered the unlock prompt.", hint: "x", reason: .signInTimedOut))
        #expect(timedOut == "Finish signing in in the browser sooner, or raise --timeout")
        let otherHost = CLIHints.hint(for: TokenCacheError(.interactionRequired, "m", hint: "x",
                                                           reason: .refreshTokenFromOtherHost(aliases: ["login.microsoftonline.us", "login.usgovcloudapi.net"], host: "login.microsoftonline.com")))
        #expect(otherHost == "Pass --authority on login.microsoftonline.us or login.usgovcloudapi.net, or sign in again (`tokencache login`) at login.microsoftonline.com")
    }
}
