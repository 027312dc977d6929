import Foundation
import Testing
@testable import TokenCache
import TokenCacheTestIdentityProvider
import TokenCacheTestSupport
#if canImport(Glibc)
import Glibc
#endif

extension KeeperScenario {
    /// A Python program, run as `user`, that sends one token request of client `client` on the
    /// keeper's socket and prints the answer's error code and message (or `granted` and no token).
    static let tokenRequest = """
        import json, socket, struct, sys
        def exchange(s, request):
            data = json.dumps(request).encode()
            s.sendall(struct.pack(">I", len(data)) + data)
            head = b""
            while len(head) < 4:
                chunk = s.recv(4 - len(head))
                if not chunk: return None
                head += chunk
            (n,) = struct.unpack(">I", head); body = b""
            while len(body) < n: body += s.recv(n - len(body))
            return json.loads(body)
        def ask(s, client):
            answer = exchange(s, {"version": 1, "op": "token", "client_id": client, "scopes": ["User.Read"]})
            if answer is None: return "closed"
            if answer.get("ok"): return "granted"
            error = answer.get("error", {})
            return "%s %s %s" % (error.get("code"), error.get("message"), error.get("hint"))
        """

    /// Alice's consents file written as a keeper before client IDs wrote it (root's, 0600).
    func writeLegacyConsent(of user: KeeperTestUser, app: String) throws {
        let path = "\(state)/\(user.uid)/consents.json"
        try Data(#"[{"app":"\#(app)","group":"\#(group)","time":"2026-01-01T00:00:00Z"}]"#.utf8).write(to: URL(fileURLWithPath: path))
        chmod(path, 0o600)
    }
}

extension KeeperTests {
    @Test("Consent hardening: no consent to an interpreter or to tokencache itself (typed refusal, PAM not asked, no --consent hint for a script's caller); a consent is for one client ID, another client of the same app is refused; an old consent without a client ID allows nothing and --list says so; root's --unenroll withdraws the group's consents, so enrolling it again lets no consented app in")
    func consentHardening() async throws {
        let scenario = try await KeeperScenario.withAliceEnrolled()
        defer { scenario.cleanUp() }
        let password = "Alice-pw-\(scenario.id)-4H"
        try scenario.alice.setPassword(password)
        var outputs: [String] = []
        let unlisted = scenario.appDirectory + "/unlisted"
        try FileManager.default.copyItem(atPath: scenario.app, toPath: unlisted)
        chmod(unlisted, 0o755)

        // The refusal names the client: the --consent command it shows is for that client.
        let first = try scenario.token(as: scenario.alice, executable: unlisted)
        #expect(first.status != 0 && first.stderr.contains("--consent --app \(unlisted) --group GROUP --client \(Fixtures.appOne)"),
                "\(first.stdout)\(first.stderr)")

        // A script is identified as its interpreter: refused without a --consent hint, saying why.
        let python = try scenario.alice.run("/usr/bin/python3", ["-c", KeeperScenario.tokenRequest + "\n" + """
            s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print(ask(s, sys.argv[2]))
            """, scenario.socket, Fixtures.appOne])
        #expect(python.stdout.hasPrefix("accessDenied") && python.stdout.contains("interpreter") && !python.stdout.contains("--consent"),
                "\(python.stdout)\(python.stderr)\n\(scenario.log)")

