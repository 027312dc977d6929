import Foundation
import Testing
import TokenCacheTestSupport

/// `tokencache unlock --file` / `lock --file`: the passphrase-derived keys in the kernel's
/// session keyring (keyutils). Each test runs its commands in a session keyring of its own
/// (`keyctl session -`), as one login session would.
@Suite("CLI: session-cached passphrase", .harness)
struct CLISessionKeyTests {
    /// Runs `script` with bash in a new session keyring, with the CLI's environment and `tokencache` on PATH.
    func inNewSession(_ cli: CLI, _ script: String) throws -> ProcessOutput {
        try run(cli, script, sessionKeyring: "-")
    }

    /// Runs `script` with bash whose session keyring is the per-user default (the user-session
    /// keyring, joined by name), as in `docker exec`, `su` and many CI shells.
    func onUserSessionKeyring(_ cli: CLI, _ script: String) throws -> ProcessOutput {
        try run(cli, script, sessionKeyring: "_uid_ses.\(getuid())")
    }

    /// `keyctl session NAME bash SCRIPT` ("-": a new anonymous session keyring).
    private func run(_ cli: CLI, _ script: String, sessionKeyring: String) throws -> ProcessOutput {
        let file = cli.dataHome.appendingPathComponent("session-\(UUID().uuidString).sh")
        try Data(("set -u\n" + script).utf8).write(to: file)
        var environment = cli.environment
        environment["PATH"] = TestEnvironment.binDirectory.path + ":" + (environment["PATH"] ?? "/usr/bin:/bin")
        environment["G"] = cli.group
        return try runProcess("/usr/bin/keyctl", ["session", sessionKeyring, "/bin/bash", file.path], environment: environment)
    }

