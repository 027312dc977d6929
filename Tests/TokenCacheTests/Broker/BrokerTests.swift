import Foundation
import Testing
@testable import TokenCache
@testable import TokenCacheCore
import TokenCacheTestSupport
import TokenCacheTestIdentityProvider

/// `tokencache broker` on a private bus, on a CLI test store, and calls to it with `dbus-send`.
final class RunningBroker: @unchecked Sendable {
    // @unchecked: set once in init, only read afterwards.
    let bus: PrivateBus
    let cli: CLI
    let process: Process
    let logFile: URL

    static let binary = TestEnvironment.binDirectory.appendingPathComponent("tokencache").path

    /// The CLI's environment on the private bus (and an empty system data directory: no
    /// Microsoft broker installed as far as --install can see).
    static func environment(_ cli: CLI, _ bus: PrivateBus) -> [String: String] {
        var environment = cli.environment
        environment["DBUS_SESSION_BUS_ADDRESS"] = bus.address
        environment["XDG_DATA_DIRS"] = cli.dataHome.appendingPathComponent("system-share").path
        return environment
    }

    /// Starts `tokencache broker ARGUMENTS` and waits until it says it owns the name (or exits).
    /// - Parameter launcher: a command that runs the broker (`setpriv …`), none by default.
    init(_ cli: CLI, bus: PrivateBus, _ arguments: [String] = [], environment extra: [String: String] = [:], launcher: [String] = []) throws {
        self.bus = bus
        self.cli = cli
        logFile = cli.dataHome.appendingPathComponent("broker-\(UUID().uuidString.prefix(6)).log")
        FileManager.default.createFile(atPath: logFile.path, contents: nil, attributes: [.posixPermissions: 0o600])
        process = Process()
        process.executableURL = URL(fileURLWithPath: launcher.first ?? Self.binary)
        process.arguments = (launcher.isEmpty ? [] : Array(launcher.dropFirst()) + [Self.binary]) + ["broker", "--backend", cli.backend, "--group", cli.group] + arguments
        process.environment = Self.environment(cli, bus).merging(extra) { _, new in new }
        process.standardOutput = FileHandle.nullDevice
        process.standardError = try FileHandle(forWritingTo: logFile)
        process.standardInput = FileHandle.nullDevice
        try process.run()
        // Readiness is an event (the line it prints once the bus gave it the name), polled without a time bound.
        while process.isRunning, !log.contains("tokencache broker: serving") { usleep(10_000) }
        guard process.isRunning else { throw TokenCacheError(.agentUnavailable, "The broker did not start: \(log)") }
    }

    var log: String { (try? String(contentsOf: logFile, encoding: .utf8)) ?? "" }

    /// Calls METHOD with protocol "0.0" and `json`; the reply string as sent.
    func call(_ method: String, _ json: String) throws -> String {
        let output = try runProcess("/usr/bin/dbus-send", [
            "--session", "--print-reply=literal", "--reply-timeout=180000", "--dest=com.microsoft.identity.broker1", "/com/microsoft/identity/broker1",
            "com.microsoft.identity.Broker1.\(method)", "string:0.0", "string:\(UUID().uuidString)", "string:\(json)",
        ], environment: Self.environment(cli, bus))
        guard output.status == 0 else { throw TokenCacheError(.agentUnavailable, "dbus-send failed: \(output.stderr)") }
        return output.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The reply parsed as a JSON object.
    func object(_ method: String, _ json: [String: Any]) throws -> [String: Any] {
        let text = try call(method, String(decoding: try JSONSerialization.data(withJSONObject: json), as: UTF8.self))
        #expect(!text.contains("refresh_token") && !text.contains("rt-broker"), "a refresh token crossed the bus")
        return try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "\(text)")
    }

    func run(_ arguments: [String]) throws -> ProcessOutput {
        try runProcess(Self.binary, arguments + ["--backend", cli.backend, "--group", cli.group], environment: Self.environment(cli, bus))
    }

