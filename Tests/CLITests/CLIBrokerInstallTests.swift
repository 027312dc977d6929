import Foundation
import Testing
import TokenCacheTestSupport

/// `tokencache broker --install` and a broker the bus starts (#59 item 10): a second --install
/// says what it replaces, the unit runs the installed path (or says the one it runs is
/// temporary), a broker that fails to start says why where doctor and --list-requests show it,
/// and --list-requests starts none.
@Suite("tokencache broker --install and a bus-started broker (#59 item 10)", .harness)
struct CLIBrokerInstallTests {
    static let binary = TestEnvironment.binDirectory.appendingPathComponent("tokencache").path

    /// A session bus that activates only what --install wrote under `cli`'s data directory,
    /// started as a session's is, with the session's environment for what it starts.
    static func bus(for cli: CLI) throws -> PrivateBus {
        let configuration = cli.dataHome.appendingPathComponent("bus.conf")
        try Data("""
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN" "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>session</type>
              <listen>unix:tmpdir=/tmp</listen>
              <servicedir>\(cli.dataHome.appendingPathComponent("dbus-1/services").path)</servicedir>
              <policy context="default"><allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/><allow own="*"/></policy>
            </busconfig>
            """.utf8).write(to: configuration)
        return try PrivateBus(configuration: configuration)
    }

    /// `path` nil: a PATH of one directory the test owns, which holds no tokencache. A tokencache
    /// installed on the machine (/usr/bin, from the Debian package) would otherwise be what
    /// --install picks; the CLI runs nothing else by PATH (#56: a run met one mid-suite).
    static func environment(_ cli: CLI, _ bus: PrivateBus, path: String? = nil) -> [String: String] {
        var environment = cli.environment
        environment["DBUS_SESSION_BUS_ADDRESS"] = bus.address
        environment["XDG_DATA_DIRS"] = cli.dataHome.appendingPathComponent("system-share").path
        environment["PATH"] = path ?? cli.dataHome.appendingPathComponent("no-tokencache-bin").path
        return environment
    }

    /// What the bus gives what it starts: the session's data and config directories, as
    /// `dbus-update-activation-environment` does at login.
    static func updateActivationEnvironment(_ cli: CLI, _ bus: PrivateBus) throws {
        let output = try runProcess("/usr/bin/dbus-update-activation-environment",
                                    ["XDG_DATA_HOME=\(cli.dataHome.path)", "XDG_CONFIG_HOME=\(cli.dataHome.appendingPathComponent("config").path)",
                                     "XDG_DATA_DIRS=\(cli.dataHome.appendingPathComponent("system-share").path)"],
                                    environment: environment(cli, bus))
        try #require(output.status == 0, "\(output.stderr)")
    }

    static func nameHasOwner(_ cli: CLI, _ bus: PrivateBus) throws -> Bool {
        let output = try runProcess("/usr/bin/dbus-send", ["--session", "--print-reply", "--dest=org.freedesktop.DBus", "/org/freedesktop/DBus",
                                                           "org.freedesktop.DBus.NameHasOwner", "string:com.microsoft.identity.broker1"],
                                    environment: environment(cli, bus))
        return output.stdout.contains("boolean true")
    }

    @Test("A second --install with other options says the first one's command is replaced; the unit runs the tokencache on PATH, or says the one it runs is a temporary path")
    func secondInstallAndPath() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        let bus = try Self.bus(for: cli)
        let unitFile = cli.dataHome.appendingPathComponent("config/systemd/user/tokencache-broker.service")
        let first = try runProcess(Self.binary, ["broker", "--install", "--client", Fixtures.appOne, "--backend", "file", "--group", cli.group],
                                   environment: Self.environment(cli, bus))
        #expect(first.status == 0 && !first.stdout.contains("Replaced"), "\(first.stdout) \(first.stderr)")
        // The test's binary is in the build directory and no tokencache is on PATH: said.
        #expect(first.stderr.contains("is a temporary path"), "\(first.stderr)")
        let second = try runProcess(Self.binary, ["broker", "--install", "--confirm", "--backend", "file", "--group", cli.group],
                                    environment: Self.environment(cli, bus))
        #expect(second.status == 0, "\(second.stderr)")
        #expect(second.stdout.contains("Replaced the installed `") && second.stdout.contains("--client \(Fixtures.appOne)"), "\(second.stdout)")
        // An installed tokencache on PATH is what the unit runs.
        let bin = cli.dataHome.appendingPathComponent("bin")
        try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: bin.appendingPathComponent("tokencache").path, withDestinationPath: Self.binary)
        let third = try runProcess(Self.binary, ["broker", "--install", "--confirm", "--backend", "file", "--group", cli.group],
                                   environment: Self.environment(cli, bus, path: bin.path))
        #expect(third.status == 0 && !third.stderr.contains("temporary"), "\(third.stderr)")
        let unit = try String(contentsOf: unitFile, encoding: .utf8)
        #expect(unit.contains("ExecStart=\(bin.path)/tokencache broker --confirm"), "\(unit)")
    }

    @Test("A broker the bus starts that fails leaves why: doctor and --list-requests show it (not only Spawn.ChildExited); --list-requests starts no broker")
    func busStartedFailure() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        let bus = try Self.bus(for: cli)
        try Self.updateActivationEnvironment(cli, bus)
        let environment = Self.environment(cli, bus)
        let install = try runProcess(Self.binary, ["broker", "--install", "--group", cli.group], environment: environment)
        try #require(install.status == 0, "\(install.stderr)")
        // Then the config file breaks: the broker the bus starts cannot start.
        let config = cli.dataHome.appendingPathComponent("config/tokencache")
        try FileManager.default.createDirectory(at: config, withIntermediateDirectories: true)
        try Data("{\"backend\": \"file\",}".utf8).write(to: config.appendingPathComponent("config.json"))
        let call = try runProcess("/usr/bin/dbus-send", ["--session", "--print-reply", "--dest=com.microsoft.identity.broker1", "/",
                                                         "org.freedesktop.DBus.Peer.Ping"], environment: environment)
        #expect(call.status != 0, "\(call.stdout)")
        try FileManager.default.removeItem(at: config.appendingPathComponent("config.json"))
        let list = try runProcess(Self.binary, ["broker", "--list-requests"], environment: environment)
        #expect(list.status == 1 && list.stderr.contains("No broker runs") && list.stderr.contains("last start failed")
                && list.stderr.contains("config.json"), "\(list.stderr)")
        let doctor = try runProcess(Self.binary, ["doctor", "--json", "--backend", "file", "--group", cli.group], environment: environment)
        let report = try #require(try JSONSerialization.jsonObject(with: Data(doctor.stdout.utf8)) as? [String: Any], "\(doctor.stdout) \(doctor.stderr)")
        let check = (report["checks"] as? [[String: Any]])?.first { $0["name"] as? String == "identity broker" }
        #expect((check?["detail"] as? String)?.contains("last start of `tokencache broker` failed") == true
                && check?["status"] as? String == "warning", "\(String(describing: check))")

        // A broker that would start: --list-requests does not start it.
        let working = try runProcess(Self.binary, ["broker", "--install", "--backend", "file", "--group", cli.group], environment: environment)
        try #require(working.status == 0, "\(working.stderr)")
        let notRunning = try runProcess(Self.binary, ["broker", "--list-requests"], environment: environment)
        #expect(notRunning.status == 1 && notRunning.stderr.contains("No broker runs"), "\(notRunning.stdout) \(notRunning.stderr)")
        #expect(try Self.nameHasOwner(cli, bus) == false)
    }
}
