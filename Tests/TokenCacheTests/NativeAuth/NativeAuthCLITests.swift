import Foundation
import Testing
@testable import TokenCache
@testable import TokenCacheCore
import TokenCacheTestSupport

/// `tokencache login --native`, `signup` and `reset-password` end to end against the stand-in:
/// the code is typed on standard input (a pipe) once the stand-in has mailed it, passwords come
/// from 0600 files, and nothing secret is printed.
@Suite("NativeAuth CLI", .serialized, .harness)
struct NativeAuthCLITests {
    let stand: NativeAuthStandIn
    let cli: CLI

    init() async throws {
        stand = try await NativeAuthStandIn()
        cli = try CLI(backend: "file")
        try await stand.addUsers()
    }

    var common: [String] {
        ["--client", Fixtures.appOne, "--authority", stand.idp.authority().description, "--scopes", "User.Read",
         "--backend", cli.backend, "--group", cli.group]
    }

    /// A 0600 file holding a password.
    func passwordFile(_ password: String, mode: Int = 0o600) throws -> String {
        let file = stand.scratch.appendingPathComponent("pw-\(UUID().uuidString)")
        try Data((password + "\n").utf8).write(to: file)
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: file.path)
        return file.path
    }

    struct Finished {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// Runs `tokencache`, typing each line of `lines` on its standard input: a line nil is the
    /// latest code mailed to `email`, typed once it arrived (the `n`-th code for the `n`-th nil).
    func run(_ arguments: [String], typing lines: [String?] = [], email: String? = nil) async throws -> Finished {
        let program = try RunningProgram(TestEnvironment.binDirectory.appendingPathComponent("tokencache"),
                                         arguments: arguments + common, environment: cli.environment)
        defer { program.terminate() }
        var codesTyped = 0
        for line in lines {
            var text = line
            if text == nil, let email {
                codesTyped += 1
                // The stand-in mails the code when the CLI asks it to send one; a CLI reading a pipe
                // prints no prompt, so its mailbox is the only sign (checked, not slept on, below a minute).
                let giveUp = Date().addingTimeInterval(60)
                while stand.codeCount(for: email) < codesTyped, Date() < giveUp, program.isRunning {
                    try await Task.sleep(for: .milliseconds(50))
                }
                text = try? stand.latestCode(for: email)
            }
            program.type(text ?? "")
        }
        program.closeInput()
        let status = await program.exitStatus()
        recordOutput(ProcessOutput(status: status, stdout: program.stdout, stderr: program.stderr), of: "tokencache", arguments)
        return Finished(status: status, stdout: program.stdout, stderr: program.stderr)
    }

    func expectNoSecrets(_ finished: Finished, _ secrets: [String]) {
        for secret in secrets {
            #expect(!finished.stdout.contains(secret) && !finished.stderr.contains(secret))
        }
    }

    @Test("login --native: a wrong code then the right one from standard input signs in; list shows the account")
    func loginWithCode() async throws {
        let email = NativeAuthStandIn.otpUser
        let finished = try await run(["login", "--native", "--username", email], typing: ["73000001", nil], email: email)
        #expect(finished.status == 0, "\(finished.stderr)")
        #expect(finished.stdout.contains("Signed in as \(email)"))
        #expect(finished.stderr.contains("That code is wrong"))
        expectNoSecrets(finished, [try stand.latestCode(for: email)])
        let list = try cli.run(["list"])
        #expect(list.stdout.contains(email))
    }

    @Test("login --native: a password from a 0600 file signs in; a file others can read is refused (64); no code is 1")
    func loginWithPassword() async throws {
        let good = try await run(["login", "--native", "--username", NativeAuthStandIn.passwordUser,
                                  "--password-file", try passwordFile(NativeAuthStandIn.password), "--json"])
        #expect(good.status == 0, "\(good.stderr)")
        #expect(good.stdout.contains("\"username\" : \"\(NativeAuthStandIn.passwordUser)\"") || good.stdout.contains("\"username\":\"\(NativeAuthStandIn.passwordUser)\""))
        expectNoSecrets(good, [NativeAuthStandIn.password])
        let open = try await run(["login", "--native", "--username", NativeAuthStandIn.passwordUser,
                                  "--password-file", try passwordFile(NativeAuthStandIn.password, mode: 0o644)])
        #expect(open.status == 64)
        #expect(open.stderr.contains("chmod 600"))
        let wrong = try await run(["login", "--native", "--username", NativeAuthStandIn.passwordUser,
                                   "--password-file", try passwordFile("Wrong-password-1")])
        #expect(wrong.status == 1)
        #expect(wrong.stderr.contains("password is wrong"))
        let noCode = try await run(["login", "--native", "--username", NativeAuthStandIn.otpUser])
        #expect(noCode.status == 1)
        #expect(noCode.stderr.contains("No code was entered"))
        let noPassword = try await run(["login", "--native", "--username", NativeAuthStandIn.passwordUser])
        #expect(noPassword.status == 64)
        #expect(noPassword.stderr.contains("--password-file"))
    }

    @Test("signup: a missing required attribute off a terminal fails naming it; with --attribute and a code from stdin it signs up and in")
    func signUp() async throws {
        try await stand.idp.control(["native_signup_attributes": [["name": "displayName", "type": "string", "required": true, "options": ["regex": ".+"]]]])
        let email = "cli.new@contoso.com"
        let password = try passwordFile("Strong-pass-77")
        let missing = try await run(["signup", "--username", email, "--password-file", password], typing: [nil], email: email)
        #expect(missing.status == 64)
        #expect(missing.stderr.contains("displayName"))
        let other = "cli.other@contoso.com"
        let done = try await run(["signup", "--username", other, "--password-file", password, "--attribute", "displayName=CLI User"],
                                 typing: [nil], email: other)
        #expect(done.status == 0, "\(done.stderr)")
        #expect(done.stdout.contains("Signed up and signed in as \(other)"))
        expectNoSecrets(done, ["Strong-pass-77", try stand.latestCode(for: other)])
        let again = try await run(["signup", "--username", other, "--password-file", password, "--attribute", "displayName=CLI User"])
        #expect(again.status == 1)
        #expect(again.stderr.contains("already exists"))
    }

    @Test("reset-password: the code from stdin, the new password from a file, then signed in; the new password works")
    func resetPassword() async throws {
        let email = NativeAuthStandIn.passwordUser
        let finished = try await run(["reset-password", "--username", email, "--new-password-file", try passwordFile("Brand-new-pass-9")],
                                     typing: [nil], email: email)
        #expect(finished.status == 0, "\(finished.stderr)")
        #expect(finished.stdout.contains("Password reset; signed in as \(email)"))
        expectNoSecrets(finished, ["Brand-new-pass-9", try stand.latestCode(for: email)])
        let login = try await run(["login", "--native", "--username", email, "--password-file", try passwordFile("Brand-new-pass-9")])
        #expect(login.status == 0, "\(login.stderr)")
    }
}
