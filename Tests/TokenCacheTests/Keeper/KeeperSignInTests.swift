import Foundation
import Testing
@testable import TokenCache
@testable import TokenCacheCore
import TokenCacheTestIdentityProvider
import TokenCacheTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Sign-in through the token keeper (#62 item 4): an enrolled user's app runs the browser
/// sign-in (listener, browser, PKCE, state) and the keeper redeems the code, so the refresh token
/// never enters the app. Real users, the keeper as root, headless Chromium as Alice's browser.
@Suite("Token keeper: sign-in", .serialized, .enabled(if: getuid() == 0 || TestEnvironment.isCI))
struct KeeperSignInTests {
    init() throws {
        try #require(getuid() == 0, "the keeper's tests need root (useradd, setpriv)")
    }

    /// `tokencache login` as `user`, finding the keeper as an installed one is found, with `$BROWSER` set.
    static func login(_ scenario: KeeperScenario, as user: KeeperTestUser, browser: String, _ extra: [String] = []) throws -> ProcessOutput {
        try scenario.findingTheKeeper(as: user, ["login", "--client", Fixtures.appOne, "--authority", scenario.idp.authority().url.absoluteString,
                                                 "--scopes", "User.Read", "--timeout", "120"] + extra,
                                      environment: ["BROWSER": browser, "DISPLAY": "", "WAYLAND_DISPLAY": ""])
    }

    /// Headless Chromium as `user`'s browser: its script and profile in a directory of that user's.
    static func browser(of user: KeeperTestUser) throws -> BrowserCommand {
        let directory = user.home + "/browser"
        let browser = try BrowserCommand(in: URL(fileURLWithPath: directory))
        for path in [directory, browser.path.path] { chown(path, user.uid, user.gid) }
        return browser
    }

    @Test("Enrolled, Alice's allowed app signs in in the browser and the keeper redeems the code: she gets the access token and account, the new refresh token is in the keeper's store and in no file, output or local cache of hers; the audit log records the sign-in",
          .enabled(if: HeadlessChromium.runsBrowserTests))
    func browserSignInRedeemedByTheKeeper() async throws {
        let scenario = try await KeeperScenario.withAliceEnrolled()
        defer { scenario.cleanUp() }
        try await scenario.idp.actAsUser("submit", family: [Fixtures.appOne: "1"])
        let browser = try Self.browser(of: scenario.alice)
        defer { browser.close() }
        let grantsBefore = try await scenario.idp.stats().grants.count

        let login = try Self.login(scenario, as: scenario.alice, browser: browser.path.path)
        #expect(login.status == 0, "\(login.stdout)\(login.stderr)\n\(scenario.log)")
        #expect(login.stdout.contains("Signed in as \(Fixtures.alice.username)") && login.stdout.contains("in the token keeper"), "\(login.stdout)")

        // The code was redeemed once, by the keeper, and the refresh token it got is the keeper's alone.
        let stats = try await scenario.idp.stats()
        #expect(stats.grants.count == grantsBefore + 1, "\(stats.grants)")
        let issued = try #require(stats.issued_refresh_tokens?.last, "the provider issued no refresh token")
        let kept = String(decoding: try scenario.keptStore().exportMSALJSON(), as: UTF8.self)
        #expect(kept.contains(issued), "the keeper's store holds the refresh token the sign-in got")
        #expect(!login.stdout.contains(issued) && !login.stderr.contains(issued))
        #expect(!scenario.homeFiles(scenario.alice).contains(issued), "no file of Alice's holds the new refresh token")
        let local = try scenario.alice.run(scenario.app, ["list", "--backend", "file"], environment: ["TOKENCACHE_KEEPER": "off"])
        #expect(!local.stdout.contains(Fixtures.alice.username), "the sign-in was not saved to her local cache: \(local.stdout)")
        #expect(scenario.log.contains("redeem-code group \(scenario.group) client \(Fixtures.appOne)") && scenario.log.contains("-> granted: signed in \(Fixtures.alice.username)"),
                "\(scenario.log)")
        #expect(!scenario.log.contains(issued) && !scenario.log.contains("authcode-"), "the keeper's log names no code or refresh token:\n\(scenario.log)")

        // Her app then gets its tokens silently from the keeper (the access token cached at the sign-in).
        let token = try scenario.tokenFindingTheKeeper(as: scenario.alice)
        #expect(token.status == 0 && !token.stdout.isEmpty, "\(token.stdout)\(token.stderr)\n\(scenario.log)")
        #expect(try await scenario.idp.stats().grants.count == grantsBefore + 1, "served from the keeper's cache, no new grant")
    }

    @Test("An app the keeper would not redeem for (a client its apps file does not name) is refused before the browser opens: nothing is asked of the provider, and the CLI says how to sign in for the keeper all the same")
    func refusedBeforeTheBrowser() async throws {
        let scenario = try await KeeperScenario.withAliceEnrolled()
        defer { scenario.cleanUp() }
        let login = try scenario.findingTheKeeper(as: scenario.alice, ["login", "--client", Fixtures.appTwo, "--authority", scenario.idp.authority().url.absoluteString,
                                                                      "--scopes", "User.Read"], environment: ["BROWSER": "/bin/false"])
        #expect(login.status == 1 && login.stderr.contains("may not use client") && login.stderr.contains("tokencache keeper --enroll"), "\(login.stdout)\(login.stderr)")
        #expect(!login.stderr.contains("browser"), "the browser was not asked for: \(login.stderr)")
        #expect(try await scenario.idp.signInStats().authorize_requests.isEmpty)
        #expect(scenario.log.contains("sign-in-check") && scenario.log.contains("-> refused"), "\(scenario.log)")
    }

    @Test("Enrolled, Alice's allowed app signs in with a device code run by the keeper: she is shown the user code (never the device code), the keeper polls and keeps the refresh token, and she gets the access token and account")
    func deviceCodeSignInRunByTheKeeper() async throws {
        let scenario = try await KeeperScenario.withAliceEnrolled()
        defer { scenario.cleanUp() }
        try await scenario.idp.actAsUser("none", family: [Fixtures.appOne: "1"])
        let command = scenario.findingTheKeeperCommand(as: scenario.alice, ["login", "--device-code", "--client", Fixtures.appOne,
                                                                           "--authority", scenario.idp.authority().url.absoluteString, "--scopes", "User.Read"])
        let login = try RunningProgram(URL(fileURLWithPath: command.executable), arguments: command.arguments, environment: scenario.alice.environment())
        defer { kill(login.processIdentifier, SIGKILL) }
        let code = try await login.shown(#"enter the code (\w+)"#)
        #expect(login.isRunning, "login waits for the user")
        let authorizations = try await scenario.idp.signInStats().device_authorizations
        #expect(authorizations.count == 1 && authorizations.first?.client_id == Fixtures.appOne, "the keeper asked for the code: \(authorizations)")
        #expect(!login.stderr.contains("devicecode-"), "the device code stays in the keeper: \(login.stderr)")
        try await scenario.idp.control(["approve_device": code])
        #expect(await login.exitStatus() == 0, "\(login.stdout)\(login.stderr)\n\(scenario.log)")
        #expect(login.stdout.contains("Signed in as") && login.stdout.contains("in the token keeper"), "\(login.stdout)")

        let issued = try #require(try await scenario.idp.stats().issued_refresh_tokens?.last, "the provider issued no refresh token")
        let kept = String(decoding: try scenario.keptStore().exportMSALJSON(), as: UTF8.self)
        #expect(kept.contains(issued), "the keeper's store holds the refresh token the sign-in got")
        #expect(!login.stdout.contains(issued) && !login.stderr.contains(issued) && !scenario.homeFiles(scenario.alice).contains(issued))
        #expect(scenario.log.contains("sign-in-device-code group \(scenario.group) client \(Fixtures.appOne)") && scenario.log.contains("-> granted: signed in"),
                "\(scenario.log)")
        #expect(!scenario.log.contains(issued) && !scenario.log.contains("devicecode-"), "\(scenario.log)")
    }

    @Test("Enrolled, Alice's allowed app signs in natively with a password and the keeper redeems the flow's last grant: the refresh token is the keeper's alone, and a wrong password is the same typed error as without the keeper")
    func nativeSignInRedeemedByTheKeeper() async throws {
        // Paul is one of Alice's enrolled accounts (a sign-in through the keeper adds none), at the provider that also answers native authentication.
        let scenario = try KeeperScenario()
        defer { scenario.cleanUp() }
        let mailbox = try TestEnvironment.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: mailbox) }
        try await scenario.idp.control(["native_mailbox": mailbox.path, "tenant_domains": [NativeAuthStandIn.domain: Fixtures.tenantA],
                                        "native_users": [NativeAuthStandIn.passwordUser: ["uid": NativeAuthStandIn.paul.uid, "password": NativeAuthStandIn.password]]])
        let enrolled = try await scenario.enrollAlice(accounts: [Fixtures.alice, NativeAuthStandIn.paul])
        try #require(enrolled.status == 0, "\(enrolled.stderr)\n\(scenario.log)")
        let file = scenario.alice.home + "/password"
        func login(password: String) throws -> ProcessOutput {
            try Data((password + "\n").utf8).write(to: URL(fileURLWithPath: file))
            chown(file, scenario.alice.uid, scenario.alice.gid)
            chmod(file, 0o600)
            return try scenario.findingTheKeeper(as: scenario.alice, ["login", "--native", "--username", NativeAuthStandIn.passwordUser, "--password-file", file,
                                                                     "--client", Fixtures.appOne, "--authority", scenario.idp.authority().description, "--scopes", "User.Read"])
        }
        let wrong = try login(password: "Wrong-password-1")
        #expect(wrong.status == 1 && wrong.stderr.contains("password is wrong"), "\(wrong.stdout)\(wrong.stderr)\n\(scenario.log)")
        let good = try login(password: NativeAuthStandIn.password)
        #expect(good.status == 0 && good.stdout.contains("Signed in as \(NativeAuthStandIn.passwordUser)") && good.stdout.contains("in the token keeper"),
                "\(good.stdout)\(good.stderr)\n\(scenario.log)")

        let issued = try #require(try await scenario.idp.stats().issued_refresh_tokens?.last, "the provider issued no refresh token")
        let kept = String(decoding: try scenario.keptStore().exportMSALJSON(), as: UTF8.self)
        #expect(kept.contains(issued), "the keeper's store holds the native sign-in's refresh token")
        #expect(!good.stdout.contains(issued) && !good.stderr.contains(issued) && !scenario.homeFiles(scenario.alice).contains(issued))
        #expect(scenario.log.contains("redeem-native password group \(scenario.group) client \(Fixtures.appOne)")
                && scenario.log.contains("-> granted: signed in \(NativeAuthStandIn.passwordUser)"), "\(scenario.log)")
        #expect(!scenario.log.contains(issued) && !scenario.log.contains(NativeAuthStandIn.password), "\(scenario.log)")
    }

    @Test("A sign-in through the keeper adds no account (any process of Alice's can start her allowed app with a browser of its choosing): Bob signing in with a device code at her provider is refused after the code and nothing is saved; an authority at a host none of her accounts signed in at is refused before anything is sent to it")
    func signInAddsNoAccount() async throws {
        let scenario = try await KeeperScenario.withAliceEnrolled()
        defer { scenario.cleanUp() }
        try await scenario.idp.control(["browser_action": "none", "sign_in_user": ["uid": Fixtures.bob.uid, "utid": Fixtures.bob.tenant, "username": Fixtures.bob.username]])
        let command = scenario.findingTheKeeperCommand(as: scenario.alice, ["login", "--device-code", "--client", Fixtures.appOne,
                                                                           "--authority", scenario.idp.authority().url.absoluteString, "--scopes", "User.Read"])
        let login = try RunningProgram(URL(fileURLWithPath: command.executable), arguments: command.arguments, environment: scenario.alice.environment())
        defer { kill(login.processIdentifier, SIGKILL) }
        let code = try await login.shown(#"enter the code (\w+)"#)
        try await scenario.idp.control(["approve_device": code])
        #expect(await login.exitStatus() == 1, "\(login.stdout)\(login.stderr)\n\(scenario.log)")
        #expect(login.stderr.contains("adds no account") && login.stderr.contains("tokencache keeper --enroll"), "\(login.stderr)")
        let kept = String(decoding: try scenario.keptStore().exportMSALJSON(), as: UTF8.self)
        #expect(!kept.contains(Fixtures.bob.username) && !kept.contains(Fixtures.bob.uid), "nothing of Bob's was saved")
        #expect(scenario.log.contains("sign-in-device-code") && scenario.log.contains("-> refused"), "\(scenario.log)")

        // Another provider, named by another host name (her accounts signed in at 127.0.0.1).
        let elsewhere = try FakeIdentityProvider()
        let other = try scenario.findingTheKeeper(as: scenario.alice, ["login", "--client", Fixtures.appOne, "--authority", "http://localhost:\(elsewhere.port)/\(Fixtures.tenantA)",
                                                                      "--scopes", "User.Read"], environment: ["BROWSER": "/bin/false"])
        #expect(other.status == 1 && other.stderr.contains("signed in at"), "\(other.stdout)\(other.stderr)")
        let stats = try await elsewhere.stats()
        #expect(stats.token_requests == 0 && stats.discovery_requests == 0, "nothing was sent to the other host: \(stats.token_requests) \(stats.discovery_requests)")
        #expect(scenario.log.contains("sign-in-check") && scenario.log.contains("none of group"), "\(scenario.log)")
    }

    @Test("A process of Alice's that is not an allowed app (python3) sending a sign-in to redeem with the allowed client ID is refused (accessDenied) and nothing is redeemed; a redirect that is not loopback or a verifier that is not PKCE's is invalidArgument")
    func forgedRedemptionRefused() async throws {
        let scenario = try await KeeperScenario.withAliceEnrolled()
        defer { scenario.cleanUp() }
        let before = try await scenario.idp.stats().token_requests
        func send(_ fields: [String: Any]) throws -> [String: Any] {
            let request: [String: Any] = ["version": 1, "op": "redeem-code", "client_id": Fixtures.appOne,
                                          "authority": scenario.idp.authority().url.absoluteString, "scopes": ["User.Read"],
                                          "code": "authcode-forged", "redirect_uri": "http://localhost:8400",
                                          "code_verifier": String(repeating: "v", count: 43), "nonce": "n"].merging(fields) { $1 }
            let script = """
                import json, socket, struct, sys
                body = sys.stdin.buffer.read()
                s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
                s.sendall(struct.pack(">I", len(body)) + body)
                head = s.recv(4, socket.MSG_WAITALL); n = struct.unpack(">I", head)[0]
                sys.stdout.write(s.recv(n, socket.MSG_WAITALL).decode())
                """
            let output = try scenario.alice.run("/usr/bin/python3", ["-c", script, scenario.socket], input: try JSONSerialization.data(withJSONObject: request))
            return try #require(try JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [String: Any], "\(output.stdout)\(output.stderr)")
        }
        let forged = try send([:])
        #expect((forged["error"] as? [String: Any])?["code"] as? String == "accessDenied", "\(forged)")
        let notLoopback = try send(["redirect_uri": "https://attacker.example/callback"])
        #expect((notLoopback["error"] as? [String: Any])?["code"] as? String == "invalidArgument"
                && ((notLoopback["error"] as? [String: Any])?["message"] as? String)?.contains("redirect_uri") == true, "\(notLoopback)")
        let notPKCE = try send(["code_verifier": "short"])
        #expect(((notPKCE["error"] as? [String: Any])?["message"] as? String)?.contains("code_verifier") == true, "\(notPKCE)")
        #expect(try await scenario.idp.stats().token_requests == before, "nothing was sent to the token endpoint")
        #expect(scenario.log.contains("redeem-code") && scenario.log.contains("-> refused"), "\(scenario.log)")
    }
}

