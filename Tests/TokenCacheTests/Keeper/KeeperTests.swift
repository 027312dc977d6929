import Foundation
import Testing
@testable import EncryptedFileStore
@testable import TokenCache
@testable import TokenCacheCore
import TokenCacheTestIdentityProvider
import TokenCacheTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// A real user made with `useradd` for one test, removed with `userdel -r`.
struct KeeperTestUser {
    let name: String
    let uid: UInt32
    let gid: UInt32
    var home: String { "/home/\(name)" }

    init(_ name: String) throws {
        let added = try runProcess("/usr/sbin/useradd", ["--create-home", "--user-group", "--shell", "/bin/sh", name])
        guard added.status == 0 else { throw KeeperTestError("useradd \(name): \(added.stderr)") }
        let ids = try runProcess("/usr/bin/id", ["-u", name]).stdout + " " + (try runProcess("/usr/bin/id", ["-g", name]).stdout)
        let numbers = ids.split(whereSeparator: \.isWhitespace).compactMap { UInt32($0) }
        guard numbers.count == 2 else { throw KeeperTestError("id \(name): \(ids)") }
        (self.name, uid, gid) = (name, numbers[0], numbers[1])
    }

    func remove() { _ = try? runProcess("/usr/sbin/userdel", ["--remove", "--force", name]) }

    /// Gives this user a login password (chpasswd, from its standard input: in no argument).
    func setPassword(_ password: String) throws {
        let set = try runProcess("/usr/sbin/chpasswd", [], input: Data("\(name):\(password)\n".utf8))
        guard set.status == 0 else { throw KeeperTestError("chpasswd \(name): \(set.stderr)") }
    }

    /// The environment of a login of this user: its home, no desktop session, no tokencache setting.
    func environment(_ extra: [String: String] = [:]) -> [String: String] {
        ["HOME": home, "USER": name, "LOGNAME": name, "PATH": "/usr/bin:/bin", "NO_COLOR": "1", "LANG": "C.UTF-8"].merging(extra) { $1 }
    }

    /// Runs `executable ARGUMENTS` as this user (setpriv: real and effective uid and gid, its groups).
    func run(_ executable: String, _ arguments: [String], environment extra: [String: String] = [:], input: Data? = nil) throws -> ProcessOutput {
        try runProcess("/usr/bin/setpriv", ["--reuid", "\(uid)", "--regid", "\(gid)", "--init-groups", "--", executable] + arguments,
                       input: input, environment: environment(extra))
    }
}

