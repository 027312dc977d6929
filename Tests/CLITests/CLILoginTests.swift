import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import TokenCache
@testable import TokenCacheCore
import TokenCacheTestSupport
import TokenCacheTestIdentityProvider

/// `tokencache login` and `logout` against the local identity provider: the device code flow a
/// user runs over SSH, the browser flow through the desktop's own browser choice (xdg-open and
/// the user's default browser, here headless Chromium), then silent SSO for another app of the
/// family with `tokencache token --refresh`.
@Suite("tokencache login and logout", .serialized, .harness)
struct CLILoginTests {
    let idp: FakeIdentityProvider
    let cli: CLI

    init() throws {
        idp = try FakeIdentityProvider()
        cli = try CLI(backend: "file")
    }

    var authority: String { idp.authority().url.absoluteString }

    /// Starts `tokencache`; the test reads what it prints while it waits.
    func start(_ arguments: [String], environment extra: [String: String] = [:]) throws -> RunningProgram {
        try RunningProgram(TestEnvironment.binDirectory.appendingPathComponent("tokencache"),
                           arguments: arguments + ["--backend", cli.backend, "--group", cli.group],
                           environment: cli.environment.merging(extra) { $1 })
    }

    func text(_ file: URL) -> String { (try? String(contentsOf: file, encoding: .utf8)) ?? "" }

