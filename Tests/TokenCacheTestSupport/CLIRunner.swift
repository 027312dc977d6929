import Foundation
import Testing
import TokenCacheCore

/// Runs the built `tokencache` binary as a subprocess against an isolated store.
package struct CLI {
    package let backend: String
    package let dataHome: URL
    package let group: String
    /// Extra environment variables for the subprocess.
    package var environmentOverrides: [String: String] = [:]

    package init(backend: String) throws {
        self.backend = backend
        dataHome = try TestEnvironment.temporaryDirectory()
        // A group of its own per test, so tests sharing the keyring never see each other.
        group = "org.swift-tokencache.cli-test-\(UUID().uuidString.prefix(8).lowercased())"
    }

    /// The same store and group through another backend.
    package init(_ other: CLI, backend: String) {
        self.backend = backend
        dataHome = other.dataHome
        group = other.group
    }

    /// The group as MSAL JSON, parsed, through `export` to a fresh file.
    package func exported() throws -> NSDictionary {
        let file = dataHome.appendingPathComponent("export-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: file) }
        let output = try run(["export", "--format", "msal-json", "--output", file.path])
        #expect(output.status == 0, "export failed: \(output.stderr)")
        return try JSONSerialization.jsonObject(with: Data(contentsOf: file)) as? NSDictionary ?? [:]
    }

    package var environment: [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["XDG_DATA_HOME"] = dataHome.path
        // No config file or TOKENCACHE_* setting of the machine's may change what a test runs.
        environment["XDG_CONFIG_HOME"] = dataHome.appendingPathComponent("config").path
        for name in ["TOKENCACHE_BACKEND", "TOKENCACHE_GROUP", "TOKENCACHE_COLLECTION", "TOKENCACHE_PASSPHRASE_FILE",
                     "TOKENCACHE_KEY_SOURCE", "TOKENCACHE_TPM_TCTI"] {
            environment[name] = nil
        }
        environment["NO_COLOR"] = "1"
        environment.merge(environmentOverrides) { _, override in override }
        return environment
    }

    @discardableResult
    package func run(_ arguments: [String], input: Data? = nil, withGroup: Bool = true) throws -> ProcessOutput {
        let binary = TestEnvironment.binDirectory.appendingPathComponent("tokencache").path
        var arguments = arguments
        if withGroup, let subcommand = arguments.first, !subcommand.hasPrefix("-"), subcommand != "migrate" {
            arguments += ["--backend", backend, "--group", group]
        }
        return try runProcess(binary, arguments, input: input, environment: environment)
    }

    package func save(_ user: Fixtures.User, client: String, foci: String? = "1", scope: String = "User.Read Mail.Read") throws -> [String: Any] {
        let response = Fixtures.response(for: user, scope: scope, foci: foci, tag: client)
        let output = try run(["save", "--client", client, "--authority", Fixtures.authority().url.absoluteString,
                              "--scopes", scope], input: Fixtures.json(response))
        #expect(output.status == 0, "save failed: \(output.stderr)")
        return response
    }

    /// Runs `tokencache ARGUMENTS` (no group or backend added) on a pseudo-terminal, as a person
    /// at a terminal would: each answer is typed once its prompt has appeared after the previous
    /// answer's; stdin, stdout and stderr are the terminal, so `output` is everything shown.
    /// A prompt asked again after the answers ran out gets end-of-file (Ctrl-D), never a hang.
    package func onTerminal(_ arguments: [String], answering answers: [(prompt: String, typed: String)]) throws -> (status: Int, output: String) {
        let script = """
            import os, pty, sys, select, json
            answers = json.loads(os.environ["TEST_ANSWERS"])
            pid, fd = pty.fork()
            if pid == 0:
                os.execv(sys.argv[1], sys.argv[1:])
            out, seen, next_answer = b"", 0, 0
            while True:
                # A guard against a hang only (a child that neither writes nor exits): generous.
                ready, _, _ = select.select([fd], [], [], 300)
                if not ready:
                    os.kill(pid, 9); break
                try: chunk = os.read(fd, 4096)
                except OSError: break
                if not chunk: break
                out += chunk
                while next_answer < len(answers):
                    at = out.find(answers[next_answer][0].encode(), seen)
                    if at < 0: break
                    seen = at + len(answers[next_answer][0].encode())
                    os.write(fd, answers[next_answer][1].encode() + b"\\n"); next_answer += 1
                if next_answer == len(answers) and answers and out.find(answers[-1][0].encode(), seen) >= 0:
                    seen = out.find(answers[-1][0].encode(), seen) + 1
                    os.write(fd, b"\\x04")
            _, status = os.waitpid(pid, 0)
            print(json.dumps({"status": os.waitstatus_to_exitcode(status), "output": out.decode(errors="replace")}))
            """
        var environment = self.environment
        environment["TEST_ANSWERS"] = String(decoding: try JSONSerialization.data(withJSONObject: answers.map { [$0.prompt, $0.typed] }), as: UTF8.self)
        let binary = TestEnvironment.binDirectory.appendingPathComponent("tokencache").path
        let run = try runProcess("/usr/bin/python3", ["-c", script, binary] + arguments, environment: environment)
        let result = try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any], "\(run.stderr)")
        return (result["status"] as? Int ?? -1, result["output"] as? String ?? "")
    }

    package func cleanUp() {
        _ = try? run(["remove", "--all", "--yes"])
        try? FileManager.default.removeItem(at: dataHome)
    }
}

/// The backends the CLI is tested on: the encrypted file always, the Secret Service inside the
/// isolated keyring session (and in CI, where it must work rather than skip).
package let cliBackends = ["file"] + (TestEnvironment.runsSecretServiceTests ? ["secret-service"] : [])
