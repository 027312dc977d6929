import Foundation
import Testing
@testable import TokenCache
@testable import TokenCacheCore
import TokenCacheTestSupport

/// Native authentication against the stand-in of the API V1 (Fixtures/native_auth.py on
/// fake_idp.py): sign-in with an email code or a password, sign-up, password reset, what is
/// saved, silent tokens and sign-out. Codes are read from the stand-in's mailbox files.
@Suite("NativeAuth flows", .harness)
struct NativeAuthFlowTests {
    let scopes = ["User.Read"]

    func expectReason(_ reason: String, _ body: () async throws -> Void) async {
        do {
            try await body()
            Issue.record("expected \(reason), got success")
        } catch let error as NativeAuthError {
            #expect(error.reason.name == reason, "\(error)")
            #expect(!error.hint.isEmpty)
        } catch {
            Issue.record("expected NativeAuthError \(reason), got \(error)")
        }
    }

    @Test("OTP sign-in: the right code signs in and saves the account as MSAL does; redirect is always offered")
    func otpSignIn() async throws {
        let stand = try await NativeAuthStandIn()
        try await stand.addUsers()
        let app = try stand.app()
        guard case .codeRequired(let state) = try await app.signIn(username: NativeAuthStandIn.otpUser, scopes: scopes) else {
            Issue.record("expected codeRequired"); return
        }
        #expect(state.sentTo == "o****@contoso.com")
        #expect(state.channel == "email")
        #expect(state.codeLength == 8)
        let account = try await state.submitCode(try stand.latestCode(for: NativeAuthStandIn.otpUser))
        #expect(account.username == NativeAuthStandIn.otpUser)
        #expect(account.claims?.preferredUsername == NativeAuthStandIn.otpUser)
        #expect(account.account.homeAccountID == "0714a000-0000-0000-0000-000000000001.\(Fixtures.tenantA)")
        #expect(account.account.environment == "127.0.0.1")
        let entries = try stand.store.entries()
        #expect(entries.filter { $0.kind == .account }.map { $0["realm"] } == [Fixtures.tenantA])
        #expect(entries.contains { $0.kind == .refreshToken && $0["client_id"] == Fixtures.appOne })
        let requests = try await stand.stats().requests
        #expect(requests.compactMap(\.challenge_type).allSatisfy { $0 == "oob password redirect" })
        #expect(requests.map { $0.path.split(separator: "/").suffix(2).joined(separator: "/") }
                == ["v2.0/initiate", "v2.0/challenge", "v2.0/token"])
    }

    @Test("An app with cp1 sends it in claims on native authentication's token request only (not on initiate or challenge)")
    func capabilitiesOnNativeTokenRequest() async throws {
        let stand = try await NativeAuthStandIn()
        try await stand.addUsers()
        let app = try stand.app(capabilities: ["cp1"])
        guard case .codeRequired(let state) = try await app.signIn(username: NativeAuthStandIn.otpUser, scopes: scopes) else {
            Issue.record("expected codeRequired"); return
        }
        _ = try await state.submitCode(try stand.latestCode(for: NativeAuthStandIn.otpUser))
        let requests = try await stand.stats().requests
        #expect(requests.map { $0.path.split(separator: "/").last ?? "" } == ["initiate", "challenge", "token"])
        #expect(requests.map(\.claims) == [nil, nil, #"{"access_token":{"xms_cc":{"values":["cp1"]}}}"#])
    }

    @Test("OTP sign-in: a wrong code is invalidCode and the same state then takes the right one")
    func wrongThenRightCode() async throws {
        let stand = try await NativeAuthStandIn()
        try await stand.addUsers()
        guard case .codeRequired(let state) = try await stand.app().signIn(username: NativeAuthStandIn.otpUser, scopes: scopes) else {
            Issue.record("expected codeRequired"); return
        }
        await expectReason("invalidCode") { _ = try await state.submitCode("73000001") }
        #expect(try stand.store.allAccounts().isEmpty)
        let account = try await state.submitCode(try stand.latestCode(for: NativeAuthStandIn.otpUser))
        #expect(account.username == NativeAuthStandIn.otpUser)
    }

    @Test("OTP sign-in: a resent code replaces the old one, which no longer works")
    func resendInvalidatesOldCode() async throws {
        let stand = try await NativeAuthStandIn()
        try await stand.addUsers()
        guard case .codeRequired(let first) = try await stand.app().signIn(username: NativeAuthStandIn.otpUser, scopes: scopes) else {
            Issue.record("expected codeRequired"); return
        }
        let old = try stand.latestCode(for: NativeAuthStandIn.otpUser)
        let second = try await first.resendCode()
        #expect(stand.codeCount(for: NativeAuthStandIn.otpUser) == 2)
        let new = try stand.latestCode(for: NativeAuthStandIn.otpUser)
        #expect(new != old)
        await expectReason("invalidCode") { _ = try await second.submitCode(old) }
        await expectReason("invalidCode") { _ = try await first.submitCode(old) }
        #expect(try await second.submitCode(new).username == NativeAuthStandIn.otpUser)
    }

    @Test("Password sign-in: the right password signs in at once; a wrong one is invalidCredentials and the state stays usable")
    func passwordSignIn() async throws {
        let stand = try await NativeAuthStandIn()
        try await stand.addUsers()
        let app = try stand.app()
        guard case .completed(let account) = try await app.signIn(username: NativeAuthStandIn.passwordUser,
                                                                  password: NativeAuthStandIn.password, scopes: scopes) else {
            Issue.record("expected completed"); return
        }
        #expect(account.username == NativeAuthStandIn.passwordUser)
        await expectReason("invalidCredentials") {
            _ = try await app.signIn(username: NativeAuthStandIn.passwordUser, password: "Wrong-password-1", scopes: scopes)
        }
        guard case .passwordRequired(let state) = try await app.signIn(username: NativeAuthStandIn.passwordUser, scopes: scopes) else {
            Issue.record("expected passwordRequired"); return
        }
        await expectReason("invalidCredentials") { _ = try await state.submitPassword("Wrong-password-1") }
        #expect(try await state.submitPassword(NativeAuthStandIn.password).username == NativeAuthStandIn.passwordUser)
        await expectReason("userNotFound") { _ = try await app.signIn(username: "nobody@contoso.com", scopes: scopes) }
        await expectReason("invalidUsername") { _ = try await app.signIn(username: "not an email", scopes: scopes) }
    }

    @Test("redirect: a password user of an app offering only codes gets browserRequired, and nothing is saved")
    func redirectIsBrowserRequired() async throws {
        let stand = try await NativeAuthStandIn()
        try await stand.addUsers()
        await expectReason("browserRequired") {
            _ = try await stand.app([.oob]).signIn(username: NativeAuthStandIn.passwordUser, scopes: scopes)
        }
        await expectReason("browserRequired") {
            _ = try await stand.app([.password]).signIn(username: NativeAuthStandIn.otpUser, scopes: scopes)
        }
        #expect(try await stand.stats().requests.compactMap(\.challenge_type) == ["oob redirect", "password redirect"])
        #expect(try stand.store.allAccounts().isEmpty)
    }

    @Test("One native-auth account per client: a second user's sign-in signs the app out of the first")
    func oneAccountPerClient() async throws {
        let stand = try await NativeAuthStandIn()
        try await stand.addUsers()
        let app = try stand.app()
        guard case .codeRequired(let state) = try await app.signIn(username: NativeAuthStandIn.otpUser, scopes: scopes) else {
            Issue.record("expected codeRequired"); return
        }
        _ = try await state.submitCode(try stand.latestCode(for: NativeAuthStandIn.otpUser))
        _ = try await app.signIn(username: NativeAuthStandIn.passwordUser, password: NativeAuthStandIn.password, scopes: scopes)
        #expect(try stand.store.accounts(clientID: Fixtures.appOne).map(\.username) == [NativeAuthStandIn.passwordUser])
        #expect(try await app.currentAccount()?.username == NativeAuthStandIn.passwordUser)
    }

    @Test("Sign-up with a password: code, then attributes_required with type and regex, a regex failure names the attribute, then sign-in after sign-up")
    func signUpWithAttributes() async throws {
        let stand = try await NativeAuthStandIn()
        try await stand.idp.control(["native_signup_attributes": [
            ["name": "displayName", "type": "string", "required": true, "options": ["regex": ".+"]],
            ["name": "extension_age", "type": "string", "required": true, "options": ["regex": "^[0-9]{1,3}$"]]]])
        let app = try stand.app()
        let email = "new.user@contoso.com"
        guard case .codeRequired(let code) = try await app.signUp(username: email, password: "Strong-pass-77",
                                                                   attributes: ["displayName": "New User"]) else {
            Issue.record("expected codeRequired"); return
        }
        await expectReason("invalidCode") { _ = try await code.submitCode("73000002") }
        guard case .attributesRequired(let attributes) = try await code.submitCode(try stand.latestCode(for: email)) else {
            Issue.record("expected attributesRequired"); return
        }
        #expect(attributes.requiredAttributes.map(\.name) == ["extension_age"])
        #expect(attributes.requiredAttributes.first?.regex == "^[0-9]{1,3}$")
        #expect(attributes.requiredAttributes.first?.type == "string")
        do {
            _ = try await attributes.submitAttributes(["extension_age": "old"])
            Issue.record("expected attributeValidation")
        } catch {
            #expect(error.reason == .attributeValidation(["extension_age"]))
        }
        guard case .completed(let after) = try await attributes.submitAttributes(["extension_age": "42"]) else {
            Issue.record("expected completed"); return
        }
        let account = try await after.signIn(scopes: scopes)
        #expect(account.username == email)
        #expect(try await stand.stats().users.contains(email))
        // The new account signs in with its password.
        guard case .completed = try await app.signIn(username: email, password: "Strong-pass-77", scopes: scopes) else {
            Issue.record("expected completed"); return
        }
    }

    @Test("Sign-up without a password: credential_required asks for one; a weak one is passwordPolicy and the state stays usable")
    func signUpCredentialRequired() async throws {
        let stand = try await NativeAuthStandIn()
        let app = try stand.app()
        let email = "second@contoso.com"
        guard case .codeRequired(let code) = try await app.signUp(username: email) else {
            Issue.record("expected codeRequired"); return
        }
        guard case .passwordRequired(let password) = try await code.submitCode(try stand.latestCode(for: email)) else {
            Issue.record("expected passwordRequired"); return
        }
        do {
            _ = try await password.submitPassword("short1")
            Issue.record("expected passwordPolicy")
        } catch {
            #expect(error.reason == .passwordPolicy(.tooShort))
        }
        do {
            _ = try await password.submitPassword("lettersonlyhere")
            Issue.record("expected passwordPolicy")
        } catch {
            #expect(error.reason == .passwordPolicy(.tooWeak))
        }
        guard case .completed(let after) = try await password.submitPassword("Good-enough-123") else {
            Issue.record("expected completed"); return
        }
        #expect(try await after.signIn(scopes: scopes).username == email)
    }

    @Test("Sign-up: an existing user is userAlreadyExists; a weak password at start is passwordPolicy; an email-code account needs no password")
    func signUpErrors() async throws {
        let stand = try await NativeAuthStandIn()
        try await stand.addUsers()
        let app = try stand.app()
        await expectReason("userAlreadyExists") { _ = try await app.signUp(username: NativeAuthStandIn.otpUser, password: "Strong-pass-77") }
        do {
            _ = try await app.signUp(username: "weak@contoso.com", password: "Password1")
            Issue.record("expected passwordPolicy")
        } catch {
            #expect(error.reason == .passwordPolicy(.banned))
        }
        // An email-code user flow, and an app offering only codes: oob redirect, no password.
        try await stand.idp.control(["native_signup_password": false])
        let otpApp = try stand.app([.oob])
        guard case .codeRequired(let code) = try await otpApp.signUp(username: "otp.only@contoso.com") else {
            Issue.record("expected codeRequired"); return
        }
        guard case .completed(let after) = try await code.submitCode(try stand.latestCode(for: "otp.only@contoso.com")) else {
            Issue.record("expected completed"); return
        }
        #expect(try await after.signIn(scopes: scopes).username == "otp.only@contoso.com")
        #expect(try await stand.stats().requests.last { $0.path.hasSuffix("/signup/v1.0/start") }?.challenge_type == "oob redirect")
    }

    @Test("Password reset: code, policy error, then polling until succeeded, then sign-in after reset; the new password works and the old does not")
    func passwordReset() async throws {
        let stand = try await NativeAuthStandIn()
        try await stand.addUsers()
        try await stand.idp.control(["native_sspr_polls": 2])
        let clock = ManualClock(immediate: true)
        let app = try stand.app(clock: clock)
        let code = try await app.resetPassword(username: NativeAuthStandIn.passwordUser)
        #expect(code.sentTo == "p****@contoso.com")
        await expectReason("invalidCode") { _ = try await code.submitCode("73000003") }
        let newPassword = try await code.submitCode(try stand.latestCode(for: NativeAuthStandIn.passwordUser))
        do {
            _ = try await newPassword.submitNewPassword(NativeAuthStandIn.password)
            Issue.record("expected passwordPolicy")
        } catch {
            #expect(error.reason == .passwordPolicy(.recentlyUsed))
        }
        let after = try await newPassword.submitNewPassword("Brand-new-pass-9")
        let polls = try await stand.stats().requests.filter { $0.path.hasSuffix("/poll_completion") }
        #expect(polls.count == 3)
        #expect(clock.sleeps == [.seconds(1), .seconds(1), .seconds(1)])  // the stand-in's poll_interval before each poll
        #expect(try await after.signIn(scopes: scopes).username == NativeAuthStandIn.passwordUser)
        await expectReason("invalidCredentials") {
            _ = try await app.signIn(username: NativeAuthStandIn.passwordUser, password: NativeAuthStandIn.password, scopes: scopes)
        }
        guard case .completed = try await app.signIn(username: NativeAuthStandIn.passwordUser, password: "Brand-new-pass-9", scopes: scopes) else {
            Issue.record("expected completed"); return
        }
        await expectReason("userNotFound") { _ = try await app.resetPassword(username: "nobody@contoso.com") }
        await expectReason("userHasNoPassword") { _ = try await app.resetPassword(username: NativeAuthStandIn.otpUser) }
    }

    @Test("Cancelling the task while the reset waits for completion ends it at once as resetFailed (the new password may be set), with no further poll")
    func cancelledResetWait() async throws {
        let stand = try await NativeAuthStandIn()
        try await stand.addUsers()
        try await stand.idp.control(["native_sspr_polls": 2])
        let clock = ManualClock()
        let app = try stand.app(clock: clock)
        let code = try await app.resetPassword(username: NativeAuthStandIn.passwordUser)
        let newPassword = try await code.submitCode(try stand.latestCode(for: NativeAuthStandIn.passwordUser))
        let reset = Task { () async -> NativeAuthError? in
            do throws(NativeAuthError) { _ = try await newPassword.submitNewPassword("Brand-new-pass-9"); return nil } catch { return error }
        }
        await clock.sleeping()  // submitted; the first wait before a poll
        reset.cancel()
        let error = await reset.value
        #expect(error?.reason == .resetFailed && error?.message.contains("may be set already") == true, "\(String(describing: error))")
        #expect(clock.now.offset == .zero, "the clock never moved: the cancellation ended the wait")
        #expect(try await stand.stats().requests.filter { $0.path.hasSuffix("/poll_completion") }.isEmpty)
    }

    @Test("An expired continuation token is expired, and nothing is saved")
    func expiredToken() async throws {
        let stand = try await NativeAuthStandIn()
        try await stand.addUsers()
        guard case .codeRequired(let state) = try await stand.app().signIn(username: NativeAuthStandIn.otpUser, scopes: scopes) else {
            Issue.record("expected codeRequired"); return
        }
        try await stand.idp.control(["native_expire_tokens": true])
        await expectReason("expired") { _ = try await state.submitCode(try stand.latestCode(for: NativeAuthStandIn.otpUser)) }
        await expectReason("expired") { _ = try await state.resendCode() }
        #expect(try stand.store.allAccounts().isEmpty)
    }

    @Test("After sign-in: a silent token comes from the cache, then through the refresh path; sign-out is local")
    func silentTokenAndSignOut() async throws {
        let stand = try await NativeAuthStandIn()
        try await stand.addUsers()
        let app = try stand.app()
        guard case .completed(let account) = try await app.signIn(username: NativeAuthStandIn.passwordUser,
                                                                  password: NativeAuthStandIn.password, scopes: scopes) else {
            Issue.record("expected completed"); return
        }
        let cached = try await account.getAccessToken(scopes: scopes)
        #expect(cached.isFromCache)
        let before = try await stand.idp.stats().grants.count
        let refreshed = try await account.getAccessToken(scopes: ["Mail.Read"])
        #expect(!refreshed.isFromCache)
        let grants = try await stand.idp.stats().grants
        #expect(grants.count == before + 1)
        #expect(grants.last?.outcome == "ok")
        let requestsBefore = try await stand.stats().requests.count
        try await account.signOut()
        #expect(try stand.store.accounts(clientID: Fixtures.appOne).isEmpty)
        #expect(try await app.currentAccount() == nil)
        #expect(try await stand.stats().requests.count == requestsBefore)
        #expect(try await stand.idp.stats().grants.count == before + 1)
    }

    @Test("Accounts an earlier version saved at the domain's realm move to the tenant ID when read: tokens kept, one account, served from the cache")
    func oldRealmMovesOnRead() async throws {
        let stand = try await NativeAuthStandIn()
        try stand.saveTheOldWay(scope: "User.Read", tag: "old", cachedAt: Date())
        let old = try stand.store.entries()
        #expect(old.filter { $0.kind != .refreshToken && $0.kind != .appMetadata && $0.kind != .accountMetadata }
                    .allSatisfy { $0["realm"] == NativeAuthStandIn.domain })
        let account = try #require(try await stand.app(tenant: NativeAuthStandIn.domain).currentAccount())
        #expect(account.account.tenants == [Fixtures.tenantA])
        let moved = try stand.store.entries()
        #expect(moved.count == old.count)
        for kind in [EntityKind.account, .idToken, .accessToken] {
            #expect(moved.filter { $0.kind == kind }.map { $0["realm"] } == [Fixtures.tenantA], "\(kind)")
            #expect(moved.first { $0.kind == kind }?["secret"] == old.first { $0.kind == kind }?["secret"])
        }
        #expect(moved.filter { $0.kind == .refreshToken } == old.filter { $0.kind == .refreshToken })
        #expect(try stand.store.accounts(clientID: Fixtures.appOne).map(\.username) == [NativeAuthStandIn.passwordUser])
        let token = try await account.getAccessToken(scopes: scopes)
        #expect(token.isFromCache && token.accessToken == "at-\(NativeAuthStandIn.paul.uid)-\(Fixtures.tenantA)-old")
        #expect(try await stand.idp.stats().token_requests == 0)
    }

    @Test("A moved access token newer than the tenant ID's copy for the same scopes replaces it; the older moved one never replaces a newer")
    func movedAccessTokenNewerWins() async throws {
        let stand = try await NativeAuthStandIn()
        let response = Fixtures.tokenResponse(Fixtures.response(for: NativeAuthStandIn.paul, scope: "User.Read", foci: nil, tag: "tenant"))
        try stand.store.save(response, clientID: Fixtures.appOne, authority: stand.idp.authority(), scopes: scopes,
                             now: Date().addingTimeInterval(-60))
        try stand.saveTheOldWay(scope: "User.Read", tag: "domain", cachedAt: Date())
        let account = try #require(try await stand.app(tenant: NativeAuthStandIn.domain).currentAccount())
        let tokens = try stand.store.entries().filter { $0.kind == .accessToken }
        #expect(tokens.map { $0["realm"] } == [Fixtures.tenantA])
        #expect(tokens.map { $0["secret"] } == ["at-\(NativeAuthStandIn.paul.uid)-\(Fixtures.tenantA)-domain"])
        #expect(account.account.tenants == [Fixtures.tenantA])

        try stand.saveTheOldWay(scope: "User.Read", tag: "stale", cachedAt: Date().addingTimeInterval(-120))
        _ = try await stand.app(tenant: NativeAuthStandIn.domain).currentAccount()
        let kept = try stand.store.entries().filter { $0.kind == .accessToken }
        #expect(kept.map { $0["secret"] } == ["at-\(NativeAuthStandIn.paul.uid)-\(Fixtures.tenantA)-domain"])
        #expect(try stand.store.entries().allSatisfy { $0["realm"] == nil || $0["realm"] == Fixtures.tenantA })
    }

    @Test("The next sign-in moves what an earlier version saved at the domain's realm: other scopes' tokens kept, an overlapping older one replaced, one account")
    func oldRealmMovesOnSave() async throws {
        let stand = try await NativeAuthStandIn()
        try await stand.addUsers()
        let earlier = Date().addingTimeInterval(-60)
        try stand.saveTheOldWay(scope: "Mail.Read", tag: "mail", cachedAt: earlier)
        try stand.saveTheOldWay(scope: "User.Read", tag: "user", cachedAt: earlier)
        let app = try stand.app(tenant: NativeAuthStandIn.domain)
        guard case .completed(let account) = try await app.signIn(username: NativeAuthStandIn.passwordUser,
                                                                  password: NativeAuthStandIn.password, scopes: scopes) else {
            Issue.record("expected completed"); return
        }
        let entries = try stand.store.entries()
        #expect(entries.filter { $0.kind == .account }.map { $0["realm"] } == [Fixtures.tenantA])
        #expect(entries.filter { $0.kind == .idToken }.map { $0["realm"] } == [Fixtures.tenantA])
        let tokens = entries.filter { $0.kind == .accessToken }
        #expect(tokens.allSatisfy { $0["realm"] == Fixtures.tenantA })
        #expect(Set(tokens.compactMap { $0["target"] }) == ["Mail.Read", "User.Read"])
        #expect(tokens.first { $0["target"] == "Mail.Read" }?["secret"] == "at-\(NativeAuthStandIn.paul.uid)-\(Fixtures.tenantA)-mail")
        #expect(tokens.first { $0["target"] == "User.Read" }?["secret"]?.hasPrefix("at-issued-") == true)
        #expect(account.account.tenants == [Fixtures.tenantA])
        #expect(try stand.store.accounts(clientID: Fixtures.appOne).count == 1)
        let mail = try await account.getAccessToken(scopes: ["Mail.Read"])
        #expect(mail.isFromCache && mail.tenantID == Fixtures.tenantA)
        #expect(try await stand.idp.stats().token_requests == 0)
    }

    @Test("A 503 is retried once and never read as an auth answer; two in a row are a serverError")
    func serverErrors() async throws {
        let stand = try await NativeAuthStandIn()
        try await stand.addUsers()
        let clock = ManualClock(immediate: true)
        let app = try stand.app(clock: clock)
        try await stand.idp.control(["native_fail_next": 1])
        guard case .codeRequired = try await app.signIn(username: NativeAuthStandIn.otpUser, scopes: scopes) else {
            Issue.record("expected codeRequired after one retry"); return
        }
        #expect(clock.sleeps == [.milliseconds(500)])  // the retry waits 0.5 s, as MSAL's
        try await stand.idp.control(["native_fail_next": 2])
        do {
            _ = try await app.signIn(username: NativeAuthStandIn.otpUser, scopes: scopes)
            Issue.record("expected a server error")
        } catch {
            guard case .tokenCache(let underlying) = error.reason else { Issue.record("expected tokenCache, got \(error)"); return }
            #expect(underlying.code == .serverError)
        }
    }

    @Test("Authorities: a bare ciamlogin.com host gets its onmicrosoft.com tenant; http is refused off loopback")
    func authorities() throws {
        let store = AccountStore(backend: InMemoryBackend())
        let app = try NativeAuthPublicClientApplication(clientID: Fixtures.appOne, authority: "https://contoso.ciamlogin.com/", store: store)
        #expect(app.authority.description == "https://contoso.ciamlogin.com/contoso.onmicrosoft.com")
        let custom = try NativeAuthPublicClientApplication(clientID: Fixtures.appOne, authority: "https://login.contoso.com/\(Fixtures.tenantA)", store: store)
        #expect(custom.authority.realm == Fixtures.tenantA)
        #expect(throws: NativeAuthError.self) {
            try NativeAuthPublicClientApplication(clientID: Fixtures.appOne, authority: "http://contoso.ciamlogin.com/x", store: store)
        }
    }
}