    func stop() {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    deinit { stop() }
}

/// `tokencache broker` (#47 item 1) as broker-enabled MSAL apps reach it: on a private session
/// bus, asked with `dbus-send` in the request shapes msalruntime sends (docs/BROKER.md).
@Suite("tokencache broker on the session bus", .harness)
struct BrokerTests {
    let idp: FakeIdentityProvider
    let cli: CLI
    let bus: PrivateBus

    init() throws {
        idp = try FakeIdentityProvider()
        cli = try CLI(backend: "file")
        bus = try PrivateBus()
    }

    static let refreshToken = "rt-broker-alice"

    /// Alice signed in to `client` at the local provider; `expired` makes her access token stale,
    /// with a refresh token the provider knows.
    func signIn(_ client: String, expired: Bool = false) async throws {
        var response = Fixtures.response(for: Fixtures.alice, scope: "User.Read", foci: nil, tag: "broker", expiresIn: expired ? 0 : 3600)
        response["refresh_token"] = Self.refreshToken + "-" + client
        let saved = try cli.run(["save", "--client", client, "--authority", idp.authority().url.absoluteString, "--scopes", "User.Read"],
                                input: Fixtures.json(response))
        try #require(saved.status == 0, "\(saved.stderr)")
        try await idp.seed(refreshToken: Self.refreshToken + "-" + client, user: Fixtures.alice, clientID: client, family: nil)
    }

    /// An acquireTokenSilently request as msalruntime sends it for a known account.
    func silent(_ client: String, authority: String) -> [String: Any] {
        ["authParameters": [
            "accessTokenToRenew": "", "authority": authority, "authorizationType": 1, "clientId": client, "decodedClaims": "",
            "account": ["homeAccountId": Fixtures.alice.homeAccountID, "username": Fixtures.alice.username, "environment": idp.host],
            "popParams": NSNull(), "redirectUri": "https://login.microsoftonline.com/common/oauth2/nativeclient",
            "requestedScopes": ["User.Read"], "username": Fixtures.alice.username, "uxContextHandle": -1,
        ] as [String: Any]]
    }

    static func usernames(_ reply: [String: Any]) -> [String] {
        ((reply["accounts"] as? [[String: Any]]) ?? []).compactMap { $0["username"] as? String }
    }

    static func status(_ reply: [String: Any]) -> Int? { (reply["error"] as? [String: Any])?["status"] as? Int }

    /// Found in a CI run: a broker the bus had started outlived the bus (its session), waiting
    /// for a signal forever.
    @Test("A broker whose session bus goes away stops, exit 1 saying why; it never lingers")
    func stopsWhenTheBusGoes() throws {
        let broker = try RunningBroker(cli, bus: bus)
        defer { broker.stop() }
        bus.stop()
        // No time bound: the broker's exit is the event waited for.
        broker.process.waitUntilExit()
        #expect(broker.process.terminationStatus == 1, "\(broker.log)")
        #expect(broker.log.contains("The session bus closed the broker's connection"), "\(broker.log)")
    }

    @Test("getAccounts lists the accounts the calling client is signed in to, in the runtime's shape; another client gets none")
    func accountsByClient() async throws {
        defer { cli.cleanUp() }
        try await signIn(Fixtures.appOne)
        let broker = try RunningBroker(cli, bus: bus)
        let one = try broker.object("getAccounts", ["clientId": Fixtures.appOne, "redirectUri": Fixtures.appOne])
        #expect(Self.usernames(one) == [Fixtures.alice.username], "\(one)")
        let account = try #require((one["accounts"] as? [[String: Any]])?.first)
        #expect(account["homeAccountId"] as? String == Fixtures.alice.homeAccountID)
        #expect(account["localAccountId"] as? String == Fixtures.alice.uid)
        #expect(account["realm"] as? String == Fixtures.alice.tenant)
        #expect(account["passwordExpiry"] as? Int == 0 && account["clientInfo"] is String)
        let two = try broker.object("getAccounts", ["clientId": Fixtures.appTwo, "redirectUri": Fixtures.appTwo])
        #expect(Self.usernames(two).isEmpty && two["error"] == nil, "\(two)")
    }