        // Her right password for an interpreter (by its link's name too) or tokencache itself: refused, typed, nothing recorded.
        let interpreter = URL(fileURLWithPath: "/usr/bin/python3").resolvingSymlinksInPath().path
        for (app, why) in [("/usr/bin/python3", "interpreter"), (interpreter, "interpreter"), ("/bin/sh", "interpreter"), (scenario.app, "tokencache itself")] {
            let refused = try scenario.consent(as: scenario.alice, app: app, password: password)
            outputs.append(refused.stdout + refused.stderr)
            #expect(refused.status == 1 && refused.stdout.contains("no consent can be given to \(app)") && refused.stdout.contains(why),
                    "\(app): \(refused.stdout)\(refused.stderr)\n\(scenario.log)")
        }
        #expect(scenario.consentsFile(of: scenario.alice).isEmpty)
        #expect(scenario.log.contains("not given for client \(Fixtures.appOne): unconsentable"), "\(scenario.log)")

        // A consent for client one: client one gets a token, client two through the same app is refused.
        let given = try scenario.consent(as: scenario.alice, app: unlisted, password: password)
        outputs.append(given.stdout + given.stderr)
        #expect(given.status == 0 && given.stdout.contains("Consent recorded"), "\(given.stdout)\(given.stderr)\n\(scenario.log)")
        #expect(scenario.consentsFile(of: scenario.alice).contains(Fixtures.appOne))
        let one = try scenario.token(as: scenario.alice, executable: unlisted)
        #expect(one.status == 0 && !one.stdout.isEmpty, "\(one.stdout)\(one.stderr)\n\(scenario.log)")
        let two = try scenario.alice.run(unlisted, ["token", "--client", Fixtures.appTwo, "--scopes", "User.Read"],
                                         environment: ["TOKENCACHE_AGENT_SOCK": scenario.socket, "TOKENCACHE_AGENT_UID": "0"])
        #expect(two.status != 0 && two.stdout.isEmpty && two.stderr.contains("may not use client \(Fixtures.appTwo)")
                && two.stderr.contains("--client \(Fixtures.appTwo)"), "\(two.stdout)\(two.stderr)")

        // An old entry without a client ID (as an earlier keeper wrote it) allows nothing; --list says so.
        let legacy = scenario.appDirectory + "/legacy"
        try FileManager.default.copyItem(atPath: scenario.app, toPath: legacy)
        chmod(legacy, 0o755)
        let current = scenario.consentsFile(of: scenario.alice)
        try scenario.writeLegacyConsent(of: scenario.alice, app: legacy)
        let old = try scenario.token(as: scenario.alice, executable: legacy)
        #expect(old.status != 0 && old.stderr.contains("is not an app of") && old.stderr.contains("--client \(Fixtures.appOne)"), "\(old.stdout)\(old.stderr)")
        let listed = try scenario.alice.run(scenario.app, ["keeper", "--list", "--socket", scenario.socket])
        #expect(listed.status == 0 && listed.stdout.contains("\(legacy) may use \(scenario.group) (no client ID: allows nothing"), "\(listed.stdout)\(listed.stderr)")
        try Data(current.utf8).write(to: URL(fileURLWithPath: "\(scenario.state)/\(scenario.alice.uid)/consents.json"))

        // Root unenrols her group: its consents go with it, and a new enrolment (no password the first time) lets the app in no more.
        let output = scenario.root + "/alice-group.json"
        let unenrolled = try runProcess(scenario.app, ["keeper", "--unenroll", "--state-dir", scenario.state, "--uid", "\(scenario.alice.uid)",
                                                       "--group", scenario.group, "--output", output])
        #expect(unenrolled.status == 0 && unenrolled.stdout.contains("Withdrew uid \(scenario.alice.uid)'s 1 consent"), "\(unenrolled.stdout)\(unenrolled.stderr)")
        #expect(!scenario.consentsFile(of: scenario.alice).contains(scenario.group), "\(scenario.consentsFile(of: scenario.alice))")
        let again = try await scenario.enrollAlice()
        #expect(again.status == 0, "\(again.stdout)\(again.stderr)\n\(scenario.log)")
        let after = try scenario.token(as: scenario.alice, executable: unlisted)
        #expect(after.status != 0 && after.stderr.contains("is not an app of"), "\(after.stdout)\(after.stderr)")

        for text in outputs + [scenario.log, scenario.consentsFile(of: scenario.alice)] { #expect(!text.contains(password), "the password leaked: \(text)") }
    }

    @Test("A connection handed on is not answered as the app: a process connects while the keeper is stopped, forks, execs the allowed app, and its child sends the token request, or it sent the request itself before the exec and its child (dumpable or not) holds the connection; the keeper, identifying the allowed app at accept, refuses it (sent by another process; held by another process) and gives no token, to a second request on that connection either")
    func connectionHandedToAnotherProcess() async throws {
        let scenario = try await KeeperScenario.withAliceEnrolled()
        defer { scenario.cleanUp() }
        guard let keeper = scenario.keeper else { throw KeeperTestError("no keeper") }
        // The parent execs the allowed app, which waits on standard input (a pipe the child holds)
        // so it runs while the keeper identifies it; the child learns of the exec when the
        // close-on-exec pipe end closes, sends, says so, then reads the answer.
        let helper = KeeperScenario.tokenRequest + "\n" + """
            import os
            path, app, client, sender = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
            s = socket.socket(socket.AF_UNIX); s.connect(path)
            data = json.dumps({"version": 1, "op": "token", "client_id": client, "scopes": ["User.Read"]}).encode()
            if sender.startswith("parent"):
                s.sendall(struct.pack(">I", len(data)) + data)
            if sender == "parent, twice":
                s.sendall(struct.pack(">I", len(data)) + data)  # the second request would not be scanned for holders
            ready_r, ready_w = os.pipe()
            stdin_r, stdin_w = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(ready_w); os.close(stdin_r)
                os.read(ready_r, 1)
                if sender == "parent, keeping it, child not dumpable":
                    # prctl(PR_SET_DUMPABLE, 0): its /proc directory then shows as root's.
                    import ctypes
                    ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)
                if sender == "child":
                    s.sendall(struct.pack(">I", len(data)) + data)
                print("sent", flush=True)
                for _ in range(2 if sender == "parent, twice" else 1):
                    head = b""
                    while len(head) < 4:
                        chunk = s.recv(4 - len(head))
                        if not chunk: break
                        head += chunk
                    if len(head) < 4:
                        print("closed", flush=True)
                        break
                    (n,) = struct.unpack(">I", head); body = b""
                    while len(body) < n: body += s.recv(n - len(body))
                    answer = json.loads(body)
                    print("granted" if answer.get("ok") else "%s %s" % (answer["error"]["code"], answer["error"]["message"]), flush=True)
                os.close(stdin_w)
                os._exit(0)
            os.close(ready_r); os.close(stdin_w)
            os.dup2(stdin_r, 0)
            if sender == "parent, keeping it, child not dumpable":
                os.set_inheritable(s.fileno(), True)  # the app holds the connection too, so the child's copy alone is the tell
            os.execv(app, [app, "save", "--backend", "file", "--group", "com.example.unused", "--client", client,
                           "--authority", "https://login.microsoftonline.com/common", "--scopes", "User.Read"])
            """
        // The child sends; or the parent sends before it forks and execs, and the child reads the answer;
        // or the parent sends two: the second, on a connection that failed its first check, is refused too.
        for sender in ["child", "parent", "parent, keeping it, child not dumpable", "parent, twice"] {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            process.arguments = ["--reuid", "\(scenario.alice.uid)", "--regid", "\(scenario.alice.gid)", "--init-groups", "--",
                                 "/usr/bin/python3", "-c", helper, scenario.socket, scenario.app, Fixtures.appOne, sender]
            process.environment = scenario.alice.environment()
            let output = Pipe()
            process.standardOutput = output
            process.standardError = output
            // Stopped, the keeper accepts nothing: it identifies the connection only after the exec.
            kill(keeper.processIdentifier, SIGSTOP)
            var continued = false
            defer { if !continued { kill(keeper.processIdentifier, SIGCONT) } }
            try process.run()
            var text = ""
            while !text.contains("sent\n"), let byte = try output.fileHandleForReading.read(upToCount: 1), !byte.isEmpty {
                text += String(decoding: byte, as: UTF8.self)
            }
            kill(keeper.processIdentifier, SIGCONT)
            continued = true
            text += String(decoding: try output.fileHandleForReading.readToEnd() ?? Data(), as: UTF8.self)
            process.waitUntilExit()
            #expect(text.contains("sent\naccessDenied") && text.contains("handed to another process") && !text.contains("granted"),
                    "\(sender) sends: \(text)\n\(scenario.log)")
            if sender == "parent, twice" {
                #expect(text.components(separatedBy: "accessDenied").count == 3, "both requests refused: \(text)")
            }
            #expect(!text.contains(scenario.refreshToken))
        }
        // The keeper identified the allowed app at accept: the refusals are for the sender and the holder, not for an unknown caller.
        #expect(scenario.log.contains("the request was sent by pid") && scenario.log.contains("held by another process as well"), "\(scenario.log)")
    }

    @Test("The consent prompt restores the terminal's echo when SIGINT, SIGTERM or SIGHUP ends it while it waits for the password, and asks nothing where echo cannot be turned off (an orphaned background process group: tcsetattr fails)")
    func promptRestoresEchoOnSignal() async throws {
        let scenario = try KeeperScenario()
        defer { scenario.cleanUp() }
        let driver = """
            import os, pty, signal, sys, termios
            # The test runner's thread may block signals, and a blocked mask is inherited: unblock, for the alarm and the prompt.
            signal.pthread_sigmask(signal.SIG_SETMASK, [])
            signal.alarm(60)
            number = int(sys.argv[1])
            pid, fd = pty.fork()
            if pid == 0:
                # A signal ignored where the test runs would stay ignored in the prompt (as it should): start from the defaults.
                signal.signal(number, signal.SIG_DFL)
                os.execv(sys.argv[2], sys.argv[2:])
            seen = b""
            while b"Your password" not in seen:
                chunk = os.read(fd, 1024)
                if not chunk: break
                seen += chunk
            waiting = bool(termios.tcgetattr(fd)[3] & termios.ECHO)
            os.kill(pid, number)
            _, status = os.waitpid(pid, 0)
            restored = bool(termios.tcgetattr(fd)[3] & termios.ECHO)
            print("asked=%s echo-while-waiting=%s signalled=%s echo-after=%s" % (b"Your password" in seen, waiting,
                  os.WIFSIGNALED(status) and os.WTERMSIG(status) == number, restored))
            """
        for number in [SIGINT, SIGTERM, SIGHUP] {
            let command = ["/usr/bin/setpriv", "--reuid", "\(scenario.alice.uid)", "--regid", "\(scenario.alice.gid)", "--init-groups", "--",
                           scenario.app, "keeper", "--consent", "--app", "/opt/some-app", "--group", scenario.group, "--client", Fixtures.appOne,
                           "--socket", scenario.socket]
            let run = try runProcess("/usr/bin/python3", ["-c", driver, "\(number)"] + command, environment: scenario.alice.environment())
            #expect(run.stdout.contains("asked=True echo-while-waiting=False signalled=True echo-after=True"), "signal \(number): \(run.stdout)\(run.stderr)")
        }

        // A process in an orphaned background process group of its terminal cannot change it
        // (tcsetattr: EIO): the prompt is refused before anything is asked or read.
        let orphan = """
            import os, pty, signal, sys
            signal.pthread_sigmask(signal.SIG_SETMASK, [])
            signal.alarm(60)
            pid, fd = pty.fork()
            if pid == 0:
                # The session leader keeps the terminal until the program ends (it holds held_w).
                held_r, held_w = os.pipe()
                a = os.fork()
                if a == 0:
                    os.setpgid(0, 0)
                    gone_r, gone_w = os.pipe()
                    if os.fork() == 0:
                        os.close(gone_w); os.close(held_r)
                        os.read(gone_r, 1)  # end of file: its parent exited, so its process group is orphaned
                        os.set_inheritable(held_w, True)
                        os.execv(sys.argv[1], sys.argv[1:])
                    os._exit(0)
                os.close(held_w)
                os.waitpid(a, 0)
                os.read(held_r, 1)
                os._exit(0)
            seen = b""
            while True:
                try:
                    chunk = os.read(fd, 1024)
                except OSError:
                    break
                if not chunk:
                    break
                seen += chunk
            sys.stdout.write(seen.decode(errors="replace"))
            """
        let refused = try runProcess("/usr/bin/python3", ["-c", orphan, scenario.app, "keeper", "--consent", "--app", "/opt/some-app", "--group", scenario.group,
                                                          "--client", Fixtures.appOne, "--socket", scenario.socket])
        #expect(refused.stdout.contains("the terminal's echo could not be turned off") && !refused.stdout.contains("Your password,"),
                "\(refused.stdout)\(refused.stderr)")
    }

    @Test("The consent prompt as readpassphrase(3): stopped with SIGTSTP (^Z) it stops with the terminal's echo on, and after SIGCONT asks again with echo off; a SIGINT ignored before the prompt stays ignored (the process ends by the SIGTERM that follows, not by SIGINT)")
    func promptStopsAndKeepsIgnoredSignals() async throws {
        let scenario = try KeeperScenario()
        defer { scenario.cleanUp() }
        let command = ["/usr/bin/setpriv", "--reuid", "\(scenario.alice.uid)", "--regid", "\(scenario.alice.gid)", "--init-groups", "--",
                       scenario.app, "keeper", "--consent", "--app", "/opt/some-app", "--group", scenario.group, "--client", Fixtures.appOne,
                       "--socket", scenario.socket]
        let driver = """
            import os, pty, signal, sys, termios
            signal.pthread_sigmask(signal.SIG_SETMASK, [])
            signal.alarm(60)
            mode = sys.argv[1]
            pid, fd = pty.fork()
            if pid == 0:
                if mode == "ignored":
                    signal.signal(signal.SIGINT, signal.SIG_IGN)
                    os.execv(sys.argv[2], sys.argv[2:])
                # The prompt runs in a foreground process group of its own whose parent (this session
                # leader) is in the session: not orphaned, so a stop signal really stops it.
                signal.signal(signal.SIGTTOU, signal.SIG_IGN)
                go_r, go_w = os.pipe()
                child = os.fork()
                if child == 0:
                    os.setpgid(0, 0)
                    os.read(go_r, 1)
                    signal.signal(signal.SIGTTOU, signal.SIG_DFL)
                    os.execv(sys.argv[2], sys.argv[2:])
                os.setpgid(child, child)
                os.tcsetpgrp(0, child)
                os.write(go_w, b"x")
                _, status = os.waitpid(child, os.WUNTRACED)
                stopped = os.WIFSTOPPED(status) and os.WSTOPSIG(status) == signal.SIGTSTP
                echo = bool(termios.tcgetattr(0)[3] & termios.ECHO)
                os.tcsetpgrp(0, child)
                os.write(1, b"stopped=%s echo-while-stopped=%s\\n" % (str(stopped).encode(), str(echo).encode()))
                os.kill(child, signal.SIGCONT)
                _, status = os.waitpid(child, 0)
                os.write(1, b"ended\\n")
                os._exit(0)
            seen = b""
            def until(text):
                global seen
                while text not in seen:
                    chunk = os.read(fd, 1024)
                    if not chunk: break
                    seen += chunk
            until(b"Your password")
            waiting = bool(termios.tcgetattr(fd)[3] & termios.ECHO)
            if mode == "ignored":
                os.kill(pid, signal.SIGINT)
                os.kill(pid, signal.SIGTERM)
                _, status = os.waitpid(pid, 0)
                print("echo-while-waiting=%s ended-by=%s" % (waiting, os.WTERMSIG(status) if os.WIFSIGNALED(status) else "exit"))
            else:
                os.killpg(os.tcgetpgrp(fd), signal.SIGTSTP)
                until(b"echo-while-stopped")
                while seen.count(b"Your password") < 2:
                    chunk = os.read(fd, 1024)
                    if not chunk: break
                    seen += chunk
                again = seen.count(b"Your password") == 2
                echo_again = bool(termios.tcgetattr(fd)[3] & termios.ECHO)
                os.killpg(os.tcgetpgrp(fd), signal.SIGTERM)
                until(b"ended")
                print("echo-while-waiting=%s asked-again=%s echo-when-asked-again=%s" % (waiting, again, echo_again))
                print(seen.decode(errors="replace"))
            """
        let stopped = try runProcess("/usr/bin/python3", ["-c", driver, "stop"] + command, environment: scenario.alice.environment())
        #expect(stopped.stdout.contains("stopped=True echo-while-stopped=True") && stopped.stdout.contains("echo-while-waiting=False asked-again=True echo-when-asked-again=False"),
                "\(stopped.stdout)\(stopped.stderr)")
        let ignored = try runProcess("/usr/bin/python3", ["-c", driver, "ignored"] + command, environment: scenario.alice.environment())
        #expect(ignored.stdout.contains("echo-while-waiting=False ended-by=\(SIGTERM)"), "\(ignored.stdout)\(ignored.stderr)")
    }

    @Test("At most 8 connections of one uid are served at once: with 8 of Alice's open (each answered, so served), a ninth of hers is answered overloaded with what to do; Bob's connection is served")
    func connectionsPerUID() async throws {
        let scenario = try await KeeperScenario.withAliceEnrolled()
        defer { scenario.cleanUp() }
        let holder = KeeperScenario.tokenRequest + "\n" + """
            def ask(s):
                answer = exchange(s, {"version": 1, "op": "log", "lines": 1})
                if answer is None: return "closed"
                error = answer.get("error")
                return "served" if not error else "%s %s %s" % (error.get("code"), error.get("message"), error.get("hint"))
            held = []
            for _ in range(int(sys.argv[2])):
                s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); held.append(s)
                print(ask(s))
            s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print("extra:", ask(s))
            """
        let alice = try scenario.alice.run("/usr/bin/python3", ["-c", holder, scenario.socket, "8"])
        let lines = alice.stdout.split(separator: "\n")
        #expect(lines.prefix(8).allSatisfy { $0 == "served" } && lines.count == 9, "\(alice.stdout)\(alice.stderr)")
        #expect(lines.last?.hasPrefix("extra: overloaded") == true && lines.last?.contains("8 connections of uid \(scenario.alice.uid)") == true,
                "\(alice.stdout)\(alice.stderr)")
        // Another uid is not counted with hers.
        let bob = try scenario.bob.run("/usr/bin/python3", ["-c", holder, scenario.socket, "0"])
        #expect(bob.stdout == "extra: served\n", "\(bob.stdout)\(bob.stderr)")
    }
}
