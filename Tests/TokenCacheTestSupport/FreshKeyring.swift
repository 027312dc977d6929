import Foundation
import Testing

/// Runs a shell script in a fresh, private D-Bus session with its own throw-away HOME and
/// gnome-keyring (unlocked login keyring, password "test-password"), for tests that change
/// the daemon's state or need keyring files in place before it starts. The script sees the
/// helper as `$H`, `start_keyring`, and `keyring_pid` (the daemon's process id, asked from
/// the bus); the daemon is killed by that id on exit. Returns the JSON lines it printed.
/// - Parameter loginKeyring: false: no login keyring and no daemon started up front; the first
///   Secret Service call starts gnome-keyring by D-Bus activation (the system's service file,
///   `--start --foreground`), with no keyring at all: no 'default' collection, as in a fresh
///   session of a desktop other than GNOME.
package func inFreshKeyring(_ script: String, keyringFiles: [String: String] = [:], loginKeyring: Bool = true) throws -> [[String: Any]] {
    let root = try TestEnvironment.temporaryDirectory()
    defer { try? FileManager.default.removeItem(at: root) }
    let home = root.appendingPathComponent("home"), runtime = root.appendingPathComponent("run")
    let keyrings = home.appendingPathComponent(".local/share/keyrings")
    try FileManager.default.createDirectory(at: keyrings, withIntermediateDirectories: true)
    try FileManager.default.createDirectory(at: runtime, withIntermediateDirectories: true,
                                            attributes: [.posixPermissions: 0o700])
    for (name, contents) in keyringFiles {
        let file = keyrings.appendingPathComponent(name)
        try Data(contents.utf8).write(to: file)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file.path)
    }
    var environment = ProcessInfo.processInfo.environment
    for name in ["DBUS_SESSION_BUS_ADDRESS", "GNOME_KEYRING_CONTROL", "DISPLAY", "WAYLAND_DISPLAY"] {
        environment[name] = nil
    }
    environment["HOME"] = home.path
    environment["XDG_DATA_HOME"] = home.appendingPathComponent(".local/share").path
    environment["XDG_CONFIG_HOME"] = home.appendingPathComponent(".config").path
    environment["XDG_CACHE_HOME"] = home.appendingPathComponent(".cache").path
    environment["XDG_RUNTIME_DIR"] = runtime.path
    environment["H"] = TestEnvironment.binDirectory.appendingPathComponent("TokenCacheTestHelper").path
    let session = """
        start_keyring() { eval "$(printf test-password | gnome-keyring-daemon --unlock --components=secrets 2>/dev/null)"; export GNOME_KEYRING_CONTROL; }
        keyring_pid() { dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \\
            org.freedesktop.DBus.GetConnectionUnixProcessID string:org.freedesktop.secrets 2>/dev/null | awk '/uint32/ {print $2}'; }
        trap 'pid=$(keyring_pid); [ -n "$pid" ] && kill -9 $pid' EXIT
        \(loginKeyring ? "start_keyring" : ": no login keyring: gnome-keyring starts by D-Bus activation")
        \(script)
        """
    // Foundation starts children with every signal blocked; dbus-run-session could then not
    // stop its dbus-daemon, which would keep our pipe open. Unblock them, bound the run, and
    // collect output through files rather than pipes a stray daemon could inherit. The bound is
    // a hang guard (a keyring call waiting for a prompt no one answers), not a speed limit: five
    // minutes, as a script of several CLI runs on one busy core must still finish inside it.
    let wrapper = """
        import os, signal, subprocess, sys, tempfile
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            child = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True)
            try:
                status = child.wait(300)
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)
                status = 124
            out.seek(0); err.seek(0)
            sys.stdout.buffer.write(out.read()); sys.stderr.buffer.write(err.read())
        sys.exit(status)
        """
    let output = try runProcess("/usr/bin/python3", ["-c", wrapper, "dbus-run-session", "--", "bash", "-c", session],
                                environment: environment)
    #expect(output.status == 0, "script failed (\(output.status)): \(output.stderr)")
    return output.stdout.split(separator: "\n").compactMap {
        try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
    }
}