    @Test("acquireTokenSilently serves the cached access token (accessTokenType 0, expiresOn in ms, the ID token) without asking the provider")
    func silentFromCache() async throws {
        defer { cli.cleanUp() }
        try await signIn(Fixtures.appOne)
        let broker = try RunningBroker(cli, bus: bus)
        let reply = try broker.object("acquireTokenSilently", silent(Fixtures.appOne, authority: idp.authority().url.absoluteString))
        let token = try #require(reply["brokerTokenResponse"] as? [String: Any], "\(reply)")
        #expect((token["accessToken"] as? String)?.hasPrefix("at-") == true && !((token["accessToken"] as? String) ?? "").hasPrefix("at-issued-"))
        #expect(token["accessTokenType"] as? Int == 0)
        let expiresOn = try #require(token["expiresOn"] as? Int)
        #expect(expiresOn > Int(Date().timeIntervalSince1970) * 1000, "milliseconds, in the future")
        #expect((token["idToken"] as? String)?.split(separator: ".").count == 3)
        #expect(token["grantedScopes"] as? String == "User.Read")
        #expect(try await idp.stats().grants.isEmpty)
    }

    @Test("After expiry the broker redeems the refresh token at its issuing host (one grant); named at another host it redeems nothing and answers an error")
    func refreshAtIssuingHostOnly() async throws {
        defer { cli.cleanUp() }
        try await signIn(Fixtures.appOne, expired: true)
        let broker = try RunningBroker(cli, bus: bus)
        // The same provider under another host name: the refresh token must not go there.
        let otherHost = "http://localhost:\(idp.port)/\(Fixtures.tenantA)"
        let refused = try broker.object("acquireTokenSilently", silent(Fixtures.appOne, authority: otherHost))
        #expect(Self.status(refused) != nil && refused["brokerTokenResponse"] == nil, "\(refused)")
        #expect(try await idp.stats().grants.isEmpty, "nothing was redeemed at the other host")
        let reply = try broker.object("acquireTokenSilently", silent(Fixtures.appOne, authority: idp.authority().url.absoluteString))
        let token = try #require(reply["brokerTokenResponse"] as? [String: Any], "\(reply)")
        #expect((token["accessToken"] as? String)?.hasPrefix("at-issued-") == true, "\(token)")
        #expect(try await idp.stats().grants.count == 1)
        // Cached now.
        let again = try broker.object("acquireTokenSilently", silent(Fixtures.appOne, authority: idp.authority().url.absoluteString))
        #expect((again["brokerTokenResponse"] as? [String: Any])?["accessToken"] as? String == token["accessToken"] as? String)
        #expect(try await idp.stats().grants.count == 1)
    }

    @Test("A cached token without an ID token is not sent as a reply the runtime would take for success with no account: status 2 (InteractionRequired)")
    func noIDTokenAsksForSignIn() async throws {
        defer { cli.cleanUp() }
        var response = Fixtures.response(for: Fixtures.alice, scope: "User.Read", foci: nil, tag: "broker")
        response["id_token"] = nil
        let saved = try cli.run(["save", "--client", Fixtures.appOne, "--authority", idp.authority().url.absoluteString, "--scopes", "User.Read"],
                                input: Fixtures.json(response))
        try #require(saved.status == 0, "\(saved.stderr)")
        let broker = try RunningBroker(cli, bus: bus)
        let reply = try broker.object("acquireTokenSilently", silent(Fixtures.appOne, authority: idp.authority().url.absoluteString))
        #expect(Self.status(reply) == 2 && reply["brokerTokenResponse"] == nil, "\(reply)")
        #expect(((reply["error"] as? [String: Any])?["context"] as? String)?.contains("no ID token") == true, "\(reply)")
    }

    /// An acquireTokenInteractively request as msalruntime's `signin_interactively` sends it.
    func interactive(_ client: String) -> [String: Any] {
        ["authParameters": [
            "accessTokenToRenew": "", "account": NSNull(), "authority": idp.authority().url.absoluteString, "authorizationType": 6,
            "clientId": client, "decodedClaims": "", "isSignIn": true, "parentWindow": ["handle": 1], "popParams": NSNull(),
            "redirectUri": "https://login.microsoftonline.com/common/oauth2/nativeclient", "requestedScopes": ["User.Read"],
            "username": Fixtures.alice.username, "uxContextHandle": -1,
        ] as [String: Any], "parentWindowHandle": 1]
    }

