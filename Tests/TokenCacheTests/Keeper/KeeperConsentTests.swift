import Foundation
import Testing
@testable import TokenCache
import TokenCacheTestIdentityProvider
import TokenCacheTestSupport
#if canImport(Glibc)
import Glibc
#endif

extension KeeperScenario {
    /// Runs `tokencache keeper ARGUMENTS` as `user` on a new pseudo-terminal (python3's pty: the
    /// program's controlling terminal, so its /dev/tty), typing `password` once it asks. The
    /// password reaches the driver on its standard input, never in an argument.
    /// - Returns: what appeared on the terminal (standard output and error together) and the status.
    func onTerminal(as user: KeeperTestUser, _ arguments: [String], typing password: String) throws -> ProcessOutput {
        let driver = """
            import os, pty, signal, sys
            signal.alarm(60)
            password = sys.stdin.buffer.read()
            pid, fd = pty.fork()
            if pid == 0:
                os.execv(sys.argv[1], sys.argv[1:])
            seen, typed = b"", False
            while True:
                try:
                    chunk = os.read(fd, 1024)
                except OSError:
                    break
                if not chunk:
                    break
                seen += chunk
                if not typed and b"Your password" in seen:
                    os.write(fd, password + b"\\n")
                    typed = True
            _, status = os.waitpid(pid, 0)
            sys.stdout.buffer.write(seen)
            sys.exit(os.waitstatus_to_exitcode(status))
            """
        let command = ["/usr/bin/setpriv", "--reuid", "\(user.uid)", "--regid", "\(user.gid)", "--init-groups", "--", app, "keeper"] + arguments
        return try runProcess("/usr/bin/python3", ["-c", driver] + command, input: Data(password.utf8), environment: user.environment())
    }

    /// `--consent --app APP --group GROUP --client CLIENT` as `user`, its password typed on its terminal.
    func consent(as user: KeeperTestUser, app: String, client: String = Fixtures.appOne, password: String) throws -> ProcessOutput {
        try onTerminal(as: user, ["--consent", "--app", app, "--group", group, "--client", client, "--socket", socket], typing: password)
    }

    /// `user`'s consents as the keeper stored them (root reads them); empty when none.
    func consentsFile(of user: KeeperTestUser) -> String {
        (try? String(contentsOfFile: "\(state)/\(user.uid)/consents.json", encoding: .utf8)) ?? ""
    }
}

extension KeeperTests {
    @Test("Consent through PAM: an unlisted app is refused until Alice types her password on her terminal (a wrong one records nothing, standard input without a terminal is refused), then gets her token; Bob's password consents for Bob only and Alice's password typed by Bob is refused; three failures in a row stop PAM being asked; --list shows the consent and --revoke-consent withdraws it; an expired account's right password records nothing; no password in any output or log")
    func consentThroughPAM() async throws {
        let scenario = try await KeeperScenario.withAliceEnrolled()
        defer { scenario.cleanUp() }
        let (alicePassword, bobPassword) = ("Alice-pw-\(scenario.id)-7Q", "Bob-pw-\(scenario.id)-3Z")
        try scenario.alice.setPassword(alicePassword)
        try scenario.bob.setPassword(bobPassword)
        // A root-owned program in a root-owned directory that no apps file names.
        let unlisted = scenario.appDirectory + "/unlisted"
        try FileManager.default.copyItem(atPath: scenario.app, toPath: unlisted)
        chmod(unlisted, 0o755)
        let first = try scenario.token(as: scenario.alice, executable: unlisted)
        #expect(first.status != 0 && first.stderr.contains("is not an app of") && first.stderr.contains("--consent --app \(unlisted)"),
                "\(first.stdout)\(first.stderr)")
        var outputs = [first.stdout, first.stderr]

        // A wrong password: refused, nothing recorded, the app still refused.
        let wrong = try scenario.consent(as: scenario.alice, app: unlisted, password: "not-\(alicePassword)")
        outputs.append(wrong.stdout + wrong.stderr)
        #expect(wrong.status == 1 && wrong.stdout.contains("your password was not accepted"), "\(wrong.stdout)\(wrong.stderr)\n\(scenario.log)")
        #expect(scenario.consentsFile(of: scenario.alice).isEmpty)
        #expect(try scenario.token(as: scenario.alice, executable: unlisted).stderr.contains("is not an app of"))

