import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization
import Testing
@testable import EncryptedFileStore
@testable import SecretServiceStore
@testable import TokenCache
@testable import TokenCacheCore
@testable import TokenCachePlatform
import TokenCacheTestSupport
import TokenCacheTestIdentityProvider

/// The device code flow (RFC 8628) against the fake identity provider, which answers each poll
/// as the test tells it (pending, slow_down, expired, denied) and "approves" a user code the way
/// a user on another device would. The provider asks for a 1 s interval; the polling waits run
/// on a manual clock the test advances, so no test here sleeps or bounds wall-clock time.
@Suite("Device code sign-in", .harness)
struct DeviceCodeSignInTests {
    let idp: FakeIdentityProvider
    let store = AccountStore(backend: InMemoryBackend())
    let clock = ManualClock()

    init() throws { idp = try FakeIdentityProvider() }

    func app(authority: Authority? = nil, capabilities: [String] = []) -> PublicClientApplication {
        var options = PublicClientApplication.Options()
        options.clientCapabilities = capabilities
        options.requestTimeout = 60
        options.clock = clock
        return PublicClientApplication(clientID: Fixtures.appOne, authority: authority ?? idp.authority(), store: store, options: options)
    }

    func playAlice() async throws {
        try await idp.actAsUser("none")
    }

    /// Starts the flow and returns it with the code it showed (nil when it failed before showing one).
    func start(authority: Authority? = nil, capabilities: [String] = [],
               parameters: DeviceCodeParameters = DeviceCodeParameters(scopes: ["User.Read"]))
        async -> (flow: Task<TokenResult, any Error>, shown: DeviceCodeMessage?) {
        let shown = AsyncStream<DeviceCodeMessage>.makeStream()
        let app = app(authority: authority, capabilities: capabilities)
        let flow = Task {
            defer { shown.continuation.finish() }
            return try await app.acquireTokenWithDeviceCode(parameters) { shown.continuation.yield($0) }
        }
        var codes = shown.stream.makeAsyncIterator()
        return (flow, await codes.next())
    }

    /// Passes the flow's next wait on the clock: returns once it is asleep, moved by `duration`.
    func passWait(_ duration: Duration = .seconds(1)) async {
        await clock.sleeping()
        clock.advance(by: duration)
    }

    /// Runs the flow: once the code is shown, the user does `userAction` with it, then the first
    /// poll's wait (the 1 s interval) passes and the flow ends with that poll's answer.
    func signIn(authority: Authority? = nil,
                userAction: @Sendable (FakeIdentityProvider, String) async throws -> Void) async throws -> (TokenResult, DeviceCodeMessage?) {
        let (flow, shown) = await start(authority: authority)
        if let shown {
            try await userAction(idp, shown.userCode)
            await passWait()
        }
        return (try await flow.value, shown)
    }

    @Test("Success: the user code is shown, the user approves, the tokens are saved for the group")
    func success() async throws {
        try await playAlice()
        let (result, message) = try await signIn { idp, code in try await idp.control(["approve_device": code]) }
        #expect(result.accessToken.hasPrefix("at-issued-"))
        let shown = try #require(message)
        #expect(shown.userCode.hasPrefix("UC"))
        #expect(shown.verificationURI.absoluteString == "http://127.0.0.1:\(idp.port)/device")
        #expect(shown.message.contains(shown.userCode))
        #expect(shown.expiresOn > Date())
        #expect(try store.account(Fixtures.alice.username)?.homeAccountID == "\(Fixtures.alice.uid).\(Fixtures.alice.tenant)")
        #expect(try await idp.signInStats().device_polls.last?.outcome == "ok")
    }