/// What the keeper redeems, checked before the app is even authorized (logic only).
@Suite("Keeper sign-in redemption checks")
struct KeeperCodeRedemptionTests {
    func redemption(redirect: String = "http://localhost:8400", verifier: String = String(repeating: "A", count: 43), nonce: String = "n",
                    scopes: [String] = ["User.Read"]) throws -> KeeperCodeRedemption {
        KeeperCodeRedemption(group: nil, clientID: try ClientID(Fixtures.appOne), authority: try Authority("https://login.microsoftonline.com/common"),
                             scopes: scopes, code: "code", redirectURI: redirect, codeVerifier: verifier, nonce: nonce, claims: nil,
                             clientCapabilities: [])
    }

    /// Whether `body` throws `invalidArgument`.
    static func refusesAsInvalid(_ body: () throws -> Void) -> Bool {
        do { try body() } catch { return (error as? TokenCacheError)?.code == .invalidArgument }
        return false
    }

    @Test("Loopback redirects with a port are taken (localhost, 127.0.0.1, [::1], with a path); https, another host, no port, a query or user info are refused")
    func loopbackOnly() throws {
        for uri in ["http://localhost:8400", "http://127.0.0.1:1/", "http://[::1]:65535/callback", "http://LOCALHOST:80"] {
            #expect(throws: Never.self, "\(uri)") { try self.redemption(redirect: uri).check() }
        }
        for uri in ["https://localhost:8400", "http://localhost", "http://example.com:80", "http://localhost.example.com:80",
                    "http://localhost:8400/?x=1", "http://user@localhost:8400", "http://localhost:8400/#f", "urn:ietf:wg:oauth:2.0:oob", ""] {
            #expect(Self.refusesAsInvalid { try self.redemption(redirect: uri).check() }, "\(uri)")
        }
    }

    @Test("A PKCE verifier is 43 to 128 unreserved characters; a nonce and a scope are required")
    func verifierNonceScopes() throws {
        #expect(throws: Never.self) { try self.redemption(verifier: String(repeating: "a-._~9Z", count: 18) + "ab").check() }
        for verifier in [String(repeating: "a", count: 42), String(repeating: "a", count: 129), String(repeating: "a", count: 42) + "/", ""] {
            #expect(Self.refusesAsInvalid { try self.redemption(verifier: verifier).check() })
        }
        #expect(Self.refusesAsInvalid { try self.redemption(nonce: "").check() })
        #expect(Self.refusesAsInvalid { try self.redemption(scopes: []).check() })
    }
}