        // Her password on standard input with no terminal (a new session, none controlling it): refused before anything is sent.
        let piped = try scenario.alice.run("/usr/bin/setsid", ["-w", scenario.app, "keeper", "--consent", "--app", unlisted, "--group", scenario.group, "--client", Fixtures.appOne,
                                                               "--socket", scenario.socket], input: Data("\(alicePassword)\n".utf8))
        outputs.append(piped.stdout + piped.stderr)
        #expect(piped.status == 64 && piped.stderr.contains("/dev/tty") && piped.stderr.contains("has none"), "\(piped.stdout)\(piped.stderr)")
        #expect(scenario.consentsFile(of: scenario.alice).isEmpty)

        // Her password on her terminal: recorded; the unlisted app gets her token (refreshed by the keeper).
        let given = try scenario.consent(as: scenario.alice, app: unlisted, password: alicePassword)
        outputs.append(given.stdout + given.stderr)
        #expect(given.status == 0 && given.stdout.contains("Consent recorded"), "\(given.stdout)\(given.stderr)\n\(scenario.log)")
        #expect(scenario.consentsFile(of: scenario.alice).contains(unlisted))
        var info = stat()
        #expect(stat("\(scenario.state)/\(scenario.alice.uid)/consents.json", &info) == 0 && info.st_uid == 0 && info.st_mode & 0o777 == 0o600)
        let token = try scenario.token(as: scenario.alice, executable: unlisted)
        outputs.append(token.stdout + token.stderr)
        #expect(token.status == 0 && !token.stdout.isEmpty, "\(token.stdout)\(token.stderr)\n\(scenario.log)")
        #expect(!token.stdout.contains(scenario.refreshToken))

