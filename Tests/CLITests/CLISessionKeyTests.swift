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
        let file = cli.dataHome.appendingPathComponent("session.sh")
        try Data(("set -u\n" + script).utf8).write(to: file)
        var environment = cli.environment
        environment["PATH"] = TestEnvironment.binDirectory.path + ":" + (environment["PATH"] ?? "/usr/bin:/bin")
        environment["G"] = cli.group
        return try runProcess("/usr/bin/keyctl", ["session", "-", "/bin/bash", file.path], environment: environment)
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

    @Test("Another uid (65534) cannot read the session key")
    func otherUserCannotRead() throws {
        let cli = try passphraseProtected()
        defer { cli.cleanUp() }
        let output = try inNewSession(cli, """
            TOKENCACHE_PASSPHRASE_FILE="$PASSPHRASE" tokencache unlock --file --group "$G" --timeout 1h > /dev/null || exit 1
            id=$(keyctl show @s | awk '/tokencache:file-key:/ { print $1 }')
            [ -n "$id" ] || { echo "NO-KEY"; exit 1; }
            keyctl read "$id" > /dev/null && echo "OWNER-SESSION read"
            # uid 65534 in its own session (as any other login would be): possessor-only permissions refuse it.
            setpriv --reuid 65534 --regid 65534 --clear-groups keyctl session - keyctl read "$id" > /dev/null 2>&1 \\
                && echo "OTHER-UID read" || echo "OTHER-UID refused"
            tokencache lock --file > /dev/null
            """)
        #expect(output.stdout.contains("OWNER-SESSION read"), "\(output.stdout)\n\(output.stderr)")
        #expect(output.stdout.contains("OTHER-UID refused"), "\(output.stdout)\n\(output.stderr)")
        #expect(!output.stdout.contains("OTHER-UID read"))
    }
}