    @Test("login --device-code shows the code, waits for the user, prints the account; another app of the family then gets a token silently")
    func deviceCodeThenFamilySSO() async throws {
        defer { cli.cleanUp() }
        try await idp.actAsUser("none", family: [Fixtures.appOne: "1", Fixtures.appTwo: "1"])
        let login = try start(["login", "--device-code", "--client", Fixtures.appOne, "--authority", authority, "--scopes", "User.Read"])
        defer { login.terminate() }
        let code = try await login.shown(#"enter the code (\w+)"#)
        #expect(login.isRunning, "login must wait for the user")
        try await idp.control(["approve_device": code])
        #expect(await login.exitStatus() == 0, "\(login.stderr)")
        #expect(login.stdout.contains("Signed in as \(Fixtures.alice.username)"), "\(login.stdout)")

        let (cli, authority) = (cli, authority)
        let token = try await offThePool { try cli.run(["token", "--client", Fixtures.appTwo, "--scopes", "Notes.Read", "--refresh", "--authority", authority]) }
        #expect(token.status == 0, "\(token.stderr)")
        #expect(token.stdout.hasPrefix("at-issued-"), "\(token.stdout)")
        let grants = try await idp.stats().grants
        #expect(grants.last?.client_id == Fixtures.appTwo && grants.last?.outcome == "ok", "\(grants)")
        let list = try await offThePool { try cli.run(["list", "--json"]) }
        #expect(list.stdout.contains(Fixtures.appOne) && list.stdout.contains(Fixtures.appTwo), "\(list.stdout)")
    }

    @Test("login --device-code the user declines exits 1 naming the denial, and saves nothing")
    func deviceCodeDenied() async throws {
        defer { cli.cleanUp() }
        try await idp.actAsUser("none")
        let login = try start(["login", "--device-code", "--client", Fixtures.appOne, "--authority", authority, "--scopes", "User.Read"])
        defer { login.terminate() }
        let code = try await login.shown(#"enter the code (\w+)"#)
        try await idp.control(["deny_device": code])
        #expect(await login.exitStatus() == 1)
        #expect(login.stderr.contains("error: "), "\(login.stderr)")
        #expect(login.stderr.lowercased().contains("denied") || login.stderr.lowercased().contains("declined"), "\(login.stderr)")
        #expect(try cli.run(["list", "--json"], withGroup: true).stdout.contains(Fixtures.alice.username) == false)
    }

    @Test("login --device-code --timeout gives up after that many seconds, though the code lives longer: exit 1 naming --timeout, nothing saved")
    func deviceCodeTimeout() async throws {
        defer { cli.cleanUp() }
        try await idp.actAsUser("none")
        // The provider's codes live 600 s and the user never approves: only --timeout ends it.
        // When it ends is the library's (DeviceCodeSignInTests/callerTimeout, on a manual clock);
        // this checks the translation: the option reaches the flow, the error names the option.
        let login = try start(["login", "--device-code", "--client", Fixtures.appOne, "--authority", authority,
                               "--scopes", "User.Read", "--timeout", "1"])
        defer { login.terminate() }
        _ = try await login.shown(#"enter the code (\w+)"#)
        #expect(await login.exitStatus() == 1, "\(login.stderr)")
        #expect(login.stderr.contains("within 1 s (--timeout)"), "\(login.stderr)")
        #expect(try cli.run(["list", "--json"], withGroup: true).stdout.contains(Fixtures.alice.username) == false)
    }

    @Test("login opens the user's default browser through xdg-open; the browser signs in and the CLI prints the account",
          .enabled(if: HeadlessChromium.runsBrowserTests))
    func browserThroughXdgOpen() async throws {
        defer { cli.cleanUp() }
        try await idp.actAsUser("submit", family: [Fixtures.appOne: "1"])
        // The desktop's choice of browser, as a user sets it: a .desktop file and mimeapps.list.
        let desktop = cli.dataHome.appendingPathComponent("desktop")
        let applications = desktop.appendingPathComponent("data/applications"), config = desktop.appendingPathComponent("config")
        try FileManager.default.createDirectory(at: applications, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: config, withIntermediateDirectories: true)
        let browser = try BrowserCommand(in: desktop)
        try "[Desktop Entry]\nType=Application\nName=Test browser\nExec=\(browser.path.path) %u\nMimeType=x-scheme-handler/http;\n"
            .write(to: applications.appendingPathComponent("test-browser.desktop"), atomically: true, encoding: .utf8)
        try "[Default Applications]\nx-scheme-handler/http=test-browser.desktop\n"
            .write(to: config.appendingPathComponent("mimeapps.list"), atomically: true, encoding: .utf8)
        defer {
            browser.close()
            try? FileManager.default.removeItem(at: desktop)
        }
        // xdg-open needs a display to pick the desktop's browser (none is used: Chromium is headless),
        // and finds it through XDG_CONFIG_HOME; the cache stays in the CLI's own XDG_DATA_HOME.
        let login = try start(
            ["login", "--client", Fixtures.appOne, "--authority", authority, "--scopes", "User.Read", "--login-hint", Fixtures.alice.username],
            environment: ["DISPLAY": ":99", "BROWSER": "", "XDG_CONFIG_HOME": config.path, "XDG_DATA_DIRS": desktop.appendingPathComponent("data").path,
                          "DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent"])
        defer { login.terminate() }
        #expect(await login.exitStatus() == 0, "\(login.stderr)")
        #expect(login.stderr.contains("Opened the sign-in page in your browser"), "\(login.stderr)")
        #expect(login.stdout.contains("Signed in as \(Fixtures.alice.username)"), "\(login.stdout)")
        let requests = try await idp.signInStats().authorize_requests
        #expect(requests.count == 1 && requests.first?["login_hint"] == Fixtures.alice.username, "\(requests)")
    }

    @Test("login without a display or desktop portal exits 1 and names --device-code")
    func browserWithoutDisplay() throws {
        defer { cli.cleanUp() }
        var cli = self.cli
        cli.environmentOverrides = ["DISPLAY": "", "WAYLAND_DISPLAY": "", "BROWSER": "", "DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent"]
        let output = try cli.run(["login", "--client", Fixtures.appOne, "--authority", authority, "--scopes", "User.Read", "--timeout", "20"])
        #expect(output.status == 1, "\(output.stderr)")
        #expect(output.stderr.contains("--device-code"), "\(output.stderr)")
        #expect(!output.stdout.contains("Signed in"))
        // No link is offered: the redirect listener ends with the process.
        #expect(!output.stderr.contains("authorize"), "\(output.stderr)")
        #expect(!output.stderr.contains("xdg-settings"), "\(output.stderr)")
    }

    @Test("Bad login arguments exit 64 naming the option")
    func badArguments() throws {
        defer { cli.cleanUp() }
        let noScopes = try cli.run(["login", "--client", Fixtures.appOne, "--authority", authority, "--scopes", " "])
        #expect(noScopes.status == 64 && noScopes.stderr.contains("--scopes"), "\(noScopes.stderr)")
        let badClient = try cli.run(["login", "--client", "not a client", "--authority", authority, "--scopes", "User.Read", "--device-code"])
        #expect(badClient.status == 64, "\(badClient.stderr)")
        let badAuthority = try cli.run(["login", "--client", Fixtures.appOne, "--authority", "notaurl", "--scopes", "User.Read"])
        #expect(badAuthority.status == 64, "\(badAuthority.stderr)")
        let mixed = try cli.run(["login", "--client", Fixtures.appOne, "--authority", authority, "--scopes", "User.Read",
                                 "--device-code", "--login-hint", "a@b.c"])
        #expect(mixed.status == 64 && mixed.stderr.contains("--device-code"), "\(mixed.stderr)")
    }

    @Test("logout signs one app out and leaves the family's other apps signed in; an app not signed in is exit 2")
    func logout() throws {
        defer { cli.cleanUp() }
        // Each app with its own refresh token: app three, with none of its own and no family's, never signed in.
        _ = try cli.save(Fixtures.alice, client: Fixtures.appOne, foci: nil)
        _ = try cli.save(Fixtures.alice, client: Fixtures.appTwo, foci: nil)
        let out = try cli.run(["logout", "--client", Fixtures.appOne])
        #expect(out.status == 0, "\(out.stderr)")
        #expect(out.stdout.contains("Signed client \(Fixtures.appOne) out of \(Fixtures.alice.username)"), "\(out.stdout)")
        let listed = try cli.run(["list", "--client", Fixtures.appTwo, "--json"])
        #expect(listed.stdout.contains(Fixtures.alice.username), "\(listed.stdout)")
        let again = try cli.run(["logout", "--client", Fixtures.appThree])
        #expect(again.status == 2, "\(again.stderr)")
        #expect(again.stderr.contains("tokencache list"), "\(again.stderr)")
        let wrongAccount = try cli.run(["logout", "--client", Fixtures.appTwo, "--account", "nobody@example.com"])
        #expect(wrongAccount.status == 2 && wrongAccount.stderr.contains(Fixtures.alice.username), "\(wrongAccount.stderr)")
    }
}
