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

/// The interactive sign-in (authorization code, PKCE, loopback redirect) completed by a real
/// browser: headless Chromium loads the fake identity provider's login page, whose script signs
/// in or cancels as the test tells it, and follows the redirect to the listener.
/// Serialized: one Chromium at a time on a small machine.
@Suite("Interactive sign-in in a real browser", .serialized, .enabled(if: HeadlessChromium.runsBrowserTests), .harness)
struct BrowserSignInTests {
    let idp: FakeIdentityProvider
    let store = AccountStore(backend: InMemoryBackend())

    init() throws { idp = try FakeIdentityProvider() }

    func app(_ clientID: String = Fixtures.appOne, authority: Authority? = nil) -> PublicClientApplication {
        var options = PublicClientApplication.Options()
        options.requestTimeout = 60
        return PublicClientApplication(clientID: clientID, authority: authority ?? idp.authority(), store: store, options: options)
    }

    /// Signs in through Chromium and closes it afterwards, whatever happened.
    func signIn(_ parameters: InteractiveTokenParameters, app: PublicClientApplication? = nil, timeout: TimeInterval = 60) async throws(TokenCacheError) -> TokenResult {
        let browser = HeadlessChromium()
        defer { browser.close() }
        var parameters = parameters
        parameters.browser = browser.opener
        parameters.timeout = timeout  // a loaded machine starts Chromium slowly; a test expecting success ends in seconds
        return try await (app ?? self.app()).acquireToken(parameters)
    }

