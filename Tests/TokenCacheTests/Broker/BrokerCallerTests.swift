import Foundation
import Synchronization
import Testing
@testable import TokenCache
@testable import TokenCacheCore
import TokenCacheAgent
@testable import TokenCacheBroker
import TokenCacheTestSupport
import TokenCacheTestIdentityProvider

/// Issue #57 item 1: a client ID is a claim, not an identity. The attackers are real processes on
/// a private bus: `dbus-send` on the host naming a family client that never signed in here, and
/// `dbus-send` under bubblewrap with a `/.flatpak-info` of its own, as Flatpak runs an app.
@Suite("The broker's callers: identified, and served only the client IDs they hold or were allowed", .harness)
struct BrokerCallerTests {
    let idp: FakeIdentityProvider
    let cli: CLI
    let bus: PrivateBus

    init() throws {
        idp = try FakeIdentityProvider()
        cli = try CLI(backend: "file")
        bus = try PrivateBus()
    }

    /// Alice signed in to appOne at the local provider with a family refresh token (FOCI "1"):
    /// any client of the family could redeem it, were the broker to let it.
    func signInWithFamily() async throws {
        var response = Fixtures.response(for: Fixtures.alice, scope: "User.Read", foci: "1", tag: "callers")
        response["refresh_token"] = "rt-broker-family"
        let saved = try cli.run(["save", "--client", Fixtures.appOne, "--authority", idp.authority().url.absoluteString, "--scopes", "User.Read"],
                                input: Fixtures.json(response))
        try #require(saved.status == 0, "\(saved.stderr)")
        try await idp.seed(refreshToken: "rt-broker-family", user: Fixtures.alice, clientID: Fixtures.appOne, family: "1")
    }

    func silent(_ client: String) -> [String: Any] {
        ["authParameters": [
            "authority": idp.authority().url.absoluteString, "authorizationType": 1, "clientId": client,
            "account": ["homeAccountId": Fixtures.alice.homeAccountID, "username": Fixtures.alice.username, "environment": idp.host],
            "requestedScopes": ["User.Read"], "username": Fixtures.alice.username,
        ] as [String: Any]]
    }

    static func usernames(_ reply: [String: Any]) -> [String] {
        ((reply["accounts"] as? [[String: Any]]) ?? []).compactMap { $0["username"] as? String }
    }

    static func error(_ reply: [String: Any]) -> (status: Int?, context: String) {
        let error = reply["error"] as? [String: Any]
        return (error?["status"] as? Int, error?["context"] as? String ?? "")
    }

    /// A file with a Flatpak app's instance information, as `flatpak run` writes it.
    func flatpakInfo(_ appID: String) throws -> URL {
        let file = cli.dataHome.appendingPathComponent("flatpak-info-\(appID)")
        let text = "[Application]\nname=\(appID)\nruntime=runtime/org.freedesktop.Platform/x86_64/23.08\n\n[Instance]\ninstance-id=\(getpid())\n"
        try Data(text.utf8).write(to: file)
        return file
    }