    @Test("acquireTokenInteractively with no account here: the user signs in in the browser ($BROWSER), the reply carries the token and the group keeps the account",
          .enabled(if: HeadlessChromium.runsBrowserTests))
    func interactiveSignInThroughBrowser() async throws {
        defer { cli.cleanUp() }
        try await idp.actAsUser("submit")
        let browser = try BrowserCommand(in: cli.dataHome.appendingPathComponent("desktop"))
        defer { browser.close() }
        // The local provider is not a Microsoft host: named with --authority (#57 item 4).
        let broker = try RunningBroker(cli, bus: bus, ["--authority", idp.authority().url.absoluteString], environment: ["BROWSER": browser.path.path])
        let reply = try broker.object("acquireTokenInteractively", interactive(Fixtures.appOne))
        let token = try #require(reply["brokerTokenResponse"] as? [String: Any], "\(reply) \(broker.log)")
        #expect((token["accessToken"] as? String)?.isEmpty == false && (token["idToken"] as? String)?.split(separator: ".").count == 3)
        #expect((token["account"] as? [String: Any])?["username"] as? String == Fixtures.alice.username, "\(token)")
        let requests = try await idp.signInStats().authorize_requests
        #expect(requests.count == 1 && requests.first?["login_hint"] == Fixtures.alice.username, "\(requests)")
        #expect(Self.usernames(try broker.object("getAccounts", ["clientId": Fixtures.appOne])) == [Fixtures.alice.username])
    }

    @Test("acquireTokenInteractively with no account and no browser to open: status 9 naming `tokencache login --device-code`; nothing is asked of the provider")
    func interactiveWithoutBrowser() async throws {
        defer { cli.cleanUp() }
        let broker = try RunningBroker(cli, bus: bus, ["--authority", idp.authority().url.absoluteString],
                                       environment: ["BROWSER": "", "DISPLAY": "", "WAYLAND_DISPLAY": ""])
        let reply = try broker.object("acquireTokenInteractively", interactive(Fixtures.appOne))
        let error = try #require(reply["error"] as? [String: Any], "\(reply)")
        #expect(error["status"] as? Int == 9 && (error["context"] as? String)?.contains("--device-code") == true, "\(reply)")
        #expect(try await idp.signInStats().authorize_requests.isEmpty)
    }