    @Test("Success: the code is redeemed with the PKCE verifier, the account is saved for the group, hints and claims reach the authority")
    func success() async throws {
        try await idp.actAsUser("submit", family: [Fixtures.appOne: "1"])
        var parameters = InteractiveTokenParameters(scopes: ["User.Read"])
        parameters.prompt = .selectAccount
        parameters.loginHint = Fixtures.alice.username
        parameters.domainHint = "contoso.com"
        parameters.claims = #"{"access_token":{"xms_cc":{"values":["cp1"]}}}"#
        parameters.extraScopesToConsent = ["Mail.Read"]
        parameters.extraQueryParameters = ["msafed": "0"]
        let result = try await signIn(parameters)
        #expect(result.accessToken.hasPrefix("at-issued-"))
        #expect(result.scopes == ["User.Read"])
        #expect(result.account?.username == Fixtures.alice.username)

        let request = try #require(try await idp.signInStats().authorize_requests.first)
        #expect(request["prompt"] == "select_account")
        #expect(request["login_hint"] == Fixtures.alice.username)
        #expect(request["domain_hint"] == "contoso.com")
        #expect(request["claims"] == parameters.claims)
        #expect(request["msafed"] == "0")
        #expect(request["code_challenge_method"] == "S256")
        #expect(request["code_challenge"]?.count == 43)
        #expect(request["redirect_uri"]?.hasPrefix("http://localhost:") == true)
        #expect(Set(request["scope"]?.split(separator: " ").map(String.init) ?? []) == ["User.Read", "Mail.Read", "openid", "profile", "offline_access"])
        #expect(try await idp.stats().grants.map(\.outcome) == ["ok"])
        #expect(try await idp.signInStats().grants.first?.client_info == true)

        // Every app of the group sees the account: a family member gets SSO from the saved token.
        let account = try #require(try store.account(Fixtures.alice.username))
        #expect(account.homeAccountID == "\(Fixtures.alice.uid).\(Fixtures.alice.tenant)")
        #expect(try store.accounts(clientID: Fixtures.appTwo).map(\.username) == [Fixtures.alice.username])
        let silent = try await app(Fixtures.appTwo).acquireTokenSilent(scopes: ["Notes.Read"], account: account)
        #expect(silent.accessToken.hasPrefix("at-issued-"))
        // The refresh token is bound to the host that issued it.
        let other = try FakeIdentityProvider(host: "127.0.0.2")
        let error = await #expect(throws: TokenCacheError.self) {
            try await app(Fixtures.appTwo, authority: other.authority()).acquireTokenSilent(scopes: ["Files.Read"], account: account)
        }
        #expect(error?.code == .interactionRequired)
        #expect(try await other.stats().token_requests == 0)
    }

    @Test("An app with cp1 sends it merged with the caller's claims on the authorization request and on the code's redemption, as MSAL does")
    func capabilitiesOnBrowserSignIn() async throws {
        try await idp.actAsUser("submit")
        var options = PublicClientApplication.Options()
        options.requestTimeout = 60
        options.clientCapabilities = ["cp1"]
        let app = PublicClientApplication(clientID: Fixtures.appOne, authority: idp.authority(), store: store, options: options)
        var parameters = InteractiveTokenParameters(scopes: ["User.Read"])
        parameters.claims = #"{"access_token":{"nbf":{"essential":true,"value":"1604106651"}}}"#
        _ = try await signIn(parameters, app: app)
        func object(_ json: String?) -> NSDictionary? {
            json.flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? NSDictionary }
        }
        let merged = object(#"{"access_token":{"nbf":{"essential":true,"value":"1604106651"},"xms_cc":{"values":["cp1"]}}}"#)
        let stats = try await idp.signInStats()
        #expect(merged != nil && object(stats.authorize_requests.first?["claims"]) == merged)
        #expect(object(stats.grants.first?.claims) == merged)
    }

    @Test("The user cancels on the login page: cancelled, nothing saved, no code redeemed")
    func userCancels() async throws {
        try await idp.actAsUser("cancel")
        let error = await #expect(throws: TokenCacheError.self) {
            try await signIn(InteractiveTokenParameters(scopes: ["User.Read"]))
        }
        #expect(error?.code == .cancelled)
        #expect(error?.server?.error == "access_denied")
        #expect(try store.allAccounts().isEmpty)
        #expect(try await idp.stats().token_requests == 0)
    }

    @Test("A redirect whose state differs from the one sent is answered 400 and the sign-in keeps waiting (then times out, saying so); no code is redeemed")
    func stateMismatch() async throws {
        try await idp.actAsUser("submit")
        try await idp.control(["tamper_state": true])
        let error = await #expect(throws: TokenCacheError.self) {
            try await signIn(InteractiveTokenParameters(scopes: ["User.Read"]), timeout: 45)
        }
        #expect(error?.code == .timedOut)
        #expect(error?.message.contains("1 redirect(s) with a state other than this sign-in's were refused") == true, "\(String(describing: error))")
        #expect(try await idp.stats().token_requests == 0)
        #expect(try store.allAccounts().isEmpty)
    }

    @Test("A code bound to another PKCE challenge (an injected code) is rejected by the server: authorizationFailed, nothing saved")
    func pkceMismatch() async throws {
        try await idp.actAsUser("submit")
        try await idp.control(["pkce_challenge_override": "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"])
        let error = await #expect(throws: TokenCacheError.self) {
            try await signIn(InteractiveTokenParameters(scopes: ["User.Read"]))
        }
        #expect(error?.code == .authorizationFailed)
        #expect(error?.server?.error == "invalid_grant")
        #expect(try await idp.stats().grants.map(\.outcome) == ["invalid_grant"])
        #expect(try store.allAccounts().isEmpty)
    }

    @Test("B2C authority (/tfp/<tenant>/<policy>): the policy's endpoints are used and the account is saved")
    func b2cAuthority() async throws {
        try await idp.actAsUser("submit")
        let authority = try Authority("http://127.0.0.1:\(idp.port)/tfp/contoso.onmicrosoft.com/B2C_1_signin")
        #expect(authority.kind == .b2c)
        let result = try await signIn(InteractiveTokenParameters(scopes: ["https://contoso.onmicrosoft.com/api/read"]),
                                      app: app(authority: authority))
        #expect(result.accessToken.hasPrefix("at-issued-"))
        #expect(try await idp.signInStats().authorize_requests.first?["path"] == "/tfp/contoso.onmicrosoft.com/B2C_1_signin/oauth2/v2.0/authorize")
        #expect(try store.account(Fixtures.alice.username) != nil)
    }

    @Test("Interop: MSAL Python finds the account and tokens this project saved after a browser sign-in, and redeems the refresh token",
          .enabled(if: TestEnvironment.runsInteropTests))
    func msalPythonFindsSignedInAccount() async throws {
        let tls = try FakeIdentityProvider(https: true)
        try await tls.actAsUser("submit")
        // Signed in on the plain port; MSAL Python (https only) uses the TLS port of the same host and state.
        let result = try await signIn(InteractiveTokenParameters(scopes: ["User.Read"]), app: app(authority: tls.authority()))
        let cache = try #require(try JSONSerialization.jsonObject(with: try store.exportMSALJSON()) as? [String: Any])
        let request: [String: Any] = [
            "op": "silent", "cache": cache, "authority": tls.httpsAuthority(), "ca_bundle": try #require(tls.certificate).path,
            "client_id": Fixtures.appOne, "username": Fixtures.alice.username, "scopes": ["User.Read"]]
        let input = try JSONSerialization.data(withJSONObject: request)
        let python = try MSALPython.interpreter(), script = MSALPython.script
        let answer = try MSALPython.answer(try await offThePool { try runProcess(python, [script], input: input) })
        #expect(answer["accounts"] as? [String] == [Fixtures.alice.username])
        let redeemed = try #require(answer["result"] as? [String: Any])
        #expect((redeemed["access_token"] as? String)?.hasPrefix("at-issued-") == true, "\(redeemed["error"] ?? "no error")")
        #expect(redeemed["access_token"] as? String != result.accessToken)
        #expect(try await tls.stats().grants.map(\.sdk).last == "MSAL.Python")
    }

    @Test("Generic OIDC authority: discovery's endpoints are used, no Microsoft client_info is asked for")
    func oidcAuthority() async throws {
        try await idp.actAsUser("submit")
        let authority = try Authority("http://127.0.0.1:\(idp.port)/oidc", kind: .oidc)
        let result = try await signIn(InteractiveTokenParameters(scopes: ["api.read"]), app: app(authority: authority))
        #expect(result.accessToken.hasPrefix("at-issued-"))
        let stats = try await idp.signInStats()
        #expect(stats.authorize_requests.first?["path"] == "/oidc/authorize")
        #expect(stats.grants.map(\.grant_type) == ["authorization_code"])
        #expect(stats.grants.first?.client_info == false)
        #expect(try store.account(Fixtures.alice.username) != nil)
    }
}