    @Test("An app with cp1 sends it merged into claims on the device authorization and on every poll, as MSAL's device flow; the resource accepts the token")
    func capabilitiesOnDeviceCode() async throws {
        try await playAlice()
        let (flow, shown) = await start(capabilities: ["cp1"])
        let code = try #require(shown).userCode
        await passWait()
        // Poll 1 was answered (pending) once the flow waits again: approving sooner could race it.
        await clock.sleeping()
        try await idp.control(["approve_device": code])
        clock.advance(by: .seconds(1))
        let token = try await flow.value
        let cp1 = #"{"access_token":{"xms_cc":{"values":["cp1"]}}}"#
        let stats = try await idp.signInStats()
        #expect(stats.device_authorizations.map(\.claims) == [cp1])
        #expect(stats.device_polls.map(\.outcome) == ["authorization_pending", "ok"])
        #expect(stats.device_polls.map(\.claims) == [cp1, cp1])
        try await idp.challengeAtResource(#"{"access_token":{"nbf":{"essential":true,"value":"1604106651"}}}"#)
        // A cp1 token without the challenge's claims is challenged (not refused outright): the resource saw cp1.
        let answer = try await idp.resource(accessToken: token.accessToken)
        #expect(answer.status == 401 && answer.wwwAuthenticate.flatMap(ClaimsChallenge.init(wwwAuthenticate:)) != nil)
    }

    @Test("At a tenant named by its domain the sign-in is saved at the tenant ID the domain's discovery names, as MSAL saves it")
    func domainTenant() async throws {
        try await playAlice()
        try await idp.control(["tenant_domains": ["contoso.onmicrosoft.com": Fixtures.tenantA]])
        let (result, _) = try await signIn(authority: idp.authority("contoso.onmicrosoft.com")) { idp, code in
            try await idp.control(["approve_device": code])
        }
        #expect(result.tenantID == Fixtures.tenantA)
        let account = try #require(try store.account(Fixtures.alice.username))
        #expect(account.tenants == [Fixtures.tenantA])
    }

    @Test("authorization_pending: polling goes on at the interval until the user approves, never sooner")
    func pending() async throws {
        try await playAlice()
        let (flow, shown) = await start()
        let code = try #require(shown).userCode
        await passWait()
        await passWait()
        await clock.sleeping()
        #expect(try await idp.signInStats().device_polls.map(\.outcome) == ["authorization_pending", "authorization_pending"])
        // A moment short of the interval the flow is still waiting: no third poll yet.
        clock.advance(by: .milliseconds(999))
        await clock.sleeping()
        #expect(try await idp.signInStats().device_polls.count == 2)
        try await idp.control(["approve_device": code])
        clock.advance(by: .milliseconds(1))
        #expect(try await flow.value.accessToken.hasPrefix("at-issued-"))
        #expect(try await idp.signInStats().device_polls.map(\.outcome) == ["authorization_pending", "authorization_pending", "ok"])
        #expect(clock.sleeps == [.seconds(1), .seconds(1), .seconds(1)])
    }

    @Test("slow_down makes the poller wait 5 s longer before the next poll")
    func slowDown() async throws {
        try await playAlice()
        try await idp.control(["device_slow_down": 1])
        let (flow, shown) = await start()
        let code = try #require(shown).userCode
        await passWait()
        await clock.sleeping()
        #expect(try await idp.signInStats().device_polls.map(\.outcome) == ["slow_down"])
        // RFC 8628 section 3.5: the interval grows by 5 s, to 6 s; at 5.999 s nothing is polled.
        #expect(clock.sleeps == [.seconds(1), .seconds(6)])
        try await idp.control(["approve_device": code])
        clock.advance(by: .milliseconds(5_999))
        await clock.sleeping()
        #expect(try await idp.signInStats().device_polls.count == 1)
        clock.advance(by: .milliseconds(1))
        #expect(try await flow.value.accessToken.hasPrefix("at-issued-"))
        #expect(try await idp.signInStats().device_polls.map(\.outcome) == ["slow_down", "ok"])
    }

    @Test("The code's lifetime passing on the clock ends the flow with timedOut, without another poll")
    func lifetimeEnds() async throws {
        try await playAlice()
        // 3 s advertised, counted on the manual clock; the stand-in keeps no time, so a loaded
        // machine's slow polls cannot expire the code first (the test hung when it did).
        try await idp.control(["device_expires_in": 3])
        let (flow, shown) = await start()
        #expect(shown != nil)
        await passWait()
        await passWait()
        await passWait()
        let error = await #expect(throws: TokenCacheError.self) { try await flow.value }
        #expect(error?.code == .timedOut)
        #expect(try await idp.signInStats().device_polls.map(\.outcome) == ["authorization_pending", "authorization_pending"])
        #expect(try store.allAccounts().isEmpty)
    }

    @Test("DeviceCodeParameters.timeout passing on the clock ends the flow with deviceCodeTimedOut at that moment, though the code lives on")
    func callerTimeout() async throws {
        try await playAlice()
        var parameters = DeviceCodeParameters(scopes: ["User.Read"])
        parameters.timeout = 2.5
        let (flow, shown) = await start(parameters: parameters)
        #expect(shown != nil)
        await passWait()
        await passWait()
        // Half an interval left: the flow wakes at the timeout, not at the next poll after it.
        await passWait(.milliseconds(500))
        let error = await #expect(throws: TokenCacheError.self) { try await flow.value }
        #expect(error?.code == .timedOut)
        #expect(error?.reason == .deviceCodeTimedOut)
        #expect(clock.sleeps == [.seconds(1), .seconds(1), .milliseconds(500)])
        #expect(try await idp.signInStats().device_polls.map(\.outcome) == ["authorization_pending", "authorization_pending"])
        #expect(try store.allAccounts().isEmpty)
    }

    @Test("expired_token ends the flow with timedOut and saves nothing")
    func expired() async throws {
        try await playAlice()
        let error = await #expect(throws: TokenCacheError.self) {
            try await signIn { idp, code in try await idp.control(["expire_device": code]) }
        }
        #expect(error?.code == .timedOut)
        #expect(try store.allAccounts().isEmpty)
    }