struct KeeperTestError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Two real users (Alice, Bob), a root-owned copy of the CLI in a root-owned 0755 directory (the
/// allowed app, and the keeper itself), an apps file allowing it one group and client, and the
/// keeper run as root on temporary paths. Everything is removed by ``cleanUp()``.
final class KeeperScenario: @unchecked Sendable {
    // @unchecked: set up in init, then only read; the keeper process is stopped once.
    let id = UUID().uuidString.prefix(6).lowercased()
    /// Socket directory, state and apps directory (root's, 0755).
    let root: String
    /// The allowed app's directory under /opt (root's, 0755, every parent root's).
    let appDirectory: String
    let group = "com.example.keeper-test"
    var alice: KeeperTestUser!
    var bob: KeeperTestUser!
    var keeper: Process?
    let keeperLog: URL
    let idp: FakeIdentityProvider
    /// Whether the keeper runs confined as its systemd unit confines it (``startKeeper()``).
    let confined: Bool
    /// Whether the keeper takes calls `tokencache broker` forwards (`--broker-forwarding`).
    var brokerForwarding = false
    /// Whether the keeper is started on its socket's first connection, as `tokencache-keeper.socket`
    /// starts it (``startKeeper()``).
    let socketActivated: Bool

    var app: String { appDirectory + "/tokencache" }
    var socket: String { root + "/run/keeper.sock" }
    var state: String { root + "/state" }
    var apps: String { root + "/apps.d" }
    var refreshToken: String { "rt-keeper-\(id)" }
    /// This scenario's PAM service (/etc/pam.d/NAME, as packaging/pam/tokencache-keeper), which the keeper checks consent with.
    var pamService: String { "tokencache-keeper-test-\(id)" }
    var pamFile: String { "/etc/pam.d/\(pamService)" }

    init(confined: Bool = false, brokerForwarding: Bool = false, socketActivated: Bool = false) throws {
        self.confined = confined
        self.socketActivated = socketActivated
        self.brokerForwarding = brokerForwarding
        root = "/tmp/tck-\(id)"
        appDirectory = "/opt/tck-\(id)"
        keeperLog = URL(fileURLWithPath: "/tmp/tck-\(id).log")
        idp = try FakeIdentityProvider()
        do {
            try setUp()
        } catch {
            cleanUp()
            throw error
        }
    }

    private func setUp() throws {
        let files = FileManager.default
        for directory in [root, root + "/run", apps, appDirectory] {
            try files.createDirectory(atPath: directory, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o755])
            chmod(directory, 0o755)
        }
        try files.copyItem(atPath: TestEnvironment.binDirectory.appendingPathComponent("tokencache").path, toPath: app)
        chmod(app, 0o755)
        try Data("""
            {"executable": "\(app)", "groups": ["\(group)"], "clientIDs": ["\(Fixtures.appOne)"]}
            """.utf8).write(to: URL(fileURLWithPath: apps + "/allowed.json"))
        chmod(apps + "/allowed.json", 0o644)
        alice = try KeeperTestUser("tcka\(id)")
        bob = try KeeperTestUser("tckb\(id)")
        files.createFile(atPath: keeperLog.path, contents: nil, attributes: [.posixPermissions: 0o600])
        let packaged = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../../packaging/pam/tokencache-keeper").standardizedFileURL
        try files.copyItem(atPath: packaged.path, toPath: pamFile)
        chmod(pamFile, 0o644)
        try startKeeper()
    }

    /// Starts the keeper (as root, on this scenario's paths) and returns once it says it serves.
    /// Confined, it runs as `packaging/systemd/tokencache-keeper.service` would run it, as far as
    /// tools outside systemd go: in a mount namespace of its own where /usr, /etc, /opt and /home
    /// are read-only (`ProtectSystem=strict`, `ProtectHome=read-only`; its state stays writable),
    /// with only `CAP_SYS_PTRACE` and `CAP_DAC_READ_SEARCH` in its bounding set, no inheritable
    /// capability and no new privileges (`CapabilityBoundingSet=`, `NoNewPrivileges=yes`).
    ///
    /// Socket-activated, systemd's own `systemd-socket-activate` listens on the socket (made
    /// 0666, as the socket unit's `SocketMode=`) and starts the keeper in its place on the first
    /// connection, passing the listening socket as systemd does (`LISTEN_FDS`, `LISTEN_PID`);
    /// this returns once it listens, and the keeper's own lines go to the log when it starts.
    func startKeeper() throws {
        let process = Process()
        let arguments = ["keeper", "--socket", socket, "--state-dir", state, "--apps-dir", apps, "--pam-service", pamService]
            + (brokerForwarding ? ["--broker-forwarding"] : [])
        if socketActivated {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
            process.arguments = ["-c", Self.socketActivation, socket, app] + arguments
        } else if confined {
            let script = """
                set -e
                for path in /usr /etc /opt /home; do [ -d "$path" ] || continue; mount --bind "$path" "$path"; mount -o remount,bind,ro "$path"; done
                exec /usr/bin/setpriv --bounding-set=-all,+sys_ptrace,+dac_read_search --inh-caps=-all --no-new-privs -- "$@"
                """
            process.executableURL = URL(fileURLWithPath: "/usr/bin/unshare")
            process.arguments = ["--mount", "--propagation", "private", "--", "/bin/sh", "-c", script, "sh", app] + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: app)
            process.arguments = arguments
        }
        var environment = ProcessInfo.processInfo.environment
        for name in ["LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH"] { environment[name] = nil }
        process.environment = environment
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = try FileHandle(forWritingTo: keeperLog)
        process.standardInput = FileHandle.nullDevice
        try process.run()
        keeper = process
        // Ready once it says so on standard error; then the rest of its lines go to the log file.
        let ready = socketActivated ? "Listening on" : "serving at"
        var text = ""
        while !text.contains(ready), let byte = try errors.fileHandleForReading.read(upToCount: 1), !byte.isEmpty {
            text += String(decoding: byte, as: UTF8.self)
        }
        guard text.contains(ready) else { throw KeeperTestError("the keeper did not start: \(text)") }

        let log = try FileHandle(forWritingTo: keeperLog)
        log.seekToEndOfFile()
        log.write(Data(text.utf8))
        // Copies what it says from now on into its log, until it exits.
        errors.fileHandleForReading.readabilityHandler = { handle in
            let data = handle.availableData
            if data.isEmpty { handle.readabilityHandler = nil } else { log.write(data) }
        }
    }

    /// What systemd does for `tokencache-keeper.socket` (PID 1 is not systemd here, and
    /// systemd-socket-activate cannot set `PassCredentials=`): the socket made 0666 with
    /// SO_PASSCRED, listening; on the first connection the keeper is started in this process's
    /// place with the listening socket as fd 3, `LISTEN_FDS=1` and `LISTEN_PID` its pid.
    static let socketActivation = """
        import os, select, socket, sys
        path, program = sys.argv[1], sys.argv[2]
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        listener.bind(path)
        os.chmod(path, 0o666)
        listener.listen(64)
        print("Listening on %s" % path, file=sys.stderr, flush=True)
        select.select([listener], [], [])
        os.dup2(listener.fileno(), 3)
        os.set_inheritable(3, True)
        print("Communication attempt; execing %s" % program, file=sys.stderr, flush=True)
        os.execve(program, sys.argv[2:], dict(os.environ, LISTEN_FDS="1", LISTEN_PID=str(os.getpid())))
        """

    /// Kills the keeper with SIGKILL (no clean-up of its own) and waits until it is gone.
    func killKeeper() {
        guard let keeper, keeper.isRunning else { return }
        kill(keeper.processIdentifier, SIGKILL)
        keeper.waitUntilExit()
    }

    var log: String { (try? String(contentsOf: keeperLog, encoding: .utf8)) ?? "" }

    /// The refresh token Alice's sign-in of `user` starts with.
    func refreshToken(of user: Fixtures.User) -> String { user.uid == Fixtures.alice.uid ? refreshToken : "\(refreshToken)-\(user.uid.prefix(5))" }

    /// As Alice: saves a sign-in of app one at the local identity provider for each of `accounts`,
    /// whose access token is stale (the keeper must refresh), then enrols her group with the keeper.
    func enrollAlice(accounts: [Fixtures.User] = [Fixtures.alice]) async throws -> ProcessOutput {
        try await saveAlice(accounts: accounts)
        return try alice.run(app, ["keeper", "--enroll", "--socket", socket, "--backend", "file", "--group", group])
    }

    /// As Alice: saves a sign-in of app one for each of `accounts` in her own encrypted file (group ``group``).
    func saveAlice(accounts: [Fixtures.User]) async throws {
        for user in accounts {
            var response = Fixtures.response(for: user, scope: "User.Read", foci: "1", tag: "keeper", expiresIn: 60)
            response["refresh_token"] = refreshToken(of: user)
            try await idp.seed(refreshToken: refreshToken(of: user), user: user, clientID: Fixtures.appOne, family: "1")
            let saved = try alice.run(app, ["save", "--backend", "file", "--group", group, "--client", Fixtures.appOne,
                                            "--authority", idp.authority().url.absoluteString, "--scopes", "User.Read"], input: Fixtures.json(response))
            guard saved.status == 0 else { throw KeeperTestError("save as Alice: \(saved.stderr)") }
        }
    }

    /// Alice's group as the keeper stored it, read here as root with the keeper's key: it must decrypt whole.
    func keptStore() throws -> AccountStore {
        let backend = EncryptedFileBackend(directory: URL(fileURLWithPath: "\(state)/\(alice.uid)"),
                                           keySource: .keyFile(URL(fileURLWithPath: state + "/keeper.key")))
        return AccountStore(backend: backend, group: try CacheGroup(group))
    }

    /// A scenario where Alice has enrolled (cleaned up here when that fails).
    static func withAliceEnrolled(confined: Bool = false, brokerForwarding: Bool = false, socketActivated: Bool = false) async throws -> KeeperScenario {
        let scenario = try KeeperScenario(confined: confined, brokerForwarding: brokerForwarding, socketActivated: socketActivated)
        do {
            let enrolled = try await scenario.enrollAlice()
            guard enrolled.status == 0 else { throw KeeperTestError("enrol as Alice: \(enrolled.stderr)\n\(scenario.log)") }
            return scenario
        } catch {
            scenario.cleanUp()
            throw error
        }
    }

    /// `tokencache token` of app one through the keeper, run as `user` with `executable`.
    func token(as user: KeeperTestUser, executable: String? = nil, environment: [String: String] = [:]) throws -> ProcessOutput {
        try user.run(executable ?? app, ["token", "--client", Fixtures.appOne, "--scopes", "User.Read"],
                     environment: ["TOKENCACHE_AGENT_SOCK": socket, "TOKENCACHE_AGENT_UID": "0"].merging(environment) { $1 })
    }

    /// `tokencache token` of app one as `user` with no agent setting, in a mount namespace of its
    /// own where the keeper's fixed paths are this scenario's: `/run` and `/var/lib` are empty
    /// (tmpfs, root's 0755) but for `/run/tokencache` (this scenario's socket directory) and
    /// `/var/lib/tokencache-enrolled` (its list directory), so the library finds this keeper as it
    /// finds an installed one.
    func tokenFindingTheKeeper(as user: KeeperTestUser, environment: [String: String] = [:]) throws -> ProcessOutput {
        try findingTheKeeper(as: user, ["token", "--client", Fixtures.appOne, "--scopes", "User.Read"], environment: environment)
    }

    /// `tokencache ARGUMENTS` as ``tokenFindingTheKeeper(as:environment:)`` runs `token`.
    func findingTheKeeper(as user: KeeperTestUser, _ arguments: [String], environment: [String: String] = [:]) throws -> ProcessOutput {
        let command = findingTheKeeperCommand(as: user, arguments)
        return try runProcess(command.executable, command.arguments, environment: user.environment(environment))
    }

    /// The command line ``findingTheKeeper(as:_:environment:)`` runs, for a test that starts it and reads what it prints meanwhile.
    func findingTheKeeperCommand(as user: KeeperTestUser, _ arguments: [String]) -> (executable: String, arguments: [String]) {
        let script = """
            set -e
            mount -t tmpfs -o mode=0755 tokencache-test /run && mkdir /run/tokencache && mount --bind "$1" /run/tokencache
            mount -t tmpfs -o mode=0755 tokencache-test /var/lib && mkdir /var/lib/tokencache-enrolled && mount --bind "$2" /var/lib/tokencache-enrolled
            shift 2
            exec "$@"
            """
        return ("/usr/bin/unshare", ["--mount", "--propagation", "private", "--", "/bin/sh", "-c", script, "sh", root + "/run", state + "-enrolled",
                                     "/usr/bin/setpriv", "--reuid", "\(user.uid)", "--regid", "\(user.gid)", "--init-groups", "--", app] + arguments)
    }

    /// Every file under a user's home, with its bytes as text.
    func homeFiles(_ user: KeeperTestUser) -> String {
        var text = ""
        let walker = FileManager.default.enumerator(atPath: user.home)
        while let name = walker?.nextObject() as? String {
            if let data = FileManager.default.contents(atPath: user.home + "/" + name) { text += String(decoding: data, as: UTF8.self) }
        }
        return text
    }

    func cleanUp() {
        if let keeper, keeper.isRunning {
            keeper.terminate()
            keeper.waitUntilExit()
        }
        alice?.remove()
        bob?.remove()
        for path in [root, appDirectory, keeperLog.path, pamFile] { try? FileManager.default.removeItem(atPath: path) }
    }
}

