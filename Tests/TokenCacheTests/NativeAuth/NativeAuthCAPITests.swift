import Foundation
import Testing
@testable import TokenCache
@testable import TokenCacheCore
import TokenCacheTestSupport

/// tokencache_native_* end to end: Tests/CTests/test_native_auth.c, compiled against the built
/// libTokenCacheC.so, signs in, up and resets through the C prompt callback at the stand-in;
/// `tokencache list` then shows the account it saved in the encrypted file.
@Suite("NativeAuth C interface", .serialized, .harness)
struct NativeAuthCAPITests {
    let stand: NativeAuthStandIn
    let cli: CLI
    let program: String

    init() async throws {
        stand = try await NativeAuthStandIn()
        try await stand.addUsers()
        cli = try CLI(backend: "file")
        program = try CTestPrograms.testNativeAuth()
    }

    func run(_ mode: String, _ email: String, _ password: String? = nil) async throws -> ProcessOutput {
        let arguments = [mode, cli.group, stand.idp.authority().description, stand.mailbox.path, email] + (password.map { [$0] } ?? [])
        let (program, environment) = (program, cli.environment)
        return try await offThePool { try runProcess(program, arguments, environment: environment) }
    }

    @Test("C: a wrong code then the mailed one signs in; a password comes through the prompt; a wrong one is INVALID_CREDENTIALS")
    func signIn() async throws {
        let otp = try await run("signin", NativeAuthStandIn.otpUser)
        #expect(otp.status == 0, "\(otp.stdout)\(otp.stderr)")
        #expect(otp.stdout == "ok \(NativeAuthStandIn.otpUser) codes=2 passwords=0 attributes=0\n")
        let password = try await run("signin", NativeAuthStandIn.passwordUser, NativeAuthStandIn.password)
        #expect(password.stdout == "ok \(NativeAuthStandIn.passwordUser) codes=0 passwords=1 attributes=0\n", "\(password.stderr)")
        let wrong = try await run("signin", NativeAuthStandIn.passwordUser, "Wrong-password-1")
        #expect(wrong.status == 1)
        #expect(wrong.stdout.hasPrefix("TOKENCACHE_E_INVALID_CREDENTIALS TOKENCACHE_REASON_NONE "))
        let unknown = try await run("signin", "nobody@contoso.com")
        #expect(unknown.stdout.hasPrefix("TOKENCACHE_E_USER_NOT_FOUND "))
        let noPrompt = try await run("noprompt", NativeAuthStandIn.otpUser)
        #expect(noPrompt.stdout.hasPrefix("TOKENCACHE_E_INVALID_ARGUMENT "))
        let list = try cli.run(["list"])
        #expect(list.stdout.contains(NativeAuthStandIn.passwordUser), "\(list.stderr)")
    }

    @Test("C: sign-up without a password is BROWSER_REQUIRED for a password user flow; an email-code flow asks the required attribute, then signs in")
    func signUp() async throws {
        try await stand.idp.control(["native_signup_attributes": [
            ["name": "displayName", "type": "string", "required": true], ["name": "extension_age", "type": "string", "required": true]]])
        let redirect = try await run("signup", "c.user@contoso.com")
        #expect(redirect.stdout.hasPrefix("TOKENCACHE_E_BROWSER_REQUIRED "), "\(redirect.stdout)")
        try await stand.idp.control(["native_signup_password": false])
        let done = try await run("signup", "c.user@contoso.com")
        #expect(done.stdout == "ok c.user@contoso.com codes=2 passwords=0 attributes=1\n", "\(done.stdout)\(done.stderr)")
        let again = try await run("signup", "c.user@contoso.com")
        #expect(again.stdout.hasPrefix("TOKENCACHE_E_USER_ALREADY_EXISTS "))
    }

    @Test("C: password reset with the code through the prompt, then signed in; a used password is PASSWORD_POLICY")
    func reset() async throws {
        let reused = try await run("reset", NativeAuthStandIn.passwordUser, NativeAuthStandIn.password)
        #expect(reused.stdout.hasPrefix("TOKENCACHE_E_PASSWORD_POLICY TOKENCACHE_REASON_PASSWORD_RECENTLY_USED "), "\(reused.stdout)")
        let done = try await run("reset", NativeAuthStandIn.passwordUser, "Brand-new-pass-9")
        #expect(done.stdout == "ok \(NativeAuthStandIn.passwordUser) codes=2 passwords=0 attributes=0\n", "\(done.stdout)\(done.stderr)")
    }
}