/// The parts of the interactive sign-in that need no browser: time bounds, cancellation, the
/// port, the listener's request handling, PKCE and the authorization URL.
@Suite("Interactive sign-in without a browser", .harness)
struct SignInFlowTests {
    let idp: FakeIdentityProvider
    let store = AccountStore(backend: InMemoryBackend())

    init() throws { idp = try FakeIdentityProvider() }

    func app() -> PublicClientApplication {
        var options = PublicClientApplication.Options()
        options.requestTimeout = 60
        return PublicClientApplication(clientID: Fixtures.appOne, authority: idp.authority(), store: store, options: options)
    }

    @Test("No redirect within the timeout: timedOut, and the listener's port is closed")
    func timeout() async throws {
        let port = Mutex<Int?>(nil)
        var parameters = InteractiveTokenParameters(scopes: ["User.Read"])
        parameters.timeout = 300
        parameters.browser = .custom { url in port.withLock { $0 = url.port } }
        let clock = ManualClock()
        var options = PublicClientApplication.Options()
        options.requestTimeout = 60
        options.clock = clock
        let app = PublicClientApplication(clientID: Fixtures.appOne, authority: idp.authority(), store: store, options: options)
        let signIn = Task { try await app.acquireToken(parameters) }
        await clock.sleeping()
        #expect(clock.sleeps == [.seconds(300)])
        clock.advance(by: .seconds(300))
        let error = await #expect(throws: TokenCacheError.self) { try await signIn.value }
        #expect(error?.code == .timedOut)
        #expect(error?.reason == .signInTimedOut)
        #expect(error?.message.contains("300 s") == true, "\(String(describing: error))")
        let redirectPort = try #require(port.withLock { $0 })
        #expect(throws: (any Error).self) { _ = try rawRequest(port: redirectPort, "GET / HTTP/1.1\r\n\r\n") }
    }