/// The token keeper (#62) with real users and real processes: the keeper as root, its callers
/// as Alice and Bob through setpriv. Root is needed (useradd, setpriv, the keeper itself); in CI a
/// run that is not root fails instead of skipping.
@Suite("Token keeper", .serialized, .enabled(if: getuid() == 0 || TestEnvironment.isCI))
struct KeeperTests {
    init() throws {
        try #require(getuid() == 0, "the keeper's tests need root (useradd, setpriv)")
        try #require(FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") && FileManager.default.isExecutableFile(atPath: "/usr/sbin/useradd"),
                     "setpriv and useradd are needed")
    }

    @Test("Alice's allowed app gets her token (refreshed by the keeper at the issuer), her copy is gone after enrolment, and she cannot read the keeper's store (EACCES)")
    func allowedAppGetsToken() async throws {
        let scenario = try KeeperScenario()
        defer { scenario.cleanUp() }
        let enrolled = try await scenario.enrollAlice()
        #expect(enrolled.status == 0 && enrolled.stdout.contains("Enrolled group"), "\(enrolled.stdout)\(enrolled.stderr)\n\(scenario.log)")
        // Her own copy is empty now; the refresh token is in no file of hers.
        let listed = try scenario.alice.run(scenario.app, ["list", "--backend", "file", "--group", scenario.group])
        #expect(!listed.stdout.contains(Fixtures.alice.username), "\(listed.stdout)")
        #expect(!scenario.homeFiles(scenario.alice).contains(scenario.refreshToken))

        let token = try scenario.token(as: scenario.alice)
        #expect(token.status == 0 && !token.stdout.isEmpty, "\(token.stdout)\(token.stderr)\n\(scenario.log)")
        #expect(!token.stdout.contains(scenario.refreshToken) && !token.stderr.contains(scenario.refreshToken))
        #expect(try await scenario.idp.stats().grants.count == 1, "the keeper refreshed once, at the issuer")
        #expect(scenario.log.contains("\(scenario.app) (pid") && scenario.log.contains("-> granted"), "\(scenario.log)")
        #expect(!scenario.log.contains(scenario.refreshToken))

        // As Alice the keeper's store is closed: the directory and the file.
        let store = "\(scenario.state)/\(scenario.alice.uid)/\(scenario.group).tkc"
        #expect(FileManager.default.fileExists(atPath: store))
        let read = try scenario.alice.run("/bin/cat", [store])
        #expect(read.status != 0 && read.stderr.contains("Permission denied"), "\(read.stdout)\(read.stderr)")
        let key = try scenario.alice.run("/bin/cat", ["\(scenario.state)/keeper.key"])
        #expect(key.status != 0 && key.stderr.contains("Permission denied"), "\(key.stderr)")
    }

    @Test("Enrolled, Alice's allowed app finds the keeper with no setting (its socket and her list of enrolled groups at their fixed paths, root's), with no group named or her enrolled group named, while a group she did not enrol stays local; Bob, who enrolled nothing, stays local, also with a list of his own making; TOKENCACHE_KEEPER=off keeps Alice local")
    func enrolledUserFindsTheKeeper() async throws {
        let scenario = try await KeeperScenario.withAliceEnrolled()
        defer { scenario.cleanUp() }
        // The keeper listed her group, for her processes to read: root's, 0644, in a root-owned 0755 directory.
        let list = "\(scenario.state)-enrolled/\(scenario.alice.uid)"
        var info = stat()
        #expect(lstat(list, &info) == 0 && info.st_uid == 0 && info.st_mode & 0o777 == 0o644)
        #expect(lstat(scenario.state + "-enrolled", &info) == 0 && info.st_uid == 0 && info.st_mode & 0o777 == 0o755)
        #expect(try String(contentsOfFile: list, encoding: .utf8) == scenario.group + "\n")

        let granted = { scenario.log.components(separatedBy: "-> granted").count - 1 }
        let grantedBefore = granted()  // the enrolment's own steps
        let found = try scenario.tokenFindingTheKeeper(as: scenario.alice)
        #expect(found.status == 0 && !found.stdout.isEmpty, "\(found.stdout)\(found.stderr)\n\(scenario.log)")
        #expect(!found.stdout.contains(scenario.refreshToken) && !found.stderr.contains(scenario.refreshToken))
        #expect(granted() == grantedBefore + 1 && scenario.log.contains("\(scenario.app) (pid"), "the keeper answered her token:\n\(scenario.log)")

        // Her enrolled group named: the keeper answers from it; a group she did not enrol stays local.
        let named = try scenario.findingTheKeeper(as: scenario.alice, ["token", "--group", scenario.group, "--client", Fixtures.appOne, "--scopes", "User.Read"])
        #expect(named.status == 0 && !named.stdout.isEmpty, "\(named.stdout)\(named.stderr)\n\(scenario.log)")
        #expect(granted() == grantedBefore + 2 && scenario.log.contains("group \(scenario.group) client"), "the keeper answered from her named group:\n\(scenario.log)")
        let other = try scenario.findingTheKeeper(as: scenario.alice, ["token", "--group", "com.example.not-enrolled", "--client", Fixtures.appOne, "--scopes", "User.Read"])
        #expect(other.status != 0 && !other.stderr.contains("keeper"), "\(other.stdout)\(other.stderr)")
        #expect(granted() == grantedBefore + 2, "a group she did not enrol reached the keeper:\n\(scenario.log)")

        // doctor says which answers: the keeper she enrolled with, not an agent of TOKENCACHE_AGENT_SOCK.
        let doctor = try scenario.findingTheKeeper(as: scenario.alice, ["doctor"])
        #expect(doctor.stdout.contains("token keeper") && doctor.stdout.contains("/run/tokencache/keeper.sock") && !doctor.stdout.contains("TOKENCACHE_AGENT_SOCK"),
                "\(doctor.stdout)\(doctor.stderr)")

        // Off: her process stays local, where her group is no longer (a typed not-found, not the keeper's answer).
        let decisions = scenario.log.components(separatedBy: "-> ").count
        let off = try scenario.tokenFindingTheKeeper(as: scenario.alice, environment: ["TOKENCACHE_KEEPER": "off"])
        #expect(off.status != 0 && off.stdout.isEmpty, "\(off.stdout)\(off.stderr)")
        #expect(!off.stderr.contains("keeper"), "\(off.stderr)")

        // Bob enrolled nothing: local. A list he made himself in a directory of his is no keeper's list.
        let bob = try scenario.tokenFindingTheKeeper(as: scenario.bob)
        #expect(bob.status != 0 && !bob.stderr.contains("keeper"), "\(bob.stdout)\(bob.stderr)")
        let forged = "\(scenario.state)-enrolled/\(scenario.bob.uid)"
        try Data((scenario.group + "\n").utf8).write(to: URL(fileURLWithPath: forged))
        chown(forged, scenario.bob.uid, scenario.bob.gid)
        let bobForged = try scenario.tokenFindingTheKeeper(as: scenario.bob)
        #expect(bobForged.status != 0 && !bobForged.stderr.contains("keeper"), "\(bobForged.stdout)\(bobForged.stderr)")
        #expect(scenario.log.components(separatedBy: "-> ").count == decisions, "no request reached the keeper:\n\(scenario.log)")

        // The keeper's start mends the lists: Alice's is written again, a list of a uid with nothing
        // enrolled goes, a new file a crash left goes, and a list whose user directory cannot be
        // read (here not a directory: ENOTDIR) is kept as it was, never taken for "none enrolled".
        let enrolled = scenario.state + "-enrolled"
        chown(forged, 0, 0)
        try Data().write(to: URL(fileURLWithPath: "\(scenario.state)/\(scenario.bob.uid)"))
        try Data("com.example.gone\n".utf8).write(to: URL(fileURLWithPath: "\(enrolled)/4242424"))
        try Data("half".utf8).write(to: URL(fileURLWithPath: "\(enrolled)/.new.0123456789abcdef"))
        try FileManager.default.removeItem(atPath: list)
        scenario.killKeeper()
        try scenario.startKeeper()
        #expect(try String(contentsOfFile: list, encoding: .utf8) == scenario.group + "\n")
        #expect(try String(contentsOfFile: forged, encoding: .utf8) == scenario.group + "\n", "an unreadable user directory keeps its list")
        #expect(!FileManager.default.fileExists(atPath: "\(enrolled)/4242424"))
        #expect(!FileManager.default.fileExists(atPath: "\(enrolled)/.new.0123456789abcdef"))
    }

    @Test("The allowed executable copied into Alice's home, run with LD_PRELOAD, run under strace, and a root-owned program that only an apps file of Alice's or one others may write names are each refused with a typed reason")
    func unidentifiedOrUnlistedCallersAreRefused() async throws {
        let scenario = try await KeeperScenario.withAliceEnrolled()
        defer { scenario.cleanUp() }
        func refused(_ output: ProcessOutput, _ why: String, sourceLocation: SourceLocation = #_sourceLocation) {
            #expect(output.status != 0 && output.stdout.isEmpty && output.stderr.contains("refused") && output.stderr.contains(why),
                    "\(output.stdout)\(output.stderr)", sourceLocation: sourceLocation)
        }
        // A copy in her home: hers, so anyone running as her could have changed it.
        let copy = scenario.alice.home + "/tokencache"
        try FileManager.default.copyItem(atPath: scenario.app, toPath: copy)
        chown(copy, scenario.alice.uid, scenario.alice.gid)
        refused(try scenario.token(as: scenario.alice, executable: copy), "belongs to uid \(scenario.alice.uid)")
        // The allowed app with a library preloaded.
        refused(try scenario.token(as: scenario.alice, environment: ["LD_PRELOAD": "/usr/lib/x86_64-linux-gnu/libm.so.6"]), "LD_PRELOAD")
        refused(try scenario.token(as: scenario.alice, environment: ["LD_LIBRARY_PATH": "/usr/lib"]), "LD_LIBRARY_PATH")
        // Under a tracer.
        // Where strace works for her (a container's seccomp may forbid ptrace): run under it. In CI
        // it must (scripts/install-deps.sh installs it): a check that cannot run fails there.
        let straceWorks = try FileManager.default.isExecutableFile(atPath: "/usr/bin/strace")
            && scenario.alice.run("/usr/bin/strace", ["-o", "/dev/null", "/bin/true"]).status == 0
        if ProcessInfo.processInfo.environment["CI"] != nil {
            #expect(straceWorks, "strace cannot trace a program of Alice's here, so the tracer case cannot run")
        }
        if straceWorks {
            let traced = try scenario.alice.run("/usr/bin/strace", ["-f", "-o", "/dev/null", scenario.app, "token", "--client", Fixtures.appOne, "--scopes", "User.Read"],
                                                environment: ["TOKENCACHE_AGENT_SOCK": scenario.socket, "TOKENCACHE_AGENT_UID": "0"])
            refused(traced, "tracer")
        }
        // A root-owned program in a root-owned directory that only ignored apps files name: one of
        // Alice's, and one of root's that others may write to.
        let other = scenario.appDirectory + "/other"
        try FileManager.default.createDirectory(atPath: other, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o755])
        try FileManager.default.copyItem(atPath: scenario.app, toPath: other + "/tokencache")
        let entry = Data(#"{"executable": "\#(other)/tokencache", "groups": ["\#(scenario.group)"]}"#.utf8)
        for (name, owner, mode) in [("alices.json", scenario.alice.uid, mode_t(0o644)), ("writable.json", UInt32(0), mode_t(0o666))] {
            try entry.write(to: URL(fileURLWithPath: "\(scenario.apps)/\(name)"))
            chown("\(scenario.apps)/\(name)", owner, owner == 0 ? 0 : scenario.alice.gid)
            chmod("\(scenario.apps)/\(name)", mode)
        }
        refused(try scenario.token(as: scenario.alice, executable: other + "/tokencache"), "is not an app of")
        #expect(scenario.log.contains("alices.json") && scenario.log.contains("writable.json") && scenario.log.contains("ignores an apps file"),
                "\(scenario.log)")
        #expect(try await scenario.idp.stats().grants.isEmpty, "nothing was redeemed for a refused caller")
        // The allowed app itself is still served.
        #expect(try scenario.token(as: scenario.alice).status == 0, "\(scenario.log)")
    }

    @Test("Bob's allowed app gets nothing of Alice's: the keeper serves each caller from its own uid's store")
    func otherUserGetsNothing() async throws {
        let scenario = try await KeeperScenario.withAliceEnrolled()
        defer { scenario.cleanUp() }
        let bobs = try scenario.token(as: scenario.bob)
        #expect(bobs.status != 0 && bobs.stdout.isEmpty && bobs.stderr.contains("holds no group \(scenario.group) of uid \(scenario.bob.uid)"),
                "\(bobs.stdout)\(bobs.stderr)")
        let listed = try scenario.bob.run(scenario.app, ["list"], environment: ["TOKENCACHE_AGENT_SOCK": scenario.socket, "TOKENCACHE_AGENT_UID": "0"])
        #expect(!listed.stdout.contains(Fixtures.alice.username) && !listed.stderr.contains(Fixtures.alice.username), "\(listed.stdout)\(listed.stderr)")
        #expect(try await scenario.idp.stats().grants.isEmpty)
        // Alice still gets hers.
        #expect(try scenario.token(as: scenario.alice).status == 0, "\(scenario.log)")
        // Bob has nothing enrolled: his calls are logged to standard error only, with no directory of his under the state directory.
        #expect(!FileManager.default.fileExists(atPath: "\(scenario.state)/\(scenario.bob.uid)"), "a directory was made for Bob, who has nothing enrolled")
    }

    @Test("A forged, oversized or unknown request gets a typed error (a token request without client_id: invalidArgument before any policy), an enrolment from another program is refused, and the keeper keeps serving")
    func forgedRequestsGetTypedErrors() async throws {
        let scenario = try await KeeperScenario.withAliceEnrolled()
        defer { scenario.cleanUp() }
        // As Bob, with the system Python: frames written by hand.
        let script = """
            import json, socket, struct, sys
            def ask(frame):
                s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(frame)
                head = b""
                while len(head) < 4:
                    chunk = s.recv(4 - len(head))
                    if not chunk: return None
                    head += chunk
                (n,) = struct.unpack(">I", head); body = b""
                while len(body) < n: body += s.recv(n - len(body))
                return json.loads(body)
            def frame(obj):
                data = json.dumps({"version": 1, **obj}).encode(); return struct.pack(">I", len(data)) + data
            answers = [
                ask(struct.pack(">I", 0x7fffffff)),
                ask(struct.pack(">I", 5) + b"nope!"),
                ask(frame({"op": "enroll", "group": "com.example.keeper-test", "cache": "{}", "uid": 0})),
                ask(frame({"op": "token", "client_id": sys.argv[2], "scopes": ["User.Read"], "uid": int(sys.argv[3])})),
                ask(frame({"op": "teleport"})),
                ask(frame({"version": 9, "op": "token"})),
                ask(frame({"op": "token", "scopes": ["User.Read"]})),
            ]
            print(json.dumps([(a or {}).get("error", {}).get("code") for a in answers]))
            """
        let output = try scenario.bob.run("/usr/bin/python3", ["-c", script, scenario.socket, Fixtures.appOne, "\(scenario.alice.uid)"])
        #expect(output.status == 0, "\(output.stderr)")
        #expect(output.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
                == #"["invalidArgument", "invalidArgument", "accessDenied", "accessDenied", "invalidArgument", "agentUnavailable", "invalidArgument"]"#,
                "\(output.stdout)\(output.stderr)\n\(scenario.log)")
        // Nothing of Bob's was stored, and the keeper still serves Alice.
        #expect(!FileManager.default.fileExists(atPath: "\(scenario.state)/\(scenario.bob.uid)/\(scenario.group).tkc"))
        let token = try scenario.token(as: scenario.alice)
        #expect(token.status == 0, "\(token.stderr)\n\(scenario.log)")
        #expect(scenario.keeper?.isRunning == true)
    }

    /// kill -9 of the keeper while 8 processes of Alice's make it refresh with rotating refresh
    /// tokens, then a check of durability: a reply means a save that survives.
    ///
    /// The stand-in issuer records, per account, the refresh tokens it issued in order and the
    /// access token issued with each; the writers record every access token the keeper gave them.
    /// After the kill, each account's stored refresh token must be the one issued with the newest
    /// access token any writer received, or a later one (a save made before the keeper could
    /// answer), never an older one; and the restarted keeper must refresh every account with what
    /// it stored, nothing re-registered at the issuer (which keeps only the newest refresh token of
    /// each chain: redeeming one retires it).
    ///
    /// **Why it can fail**: just before the kill the issuer stops rotating (it answers 503, so no
    /// redemption is cut short after it rotated, which no keeper could survive with an issuer that
    /// retires the old token), and the test waits until every writer has had an answer to a request
    /// made after that, so every rotation the issuer made has been answered. A keeper that answered
    /// before its save was durable (saving after the reply, or without syncing before the rename)
    /// can lose that save to the kill: its file then holds an older refresh token than the newest
    /// access token a writer got, which fails the first check, and one the issuer has retired,
    /// which fails the second.
    @Test("kill -9 of the keeper while 8 processes of Alice's make it refresh (rotating refresh tokens) loses no answered save: after a restart every account decrypts whole with the refresh token issued with the newest access token any writer got (or a later one), and the keeper refreshes every account again with nothing re-registered")
    func killNineLosesNothing() async throws {
        let scenario = try KeeperScenario()
        defer { scenario.cleanUp() }
        let accounts = [Fixtures.alice, Fixtures.bob]
        let enrolled = try await scenario.enrollAlice(accounts: accounts)
        try #require(enrolled.status == 0, "\(enrolled.stderr)\n\(scenario.log)")
        // Every token it issues is stale at once: each request makes the keeper redeem and save.
        try await scenario.idp.control(["expires_in": 60])
        let environment = scenario.alice.environment(["TOKENCACHE_AGENT_SOCK": scenario.socket, "TOKENCACHE_AGENT_UID": "0"])
        // Written by root, read by the writers: "paused" once the issuer stopped rotating, "stop" to end.
        let paused = scenario.root + "/paused", stop = scenario.root + "/stop"
        let writers = try (0..<8).map { index in
            let account = accounts[index % accounts.count].username
            // Each access token received is printed ("received AT"); a request begun after the pause,
            // once answered, prints "answered after pause". Bounded by counts, not time: a writer
            // ends after 50 failures in a row before the pause (a keeper that stopped answering:
            // the wait for its lines then fails instead of hanging) or 500 requests after it.
            let script = """
                failures=0; late=0
                while [ ! -e \(stop) ] && [ $failures -lt 50 ] && [ $late -lt 500 ]; do
                  after=no; [ -e \(paused) ] && after=yes
                  if at=$("$0" token --refresh --client \(Fixtures.appOne) --scopes User.Read --account \(account) 2>/dev/null); then
                    echo "received $at" >&2; failures=0
                  elif [ $after = no ]; then
                    failures=$((failures + 1))
                  fi
                  if [ $after = yes ]; then echo "answered after pause" >&2; late=$((late + 1)); fi
                done
                """
            return try RunningProgram(URL(fileURLWithPath: "/usr/bin/setpriv"),
                                      arguments: ["--reuid", "\(scenario.alice.uid)", "--regid", "\(scenario.alice.gid)", "--init-groups", "--",
                                                  "/bin/sh", "-c", script, scenario.app],
                                      environment: environment)
        }
        defer {
            FileManager.default.createFile(atPath: stop, contents: nil)
            writers.forEach { $0.terminate() }
        }
        // Once every writer had a token (refreshes and saves under way), the issuer stops rotating;
        // once each writer had an answer to a request begun after that, the keeper is killed while
        // they keep asking.
        for writer in writers { _ = try await writer.shown("(received) at-") }
        try await scenario.idp.control(["mode": "fail"])
        try #require(FileManager.default.createFile(atPath: paused, contents: nil, attributes: [.posixPermissions: 0o644]))
        for writer in writers { _ = try await writer.shown("(answered) after pause") }
        scenario.killKeeper()
        try #require(FileManager.default.createFile(atPath: stop, contents: nil, attributes: [.posixPermissions: 0o644]))
        for writer in writers { _ = await writer.exitStatus() }
        let received = Set(writers.flatMap { writer in
            writer.stderr.split(separator: "\n").compactMap { $0.hasPrefix("received ") ? String($0.dropFirst("received ".count)) : nil }
        })

        // Read as root with the keeper's key: whole, both accounts.
        let store = try scenario.keptStore()
        let inventory = try store.inventory()
        #expect(Set(inventory.accounts.map(\.username)) == Set(accounts.map(\.username)), "\(inventory.accounts.map(\.username))")
        let cache = try #require(try JSONSerialization.jsonObject(with: try store.exportMSALJSON()) as? [String: Any])
        let refreshTokens = try #require(cache["RefreshToken"] as? [String: [String: Any]]).values
        let grants = try await scenario.idp.stats().grants.filter { $0.outcome == "ok" && $0.account != nil }
        for user in accounts {
            // The issuer's chain for this account: the seeded refresh token, then each it issued, with its access token.
            let chain: [(refreshToken: String, accessToken: String?)] = [(scenario.refreshToken(of: user), nil)]
                + grants.filter { $0.account == user.uid }.compactMap { grant in grant.issued.map { ($0, grant.access_token) } }
            let newestReceived = chain.lastIndex { $0.accessToken.map(received.contains) ?? false }
            #expect(newestReceived != nil, "\(user.username): no writer received a token of this account")
            let stored = refreshTokens.filter { $0["home_account_id"] as? String == user.homeAccountID }.compactMap { $0["secret"] as? String }
            try #require(stored.count == 1, "\(user.username): \(stored.count) refresh tokens stored")
            let position = chain.firstIndex { $0.refreshToken == stored[0] }
            #expect(position != nil, "\(user.username): a stored refresh token the issuer never gave")
            if let position, let newestReceived {
                #expect(position >= newestReceived,
                        "\(user.username): the stored refresh token is #\(position) of \(chain.count - 1) issued, older than #\(newestReceived), whose access token a writer received: an answered save was lost")
            }
        }
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: "\(scenario.state)/\(scenario.alice.uid)")
        #expect(leftovers.allSatisfy { !$0.hasSuffix(".tkc") || $0 == "\(scenario.group).tkc" }, "\(leftovers)")

        // Started again, with the issuer rotating again and nothing re-registered, it refreshes each
        // account with what it saved and lists both.
        try await scenario.idp.control(["mode": "normal"])
        try scenario.startKeeper()
        for user in accounts {
            let token = try scenario.alice.run(scenario.app, ["token", "--refresh", "--client", Fixtures.appOne, "--scopes", "User.Read", "--account", user.username],
                                               environment: ["TOKENCACHE_AGENT_SOCK": scenario.socket, "TOKENCACHE_AGENT_UID": "0"])
            #expect(token.status == 0 && !token.stdout.isEmpty, "\(user.username): \(token.stderr)\n\(scenario.log)")
        }
        let listed = try scenario.alice.run(scenario.app, ["list"], environment: ["TOKENCACHE_AGENT_SOCK": scenario.socket, "TOKENCACHE_AGENT_UID": "0"])
        #expect(accounts.allSatisfy { listed.stdout.contains($0.username) }, "\(listed.stdout)\(listed.stderr)")
        #expect(!scenario.log.contains(scenario.refreshToken))
    }

    @Test("--unenroll is root's: Alice's own --unenroll (the keeper's program, run by any process of hers) and her forged export or unenroll requests get nothing and delete nothing; root writes her group to a new 0600 file, read back, then deletes the keeper's copy; an existing file or Bob with nothing enrolled lose nothing")
    func unenrollIsRoots() async throws {
        let scenario = try await KeeperScenario.withAliceEnrolled()
        defer { scenario.cleanUp() }
        let kept = "\(scenario.state)/\(scenario.alice.uid)/\(scenario.group).tkc"
        let before = try #require(FileManager.default.contents(atPath: kept))

        // Alice runs the keeper's own program: refused, nothing handed back, nothing deleted.
        let hers = try scenario.alice.run(scenario.app, ["keeper", "--unenroll", "--socket", scenario.socket, "--backend", "file", "--group", scenario.group])
        #expect(hers.status != 0 && hers.stderr.contains("Only root takes a group out of the token keeper"), "\(hers.stdout)\(hers.stderr)")
        #expect(!hers.stdout.contains(scenario.refreshToken) && !hers.stderr.contains(scenario.refreshToken))

        // Her forged requests, whatever program sends them: a typed refusal, no cache in the answer.
        let script = """
            import json, socket, struct, sys
            s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
            for op in ("export", "unenroll"):
                data = json.dumps({"version": 1, "op": op, "group": sys.argv[2], "revision": "x"}).encode()
                s.sendall(struct.pack(">I", len(data)) + data)
                head = s.recv(4); (n,) = struct.unpack(">I", head); body = b""
                while len(body) < n: body += s.recv(n - len(body))
                answer = json.loads(body)
                print(answer.get("error", {}).get("code"), "cache" in answer)
            """
        let forged = try scenario.alice.run("/usr/bin/python3", ["-c", script, scenario.socket, scenario.group])
        #expect(forged.stdout == "accessDenied False\naccessDenied False\n" && !forged.stdout.contains(scenario.refreshToken), "\(forged.stdout)\(forged.stderr)")
        #expect(FileManager.default.contents(atPath: kept) == before, "the keeper's copy changed")

        // Root, to a file that exists: refused, the file and the keeper's copy untouched.
        let output = scenario.root + "/alice-group.json"
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: output))
        let unenroll = ["keeper", "--unenroll", "--state-dir", scenario.state, "--uid", "\(scenario.alice.uid)", "--group", scenario.group, "--output", output]
        let existing = try runProcess(scenario.app, unenroll)
        #expect(existing.status != 0 && existing.stderr.contains("could not be created"), "\(existing.stdout)\(existing.stderr)")
        #expect(FileManager.default.contents(atPath: output) == Data("keep me".utf8))
        #expect(FileManager.default.contents(atPath: kept) == before, "the keeper's copy changed")

        // Bob has nothing enrolled: a typed error, nothing written.
        let bobsFile = scenario.root + "/bob-group.json"
        let bobs = try runProcess(scenario.app, ["keeper", "--unenroll", "--state-dir", scenario.state, "--uid", "\(scenario.bob.uid)", "--group", scenario.group, "--output", bobsFile])
        #expect(bobs.status != 0 && bobs.stderr.contains("holds no group \(scenario.group) of uid \(scenario.bob.uid)"), "\(bobs.stderr)")
        #expect(!FileManager.default.fileExists(atPath: bobsFile))

        // Root's unenrolment: the file holds her account, is root's 0600, and the keeper's copy is gone.
        try FileManager.default.removeItem(atPath: output)
        let done = try runProcess(scenario.app, unenroll)
        #expect(done.status == 0 && done.stdout.contains("Unenrolled uid \(scenario.alice.uid)'s group \(scenario.group) (1 account)"), "\(done.stdout)\(done.stderr)")
        #expect(!done.stdout.contains(scenario.refreshToken) && !done.stderr.contains(scenario.refreshToken))
        #expect(!FileManager.default.fileExists(atPath: kept))
        #expect(!FileManager.default.fileExists(atPath: "\(scenario.state)-enrolled/\(scenario.alice.uid)"), "her list of enrolled groups went with her last group")
        var info = stat()
        #expect(lstat(output, &info) == 0 && info.st_uid == 0 && info.st_mode & 0o777 == 0o600)
        let written = AccountStore(backend: InMemoryBackend(), group: try CacheGroup(scenario.group))
        _ = try written.importMSALJSON(try #require(FileManager.default.contents(atPath: output)))
        #expect(try written.accounts(clientID: Fixtures.appOne).map(\.username) == [Fixtures.alice.username])
        let token = try scenario.token(as: scenario.alice)
        #expect(token.status != 0 && token.stderr.contains("holds no group"), "\(token.stdout)\(token.stderr)")
        #expect(!scenario.log.contains(scenario.refreshToken))
    }

    @Test("--list shows Alice her enrolled group (accounts, the apps allowed it, no secret), Bob none, and root every user's from --state-dir")
    func listShowsEnrolledGroups() async throws {
        let scenario = try await KeeperScenario.withAliceEnrolled()
        defer { scenario.cleanUp() }
        let hers = try scenario.alice.run(scenario.app, ["keeper", "--list", "--socket", scenario.socket])
        #expect(hers.status == 0 && hers.stdout.contains("\(scenario.group): 1 account; apps: \(scenario.app)"), "\(hers.stdout)\(hers.stderr)\n\(scenario.log)")
        #expect(!hers.stdout.contains(scenario.refreshToken) && !hers.stdout.contains(Fixtures.alice.username))
        let bobs = try scenario.bob.run(scenario.app, ["keeper", "--list", "--socket", scenario.socket])
        #expect(bobs.status == 0 && bobs.stdout.contains("none enrolled") && !bobs.stdout.contains(scenario.group), "\(bobs.stdout)\(bobs.stderr)")
        let all = try runProcess(scenario.app, ["keeper", "--list", "--state-dir", scenario.state, "--apps-dir", scenario.apps])
        #expect(all.status == 0 && all.stdout.contains("uid \(scenario.alice.uid) \(scenario.group): 1 account; apps: \(scenario.app)"), "\(all.stdout)\(all.stderr)")
        #expect(!all.stdout.contains(scenario.refreshToken))
    }

    @Test("The audit log: Alice's --log shows her allowed app's token and an unlisted program's refusal (app, client, outcome; no token), Bob's --log and a forged request of Bob's naming Alice's uid show none of hers, the file is root's 0600 and closed to Alice (EACCES), and past 1 MiB it keeps its newest half")
    func auditLogShowsEachUserTheirOwn() async throws {
        let scenario = try await KeeperScenario.withAliceEnrolled()
        defer { scenario.cleanUp() }
        let token = try scenario.token(as: scenario.alice)
        #expect(token.status == 0 && !token.stdout.isEmpty, "\(token.stderr)\n\(scenario.log)")
        let accessToken = token.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        // A root-owned program in a root-owned directory that no apps file names.
        let other = scenario.appDirectory + "/unlisted"
        try FileManager.default.copyItem(atPath: scenario.app, toPath: other)
        chmod(other, 0o755)
        let refused = try scenario.token(as: scenario.alice, executable: other)
        #expect(refused.status != 0 && refused.stderr.contains("is not an app of"), "\(refused.stdout)\(refused.stderr)")

        struct Log: Decodable {
            struct Entry: Decodable { var time: String; var app: String; var uid: UInt32; var op: String; var client: String?; var outcome: String }
            var entries: [Entry]
        }
        func entries(_ output: ProcessOutput, sourceLocation: SourceLocation = #_sourceLocation) throws -> [Log.Entry] {
            try #require(output.status == 0, "\(output.stdout)\(output.stderr)\n\(scenario.log)", sourceLocation: sourceLocation)
            return try JSONDecoder().decode(Log.self, from: Data(output.stdout.utf8)).entries
        }
        // Alice's own: both decisions, with the app, client and outcome; no token of any kind.
        let table = try scenario.alice.run(scenario.app, ["keeper", "--log", "--socket", scenario.socket])
        #expect(table.status == 0 && table.stdout.contains(scenario.app) && table.stdout.contains(other) && table.stdout.contains(Fixtures.appOne)
                && table.stdout.contains("granted") && table.stdout.contains("refused"), "\(table.stdout)\(table.stderr)\n\(scenario.log)")
        let hers = try entries(try scenario.alice.run(scenario.app, ["keeper", "--log", "--json", "--lines", "20", "--socket", scenario.socket]))
        #expect(hers.allSatisfy { $0.uid == scenario.alice.uid })
        #expect(hers.contains { $0.app == scenario.app && $0.op == "token" && $0.client == Fixtures.appOne && $0.outcome == "granted" }, "\(hers)")
        #expect(hers.contains { $0.app == other && $0.op == "token" && $0.outcome.hasPrefix("refused") && $0.outcome.contains("is not an app of") }, "\(hers)")
        #expect(hers.contains { $0.op == "enroll" && $0.outcome.hasPrefix("granted") }, "\(hers)")
        let file = "\(scenario.state)/\(scenario.alice.uid)/audit.log"
        let written = try String(contentsOfFile: file, encoding: .utf8)
        for text in [table.stdout, written, scenario.log] {
            #expect(!text.contains(accessToken) && !text.contains(scenario.refreshToken), "a token in the audit log or its output")
        }

        // Bob's: nothing of Alice's, through the CLI or a request of his naming her uid.
        let bobs = try entries(try scenario.bob.run(scenario.app, ["keeper", "--log", "--json", "--socket", scenario.socket]))
        #expect(bobs.allSatisfy { $0.uid == scenario.bob.uid && $0.app != other && $0.client == nil }, "\(bobs)")
        let script = """
            import json, socket, struct, sys
            s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
            data = json.dumps({"version": 1, "op": "log", "uid": int(sys.argv[2]), "lines": 500, "group": "x"}).encode()
            s.sendall(struct.pack(">I", len(data)) + data)
            head = b""
            while len(head) < 4: head += s.recv(4 - len(head))
            (n,) = struct.unpack(">I", head); body = b""
            while len(body) < n: body += s.recv(n - len(body))
            print(body.decode())
            """
        let forged = try scenario.bob.run("/usr/bin/python3", ["-c", script, scenario.socket, "\(scenario.alice.uid)"])
        #expect(forged.status == 0, "\(forged.stderr)")
        let forgedEntries = try JSONDecoder().decode(Log.self, from: Data(forged.stdout.utf8)).entries
        #expect(forgedEntries.allSatisfy { $0.uid == scenario.bob.uid && $0.app != other && $0.client == nil }, "\(forged.stdout)")
        // Bob has nothing enrolled: his calls went to the keeper's standard error only, and left no directory of his.
        #expect(bobs.isEmpty && forgedEntries.isEmpty, "\(bobs) \(forged.stdout)")
        #expect(!FileManager.default.fileExists(atPath: "\(scenario.state)/\(scenario.bob.uid)"), "a directory was made for Bob, who has nothing enrolled")

        // The file: root's, 0600, closed to Alice; as root, --log --uid reads it from --state-dir.
        var info = stat()
        #expect(lstat(file, &info) == 0 && info.st_uid == 0 && info.st_mode & 0o777 == 0o600)
        let read = try scenario.alice.run("/bin/cat", [file])
        #expect(read.status != 0 && read.stderr.contains("Permission denied") && read.stdout.isEmpty, "\(read.stdout)\(read.stderr)")
        let asRoot = try runProcess(scenario.app, ["keeper", "--log", "--json", "--state-dir", scenario.state, "--uid", "\(scenario.alice.uid)"])
        #expect(try entries(asRoot).contains { $0.app == other }, "\(asRoot.stdout)\(asRoot.stderr)")

        // Past the cap (1 MiB): the next decision leaves the newest half, whole lines, still root's 0600.
        let filler = String(repeating: #"{"time":"2000-01-01T00:00:00Z","app":"filler","uid":\#(scenario.alice.uid),"pid":1,"op":"token","scopes":[],"outcome":"granted"}"# + "\n", count: 12000)
        let appended = try FileHandle(forWritingTo: URL(fileURLWithPath: file))
        appended.seekToEndOfFile()
        appended.write(Data(filler.utf8))
        try appended.close()
        #expect(try scenario.token(as: scenario.alice).status == 0, "\(scenario.log)")
        let trimmed = try String(contentsOfFile: file, encoding: .utf8)
        #expect(trimmed.utf8.count <= 1 << 19 && trimmed.utf8.count > 1 << 18, "\(trimmed.utf8.count) bytes")
        #expect(trimmed.hasSuffix("\n"))
        let first = try #require(trimmed.split(separator: "\n").first)
        #expect((try? JSONDecoder().decode(Log.Entry.self, from: Data(first.utf8))) != nil, "the first line is cut: \(first)")
        let last = try #require(trimmed.split(separator: "\n").last)
        let newest = try JSONDecoder().decode(Log.Entry.self, from: Data(last.utf8))
        #expect(newest.app == scenario.app && newest.op == "token" && newest.outcome == "granted", "\(last)")
        #expect(lstat(file, &info) == 0 && info.st_uid == 0 && info.st_mode & 0o777 == 0o600)
    }

    @Test("Socket activation as tokencache-keeper.socket does it (the socket with PassCredentials, the keeper started on the first connection with the listening socket passed as LISTEN_FDS): the keeper takes it, answers that first, queued request (Alice's enrolment, its sender checked) and then her allowed app's token")
    func socketActivation() async throws {
        let scenario = try await KeeperScenario.withAliceEnrolled(socketActivated: true)
        defer { scenario.cleanUp() }
        #expect(scenario.log.contains("serving at the socket systemd passed"), "the keeper took the passed socket:\n\(scenario.log)")
        #expect(scenario.log.contains("Communication attempt; execing \(scenario.app)"), "started on the first connection:\n\(scenario.log)")
        let token = try scenario.token(as: scenario.alice)
        #expect(token.status == 0 && !token.stdout.isEmpty, "\(token.stdout)\(token.stderr)\n\(scenario.log)")
        #expect(!token.stdout.contains(scenario.refreshToken))
    }

    @Test("The hardened systemd unit and socket (packaging/systemd) pass systemd-analyze verify (ExecStart pointed at the built binary); in CI systemd-analyze must be there")
    func systemdUnitsVerify() throws {
        let analyze = "/usr/bin/systemd-analyze"
        guard FileManager.default.isExecutableFile(atPath: analyze) else {
            #expect(!TestEnvironment.isCI, "systemd-analyze is missing (scripts/install-deps.sh installs systemd), so the units cannot be checked")
            return
        }
        let units = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../../packaging/systemd").standardizedFileURL
        let service = try String(contentsOf: units.appendingPathComponent("tokencache-keeper.service"), encoding: .utf8)
        let socket = try String(contentsOf: units.appendingPathComponent("tokencache-keeper.socket"), encoding: .utf8)
        for line in ["ExecStart=/usr/bin/tokencache keeper", "ProtectSystem=strict", "NoNewPrivileges=yes", "StateDirectory=tokencache", "ReadWritePaths=-/var/lib/tokencache-enrolled",
                     "CapabilityBoundingSet=CAP_SYS_PTRACE CAP_DAC_READ_SEARCH"] {
            #expect(service.contains("\n\(line)\n"), "the unit lacks \(line)")
        }
        #expect(socket.contains("\nListenStream=/run/tokencache/keeper.sock\n") && socket.contains("\nSocketMode=0666\n") && socket.contains("\nPassCredentials=yes\n"))
        // systemd-analyze checks that ExecStart's program exists: the built one stands in for /usr/bin/tokencache.
        let directory = try TestEnvironment.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let built = TestEnvironment.binDirectory.appendingPathComponent("tokencache").path
        try Data(service.replacingOccurrences(of: "ExecStart=/usr/bin/tokencache", with: "ExecStart=\(built)").utf8)
            .write(to: directory.appendingPathComponent("tokencache-keeper.service"))
        try Data(socket.utf8).write(to: directory.appendingPathComponent("tokencache-keeper.socket"))
        let verified = try runProcess(analyze, ["verify", "--man=no", directory.appendingPathComponent("tokencache-keeper.socket").path,
                                                directory.appendingPathComponent("tokencache-keeper.service").path])
        #expect(verified.status == 0 && !verified.stderr.contains("tokencache-keeper") && !verified.stdout.contains("tokencache-keeper"),
                "\(verified.stdout)\(verified.stderr)")
    }
}