        // Bob: Alice's password typed by Bob is checked against Bob (the uid the kernel names): refused.
        let posing = try scenario.consent(as: scenario.bob, app: unlisted, password: alicePassword)
        outputs.append(posing.stdout + posing.stderr)
        #expect(posing.status == 1 && posing.stdout.contains("not accepted"), "\(posing.stdout)\(posing.stderr)")
        // His own password consents for him alone: his store, not Alice's, and her consents unchanged.
        let aliceConsents = scenario.consentsFile(of: scenario.alice)
        let his = try scenario.consent(as: scenario.bob, app: unlisted, password: bobPassword)
        outputs.append(his.stdout + his.stderr)
        #expect(his.status == 0, "\(his.stdout)\(his.stderr)\n\(scenario.log)")
        #expect(scenario.consentsFile(of: scenario.alice) == aliceConsents && scenario.consentsFile(of: scenario.bob).contains(unlisted))
        let bobs = try scenario.token(as: scenario.bob, executable: unlisted)
        #expect(bobs.status != 0 && bobs.stdout.isEmpty && bobs.stderr.contains("holds no group \(scenario.group) of uid \(scenario.bob.uid)"),
                "\(bobs.stdout)\(bobs.stderr)")
        // A hand-made consent of Bob's naming Alice's uid: only the keeper's own program may ask, and no field names whose.
        let forged = """
            import json, socket, struct, sys
            s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
            data = json.dumps({"version": 1, "op": "consent", "app": sys.argv[2], "group": sys.argv[3], "uid": int(sys.argv[4]), "password": "x"}).encode()
            s.sendall(struct.pack(">I", len(data)) + data)
            head = s.recv(4); (n,) = struct.unpack(">I", head); body = b""
            while len(body) < n: body += s.recv(n - len(body))
            print(json.loads(body).get("error", {}).get("code"))
            """
        let forgedAnswer = try scenario.bob.run("/usr/bin/python3", ["-c", forged, scenario.socket, "/usr/bin/python3", scenario.group, "\(scenario.alice.uid)"])
        #expect(forgedAnswer.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "accessDenied", "\(forgedAnswer.stdout)\(forgedAnswer.stderr)")
        #expect(scenario.consentsFile(of: scenario.alice) == aliceConsents)

        // Three failures in a row: the fourth attempt, with the right password, is refused without asking PAM.
        for _ in 0..<3 {
            let failed = try scenario.consent(as: scenario.bob, app: unlisted, password: "wrong")
            #expect(failed.status == 1 && failed.stdout.contains("not accepted"), "\(failed.stdout)\(failed.stderr)")
        }
        let limited = try scenario.consent(as: scenario.bob, app: unlisted, password: bobPassword)
        outputs.append(limited.stdout + limited.stderr)
        #expect(limited.status == 1 && limited.stdout.contains("too many wrong passwords"), "\(limited.stdout)\(limited.stderr)\n\(scenario.log)")
        // The count is saved in the state directory: a restarted keeper (socket activation after a crash) still refuses.
        scenario.killKeeper()
        try scenario.startKeeper()
        let restarted = try scenario.consent(as: scenario.bob, app: unlisted, password: bobPassword)
        outputs.append(restarted.stdout + restarted.stderr)
        #expect(restarted.status == 1 && restarted.stdout.contains("too many wrong passwords"), "\(restarted.stdout)\(restarted.stderr)\n\(scenario.log)")
        var saved = stat()
        #expect(stat("\(scenario.state)/\(scenario.bob.uid)/consent-failures.json", &saved) == 0 && saved.st_uid == 0 && saved.st_mode & 0o777 == 0o600)

        // --list shows her consent; --revoke-consent (no password) withdraws it and the app is refused again.
        let listed = try scenario.alice.run(scenario.app, ["keeper", "--list", "--socket", scenario.socket])
        outputs.append(listed.stdout + listed.stderr)
        #expect(listed.status == 0 && listed.stdout.contains("\(unlisted) may use \(scenario.group)"), "\(listed.stdout)\(listed.stderr)")
        let revoked = try scenario.alice.run(scenario.app, ["keeper", "--revoke-consent", "--app", unlisted, "--group", scenario.group, "--socket", scenario.socket])
        outputs.append(revoked.stdout + revoked.stderr)
        #expect(revoked.status == 0 && revoked.stdout.contains("Withdrawn"), "\(revoked.stdout)\(revoked.stderr)")
        let again = try scenario.token(as: scenario.alice, executable: unlisted)
        #expect(again.status != 0 && again.stderr.contains("is not an app of"), "\(again.stdout)\(again.stderr)")
        #expect(!scenario.consentsFile(of: scenario.alice).contains(unlisted))

        // Her password is right but her account has expired: PAM's account check refuses, nothing is recorded.
        #expect(try runProcess("/usr/bin/chage", ["-E", "0", scenario.alice.name]).status == 0)
        let expired = try scenario.consent(as: scenario.alice, app: unlisted, password: alicePassword)
        outputs.append(expired.stdout + expired.stderr)
        #expect(expired.status == 1 && expired.stdout.contains("your account may not be used now"), "\(expired.stdout)\(expired.stderr)\n\(scenario.log)")
        #expect(!scenario.consentsFile(of: scenario.alice).contains(unlisted))

        // Every attempt and outcome is in the audit log; no password anywhere.
        let audit = (try? String(contentsOfFile: "\(scenario.state)/\(scenario.alice.uid)/audit.log", encoding: .utf8)) ?? ""
        let bobAudit = (try? String(contentsOfFile: "\(scenario.state)/\(scenario.bob.uid)/audit.log", encoding: .utf8)) ?? ""
        let logged = unlisted.replacingOccurrences(of: "/", with: "\\/")  // as JSON writes it
        #expect(audit.contains("consent of \(logged) not given") && audit.contains("consent of \(logged) recorded")
                && audit.contains("consent of \(logged) withdrawn"), "\(audit)")
        // Bob has nothing enrolled: his decisions are in the keeper's standard error, not in an audit log of his.
        #expect(bobAudit.isEmpty && !FileManager.default.fileExists(atPath: "\(scenario.state)/\(scenario.bob.uid)/audit.log"), "\(bobAudit)")
        #expect(scenario.log.contains("tooManyFailures"), "\(scenario.log)")
        for text in outputs + [audit, bobAudit, scenario.log, scenario.consentsFile(of: scenario.alice), scenario.consentsFile(of: scenario.bob)] {
            #expect(!text.contains(alicePassword) && !text.contains(bobPassword), "a password leaked: \(text)")
        }
    }

    @Test("Confined as its systemd unit confines it (read-only /usr, /etc, /opt and /home in a mount namespace of its own; CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH alone; no new privileges), the keeper serves Alice's allowed app, refuses an unlisted one, and records her consent checked with PAM, after which the unlisted app gets her token")
    func confinedKeeperServesAndConsents() async throws {
        let scenario = try await KeeperScenario.withAliceEnrolled(confined: true)
        defer { scenario.cleanUp() }
        // The kernel says how it runs: the two capabilities and nothing else, bounded, and no new privileges.
        let pid = try #require(scenario.keeper?.processIdentifier)
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        let field = { (name: String) in status.split(separator: "\n").first { $0.hasPrefix(name + ":") }.map { $0.dropFirst(name.count + 1).trimmingCharacters(in: .whitespaces) } }
        let twoCapabilities = String(format: "%016llx", (UInt64(1) << 19) | (UInt64(1) << 2))  // CAP_SYS_PTRACE, CAP_DAC_READ_SEARCH
        #expect(field("CapEff") == twoCapabilities && field("CapBnd") == twoCapabilities && field("CapInh") == String(repeating: "0", count: 16),
                "\(status)")
        #expect(field("NoNewPrivs") == "1", "\(status)")
        // Its mounts (the topmost at each path): /usr, /etc, /opt and /home read-only; its own state not.
        let mounts = try String(contentsOfFile: "/proc/\(pid)/mountinfo", encoding: .utf8).split(separator: "\n").map { $0.split(separator: " ") }
        let readOnly = { (path: String) in mounts.last { $0.count > 5 && $0[4] == path }.map { $0[5].split(separator: ",").contains("ro") } }
        for path in ["/usr", "/etc", "/opt", "/home"] { #expect(readOnly(path) == true, "\(path) in the keeper's mounts") }
        #expect(!mounts.contains { $0.count > 4 && $0[4] == "/tmp" && $0[5].split(separator: ",").contains("ro") })

        let token = try scenario.token(as: scenario.alice)
        #expect(token.status == 0 && !token.stdout.isEmpty, "\(token.stdout)\(token.stderr)\n\(scenario.log)")
        #expect(!token.stdout.contains(scenario.refreshToken))

        let password = "Alice-pw-\(scenario.id)-5C"
        try scenario.alice.setPassword(password)
        let unlisted = scenario.appDirectory + "/unlisted"
        try FileManager.default.copyItem(atPath: scenario.app, toPath: unlisted)
        chmod(unlisted, 0o755)
        let refused = try scenario.token(as: scenario.alice, executable: unlisted)
        #expect(refused.status != 0 && refused.stderr.contains("is not an app of"), "\(refused.stdout)\(refused.stderr)\n\(scenario.log)")
        let given = try scenario.consent(as: scenario.alice, app: unlisted, password: password)
        #expect(given.status == 0 && given.stdout.contains("Consent recorded"), "\(given.stdout)\(given.stderr)\n\(scenario.log)")
        let consented = try scenario.token(as: scenario.alice, executable: unlisted)
        #expect(consented.status == 0 && !consented.stdout.isEmpty, "\(consented.stdout)\(consented.stderr)\n\(scenario.log)")
        #expect(!scenario.log.contains(password) && !scenario.log.contains(scenario.refreshToken))
    }

    @Test("Enrolling into a group the keeper holds already asks for Alice's password on her terminal: without a terminal it stops before sending, a wrong password adds nothing, her password adds her second account; no password in any output or log")
    func enrollingIntoAnExistingGroupNeedsThePassword() async throws {
        let scenario = try await KeeperScenario.withAliceEnrolled()
        defer { scenario.cleanUp() }
        let password = "Alice-pw-\(scenario.id)-9K"
        try scenario.alice.setPassword(password)
        try await scenario.saveAlice(accounts: [Fixtures.bob])
        let arguments = ["--enroll", "--socket", scenario.socket, "--backend", "file", "--group", scenario.group]
        var outputs: [String] = []

        let piped = try scenario.alice.run("/usr/bin/setsid", ["-w", scenario.app, "keeper"] + arguments, input: Data("\(password)\n".utf8))
        outputs.append(piped.stdout + piped.stderr)
        #expect(piped.status == 64 && piped.stderr.contains("/dev/tty"), "\(piped.stdout)\(piped.stderr)")
        let wrong = try scenario.onTerminal(as: scenario.alice, arguments, typing: "not-\(password)")
        outputs.append(wrong.stdout + wrong.stderr)
        #expect(wrong.status != 0 && wrong.stdout.contains("was not accepted"), "\(wrong.stdout)\(wrong.stderr)\n\(scenario.log)")
        #expect(try scenario.keptStore().inventory().accounts.count == 1, "nothing was added")
        // Her own copy is kept when the keeper refused.
        let hers = try scenario.alice.run(scenario.app, ["list", "--backend", "file", "--group", scenario.group])
        #expect(hers.stdout.contains(Fixtures.bob.username), "\(hers.stdout)\(hers.stderr)")

        let right = try scenario.onTerminal(as: scenario.alice, arguments, typing: password)
        outputs.append(right.stdout + right.stderr)
        #expect(right.status == 0 && right.stdout.contains("Enrolled group"), "\(right.stdout)\(right.stderr)\n\(scenario.log)")
        #expect(try scenario.keptStore().inventory().accounts.count == 2)

        let audit = (try? String(contentsOfFile: "\(scenario.state)/\(scenario.alice.uid)/audit.log", encoding: .utf8)) ?? ""
        #expect(audit.contains("needs your password, and it was not accepted"), "\(audit)")
        for text in outputs + [audit, scenario.log] { #expect(!text.contains(password), "the password leaked: \(text)") }
    }
}
