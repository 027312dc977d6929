import Foundation
import Testing
@testable import TokenCache
import TokenCacheTestIdentityProvider
import TokenCacheTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// A process started as a user in the background, whose output is read until it says it is ready.
final class UserProcess: @unchecked Sendable {
    // @unchecked: started in init, then only stopped once.
    let process = Process()
    private let output = Pipe()
    private(set) var said = ""

    /// Starts `executable ARGUMENTS` as `user` (setpriv) and reads its standard output and error
    /// until they hold `ready`; throws what it said when it exits before.
    convenience init(as user: KeeperTestUser, _ executable: String, _ arguments: [String], environment: [String: String], ready: String) throws {
        try self.init(as: user, executable, arguments, environment: environment) { $0.contains(ready) }
    }

    /// Starts `executable ARGUMENTS` as `user` (setpriv) and reads its standard output and error
    /// until `isReady` says what they hold so far is enough; throws what it said when it exits before.
    init(as user: KeeperTestUser, _ executable: String, _ arguments: [String], environment: [String: String], isReady: (String) -> Bool) throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        process.arguments = ["--reuid", "\(user.uid)", "--regid", "\(user.gid)", "--init-groups", "--", executable] + arguments
        process.environment = user.environment(environment)
        process.standardOutput = output
        process.standardError = output
        process.standardInput = FileHandle.nullDevice
        try process.run()
        while !isReady(said), let byte = try output.fileHandleForReading.read(upToCount: 1), !byte.isEmpty {
            said += String(decoding: byte, as: UTF8.self)
        }
        guard isReady(said) else { throw KeeperTestError("\(executable) did not start: \(said)") }
    }

    /// Sends `signal` and waits until it is gone. SIGKILL by default: a child started from a test
    /// thread inherits its blocked signals, so only a program that waits for SIGTERM (the broker) hears it.
    func stop(_ signal: Int32 = SIGKILL) {
        guard process.isRunning else { return }
        kill(process.processIdentifier, signal)
        process.waitUntilExit()
    }
}

/// A session bus of a user's own (`dbus-daemon --session --nofork`), stopped by ``stop()``.
struct UserBus {
    let address: String
    private let daemon: UserProcess

    init(of user: KeeperTestUser) throws {
        // Ready once it printed its address (`unix:…,guid=HEX` and a newline).
        daemon = try UserProcess(as: user, "/usr/bin/dbus-daemon", ["--session", "--nofork", "--print-address=1"], environment: [:]) { said in
            said.split(separator: "\n", omittingEmptySubsequences: false).dropLast().contains { $0.hasPrefix("unix:") && $0.contains("guid=") }
        }
        address = try #require(daemon.said.split(separator: "\n").first { $0.hasPrefix("unix:") }).description
    }

    func stop() { daemon.stop() }
}

/// `tokencache broker` forwarding to the token keeper (#62, docs/KEEPER.md "Through the identity
/// broker"): real users, the keeper as root, each user's own session bus and broker, and
/// `gdbus` (a root-owned executable, named in the keeper's apps files) as the broker-enabled app
/// calling the broker's D-Bus methods as MSAL's runtime calls them. The issue's MSAL Python run
/// through the same path is in Tests/BrokerEndToEnd (scripts/test-broker.sh).
@Suite("Token keeper through the identity broker", .serialized, .enabled(if: getuid() == 0 || TestEnvironment.isCI))
struct KeeperBrokerForwardingTests {
    init() throws {
        try #require(getuid() == 0, "the keeper's tests need root (useradd, setpriv)")
        for tool in ["/usr/bin/setpriv", "/usr/sbin/useradd", "/usr/bin/dbus-daemon", "/usr/bin/gdbus", "/usr/bin/dbus-send", "/usr/bin/python3"] {
            try #require(FileManager.default.isExecutableFile(atPath: tool), "\(tool) is needed")
        }
    }

    static let gdbus = "/usr/bin/gdbus"

    /// One broker method called by `executable` (gdbus, or dbus-send) as `user` on `bus`: the reply's JSON text, or the tool's error.
    static func call(_ method: String, _ request: String, as user: KeeperTestUser, on bus: UserBus, executable: String = gdbus,
                     environment: [String: String] = [:]) throws -> String {
        let arguments = executable == gdbus
            ? ["call", "--session", "--dest", BrokerWire.busName, "--object-path", BrokerWire.objectPath, "--method", "\(BrokerWire.interfaceName).\(method)",
               "0.0", UUID().uuidString, request]
            : ["--session", "--print-reply", "--dest=\(BrokerWire.busName)", BrokerWire.objectPath, "\(BrokerWire.interfaceName).\(method)",
               "string:0.0", "string:\(UUID().uuidString)", "string:\(request)"]
        let output = try user.run(executable, arguments, environment: ["DBUS_SESSION_BUS_ADDRESS": bus.address].merging(environment) { $1 })
        return output.stdout + output.stderr
    }