    @Test("access_denied (the user declined) ends the flow with accessDenied and saves nothing")
    func denied() async throws {
        try await playAlice()
        let error = await #expect(throws: TokenCacheError.self) {
            try await signIn { idp, code in try await idp.control(["deny_device": code]) }
        }
        #expect(error?.code == .accessDenied)
        #expect(try store.allAccounts().isEmpty)
    }

    @Test("Cancelling the task stops the polling with cancelled, without the interval passing")
    func cancellation() async throws {
        try await playAlice()
        try await idp.control(["device_interval": 30])
        let (flow, shown) = await start()
        #expect(shown != nil)
        await clock.sleeping()
        flow.cancel()
        // The clock never moves: the wait ends by the cancellation alone.
        let result = await flow.result
        #expect((result.error as? TokenCacheError)?.code == .cancelled)
        #expect(clock.now.offset == .zero)
        #expect(try await idp.signInStats().device_polls.isEmpty)
    }

    @Test("An AD FS authority without a device authorization endpoint gives unsupportedFlow before any request")
    func adfsHasNoDeviceCode() async throws {
        let authority = try Authority("http://127.0.0.1:\(idp.port)/adfs")
        #expect(authority.kind == .adfs)
        let error = await #expect(throws: TokenCacheError.self) {
            try await app(authority: authority).acquireTokenWithDeviceCode(DeviceCodeParameters(scopes: ["User.Read"])) { _ in
                Issue.record("no code can be shown")
            }
        }
        #expect(error?.code == .unsupportedFlow)
        #expect(error?.hint?.contains("AD FS") == true)
    }

    @Test("An Entra authority whose discovery names no device endpoint uses <authority>/oauth2/v2.0/devicecode")
    func entraFallbackEndpoint() async throws {
        try await playAlice()
        try await idp.control(["omit_device_endpoint": true])
        let (result, _) = try await signIn { idp, code in try await idp.control(["approve_device": code]) }
        #expect(result.accessToken.hasPrefix("at-issued-"))
    }

    @Test("Generic OIDC authority: discovery's device_authorization_endpoint is used")
    func oidcAuthority() async throws {
        try await playAlice()
        let authority = try Authority("http://127.0.0.1:\(idp.port)/oidc", kind: .oidc)
        let (result, _) = try await signIn(authority: authority) { idp, code in try await idp.control(["approve_device": code]) }
        #expect(result.accessToken.hasPrefix("at-issued-"))
        #expect(try store.account(Fixtures.alice.username) != nil)
    }

    @Test("The server's message reaches the app without control or bidirectional-override characters")
    func hostileMessage() async throws {
        try await playAlice()
        try await idp.control(["device_message": "Go to \u{1B}[31mexample\u{7} and \u{202E}enter the code"])
        let (_, message) = try await signIn { idp, code in try await idp.control(["approve_device": code]) }
        let text = try #require(message?.message)
        #expect(text.contains("example"))
        #expect(!text.unicodeScalars.contains { $0.value < 0x20 || $0 == "\u{202E}" || $0 == "\u{7F}" })
    }
}

/// The other direction of the sign-in interop: MSAL Python signs the user in.
@Suite("MSAL Python's device code sign-in, read here", .harness)
struct MSALPythonDeviceCodeInteropTests {
    @Test("MSAL Python signs in with a device code; this project finds the account and its token, and a family app gets SSO")
    func msalPythonSignsIn() async throws {
        let tls = try FakeIdentityProvider(https: true)
        try await tls.actAsUser("none", family: [Fixtures.appOne: "1"])
        let request: [String: Any] = [
            "op": "device", "authority": tls.httpsAuthority(), "ca_bundle": try #require(tls.certificate).path,
            "client_id": Fixtures.appOne, "scopes": ["User.Read"], "control": "http://127.0.0.1:\(tls.port)/control"]
        let python = try MSALPython.interpreter(), script = MSALPython.script
        let input = try JSONSerialization.data(withJSONObject: request)
        let answer = try MSALPython.answer(try await offThePool { try runProcess(python, [script], input: input) })
        let result = try #require(answer["result"] as? [String: Any])
        #expect((result["access_token"] as? String)?.hasPrefix("at-issued-") == true, "\(result)")
        let cache = try JSONSerialization.data(withJSONObject: try #require(answer["cache"] as? [String: Any]))

        let store = AccountStore(backend: InMemoryBackend())
        _ = try store.importMSALJSON(cache)
        let account = try #require(try store.account(Fixtures.alice.username), "MSAL Python's account is not found here")
        let cached = try #require(try store.accessToken(clientID: Fixtures.appOne, account: account, scopes: ["User.Read"]),
                                  "\(account) \(String(decoding: cache, as: UTF8.self))")
        #expect(cached.accessToken == result["access_token"] as? String)
        // Another app of the family, on the same host's plain port: silent, with MSAL Python's family token.
        var options = PublicClientApplication.Options()
        options.requestTimeout = 60
        let family = PublicClientApplication(clientID: Fixtures.appTwo, authority: tls.authority(), store: store, options: options)
        let token = try await family.acquireTokenSilent(scopes: ["Notes.Read"], account: try #require(try await family.accounts().first))
        #expect(!token.isFromCache)
        #expect(try await tls.stats().grants.last?.client_id == Fixtures.appTwo)
    }
}
