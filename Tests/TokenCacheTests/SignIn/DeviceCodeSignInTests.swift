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
/// a user on another device would. The provider asks for a 1 s interval.
@Suite("Device code sign-in", .harness)
struct DeviceCodeSignInTests {
    let idp: FakeIdentityProvider
    let store = AccountStore(backend: InMemoryBackend())

    init() throws { idp = try FakeIdentityProvider() }

    func app(authority: Authority? = nil) -> PublicClientApplication {
        var options = PublicClientApplication.Options()
        options.requestTimeout = 60
        return PublicClientApplication(clientID: Fixtures.appOne, authority: authority ?? idp.authority(), store: store, options: options)
    }

    func playAlice() async throws {
        try await idp.actAsUser("none")
    }

    /// Runs the flow, doing `userAction` with the user code once it is shown.
    func signIn(authority: Authority? = nil,
                userAction: @escaping @Sendable (FakeIdentityProvider, String) async throws -> Void) async throws(TokenCacheError) -> (TokenResult, DeviceCodeMessage?) {
        let shown = Mutex<DeviceCodeMessage?>(nil)
        let idp = idp
        let result = try await app(authority: authority).acquireTokenWithDeviceCode(DeviceCodeParameters(scopes: ["User.Read"])) { message in
            shown.withLock { $0 = message }
            Task { try await userAction(idp, message.userCode) }
        }
        return (result, shown.withLock { $0 })
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

    @Test("authorization_pending: polling goes on at the interval until the user approves")
    func pending() async throws {
        try await playAlice()
        let (result, _) = try await signIn { idp, code in
            while try await idp.signInStats().device_polls.count < 2 { try await Task.sleep(for: .milliseconds(100)) }
            try await idp.control(["approve_device": code])
        }
        #expect(result.accessToken.hasPrefix("at-issued-"))
        let polls = try await idp.signInStats().device_polls
        #expect(polls.map(\.outcome).prefix(2) == ["authorization_pending", "authorization_pending"])
        #expect(polls.last?.outcome == "ok")
        // The interval is honoured (1 s, less a little for timer slack).
        for (earlier, later) in zip(polls, polls.dropFirst()) { #expect(later.at - earlier.at >= 0.9) }
    }

    @Test("slow_down makes the poller wait longer before the next poll")
    func slowDown() async throws {
        try await playAlice()
        try await idp.control(["device_slow_down": 1])
        // RFC 8628 adds 5 s; the test's poller adds 2 s to stay quick (the code path is the same).
        let app = app()
        let endpoints = try await app.client.endpoints(for: idp.authority())
        var flow = DeviceCodeFlow(client: app.client, clientID: Fixtures.appOne, scopes: ["User.Read"], isMicrosoft: true)
        flow.slowDownIncrement = .seconds(2)
        let authorization = try await flow.start(at: try #require(endpoints.deviceAuthorization), claims: nil)
        let approve = Task {  // after the slow_down answer, so the next poll (at the longer interval) succeeds
            while try await idp.signInStats().device_polls.isEmpty { try await Task.sleep(for: .milliseconds(100)) }
            try await idp.control(["approve_device": authorization.message.userCode])
        }
        _ = try await flow.poll(authorization, tokenEndpoint: endpoints.token)
        try await approve.value
        let polls = try await idp.signInStats().device_polls
        #expect(polls.first?.outcome == "slow_down")
        #expect(polls.count >= 2)
        // After slow_down the interval is 1 + 2 s.
        if polls.count >= 2 { #expect(polls[1].at - polls[0].at >= 2.9) }
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

    @Test("Cancelling the task stops the polling with cancelled")
    func cancellation() async throws {
        try await playAlice()
        try await idp.control(["device_interval": 30])
        let shown = AsyncStream<Void>.makeStream()
        let app = app()
        let task = Task {
            try await app.acquireTokenWithDeviceCode(DeviceCodeParameters(scopes: ["User.Read"])) { _ in shown.continuation.yield() }
        }
        for await _ in shown.stream { break }
        let started = Date()
        task.cancel()
        let result = await task.result
        #expect((result.error as? TokenCacheError)?.code == .cancelled)
        #expect(Date().timeIntervalSince(started) < 10)
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