    func passphraseProtected() throws -> CLI {
        var cli = try CLI(backend: "file")
        let passphrase = cli.dataHome.appendingPathComponent("passphrase")
        try Data("a session passphrase\n".utf8).write(to: passphrase)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: passphrase.path)
        cli.environmentOverrides["TOKENCACHE_PASSPHRASE_FILE"] = passphrase.path
        _ = try cli.save(Fixtures.alice, client: Fixtures.appOne, scope: "User.Read")
        cli.environmentOverrides["PASSPHRASE"] = passphrase.path
        cli.environmentOverrides["TOKENCACHE_PASSPHRASE_FILE"] = nil
        return cli
    }

    @Test("unlock --file, then 10 CLI runs read without a passphrase; nothing is written to disk; lock --file drops the key")
    func unlockThenTenRunsThenLock() throws {
        let cli = try passphraseProtected()
        defer { cli.cleanUp() }
        let directory = cli.dataHome.appendingPathComponent("tokencache")
        let before = try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
        let output = try inNewSession(cli, """
            token() { tokencache token --backend file --group "$G" --client \(Fixtures.appOne) --scopes User.Read < /dev/null; }
            token > /dev/null 2>&1 && echo "BEFORE-UNLOCK read" || echo "BEFORE-UNLOCK refused $?"
            TOKENCACHE_PASSPHRASE_FILE="$PASSPHRASE" tokencache unlock --file --group "$G" --timeout 1h || exit 1
            for run in 1 2 3 4 5 6 7 8 9 10; do echo "RUN $run $(token)"; done
            tokencache lock --file
            token > /dev/null 2>&1 && echo "AFTER-LOCK read" || echo "AFTER-LOCK refused $?"
            """)
        #expect(output.status == 0, "\(output.stderr)")
        let lines = output.stdout.split(separator: "\n").map(String.init)
        #expect(lines.contains { $0.hasPrefix("BEFORE-UNLOCK refused") }, "\(output.stdout)\n\(output.stderr)")
        let runs = lines.filter { $0.hasPrefix("RUN ") }
        #expect(runs.count == 10)
        // Each run printed the saved access token, asking nothing (stdin is /dev/null).
        #expect(runs.allSatisfy { $0.split(separator: " ").last?.hasPrefix("at-\(Fixtures.alice.uid)-") == true },
                "\(runs)\n\(output.stderr)")
        #expect(lines.contains { $0.hasPrefix("AFTER-LOCK refused") }, "\(output.stdout)\n\(output.stderr)")
        // Nothing key-like on disk: the directory holds what it held before the unlock.
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted() == before)
    }

    @Test("The session key expires at its timeout")
    func timeoutExpires() throws {
        let cli = try passphraseProtected()
        defer { cli.cleanUp() }
        // The kernel's key timer is not logic under test: a 1 s timeout, polled for up to 30 s.
        let output = try inNewSession(cli, """
            token() { tokencache token --backend file --group "$G" --client \(Fixtures.appOne) --scopes User.Read < /dev/null > /dev/null 2>&1; }
            TOKENCACHE_PASSPHRASE_FILE="$PASSPHRASE" tokencache unlock --file --group "$G" --timeout 1s || exit 1
            for poll in $(seq 300); do token || { echo "EXPIRED"; exit 0; }; sleep 0.1; done
            echo "STILL-READABLE"
            """)
        #expect(output.stdout.contains("EXPIRED"), "\(output.stdout)\n\(output.stderr)")
    }

    /// `su`, `sudo -u` and `runuser` (without `pam_keyinit force`) keep the caller's session keyring:
    /// uid 65534 plays the attacker with keyctl, in a session of its own and sharing this one.
    static let otherUID = "setpriv --reuid 65534 --regid 65534 --clear-groups"

    @Test("Another uid (65534) cannot read the session key, in its own session keyring nor attached to the same one (#57 item 2)")
    func otherUserCannotRead() throws {
        let cli = try passphraseProtected()
        defer { cli.cleanUp() }
        let output = try inNewSession(cli, """
            TOKENCACHE_PASSPHRASE_FILE="$PASSPHRASE" tokencache unlock --file --group "$G" --timeout 1h > /dev/null || exit 1
            id=$(keyctl show @s | awk '/tokencache:file-key:/ { print $1 }')
            [ -n "$id" ] || { echo "NO-KEY"; exit 1; }
            keyctl read "$id" > /dev/null && echo "OWNER-SESSION read"
            # In its own session (as any other login would be).
            \(Self.otherUID) keyctl session - keyctl read "$id" > /dev/null 2>&1 \\
                && echo "OTHER-UID read" || echo "OTHER-UID refused"
            # Attached to this session keyring (possessor permissions would let it read).
            \(Self.otherUID) keyctl read "$id" > /dev/null 2>&1 && echo "SAME-SESSION-UID read" || echo "SAME-SESSION-UID refused"
            tokencache lock --file > /dev/null
            """)
        #expect(output.stdout.contains("OWNER-SESSION read"), "\(output.stdout)\n\(output.stderr)")
        #expect(output.stdout.contains("OTHER-UID refused"), "\(output.stdout)\n\(output.stderr)")
        #expect(output.stdout.contains("SAME-SESSION-UID refused"), "\(output.stdout)\n\(output.stderr)")
        #expect(!output.stdout.contains("UID read"))
    }

    @Test("A key another uid plants under the cache's name in the shared session keyring is neither used nor filled by unlock (#57 item 2)")
    func plantedKeyIsIgnoredAndNotFilled() throws {
        let cli = try passphraseProtected()
        defer { cli.cleanUp() }
        // World-readable scratch: the attacker (uid 65534) reads the payload it plants from here.
        let scratch = try TestEnvironment.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: scratch) }
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: scratch.path)
        let output = try inNewSession(cli, """
            S=\(scratch.path)
            token() { tokencache token --backend file --group "$G" --client \(Fixtures.appOne) --scopes User.Read < /dev/null; }
            unlock() { TOKENCACHE_PASSPHRASE_FILE="$PASSPHRASE" tokencache unlock --file --group "$G" --timeout 1h > /dev/null; }
            # As uid 65534: adds the file $2 as key "$1" to the shared session keyring, open to all (and
            # kept alive in its own user keyring), and prints its id.
            plant() { \(Self.otherUID) sh -c 'id=$(keyctl padd user "$1" @s < "$2") && keyctl setperm "$id" 0x3f3f3f3f && keyctl link "$id" @u && echo "$id"' - "$@"; }
            unlock || exit 1
            id=$(keyctl show @s | awk '/tokencache:file-key:/ { print $1 }')
            name=$(keyctl show @s | awk '/tokencache:file-key:/ { print $NF }')
            [ -n "$id" ] && [ -n "$name" ] || { echo "NO-KEY"; exit 1; }
            # The file's salt tag (the attacker could learn it from any copy of the file).
            keyctl pipe "$id" | head -c 8 > "$S/tag"
            tokencache lock --file > /dev/null
            # 1. A key of that name holding nothing of the user's: unlock must not fill it.
            { printf 'XXXXXXXX'; head -c 32 /dev/zero; } > "$S/empty"
            chmod 644 "$S/empty"
            planted=$(plant "$name" "$S/empty")
            [ -n "$planted" ] || { echo "NO-PLANT"; exit 1; }
            unlock && echo "UNLOCKED" || echo "UNLOCK-FAILED"
            \(Self.otherUID) keyctl pipe "$planted" > "$S/after" 2>/dev/null
            cmp -s "$S/empty" "$S/after" && echo "PLANTED-UNCHANGED" || echo "PLANTED-FILLED $(wc -c < "$S/after")"
            echo "AFTER-UNLOCK $(token 2>&1)"
            tokencache lock --file > /dev/null
            \(Self.otherUID) keyctl unlink "$planted" @u > /dev/null 2>&1
            # 2. A key of that name with the file's tag and a key of the attacker's choosing: never used.
            { cat "$S/tag"; head -c 32 /dev/zero; } > "$S/chosen"
            chmod 644 "$S/chosen"
            planted=$(plant "$name" "$S/chosen")
            [ -n "$planted" ] || { echo "NO-PLANT"; exit 1; }
            echo "TOKEN $(TOKENCACHE_PASSPHRASE_FILE="$PASSPHRASE" token 2>&1)"
            \(Self.otherUID) keyctl unlink "$planted" @u > /dev/null 2>&1
            """)
        #expect(output.status == 0, "\(output.stdout)\n\(output.stderr)")
        let lines = output.stdout.split(separator: "\n").map(String.init)
        // Unlock made a key of its own instead of updating the attacker's in place, and reads with it.
        #expect(lines.contains("UNLOCKED"), "\(output.stdout)\n\(output.stderr)")
        #expect(lines.contains("PLANTED-UNCHANGED"), "\(output.stdout)\n\(output.stderr)")
        #expect(lines.contains { $0.hasPrefix("AFTER-UNLOCK at-\(Fixtures.alice.uid)-") }, "\(output.stdout)\n\(output.stderr)")
        // The planted key was not used: the passphrase file was, and the token read.
        #expect(lines.contains { $0.hasPrefix("TOKEN at-\(Fixtures.alice.uid)-") }, "\(output.stdout)\n\(output.stderr)")
    }

    @Test("Where the session keyring is the per-user default, unlock --file keeps the keys where the next command finds them (the user-session keyring) and says so; doctor shows them and the time left; lock --file drops them")
    func unlockOnUserSessionKeyring() throws {
        let cli = try passphraseProtected()
        defer { cli.cleanUp() }
        let output = try onUserSessionKeyring(cli, """
            [ "$(keyctl rdescribe @s | cut -d';' -f5)" = "_uid_ses.$(id -u)" ] || { echo "NOT-ON-USER-SESSION $(keyctl rdescribe @s)"; exit 3; }
            token() { tokencache token --backend file --group "$G" --client \(Fixtures.appOne) --scopes User.Read < /dev/null; }
            echo "UNLOCK $(TOKENCACHE_PASSPHRASE_FILE="$PASSPHRASE" tokencache unlock --file --group "$G" --timeout 600)"
            echo "TOKEN $(token)"
            tokencache doctor --backend file --group "$G" < /dev/null | grep "session keys" | sed 's/^/DOCTOR /'
            tokencache lock --file
            token > /dev/null 2>&1 && echo "AFTER-LOCK read" || echo "AFTER-LOCK refused $?"
            """)
        #expect(output.status == 0, "\(output.stdout)\(output.stderr)")
        let lines = output.stdout.split(separator: "\n").map(String.init)
        #expect(lines.contains { $0.hasPrefix("UNLOCK Unlocked 1 passphrase key") && $0.contains("user-session keyring") }, "\(output.stdout)")
        #expect(lines.contains { $0.hasPrefix("TOKEN at-\(Fixtures.alice.uid)-") }, "the next command did not find the key: \(output.stdout)\(output.stderr)")
        #expect(lines.contains { $0.hasPrefix("DOCTOR") && $0.contains("held in your user-session keyring, time left") }, "\(output.stdout)")
        #expect(lines.contains { $0.hasPrefix("AFTER-LOCK refused") }, "\(output.stdout)")
    }
}