    @Test("removeAccount signs that client out; the account stays for the other client")
    func removeAccountKeepsOthers() async throws {
        defer { cli.cleanUp() }
        try await signIn(Fixtures.appOne)
        try await signIn(Fixtures.appTwo)
        let broker = try RunningBroker(cli, bus: bus)
        let removed = try broker.call("removeAccount", #"{"clientId": "\#(Fixtures.appOne)", "account": {"homeAccountId": "\#(Fixtures.alice.homeAccountID)", "username": "\#(Fixtures.alice.username)"}}"#)
        #expect(removed == "{}", "\(removed)")
        #expect(Self.usernames(try broker.object("getAccounts", ["clientId": Fixtures.appOne])).isEmpty)
        #expect(Self.usernames(try broker.object("getAccounts", ["clientId": Fixtures.appTwo])) == [Fixtures.alice.username])
        let listed = try cli.run(["list", "--client", Fixtures.appTwo])
        #expect(listed.status == 0 && listed.stdout.contains(Fixtures.alice.username), "\(listed.stdout)\(listed.stderr)")
    }

    @Test("--confirm in a broker with no terminal and no display (as the bus starts one): it serves, and every question is answered no (a client's accounts are not listed)")
    func confirmWithoutTerminal() async throws {
        defer { cli.cleanUp() }
        try await signIn(Fixtures.appOne)
        let broker = try RunningBroker(cli, bus: bus, ["--confirm"], environment: ["DISPLAY": "", "WAYLAND_DISPLAY": ""])
        #expect(Self.usernames(try broker.object("getAccounts", ["clientId": Fixtures.appOne])).isEmpty)
        #expect(broker.log.contains("refused (no terminal or desktop dialog to ask in)"), "\(broker.log)")
    }

    @Test("A client outside --client is refused (status 9), for accounts and tokens; the log names the caller's pid and uid")
    func outOfPolicyClientRefused() async throws {
        defer { cli.cleanUp() }
        try await signIn(Fixtures.appOne)
        try await signIn(Fixtures.appTwo)
        let broker = try RunningBroker(cli, bus: bus, ["--client", Fixtures.appOne])
        let accounts = try broker.object("getAccounts", ["clientId": Fixtures.appTwo])
        #expect(Self.status(accounts) == 9 && accounts["accounts"] == nil, "\(accounts)")
        let token = try broker.object("acquireTokenSilently", silent(Fixtures.appTwo, authority: idp.authority().url.absoluteString))
        #expect(Self.status(token) == 9 && token["brokerTokenResponse"] == nil, "\(token)")
        #expect(Self.usernames(try broker.object("getAccounts", ["clientId": Fixtures.appOne])) == [Fixtures.alice.username])
        let log = try broker.run(["broker", "--list-requests", "--json"])
        #expect(log.status == 0, "\(log.stderr)")
        let entries = try #require(try JSONSerialization.jsonObject(with: Data(log.stdout.utf8)) as? [[String: Any]], "\(log.stdout)")
        #expect(entries.count == 3)
        #expect(entries.allSatisfy { $0["uid"] as? Int == Int(getuid()) && ($0["pid"] as? Int ?? 0) > 0 && $0["channel"] as? String == "bus" })
        #expect(entries.filter { ($0["outcome"] as? String)?.hasPrefix("refused") == true }.count == 2)
        #expect(broker.log.contains("dbus-send[") && broker.log.contains("refused"), "\(broker.log)")
    }

    @Test("Malformed, oversized and wrong-typed request JSON gets a typed error reply (status 6) naming the field; the broker keeps serving")
    func badRequestsGetTypedErrors() async throws {
        defer { cli.cleanUp() }
        try await signIn(Fixtures.appOne)
        let broker = try RunningBroker(cli, bus: bus)
        let cases: [(String, String, String)] = [
            ("getAccounts", "{", "not a JSON object"),
            ("getAccounts", "[1, 2]", "not a JSON object"),
            ("getAccounts", #"{"clientId": 42}"#, "'clientId' must be a string"),
            ("getAccounts", "{}", "'clientId' is missing"),
            ("acquireTokenSilently", #"{"authParameters": "x"}"#, "'authParameters' must be an object"),
            ("acquireTokenSilently", #"{"authParameters": {"clientId": "c", "requestedScopes": "User.Read"}}"#, "requestedScopes' must be an array of strings"),
            ("acquireTokenSilently", #"{"authParameters": {"clientId": "c", "requestedScopes": [1]}}"#, "must be an array of strings"),
            ("acquireTokenSilently", #"{"authParameters": {"clientId": "c", "requestedScopes": ["User.Read"], "account": []}}"#, "'authParameters.account' must be an object"),
            ("removeAccount", #"{"clientId": "c"}"#, "'account' must name the account"),
            ("getAccounts", #"{"clientId": ""# + String(repeating: "a", count: 70_000) + #""}"#, "over the broker's limit"),
            ("getAccounts", String(repeating: "[", count: 5000), "not a JSON object"),
        ]
        for (method, json, said) in cases {
            let text = try broker.call(method, json)
            let reply = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "\(text)")
            let error = try #require(reply["error"] as? [String: Any], "\(method) \(json.prefix(80)): \(text)")
            #expect(error["status"] as? Int == 6 && error["tokencacheCode"] as? String == "invalidRequest", "\(text)")
            #expect((error["context"] as? String)?.contains(said) == true, "\(json.prefix(80)): \(text)")
        }
        #expect(Self.usernames(try broker.object("getAccounts", ["clientId": Fixtures.appOne])) == [Fixtures.alice.username], "still serving")
        #expect(broker.process.isRunning)
    }

    @Test("acquirePrtSsoCookie and generateSignedHttpRequest answer a typed not-supported error; getLinuxBrokerVersion names the provider")
    func unsupportedAndVersion() async throws {
        defer { cli.cleanUp() }
        let broker = try RunningBroker(cli, bus: bus)
        for method in ["acquirePrtSsoCookie", "generateSignedHttpRequest"] {
            let reply = try broker.object(method, ["account": ["username": Fixtures.alice.username], "ssoUrl": "https://login.microsoftonline.com/"])
            let error = try #require(reply["error"] as? [String: Any], "\(reply)")
            #expect(error["status"] as? Int == 9 && error["tokencacheCode"] as? String == "unsupportedFlow", "\(reply)")
        }
        let version = try broker.object("getLinuxBrokerVersion", ["msalCppVersion": "1.28.0"])
        #expect((version["linuxBrokerVersion"] as? String)?.isEmpty == false && version["provider"] as? String == "swift-tokencache", "\(version)")
    }

    @Test("A second broker on the same bus is refused (exit 1, naming the owner's name); --install refuses while the name is owned and writes nothing")
    func secondInstanceAndInstallRefused() async throws {
        defer { cli.cleanUp() }
        let broker = try RunningBroker(cli, bus: bus)
        let second = try broker.run(["broker"])
        #expect(second.status == 1 && second.stderr.contains("Another process owns com.microsoft.identity.broker1"), "\(second.stderr)")
        let install = try broker.run(["broker", "--install"])
        #expect(install.status == 1 && install.stderr.contains("owns com.microsoft.identity.broker1"), "\(install.stderr)")
        let serviceFile = cli.dataHome.appendingPathComponent("dbus-1/services/com.microsoft.identity.broker1.service")
        #expect(!FileManager.default.fileExists(atPath: serviceFile.path))
        #expect(broker.process.isRunning, "the first keeps serving")
    }

    @Test("--install writes the D-Bus service file and the systemd user unit when the name is free, --confirm included; refuses when Microsoft's broker is installed; --uninstall removes them")
    func installAndUninstall() async throws {
        defer { cli.cleanUp() }
        var environment = RunningBroker.environment(cli, bus)
        func run(_ arguments: [String]) throws -> ProcessOutput {
            try runProcess(RunningBroker.binary, arguments + ["--backend", cli.backend, "--group", cli.group], environment: environment)
        }
        let installed = try run(["broker", "--install", "--client", Fixtures.appOne, "--confirm"])
        #expect(installed.status == 0, "\(installed.stderr)")
        let serviceFile = cli.dataHome.appendingPathComponent("dbus-1/services/com.microsoft.identity.broker1.service")
        let unitFile = cli.dataHome.appendingPathComponent("config/systemd/user/tokencache-broker.service")
        let service = try String(contentsOf: serviceFile, encoding: .utf8)
        #expect(service.contains("Name=com.microsoft.identity.broker1") && service.contains("broker --client \(Fixtures.appOne) --confirm --backend file --group \(cli.group)"), "\(service)")
        #expect(service.contains("SystemdService=tokencache-broker.service"))
        let unit = try String(contentsOf: unitFile, encoding: .utf8)
        #expect(unit.contains("Type=dbus") && unit.contains("BusName=com.microsoft.identity.broker1"), "\(unit)")
        let removed = try run(["broker", "--uninstall"])
        #expect(removed.status == 0 && !FileManager.default.fileExists(atPath: serviceFile.path) && !FileManager.default.fileExists(atPath: unitFile.path))
        // Microsoft's broker's service file in a system data directory.
        let system = cli.dataHome.appendingPathComponent("microsoft/dbus-1/services")
        try FileManager.default.createDirectory(at: system, withIntermediateDirectories: true)
        try Data("[D-BUS Service]\nName=com.microsoft.identity.broker1\n".utf8).write(to: system.appendingPathComponent("com.microsoft.identity.broker1.service"))
        environment["XDG_DATA_DIRS"] = cli.dataHome.appendingPathComponent("microsoft").path
        let refused = try run(["broker", "--install"])
        #expect(refused.status == 1 && refused.stderr.contains("Microsoft's identity broker is installed"), "\(refused.stderr)")
        #expect(!FileManager.default.fileExists(atPath: serviceFile.path))
    }
}