    @Test("Cancelling the task ends the wait at once with cancelled")
    func taskCancellation() async throws {
        var parameters = InteractiveTokenParameters(scopes: ["User.Read"])
        let opened = AsyncStream<Void>.makeStream()
        parameters.browser = .custom { _ in opened.continuation.yield() }
        // The timeout's clock never moves: only the cancellation can end the wait (a hang otherwise,
        // which the test's time limit reports), and it must end as cancelled, not timed out.
        var options = PublicClientApplication.Options()
        options.requestTimeout = 60
        options.clock = ManualClock()
        let app = PublicClientApplication(clientID: Fixtures.appOne, authority: idp.authority(), store: store, options: options)
        let task = Task { try await app.acquireToken(parameters) }
        for await _ in opened.stream { break }  // the browser was opened: the flow waits for the redirect
        task.cancel()
        let result = await task.result
        #expect((result.error as? TokenCacheError)?.code == .cancelled)
    }

    @Test("A redirect port in use gives portUnavailable and opens no browser")
    func portInUse() async throws {
        let occupant = try LoopbackListener(port: 0)
        let opened = Atomic<Int>(0)
        var parameters = InteractiveTokenParameters(scopes: ["User.Read"])
        parameters.redirectPort = occupant.port
        parameters.browser = .custom { _ in opened.add(1, ordering: .sequentiallyConsistent) }
        let error = await #expect(throws: TokenCacheError.self) { try await app().acquireToken(parameters) }
        #expect(error?.code == .portUnavailable)
        #expect(error?.reason == .redirectPortUnavailable(port: occupant.port))
        #expect(error?.hint?.contains("redirectPort 0") == true)
        #expect(opened.load(ordering: .sequentiallyConsistent) == 0)
    }

    @Test("A browser opener that fails ends the sign-in with browserUnavailable")
    func openerFails() async throws {
        struct NoBrowser: Error {}
        var parameters = InteractiveTokenParameters(scopes: ["User.Read"])
        parameters.browser = .custom { _ in throw NoBrowser() }
        let error = await #expect(throws: TokenCacheError.self) { try await app().acquireToken(parameters) }
        #expect(error?.code == .browserUnavailable)
    }