    /// METHOD called by `dbus-send` in bubblewrap with the app's `/.flatpak-info` at its root (a
    /// root of its own: the host's /usr and /etc read-only, /tmp for the bus), as Flatpak runs it.
    func sandboxedCall(_ appID: String, _ method: String, _ json: [String: Any]) throws -> [String: Any] {
        let request = String(decoding: try JSONSerialization.data(withJSONObject: json), as: UTF8.self)
        let text = try sandboxedSend(appID, ["com.microsoft.identity.Broker1.\(method)", "string:0.0", "string:\(UUID().uuidString)", "string:\(request)"])
        return try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "\(text)")
    }

    /// `dbus-send` of MEMBER and ARGUMENTS to the broker's object, in the app's sandbox; its literal reply.
    func sandboxedSend(_ appID: String, _ call: [String]) throws -> String {
        var binds = ["--bind", "/tmp", "/tmp"]
        if let range = bus.address.range(of: "unix:path=") {
            let path = String(bus.address[range.upperBound...].prefix { $0 != "," })
            let directory = (path as NSString).deletingLastPathComponent
            if !directory.hasPrefix("/tmp") { binds += ["--bind", directory, directory] }
        }
        let sandbox = ["--tmpfs", "/", "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin",
                       "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "--ro-bind", "/etc", "/etc",
                       "--proc", "/proc", "--dev", "/dev"] + binds + ["--ro-bind", try flatpakInfo(appID).path, "/.flatpak-info", "--die-with-parent"]
        let output = try runProcess("/usr/bin/bwrap", sandbox + [
            "/usr/bin/dbus-send", "--session", "--print-reply=literal", "--reply-timeout=180000", "--dest=com.microsoft.identity.broker1",
            "/com/microsoft/identity/broker1",
        ] + call, environment: RunningBroker.environment(cli, bus))
        try #require(output.status == 0, "bwrap dbus-send failed: \(output.stderr)")
        return output.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test("A same-user caller naming a family client that never signed in here gets no accounts and no token, and nothing is redeemed; allowed with --client, the same call is served")
    func newFamilyClientRefusedUntilAllowed() async throws {
        defer { cli.cleanUp() }
        try await signInWithFamily()
        let broker = try RunningBroker(cli, bus: bus)
        // appOne signed in here: its own calls are served.
        #expect(Self.usernames(try broker.object("getAccounts", ["clientId": Fixtures.appOne])) == [Fixtures.alice.username])
        // The attacker names appTwo, of the same family, new here: the family's account is not listed…
        let listed = try broker.object("getAccounts", ["clientId": Fixtures.appTwo, "redirectUri": Fixtures.appTwo])
        #expect(Self.usernames(listed).isEmpty && listed["error"] == nil, "\(listed)")
        // …and the family refresh token is not redeemed for it.
        let token = try broker.object("acquireTokenSilently", silent(Fixtures.appTwo))
        #expect(Self.error(token).status == 9 && token["brokerTokenResponse"] == nil, "\(token)")
        #expect(Self.error(token).context.contains("has not signed in here") && Self.error(token).context.contains("--client \(Fixtures.appTwo)"), "\(token)")
        #expect(try await idp.stats().grants.isEmpty, "nothing was redeemed for the new client")
        // The log names the caller by its executable, not by what it calls itself.
        #expect(broker.log.contains("/usr/bin/dbus-send[") && broker.log.contains("refused"), "\(broker.log)")
        broker.stop()

        // The user allowed it: the family's refresh token is redeemed for it (one grant).
        let allowed = try RunningBroker(cli, bus: bus, ["--client", Fixtures.appOne, "--client", Fixtures.appTwo])
        #expect(Self.usernames(try allowed.object("getAccounts", ["clientId": Fixtures.appTwo])) == [Fixtures.alice.username])
        let served = try allowed.object("acquireTokenSilently", silent(Fixtures.appTwo))
        #expect((served["brokerTokenResponse"] as? [String: Any])?["accessToken"] as? String != nil, "\(served) \(allowed.log)")
        #expect(try await idp.stats().grants.count == 1)
    }

    @Test("A Flatpak-like caller (bubblewrap, its own /.flatpak-info) gets only the client IDs --app allows its app ID: not the host app's, not another app's; the log names its app ID and is not given to it",
          .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/bwrap")))
    func sandboxedAppGetsOnlyItsClients() async throws {
        defer { cli.cleanUp() }
        try await signInWithFamily()
        let broker = try RunningBroker(cli, bus: bus, ["--app", "org.example.Allowed=\(Fixtures.appTwo)"])
        // The host app's client ID, named from the sandbox: refused, although it is held here.
        let hostClient = try sandboxedCall("org.example.Allowed", "getAccounts", ["clientId": Fixtures.appOne])
        #expect(Self.error(hostClient).status == 9 && hostClient["accounts"] == nil, "\(hostClient)")
        #expect(Self.error(hostClient).context.contains("--app org.example.Allowed=\(Fixtures.appOne)"), "\(hostClient)")
        let hostToken = try sandboxedCall("org.example.Allowed", "acquireTokenSilently", silent(Fixtures.appOne))
        #expect(Self.error(hostToken).status == 9 && hostToken["brokerTokenResponse"] == nil, "\(hostToken)")
        // Another sandboxed app naming the allowed app's client: refused.
        let other = try sandboxedCall("org.example.Other", "acquireTokenSilently", silent(Fixtures.appTwo))
        #expect(Self.error(other).status == 9 && other["brokerTokenResponse"] == nil, "\(other)")
        #expect(try await idp.stats().grants.isEmpty, "nothing redeemed for a refused caller")
        // Its own client: served (the family's account, redeemed for it once).
        #expect(Self.usernames(try sandboxedCall("org.example.Allowed", "getAccounts", ["clientId": Fixtures.appTwo])) == [Fixtures.alice.username])
        let own = try sandboxedCall("org.example.Allowed", "acquireTokenSilently", silent(Fixtures.appTwo))
        #expect((own["brokerTokenResponse"] as? [String: Any])?["accessToken"] as? String != nil, "\(own) \(broker.log)")
        #expect(try await idp.stats().grants.count == 1)
        #expect(broker.log.contains("flatpak:org.example.Allowed[") && broker.log.contains("flatpak:org.example.Other["), "\(broker.log)")
        // The request log names every app's calls: not for a sandboxed app; the host's CLI reads it.
        #expect(try sandboxedSend("org.example.Allowed", ["org.swift_tokencache.Broker.ListRequests"]) == "[]")
        let log = try broker.run(["broker", "--list-requests", "--json"])
        #expect(log.status == 0 && log.stdout.contains("flatpak:org.example.Other"), "\(log.stdout)\(log.stderr)")
        // The host is still served its own client.
        #expect(Self.usernames(try broker.object("getAccounts", ["clientId": Fixtures.appOne])) == [Fixtures.alice.username])
    }

    @Test("A broker without CAP_SYS_PTRACE (as a user's broker runs) still gives `broker --list-requests` (a non-dumpable CLI) the log; a caller it cannot look at is refused, not taken for a host program",
          .enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")))
    func nonDumpableCallers() async throws {
        defer { cli.cleanUp() }
        try await signInWithFamily()
        // The broker and its callers without CAP_SYS_PTRACE: root then looks at root's processes
        // under the rules a user's broker has for the user's (dumpable: yes; non-dumpable: no).
        let capped = ["/usr/bin/setpriv", "--bounding-set", "-sys_ptrace", "--inh-caps", "-sys_ptrace"]
        let broker = try RunningBroker(cli, bus: bus, launcher: capped)
        let environment = RunningBroker.environment(cli, bus)
        let listed = try runProcess(capped[0], Array(capped.dropFirst()) + [
            "/usr/bin/dbus-send", "--session", "--print-reply=literal", "--dest=com.microsoft.identity.broker1", "/com/microsoft/identity/broker1",
            "com.microsoft.identity.Broker1.getAccounts", "string:0.0", "string:x", "string:{\"clientId\": \"\(Fixtures.appOne)\"}",
        ], environment: environment)
        #expect(listed.status == 0 && listed.stdout.contains(Fixtures.alice.username), "a dumpable caller is identified: \(listed.stdout)\(listed.stderr) \(broker.log)")
        let log = try runProcess(capped[0], Array(capped.dropFirst()) + [RunningBroker.binary, "broker", "--list-requests", "--json",
                                                                         "--backend", cli.backend, "--group", cli.group], environment: environment)
        #expect(log.status == 0 && log.stdout.contains("/usr/bin/dbus-send"), "\(log.stdout)\(log.stderr)")
        // A caller that makes itself non-dumpable closes its /proc/PID/root and exe to the broker:
        // it could be a sandboxed app hiding its /.flatpak-info, so it is refused (status 9).
        let script = """
            import ctypes, json, sys
            from gi.repository import Gio, GLib
            assert ctypes.CDLL(None).prctl(4, 0, 0, 0, 0) == 0  # PR_SET_DUMPABLE 0
            bus = Gio.bus_get_sync(Gio.BusType.SESSION, None)
            reply = bus.call_sync("com.microsoft.identity.broker1", "/com/microsoft/identity/broker1", "com.microsoft.identity.Broker1",
                                  "getAccounts", GLib.Variant("(sss)", ("0.0", "x", json.dumps({"clientId": sys.argv[1]}))),
                                  GLib.VariantType("(s)"), Gio.DBusCallFlags.NONE, 60000, None)
            print(reply.unpack()[0])
            """
        let hidden = try runProcess(capped[0], Array(capped.dropFirst()) + ["/usr/bin/python3", "-c", script, Fixtures.appOne], environment: environment)
        try #require(hidden.status == 0, "\(hidden.stderr)")
        let reply = try #require(try JSONSerialization.jsonObject(with: Data(hidden.stdout.utf8)) as? [String: Any], "\(hidden.stdout)")
        #expect(Self.error(reply).status == 9 && Self.error(reply).context.contains("cannot tell which app is calling"), "\(reply)")
    }

    @Test("Without --authority, an interactive sign-in at a host that issued none of the group's accounts is refused (status 9) before any browser opens")
    func interactiveAtUnknownHostRefused() async throws {
        defer { cli.cleanUp() }
        let broker = try RunningBroker(cli, bus: bus, environment: ["BROWSER": "/bin/false"])
        let reply = try broker.object("acquireTokenInteractively", ["authParameters": [
            "authority": "http://localhost:\(idp.port)/\(Fixtures.tenantA)", "authorizationType": 6, "clientId": Fixtures.appOne,
            "requestedScopes": ["User.Read"], "username": Fixtures.alice.username,
        ] as [String: Any]])
        #expect(Self.error(reply).status == 9 && Self.error(reply).context.contains("--authority"), "\(reply)")
        #expect(try await idp.signInStats().authorize_requests.isEmpty)
    }
}

/// The broker's identification and limits, in process.
@Suite("Broker caller identity and limits")
struct BrokerCallerUnitTests {
    @Test("A .flatpak-info's [Application] name is the app ID; a malformed one names none")
    func flatpakInfoParsed() {
        #expect(CallerIdentity.flatpakAppID("[Application]\nname=org.example.App\nruntime=x\n[Instance]\nname=evil.App\n") == "org.example.App")
        #expect(CallerIdentity.flatpakAppID("[Instance]\nname=org.example.App\n") == nil)
        #expect(CallerIdentity.flatpakAppID("[Application]\nname=noDots\n") == nil)
        #expect(CallerIdentity.flatpakAppID("[Application]\nname=org..x\n") == nil)
        #expect(CallerIdentity.flatpakAppID("[Application]\nname=org.ex ample.x\n") == nil)
    }

    @Test("A snap is named by its AppArmor label or its cgroup scope; anything else names none")
    func snapParsed() {
        #expect(CallerIdentity.snapName(label: "snap.firefox.firefox (enforce)") == "firefox")
        #expect(CallerIdentity.snapName(label: "unconfined") == nil)
        #expect(CallerIdentity.snapName(label: "snap.Bad_Name.app (enforce)") == nil)
        #expect(CallerIdentity.snapName(cgroup: "0::/user.slice/user-1000.slice/user@1000.service/app.slice/snap.code.code-1234.scope\n") == "code")
        #expect(CallerIdentity.snapName(cgroup: "0::/user.slice/user-1000.slice/session-2.scope\n") == nil)
    }

    @Test("This process is identified by its executable (not its comm), a gone pid as unknown")
    func identifiesHostProcess() throws {
        let executable = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        #expect(CallerIdentity.identify(pid: UInt32(getpid())) == .host(executable: executable))
        #expect(CallerIdentity.identify(pid: nil) == .unknown(reason: "the bus named no process"))
        if case .unknown = CallerIdentity.identify(pid: UInt32(Int32.max)) {} else { Issue.record("a pid no process has is unknown") }
    }

    static let host = CallerIdentity.host(executable: "/usr/bin/test-app")

    static func request(_ client: String, interactive: Bool = false) -> String {
        var parameters: [String: Any] = ["clientId": client, "requestedScopes": ["User.Read"], "account": ["username": Fixtures.alice.username],
                                         "authority": Fixtures.authority().url.absoluteString]
        if interactive { (parameters["account"], parameters["username"]) = (NSNull(), Fixtures.bob.username) }
        return String(decoding: try! JSONSerialization.data(withJSONObject: ["authParameters": parameters]), as: UTF8.self)
    }

    static func object(_ reply: String) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(reply.utf8)) as? [String: Any]) ?? [:]
    }

    /// A service whose `--confirm` question waits until the test answers: calls stay in flight.
    final class HeldQuestions: Sendable {
        let asked: AsyncStream<String>
        private let continuation: AsyncStream<String>.Continuation
        /// The answer once given, and the questions waiting for it (each woken by its semaphore).
        private let state = Mutex<(answer: Bool?, waiting: [DispatchSemaphore])>((nil, []))
        init() { (asked, continuation) = AsyncStream.makeStream() }
        /// Blocks, as a person's answer does, until ``answerAll(_:)``.
        func confirmation(_ question: String) -> Bool {
            let wake = DispatchSemaphore(value: 0)
            let answer = state.withLock { state -> Bool? in
                if state.answer == nil { state.waiting.append(wake) }
                return state.answer
            }
            continuation.yield(question)
            if let answer { return answer }
            wake.wait()
            return state.withLock { $0.answer! }
        }
        /// Answers every question asked and to come.
        func answerAll(_ answer: Bool) {
            let waiting = state.withLock { state in
                state.answer = answer
                defer { state.waiting = [] }
                return state.waiting
            }
            waiting.forEach { $0.signal() }
        }
    }

    @Test("A sender gets 8 calls in flight (BrokerService.callsPerSender); one more is refused overloaded at once while other senders are answered")
    func callsBoundedPerSender() async throws {
        let store = AccountStore(backend: InMemoryBackend())
        _ = try store.save(responseJSON: Fixtures.json(Fixtures.response(for: Fixtures.alice, scope: "User.Read", foci: nil)),
                           clientID: Fixtures.appOne, authority: Fixtures.authority(), scopes: ["User.Read"])
        let held = HeldQuestions()
        let service = BrokerService(store: store, policy: AgentPolicy(), version: "test", confirmation: held.confirmation)
        let caller = BrokerCaller(sender: ":1.5", pid: 1, uid: getuid(), identity: Self.host)
        try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<BrokerService.callsPerSender {
                group.addTask { await service.handle(.acquireTokenSilently, protocolVersion: "0.0", correlationID: "x", json: Self.request(Fixtures.appOne), caller: caller) }
            }
            var questions = held.asked.makeAsyncIterator()
            for _ in 0..<BrokerService.callsPerSender { _ = await questions.next() }
            let refused = Self.object(await service.handle(.acquireTokenSilently, protocolVersion: "0.0", correlationID: "x", json: Self.request(Fixtures.appOne), caller: caller))
            let error = refused["error"] as? [String: Any]
            #expect(error?["tokencacheCode"] as? String == "overloaded" && refused["brokerTokenResponse"] == nil, "\(refused)")
            var other = caller
            other.sender = ":1.6"
            #expect(await service.handle(.getLinuxBrokerVersion, protocolVersion: "0.0", correlationID: "x", json: "{}", caller: other).contains("test"))
            held.answerAll(true)
            for try await reply in group { #expect(Self.object(reply)["brokerTokenResponse"] != nil, "\(reply)") }
        }
        // The slots are free again.
        let again = Self.object(await service.handle(.acquireTokenSilently, protocolVersion: "0.0", correlationID: "x", json: Self.request(Fixtures.appOne), caller: caller))
        #expect(again["brokerTokenResponse"] != nil, "\(again)")
    }

    @Test("--confirm for a client new here: asked once per caller identity and client; yes lists the family's account to that caller only, another executable is asked again, no lists nothing")
    func confirmPerCallerAndClient() async throws {
        let store = AccountStore(backend: InMemoryBackend())
        _ = try store.save(responseJSON: Fixtures.json(Fixtures.response(for: Fixtures.alice, scope: "User.Read", foci: "1")),
                           clientID: Fixtures.appOne, authority: Fixtures.authority(), scopes: ["User.Read"])
        let questions = Mutex<[String]>([]), answer = Mutex<Bool>(true)
        let service = BrokerService(store: store, policy: AgentPolicy(), version: "test", confirmation: { question in
            questions.withLock { $0.append(question) }
            return answer.withLock { $0 }
        })
        func accounts(_ executable: String) async -> [String] {
            let reply = Self.object(await service.handle(.getAccounts, protocolVersion: "0.0", correlationID: "x", json: #"{"clientId": "\#(Fixtures.appTwo)"}"#,
                                                         caller: BrokerCaller(sender: ":1.5", pid: 1, uid: getuid(), identity: .host(executable: executable))))
            return ((reply["accounts"] as? [[String: Any]]) ?? []).compactMap { $0["username"] as? String }
        }
        #expect(await accounts("/usr/bin/office") == [Fixtures.alice.username])
        #expect(await accounts("/usr/bin/office") == [Fixtures.alice.username])
        #expect(questions.withLock { $0.count } == 1 && questions.withLock { $0[0].contains("/usr/bin/office") && $0[0].contains(Fixtures.appTwo) })
        answer.withLock { $0 = false }
        #expect(await accounts("/usr/bin/other").isEmpty)
        #expect(questions.withLock { $0.count } == 2, "another caller is asked for itself")
    }

    @Test("One interactive sign-in at a time: a second, from another caller, gets the typed busy status (overloaded) at once")
    func oneSignInAtATime() async throws {
        let store = AccountStore(backend: InMemoryBackend())
        var policy = AgentPolicy()
        policy.clients = [try ClientID(Fixtures.appOne)]
        policy.authorities = [Fixtures.authority()]
        let held = HeldQuestions()
        let service = BrokerService(store: store, policy: policy, version: "test", confirmation: held.confirmation)
        let first = Task {
            await service.handle(.acquireTokenInteractively, protocolVersion: "0.0", correlationID: "x", json: Self.request(Fixtures.appOne, interactive: true),
                                 caller: BrokerCaller(sender: ":1.5", pid: 1, uid: getuid(), identity: Self.host))
        }
        var questions = held.asked.makeAsyncIterator()
        let question = await questions.next()
        #expect(question?.contains(Fixtures.bob.username) == true, "the first sign-in waits on its question: \(question ?? "")")
        let second = Self.object(await service.handle(.acquireTokenInteractively, protocolVersion: "0.0", correlationID: "x",
                                                      json: Self.request(Fixtures.appOne, interactive: true),
                                                      caller: BrokerCaller(sender: ":1.6", pid: 1, uid: getuid(), identity: .host(executable: "/usr/bin/other"))))
        let error = second["error"] as? [String: Any]
        #expect(error?["tokencacheCode"] as? String == "overloaded" && (error?["context"] as? String)?.contains("one at a time") == true, "\(second)")
        // Declined: the first ends without opening a browser, and the slot is free again.
        held.answerAll(false)
        let declined = Self.object(await first.value)
        #expect((declined["error"] as? [String: Any])?["tokencacheCode"] as? String == "accessDenied", "\(declined)")
    }
}
