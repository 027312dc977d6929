import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization
import Testing
@testable import TokenCache
@testable import TokenCacheCore
import TokenCacheTestSupport
import TokenCacheTestIdentityProvider

/// The browser sign-in against another local user (uid 65534, as `setpriv` makes it): the
/// authorization request stays out of every process's arguments, the listener holds every
/// address of `localhost`, and forged redirects neither end nor fail the sign-in, while the real
/// one completes in headless Chromium started through a `$BROWSER` stand-in with no display.
/// Also the ID token's nonce, `$BROWSER` itself, and authorities that are not http(s).
@Suite("Browser sign-in against another local user", .serialized, .enabled(if: HeadlessChromium.runsBrowserTests), .harness)
struct BrowserSignInSecurityTests {
    let idp: FakeIdentityProvider
    let store = AccountStore(backend: InMemoryBackend())

    init() throws { idp = try FakeIdentityProvider() }

    func app() -> PublicClientApplication {
        var options = PublicClientApplication.Options()
        options.requestTimeout = 60
        return PublicClientApplication(clientID: Fixtures.appOne, authority: idp.authority(), store: store, options: options)
    }

    /// A directory uid 65534 can read, holding the attacker's script.
    static func sharedDirectory() throws -> URL {
        let directory = try TestEnvironment.temporaryDirectory()
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: directory.path)
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../Fixtures/signin_attacker.py").standardizedFileURL
        let copy = directory.appendingPathComponent("attacker.py")
        try FileManager.default.copyItem(at: script, to: copy)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: copy.path)
        return directory
    }

    /// Runs the attacker's script as uid 65534 and returns its JSON answer.
    static func attack(_ directory: URL, _ arguments: [String]) async throws -> [String: Any] {
        let script = directory.appendingPathComponent("attacker.py").path
        let output = try await offThePool {
            try runProcess("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", script] + arguments)
        }
        let answer = try JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [String: Any]
        let result = try #require(answer, "attacker: \(output.stderr)")
        #expect(result["uid"] as? Int == 65534)
        return result
    }

    /// Waits up to `seconds` for a file to hold a line.
    static func waitForLine(_ file: URL, seconds: Double) async throws -> String? {
        let giveUp = Date().addingTimeInterval(seconds)
        while Date() < giveUp {
            if let text = try? String(contentsOf: file, encoding: .utf8), text.hasSuffix("\n") { return text.trimmingCharacters(in: .whitespacesAndNewlines) }
            try await Task.sleep(for: .milliseconds(100))
        }
        return nil
    }

    @Test("Through $BROWSER with no display: another user finds no state, code_challenge or nonce in any process's arguments, cannot open the start page, cannot bind [::1] or 127.0.0.1 on the port, and its forged redirects (?error=x, a forged code, a wrong state) are refused while the real sign-in completes")
    func anotherUserCannotHijack() async throws {
        try await idp.actAsUser("submit")
        let directory = try Self.sharedDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let standInPID = directory.appendingPathComponent("standin.pid"), browserPID = directory.appendingPathComponent("browser.pid")
        let go = directory.appendingPathComponent("go"), standIn = directory.appendingPathComponent("browser.sh")
        // The stand-in holds the URL in its arguments until the test says go (the attacker reads them
        // meanwhile), then starts Chromium and exits, as VS Code's helper hands the URL to the host.
        try """
            #!/bin/sh
            echo $$ > '\(standInPID.path)'
            while [ ! -e '\(go.path)' ]; do sleep 0.1; done
            \(HeadlessChromium.detachedShellCommand(profile: directory.path + "/profile"))
            echo $! > '\(browserPID.path)'
            """.write(to: standIn, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: standIn.path)
        defer { if let pid = try? String(contentsOf: browserPID, encoding: .utf8), let group = Int32(pid.trimmingCharacters(in: .whitespacesAndNewlines)) { HeadlessChromium.endGroup(group) } }

        var parameters = InteractiveTokenParameters(scopes: ["User.Read"])
        parameters.timeout = 120
        // No DISPLAY, WAYLAND_DISPLAY or portal: only BROWSER, a list whose first command does not exist.
        parameters.browser = .system(environment: ["BROWSER": "/nonexistent/browser:\(standIn.path) %s"])
        let app = app()
        let signIn = Task { try await app.acquireToken(parameters) }
        defer { signIn.cancel() }

        let pid = try #require(try await Self.waitForLine(standInPID, seconds: 60), "the $BROWSER stand-in was not started")
        let arguments = try String(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/cmdline"), encoding: .utf8).split(separator: "\0").map(String.init)
        let start = try #require(arguments.last.flatMap(URLComponents.init(string:)), "\(arguments)")
        let port = try #require(start.port)
        #expect(start.host == "localhost" && start.path.hasPrefix("/start/"), "\(arguments)")

        let attack = try await Self.attack(directory, ["attack", pid, String(port)])
        let browserArguments = attack["browser_arguments"] as? [String] ?? []
        #expect(browserArguments.last == start.string, "the other user reads only the start page: \(browserArguments)")
        for target in ["state=", "code_challenge", "nonce=", "client_id="] {
            #expect(!browserArguments.joined(separator: " ").contains(target), "\(browserArguments)")
        }
        // The start page answers another user 403 on both addresses, with no Location.
        let startAnswers = attack["start"] as? [[String: Any]] ?? []
        #expect(startAnswers.map { $0["status"] as? Int } == [403, 403], "\(startAnswers)")
        #expect(startAnswers.allSatisfy { $0["location"] is NSNull || $0["location"] == nil }, "\(startAnswers)")
        #expect(attack["bind"] as? [String: String] == ["::1": "EADDRINUSE", "127.0.0.1": "EADDRINUSE"], "\(String(describing: attack["bind"]))")
        let forged = attack["forged"] as? [[String: Any]] ?? []
        #expect(forged.count == 8 && forged.allSatisfy { $0["status"] as? Int == 403 }, "\(forged)")

        // The sign-in is still waiting: now the user's browser opens, signs in, and it completes.
        FileManager.default.createFile(atPath: go.path, contents: nil)
        let result = try await signIn.value
        #expect(result.accessToken.hasPrefix("at-issued-"))
        #expect(try store.account(Fixtures.alice.username) != nil)

        // The request Chromium made carried the secrets; none of them is in any process's arguments,
        // the browser's included (it is still running).
        let request = try #require(try await idp.signInStats().authorize_requests.first)
        let secrets = try ["state", "code_challenge", "nonce"].map { try #require(request[$0], "\($0) not sent: \(request)") }
        let scan = try await Self.attack(directory, ["scan"])
        let everything = (scan["arguments"] as? [String] ?? []) + (attack["arguments"] as? [String] ?? [])
        #expect(everything.contains { $0.contains(start.string ?? "-") }, "the scan saw the browser's arguments")
        for secret in secrets {
            #expect(!everything.contains { $0.contains(secret) }, "found in another process's arguments")
        }
    }

    @Test("tokencache login with BROWSER set and no display runs that command (the host's browser in a devcontainer) with only the start page, and signs in")
    func cliLoginThroughBrowserVariable() async throws {
        try await idp.actAsUser("submit")
        var cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        let directory = try TestEnvironment.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let given = directory.appendingPathComponent("given"), browserPID = directory.appendingPathComponent("browser.pid")
        let standIn = directory.appendingPathComponent("open-on-host")
        // As VS Code's helper: take the URL, hand it to a browser elsewhere, exit 0 at once.
        try """
            #!/bin/sh
            printf '%s\n' "$*" > '\(given.path)'
            \(HeadlessChromium.detachedShellCommand(profile: directory.path + "/profile"))
            echo $! > '\(browserPID.path)'
            """.write(to: standIn, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: standIn.path)
        defer { if let pid = try? String(contentsOf: browserPID, encoding: .utf8), let group = Int32(pid.trimmingCharacters(in: .whitespacesAndNewlines)) { HeadlessChromium.endGroup(group) } }
        cli.environmentOverrides = ["DISPLAY": "", "WAYLAND_DISPLAY": "", "BROWSER": standIn.path, "DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent"]
        let authority = idp.authority().url.absoluteString
        let output = try await offThePool { [cli] in
            try cli.run(["login", "--client", Fixtures.appOne, "--authority", authority, "--scopes", "User.Read", "--timeout", "120"])
        }
        #expect(output.status == 0, "\(output.stderr)")
        #expect(output.stdout.contains("Signed in as \(Fixtures.alice.username)"), "\(output.stdout)")
        let argument = try String(contentsOf: given, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(argument.hasPrefix("http://localhost:") && argument.contains("/start/") && !argument.contains("state="), "\(argument)")
        // The terminal's fallback link is the same start page, not the authorization URL.
        #expect(output.stderr.contains(argument) && !output.stderr.contains("code_challenge"), "\(output.stderr)")

        // A BROWSER whose commands all fail: exit 1, naming them, with a hint to fix BROWSER or use --device-code.
        cli.environmentOverrides["BROWSER"] = "/nonexistent/open-on-host:/bin/false"
        let failed = try await offThePool { [cli] in
            try cli.run(["login", "--client", Fixtures.appOne, "--authority", authority, "--scopes", "User.Read", "--timeout", "30"])
        }
        #expect(failed.status == 1, "\(failed.stderr)")
        #expect(failed.stderr.contains("/nonexistent/open-on-host") && failed.stderr.contains("Fix BROWSER") && failed.stderr.contains("--device-code"),
                "\(failed.stderr)")
    }

    @Test("A redirect from this user with no state, a wrong state or ?error=x is answered 400 and the sign-in keeps waiting; the real redirect then completes it")
    func forgedRedirectsDoNotEndTheSignIn() async throws {
        try await idp.actAsUser("submit")
        let opened = AsyncStream<URL>.makeStream()
        var parameters = InteractiveTokenParameters(scopes: ["User.Read"])
        parameters.timeout = 120
        parameters.browser = .custom { url in opened.continuation.yield(url) }
        let app = app()
        let signIn = Task { try await app.acquireToken(parameters) }
        defer { signIn.cancel() }
        var urls = opened.stream.makeAsyncIterator()
        let start = try #require(await urls.next())
        let port = try #require(start.port)
        for target in ["/?error=x", "/?code=forged", "/?code=forged&state=wrong", "/?error=access_denied&state="] {
            let answer = try await offThePool { try rawRequest(port: port, "GET \(target) HTTP/1.1\r\nHost: localhost:\(port)\r\n\r\n") }
            #expect(answer.hasPrefix("HTTP/1.1 400"), "\(target): \(answer.prefix(80))")
        }
        // This user's connection to the start page gets the redirect to the authorization URL.
        let redirect = try await offThePool { try rawRequest(port: port, "GET \(start.path) HTTP/1.1\r\nHost: localhost:\(port)\r\n\r\n") }
        #expect(redirect.hasPrefix("HTTP/1.1 302") && redirect.contains("Location: http://127.0.0.1:\(idp.port)/"), "\(redirect.prefix(80))")
        let browser = HeadlessChromium()
        defer { browser.close() }
        try await browser.opener.open(start)
        let result = try await signIn.value
        #expect(result.accessToken.hasPrefix("at-issued-"))
        #expect(try await idp.stats().grants.map(\.outcome) == ["ok"])
    }

    @Test("An ID token whose nonce is not the one sent is refused (stateMismatch, field nonce) and nothing is saved")
    func nonceMismatch() async throws {
        try await idp.actAsUser("submit")
        try await idp.control(["nonce_override": "another-sign-ins-nonce"])
        let browser = HeadlessChromium()
        defer { browser.close() }
        var parameters = InteractiveTokenParameters(scopes: ["User.Read"])
        parameters.timeout = 60
        parameters.browser = browser.opener
        let error = await #expect(throws: TokenCacheError.self) { try await app().acquireToken(parameters) }
        #expect(error?.code == .stateMismatch)
        #expect(error?.field == "nonce")
        #expect(try await idp.signInStats().authorize_requests.first?["nonce"]?.count == 22)
        #expect(try await idp.stats().grants.map(\.outcome) == ["ok"])
        #expect(try store.allAccounts().isEmpty)
    }

    @Test("Authorities accept only https, and http on loopback: file://localhost and other schemes are invalidArgument")
    func authoritySchemes() throws {
        for bad in ["file://localhost/tenant", "file://127.0.0.1/etc/passwd", "ftp://localhost/tenant", "javascript://localhost/tenant",
                    "http://login.example.com/tenant"] {
            let error = #expect(throws: TokenCacheError.self, "\(bad)") { try Authority(bad) }
            #expect(error?.code == .invalidArgument && error?.field == "authority", "\(bad)")
        }
        #expect(try Authority("http://localhost:8080/tenant").environment == "localhost")
        #expect(try Authority("HTTPS://login.microsoftonline.com/common").environment == "login.microsoftonline.com")
    }

    @Test("A fixed redirect port another program holds on [::1] only is portUnavailable naming [::1]:PORT")
    func fixedPortTakenOnIPv6() throws {
        // The premise is a port free on 127.0.0.1 and held on [::1]. The kernel's ephemeral port for
        // [::1] says nothing of 127.0.0.1 (#56: another test's connection held it there, and the
        // listener rightly named 127.0.0.1), so the port comes from a 127.0.0.1 probe, held until the
        // [::1] occupant is bound. Another process can still take the port on 127.0.0.1 for a moment
        // after the probe closes (another listener's first bind, a connection): an attempt whose
        // error names 127.0.0.1 proves nothing and another port is tried. A listener that names the
        // wrong address fails every attempt, and then the test.
        var lastError: TokenCacheError?
        for _ in 0..<20 {
            guard let v4 = Self.loopbackSocket(ipv6: false, port: 0) else { continue }
            let port = v4.port
            guard let occupant = Self.loopbackSocket(ipv6: true, port: port) else { close(v4.fd); continue }
            defer { close(occupant.fd) }
            close(v4.fd)
            let error = #expect(throws: TokenCacheError.self) { try LoopbackListener(port: port) }
            lastError = error
            if let message = error?.message, message.contains("127.0.0.1:\(port)") { continue }
            #expect(error?.code == .portUnavailable)
            #expect(error?.message.contains("[::1]:\(port)") == true, "\(String(describing: error))")
            // An ephemeral port is one free on both.
            let listener = try LoopbackListener(port: 0)
            #expect(listener.addresses == ["127.0.0.1", "[::1]"])
            return
        }
        Issue.record("20 attempts, none with a port free on 127.0.0.1 and held on [::1] that the listener blamed on [::1]; the last: \(String(describing: lastError))")
    }

    /// A listening socket on 127.0.0.1 or [::1] only, bound as the listener binds, or nil.
    private static func loopbackSocket(ipv6: Bool, port: Int) -> (fd: Int32, port: Int)? {
        try? LoopbackListener.listenSocket(ipv6: ipv6, port: port)
    }

    @Test("$BROWSER: a colon-separated list, %s replaced by the URL (%% a percent sign), else the URL appended; words split as a shell would")
    func browserVariable() {
        let url = "http://localhost:1/start/x"
        #expect(SystemBrowser.browserCommands("firefox", url: url) == [["firefox", url]])
        #expect(SystemBrowser.browserCommands("a:b --new-window=%s::'/opt/my browser/run' \"x y\"", url: url)
            == [["a", url], ["b", "--new-window=" + url], ["/opt/my browser/run", "x y", url]])
        #expect(SystemBrowser.browserCommands("open %s %%s", url: url) == [["open", url, "%s"]])
        #expect(SystemBrowser.browserCommands(" : ", url: url).isEmpty)
    }

    @Test("With no browser at all the error says so and points to the device code flow; a BROWSER whose commands fail names them")
    func noBrowser() async throws {
        let none = await #expect(throws: TokenCacheError.self) {
            try await offThePool { try SystemBrowser.openHere(URL(string: "http://localhost:9/start/x")!, environment: [:]) }
        }
        #expect(none?.code == .browserUnavailable)
        #expect(none?.message.contains("BROWSER is not set") == true && none?.message.contains("no display") == true, "\(String(describing: none))")
        #expect(none?.hint?.contains("device code flow") == true && none?.hint?.contains("BROWSER") == true)
        let failing = await #expect(throws: TokenCacheError.self) {
            try await offThePool { try SystemBrowser.openHere(URL(string: "http://localhost:9/start/x")!, environment: ["BROWSER": "/nonexistent/browser:/bin/false"]) }
        }
        #expect(failing?.code == .browserUnavailable)
        #expect(failing?.message.contains("/nonexistent/browser") == true && failing?.message.contains("/bin/false: exit status 1") == true,
                "\(String(describing: failing))")
        #expect(failing?.hint?.contains("device code") == true)
    }
}