    /// acquireTokenSilently's request for app one at the scenario's identity provider (the authority Alice signed in at).
    static func silentRequest(_ scenario: KeeperScenario, account: String? = nil) throws -> String {
        let named = account.map { #", "account": {"homeAccountId": "\#($0)"}"# } ?? ""
        let authority = scenario.idp.authority().url.absoluteString
        return #"{"authParameters": {"clientId": "\#(Fixtures.appOne)", "authority": "\#(authority)", "requestedScopes": ["User.Read"]\#(named)}}"#
    }

    static let accountsRequest = #"{"clientId": "\#(Fixtures.appOne)", "redirectUri": "\#(Fixtures.appOne)"}"#

    /// Alice's own bus and broker, forwarding to the scenario's keeper, with gdbus named in its apps files.
    static func alicesSession(_ scenario: KeeperScenario) throws -> (UserBus, UserProcess) {
        try scenario.allow(gdbus)
        let bus = try UserBus(of: scenario.alice)
        do {
            return (bus, try broker(scenario, as: scenario.alice, busAddress: bus.address))
        } catch {
            bus.stop()
            throw error
        }
    }

    /// The broker as `user` on `bus`, forwarding to the scenario's keeper.
    static func broker(_ scenario: KeeperScenario, as user: KeeperTestUser, busAddress: String) throws -> UserProcess {
        try UserProcess(as: user, scenario.app, ["broker"],
                        environment: ["DBUS_SESSION_BUS_ADDRESS": busAddress, "TOKENCACHE_AGENT_SOCK": scenario.socket, "TOKENCACHE_AGENT_UID": "0"],
                        ready: "on the session bus")
    }

    @Test("An allowed app's broker calls reach the keeper through Alice's `tokencache broker`: getAccounts lists her account and a silent call gets her token with its ID token and account (refreshed by the keeper), never a refresh token; the keeper's audit names the app via the broker")
    func allowedAppThroughTheBroker() async throws {
        let scenario = try await KeeperScenario.withAliceEnrolled(brokerForwarding: true)
        defer { scenario.cleanUp() }
        let (bus, broker) = try Self.alicesSession(scenario)
        defer { broker.stop(SIGTERM); bus.stop() }
        #expect(broker.said.contains("token keeper"), "\(broker.said)")

        let accounts = try Self.call("getAccounts", Self.accountsRequest, as: scenario.alice, on: bus)
        #expect(accounts.contains(Fixtures.alice.username) && accounts.contains(Fixtures.alice.homeAccountID), "\(accounts)\n\(scenario.log)")

        let token = try Self.call("acquireTokenSilently", try Self.silentRequest(scenario, account: Fixtures.alice.homeAccountID), as: scenario.alice, on: bus)
        let reply = try Self.brokerReply(token)
        let response = try #require(reply["brokerTokenResponse"] as? [String: Any], "\(token)\n\(scenario.log)")
        #expect((response["accessToken"] as? String)?.isEmpty == false)
        #expect((response["idToken"] as? String)?.split(separator: ".", omittingEmptySubsequences: false).count == 3, "the ID token a reply must carry")
        #expect((response["account"] as? [String: Any])?["homeAccountId"] as? String == Fixtures.alice.homeAccountID)
        #expect(response["clientInfo"] is String)
        #expect(try await scenario.idp.stats().grants.count == 1, "the keeper refreshed the stale token once, at the issuer")
        #expect(!token.contains(scenario.refreshToken) && !broker.said.contains(scenario.refreshToken) && !scenario.homeFiles(scenario.alice).contains(scenario.refreshToken))
        #expect(scenario.log.contains("\(Self.gdbus) (pid") && scenario.log.contains("via broker pid \(broker.process.processIdentifier): forward token")
                && scenario.log.contains("-> granted"), "\(scenario.log)")
        // The keeper's accounts are not the app's to remove, and a sign-in through the keeper is not built: both say what to do.
        let removed = try Self.call("removeAccount", #"{"clientId": "\#(Fixtures.appOne)", "account": {"homeAccountId": "\#(Fixtures.alice.homeAccountID)"}}"#,
                                    as: scenario.alice, on: bus)
        #expect(removed.contains("The token keeper holds this account") && removed.contains("unsupportedFlow"), "\(removed)")
        let interactive = try Self.call("acquireTokenInteractively", try Self.silentRequest(scenario, account: "nobody@example.com"), as: scenario.alice, on: bus)
        #expect(interactive.contains("interactionRequired") && interactive.contains("tokencache keeper --enroll") && !interactive.contains("accessToken"),
                "\(interactive)")
        let audit = try scenario.alice.run(scenario.app, ["keeper", "--log", "--socket", scenario.socket, "--json"])
        #expect(audit.stdout.contains("\(Self.gdbus) via broker pid \(broker.process.processIdentifier)"), "\(audit.stdout)\(audit.stderr)")
    }

    @Test("A keeper started without --broker-forwarding takes no forwarded call: the app gets the typed reason naming the option, and nothing is served")
    func forwardingIsOffByDefault() async throws {
        let scenario = try await KeeperScenario.withAliceEnrolled()
        defer { scenario.cleanUp() }
        let (bus, broker) = try Self.alicesSession(scenario)
        defer { broker.stop(SIGTERM); bus.stop() }
        let token = try Self.call("acquireTokenSilently", try Self.silentRequest(scenario), as: scenario.alice, on: bus)
        #expect(token.contains("unsupportedFlow") && token.contains("--broker-forwarding") && !token.contains("accessToken"), "\(token)")
        #expect(try await scenario.idp.stats().grants.isEmpty)
    }

    @Test("Refused through the broker, with the keeper's typed reason: an app no apps file names, an allowed app started with LD_PRELOAD, a connection made by another process before the allowed app was exec'd in its place, any app while the broker hears the bus through a relay that is not a bus daemon, and a forward sent by a program other than the keeper's; Bob's own broker gives him nothing of Alice's")
    func refusalsThroughTheBroker() async throws {
        let scenario = try await KeeperScenario.withAliceEnrolled(brokerForwarding: true)
        defer { scenario.cleanUp() }
        let (bus, first) = try Self.alicesSession(scenario)
        var broker = first
        defer { broker.stop(SIGTERM); bus.stop() }

        // dbus-send is in no apps file: the runtime's IncorrectConfiguration (9) with the keeper's reason.
        let unlisted = try Self.call("acquireTokenSilently", try Self.silentRequest(scenario), as: scenario.alice, on: bus, executable: "/usr/bin/dbus-send")
        #expect(unlisted.contains(#""status":9"#) && unlisted.contains("/usr/bin/dbus-send is not an app of"), "\(unlisted)")
        let preloaded = try Self.call("acquireTokenSilently", try Self.silentRequest(scenario), as: scenario.alice, on: bus,
                                      environment: ["LD_PRELOAD": "/lib/x86_64-linux-gnu/libc.so.6"])
        #expect(preloaded.contains("started with LD_PRELOAD") && !preloaded.contains("accessToken"), "\(preloaded)")

        // A forward sent by another program of Alice's (python3) naming the allowed app: refused before any app is looked at.
        let forged = try scenario.alice.run("/usr/bin/python3", ["-c", Self.forgedForward, scenario.socket, Fixtures.appOne])
        #expect(forged.stdout.contains("accessDenied") && forged.stdout.contains("only the keeper's own program"), "\(forged.stdout)\(forged.stderr)")

        // A process of Alice's connects to the bus, then the allowed app is started in its place
        // (exec keeps the pid the bus credits the connection to) while a child keeps the connection
        // and calls: the daemon's connection credited to gdbus is held by another process.
        let execAfterConnect = try scenario.alice.run("/usr/bin/python3", ["-c", Self.execAfterConnect, bus.address, try Self.silentRequest(scenario)],
                                                      environment: ["DBUS_SESSION_BUS_ADDRESS": bus.address])
        #expect(execAfterConnect.stdout.contains("not by the app alone") && !execAfterConnect.stdout.contains("accessToken"),
                "\(execAfterConnect.stdout)\(execAfterConnect.stderr)\n\(scenario.log)")

        // The broker hears the bus through a relay of Alice's (python3, not a bus daemon): nothing is served through it.
        broker.stop(SIGTERM)
        let relayPath = scenario.alice.home + "/relay.sock"
        let relay = try UserProcess(as: scenario.alice, "/usr/bin/python3", ["-c", Self.relay, relayPath, bus.address], environment: [:], ready: "ready")
        defer { relay.stop() }
        broker = try Self.broker(scenario, as: scenario.alice, busAddress: "unix:path=\(relayPath)")
        let relayed = try Self.call("acquireTokenSilently", try Self.silentRequest(scenario), as: scenario.alice, on: bus)
        #expect(relayed.contains("the broker's bus is not verified") && relayed.contains("not a bus daemon as installed") && !relayed.contains("accessToken"),
                "\(relayed)\n\(scenario.log)")
        broker.stop(SIGTERM)

        // Bob, with nothing enrolled, on his own bus and broker: no account, no token, nothing of Alice's.
        let bobsBus = try UserBus(of: scenario.bob)
        defer { bobsBus.stop() }
        let bobsBroker = try Self.broker(scenario, as: scenario.bob, busAddress: bobsBus.address)
        defer { bobsBroker.stop(SIGTERM) }
        let bobsAccounts = try Self.call("getAccounts", Self.accountsRequest, as: scenario.bob, on: bobsBus)
        let bobsToken = try Self.call("acquireTokenSilently", try Self.silentRequest(scenario, account: Fixtures.alice.homeAccountID), as: scenario.bob, on: bobsBus)
        #expect(!bobsAccounts.contains(Fixtures.alice.username) && !bobsToken.contains("accessToken") && !bobsToken.contains(Fixtures.alice.username),
                "\(bobsAccounts)\(bobsToken)")
        #expect(bobsToken.contains("holds no group"), "\(bobsToken)")
        #expect(try await scenario.idp.stats().grants.isEmpty, "nothing was refreshed for a refused call")
    }

    /// The JSON inside gdbus's `('…',)`.
    static func brokerReply(_ output: String) throws -> [String: Any] {
        guard let start = output.firstIndex(of: "{"), let end = output.lastIndex(of: "}") else { throw KeeperTestError("no reply: \(output)") }
        let object = try JSONSerialization.jsonObject(with: Data(output[start...end].utf8))
        return try #require(object as? [String: Any])
    }

    /// Sends one framed forward request to the keeper socket argv[1] and prints the answer.
    static let forgedForward = #"""
        import json, os, socket, struct, sys
        body = json.dumps({"op": "forward", "inner": "token", "app_pid": os.getppid(), "app_started": 1, "client_id": sys.argv[2], "scopes": ["User.Read"]}).encode()
        s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(struct.pack(">I", len(body)) + body)
        head = s.recv(4, socket.MSG_WAITALL); print(s.recv(struct.unpack(">I", head)[0], socket.MSG_WAITALL).decode())
        """#

    /// Connects to the bus at argv[1]; the connecting process then runs `gdbus monitor` (an allowed
    /// app) by exec, while a child it forked calls acquireTokenSilently (argv[2]) on the connection
    /// once the exec happened (the close-on-exec pipe's end) and prints the reply.
    static let execAfterConnect = #"""
        import os, socket, sys
        address = dict(part.split("=", 1) for part in sys.argv[1].split(":", 1)[1].split(","))
        target = address["path"] if "path" in address else "\0" + address["abstract"]
        connection = socket.socket(socket.AF_UNIX); connection.connect(target)
        read_end, write_end = os.pipe()
        app = os.getpid()
        if os.fork() != 0:
            os.close(read_end); connection.set_inheritable(False)
            os.execv("/usr/bin/gdbus", ["gdbus", "monitor", "--session", "--dest", "org.freedesktop.DBus"])
        os.close(write_end); os.read(read_end, 1)  # end of file: the parent ran exec
        from gi.repository import Gio, GLib
        stream = Gio.Socket.new_from_fd(connection.detach()).connection_factory_create_connection()
        bus = Gio.DBusConnection.new_sync(stream, None, Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION, None, None)
        try:
            reply = bus.call_sync("com.microsoft.identity.broker1", "/com/microsoft/identity/broker1", "com.microsoft.identity.Broker1", "acquireTokenSilently",
                                  GLib.Variant("(sss)", ("0.0", "exec-after-connect", sys.argv[2])), GLib.VariantType("(s)"), Gio.DBusCallFlags.NONE, 60000, None)
            print(reply.unpack()[0])
        finally:
            os.kill(app, 9)
        """#

    /// Relays every connection to argv[1] to the bus at the D-Bus address argv[2] (path= or abstract=).
    static let relay = #"""
        import os, socket, sys, threading
        address = dict(part.split("=", 1) for part in sys.argv[2].split(":", 1)[1].split(","))
        target = address["path"] if "path" in address else "\0" + address["abstract"]
        server = socket.socket(socket.AF_UNIX); server.bind(sys.argv[1]); server.listen(8)
        print("ready", flush=True)
        def pump(source, sink):
            while True:
                data = source.recv(65536)
                if not data:
                    sink.shutdown(socket.SHUT_WR); return
                sink.sendall(data)
        while True:
            client, _ = server.accept()
            upstream = socket.socket(socket.AF_UNIX); upstream.connect(target)
            threading.Thread(target=pump, args=(client, upstream), daemon=True).start()
            threading.Thread(target=pump, args=(upstream, client), daemon=True).start()
        """#
}

extension KeeperScenario {
    /// Names `executable` in the keeper's apps files with this scenario's group and app one.
    func allow(_ executable: String) throws {
        let file = apps + "/\(URL(fileURLWithPath: executable).lastPathComponent).json"
        try Data(#"{"executable": "\#(executable)", "groups": ["\#(group)"], "clientIDs": ["\#(Fixtures.appOne)"]}"#.utf8).write(to: URL(fileURLWithPath: file))
        chmod(file, 0o644)
    }
}