    @Test("The system opener asks the desktop portal first and, with no portal and no display, refuses (never a console browser)",
          .enabled(if: TestEnvironment.runsSecretServiceTests))
    func systemOpenerWithoutDisplay() async throws {
        // The test session bus has no OpenURI portal: no org.freedesktop.portal.Desktop (ServiceUnknown), or,
        // with xdg-desktop-portal installed (the sandbox tests), one without an OpenURI backend (UnknownMethod).
        let error = await #expect(throws: TokenCacheError.self) {
            try await offThePool { try SystemBrowser.openHere(URL(string: "http://127.0.0.1:9/never-opened")!, environment: [:]) }
        }
        #expect(error?.code == .browserUnavailable)
        // Where xdg-desktop-portal is installed but has no OpenURI backend, the bus activates it and it refuses.
        #expect(error?.message.contains("no desktop portal") == true
                    || error?.message.contains("org.freedesktop.portal.OpenURI") == true, "\(String(describing: error))")
        #expect(error?.hint?.contains("device code") == true)
        #expect(error?.reason == .noDisplay)
    }

    @Test("The listener binds 127.0.0.1 and ::1 only, refuses other methods, paths, hosts, malformed and oversized requests, and serves the page to the redirect")
    func listenerRequests() async throws {
        let listener = try LoopbackListener(port: 0)
        let port = listener.port
        #expect(listener.addresses == ["127.0.0.1", "[::1]"])
        let waiting = Task {
            try await offThePool { listener.waitForRedirectHere(.init(path: "/", state: "s1")) { _ in AuthorizationRequest.successPage } }
        }
        #expect(try await offThePool { try rawRequest(port: port, "POST /?code=x&state=s HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n") }.hasPrefix("HTTP/1.1 405"))
        #expect(try await offThePool { try rawRequest(port: port, "GET /favicon.ico HTTP/1.1\r\nHost: localhost\r\n\r\n") }.hasPrefix("HTTP/1.1 404"))
        #expect(try await offThePool { try rawRequest(port: port, "GET /?x=1 HTTP/1.1\r\nHost: localhost\r\n\r\n") }.hasPrefix("HTTP/1.1 400"))
        // A page of another site that resolves to 127.0.0.1 (DNS rebinding) names its own host.
        #expect(try await offThePool { try rawRequest(port: port, "GET /?code=c1&state=s1 HTTP/1.1\r\nHost: evil.example:\(port)\r\n\r\n") }.hasPrefix("HTTP/1.1 400"))
        // Nor can a second Host line, or a malformed head, slip past that check.
        #expect(try await offThePool { try rawRequest(port: port, "GET /?code=c1&state=s1 HTTP/1.1\r\nHost: localhost\r\nHost: evil.example\r\n\r\n") }.hasPrefix("HTTP/1.1 400"))
        #expect(try await offThePool { try rawRequest(port: port, "GET /?code=c1&state=s1 HTTP/1.1\r\nHost: localhost\r\n folded\r\n\r\n") }.hasPrefix("HTTP/1.1 400"))
        // One byte over the bound and no end of head: the listener reads it all, so its close is a clean FIN.
        let head = "GET /?code=x HTTP/1.1\r\nX-Padding: "
        let huge = head + String(repeating: "a", count: HTTPRequestHead.maximumBytes + 1 - head.utf8.count)
        #expect(try await offThePool { try rawRequest(port: port, huge) }.hasPrefix("HTTP/1.1 431"))
        #expect(try await offThePool { try rawRequest(port: port, "GET /?code=c1&state=s1 HTTP/1.1\r\nHost: localhost\r\n\r\n") }
            .contains("You are signed in"))
        guard case .redirect(let query) = try await waiting.value else { Issue.record("no redirect"); return }
        #expect(query == ["code": "c1", "state": "s1"])
        // Not on other addresses of the machine: 127.0.0.2 is loopback too, but not bound.
        #expect(throws: (any Error).self) { _ = try rawRequest(host: "127.0.0.2", port: port, "GET / HTTP/1.1\r\n\r\n") }
    }

    @Test("PKCE S256 matches RFC 7636's example, and verifiers are fresh 43-character strings")
    func pkce() throws {
        #expect(try PKCE.challenge(for: "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk") == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")
        let first = try PKCE.make(), second = try PKCE.make()
        #expect(first.verifier.count == 43 && first.verifier != second.verifier)
        #expect(try PKCE.challenge(for: first.verifier) == first.challenge)
    }

    @Test("The authorization URL keeps the endpoint's own query, and extra parameters cannot replace the flow's")
    func authorizationURL() throws {
        var parameters = InteractiveTokenParameters(scopes: ["a b"])
        let url = try AuthorizationRequest.url(endpoint: URL(string: "https://contoso.b2clogin.com/x/oauth2/v2.0/authorize?p=B2C_1_signin")!,
                                               clientID: try ClientID("client"), redirectURI: "http://localhost:1234", state: "st", challenge: "ch",
                                               nonce: "nc", parameters: parameters)
        let items = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems ?? []
        #expect(items.first?.name == "p")
        #expect(items.first { $0.name == "redirect_uri" }?.value == "http://localhost:1234")
        #expect(items.first { $0.name == "scope" }?.value == "a b openid profile offline_access")
        #expect(items.first { $0.name == "nonce" }?.value == "nc")
        parameters.extraQueryParameters = ["State": "forged"]
        let error = #expect(throws: TokenCacheError.self) {
            try AuthorizationRequest.url(endpoint: url, clientID: try ClientID("c"), redirectURI: "r", state: "s", challenge: "c", nonce: "n", parameters: parameters)
        }
        #expect(error?.code == .invalidArgument)
    }
}

/// Sends raw bytes to a loopback port and returns the answer (up to the peer's close).
func rawRequest(host: String = "127.0.0.1", port: Int, _ text: String) throws -> String {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw POSIXError(.EIO) }
    defer { close(fd) }
    // Generous: on two loaded cores the listener's task can wait a while for a cooperative thread.
    var timeout = timeval(tv_sec: 90, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port)).bigEndian
    address.sin_addr.s_addr = inet_addr(host)
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard connected == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    let bytes = Array(text.utf8)
    _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    var answer = [UInt8]()
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let count = recv(fd, &buffer, buffer.count, 0)
        if count <= 0 { break }
        answer += buffer[..<count]
    }
    return String(decoding: answer, as: UTF8.self)
}
