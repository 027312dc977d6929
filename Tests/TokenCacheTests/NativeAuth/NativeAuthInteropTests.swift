import Foundation
import Testing
@testable import TokenCache
@testable import TokenCacheCore
import TokenCacheTestSupport
import TokenCacheTestIdentityProvider

/// What a native sign-in leaves in the cache, read by real MSAL Python 1.39, and the browser
/// fallback a `redirect` answer calls for, completed in headless Chromium.
@Suite("NativeAuth interop", .serialized, .harness)
struct NativeAuthInteropTests {
    let scopes = ["User.Read"]

    @Test("MSAL Python lists the natively signed-in account and refreshes its token at the same authority", .enabled(if: TestEnvironment.runsInteropTests))
    func msalPythonReadsTheAccount() async throws {
        let stand = try await NativeAuthStandIn(https: true)
        try await stand.addUsers()
        guard case .completed(let account) = try await stand.app().signIn(username: NativeAuthStandIn.passwordUser,
                                                                          password: NativeAuthStandIn.password, scopes: scopes) else {
            Issue.record("expected completed"); return
        }
        let cache = try #require(try JSONSerialization.jsonObject(with: try stand.store.exportMSALJSON()) as? [String: Any])
        let accounts = try #require(cache["Account"] as? [String: [String: Any]])
        #expect(accounts.keys.sorted() == ["\(account.account.homeAccountID)-127.0.0.1-\(Fixtures.tenantA)".lowercased()])
        let answer = try await MSALPython.run([
            "op": "silent", "cache": cache, "authority": stand.idp.httpsAuthority(), "ca_bundle": try #require(stand.idp.certificate).path,
            "client_id": Fixtures.appOne, "username": NativeAuthStandIn.passwordUser, "scopes": scopes])
        #expect(answer["accounts"] as? [String] == [NativeAuthStandIn.passwordUser])
        let result = try #require(answer["result"] as? [String: Any])
        #expect((result["access_token"] as? String)?.hasPrefix("at-issued-") == true, "\(result["error"] ?? "")")
        #expect(try await stand.idp.stats().grants.last?.sdk == "MSAL.Python")
    }

    @Test("A native sign-in at the tenant's domain saves under the tenant ID: MSAL Python's acquire_token_silent finds the access token, with no token request",
          .enabled(if: TestEnvironment.runsInteropTests))
    func msalPythonFindsTheAccessTokenOfADomainAuthority() async throws {
        let stand = try await NativeAuthStandIn(https: true)
        try await stand.addUsers()
        guard case .completed = try await stand.app(tenant: NativeAuthStandIn.domain).signIn(
            username: NativeAuthStandIn.passwordUser, password: NativeAuthStandIn.password, scopes: scopes) else {
            Issue.record("expected completed"); return
        }
        let ours = try #require(try stand.store.entries().first { $0.kind == .accessToken }?["secret"])
        let nativeRequests = try await stand.stats().requests.count
        let cache = try #require(try JSONSerialization.jsonObject(with: try stand.store.exportMSALJSON()) as? [String: Any])
        // MSAL Python at the domain: its discovery resolves the domain to the tenant ID, and it looks there.
        let answer = try await MSALPython.run([
            "op": "silent", "force_refresh": false, "cache": cache, "authority": stand.idp.httpsAuthority(NativeAuthStandIn.domain),
            "ca_bundle": try #require(stand.idp.certificate).path, "client_id": Fixtures.appOne,
            "username": NativeAuthStandIn.passwordUser, "scopes": scopes])
        let result = try #require(answer["result"] as? [String: Any])
        #expect(result["access_token"] as? String == ours, "\(result["error"] ?? "")")
        #expect(result["token_source"] as? String == "cache")
        let stats = try await stand.idp.stats()
        #expect(stats.token_requests == 0 && stats.grants.isEmpty, "MSAL Python asked the token endpoint")
        #expect(try await stand.stats().requests.count == nativeRequests)
    }

    @Test("redirect -> browserRequired, then signInWithBrowser completes in headless Chromium and keeps one account", .enabled(if: HeadlessChromium.runsBrowserTests))
    func browserFallback() async throws {
        let stand = try await NativeAuthStandIn()
        try await stand.addUsers()
        let app = try stand.app([.oob])
        guard case .codeRequired(let state) = try await app.signIn(username: NativeAuthStandIn.otpUser, scopes: scopes) else {
            Issue.record("expected codeRequired"); return
        }
        _ = try await state.submitCode(try stand.latestCode(for: NativeAuthStandIn.otpUser))
        do {
            _ = try await app.signIn(username: NativeAuthStandIn.passwordUser, scopes: scopes)
            Issue.record("expected browserRequired")
        } catch {
            #expect(error.reason == .browserRequired)
        }
        try await stand.idp.actAsUser("submit")
        let browser = HeadlessChromium()
        defer { browser.close() }
        var parameters = InteractiveTokenParameters(scopes: scopes)
        parameters.browser = browser.opener
        // The default timeout (5 minutes): no hang is tested here, and a sign-in that cannot complete
        // fails with the browser's output (it failed once in CI at 60 s, when the browser still
        // shared the test keyring and bus: HeadlessChromium.arguments).
        let account: NativeAuthAccount
        do { account = try await app.signInWithBrowser(parameters) } catch {
            Issue.record("the browser sign-in did not complete; the browser printed:\n\(browser.outputTail())")
            throw error
        }
        #expect(account.username == Fixtures.alice.username)
        #expect(try stand.store.accounts(clientID: Fixtures.appOne).map(\.username) == [Fixtures.alice.username])
    }
}
