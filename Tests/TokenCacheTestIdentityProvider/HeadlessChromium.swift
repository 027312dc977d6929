import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization
import Testing
import TokenCache
import TokenCacheTestSupport

/// Debian's Chromium, headless, as the user's browser of the interactive sign-in tests: it loads
/// the fake identity provider's login page, runs its script, posts the form and follows the
/// redirect to the loopback listener. One instance per sign-in; ``close()`` ends the browser and
/// removes its throw-away profile.
package final class HeadlessChromium: Sendable {
    package static let path = "/usr/bin/chromium"
    package static var isInstalled: Bool { FileManager.default.isExecutableFile(atPath: path) }
    /// Browser tests run where Chromium is installed, and in CI always (where a missing browser
    /// makes them fail rather than skip; scripts/install-deps.sh installs it).
    package static var runsBrowserTests: Bool { isInstalled || TestEnvironment.isCI }

    package init() {}

    /// The browser's flags. `--password-store=basic` and ``isolatedEnvironment`` keep it off the
    /// test session's bus: Chromium otherwise stores its "Chromium Safe Storage" key in the shared
    /// test keyring (waiting on it while other tests lock or load it) and activates the portal and
    /// the accessibility bus there, so a sign-in test depended on what the other tests were doing.
    package static func arguments(profile: String, url: String) -> [String] {
        ["--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--password-store=basic",
         "--user-data-dir=\(profile)", url]
    }

    /// The browser's environment: the test process's, with no session bus and no accessibility bridge.
    package static var isolatedEnvironment: [String: String] {
        ProcessInfo.processInfo.environment.merging(isolation) { _, new in new }
    }

    private static let isolation = ["DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent", "NO_AT_BRIDGE": "1"]

    /// A shell line that starts the browser detached (`setsid`, its own process group) on `"$1"`,
    /// isolated as ``arguments(profile:url:)`` says, for the scripts a program under test runs.
    package static func detachedShellCommand(profile: String) -> String {
        let flags = arguments(profile: "'\(profile)'", url: "\"$1\"").joined(separator: " ")
        let environment = isolation.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        return "env \(environment) setsid \(path) \(flags) </dev/null >/dev/null 2>&1 &"
    }

    private let running = Mutex<(process: Process, profile: URL)?>(nil)
    /// How many URLs it was asked to open.
    package let opened = Atomic<Int>(0)

    package var opener: BrowserOpener {
        .custom { [self] url in try launch(url) }
    }

    private func launch(_ url: URL) throws {
        opened.add(1, ordering: .sequentiallyConsistent)
        let profile = try TestEnvironment.temporaryDirectory()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.path)
        process.arguments = Self.arguments(profile: profile.path, url: url.absoluteString)
        process.environment = Self.isolatedEnvironment
        // Chromium's own chatter is not the test's output: it goes to a file in the profile, which
        // ``outputTail()`` reads for a failing test's message.
        let log = profile.appendingPathComponent(Self.logName)
        FileManager.default.createFile(atPath: log.path, contents: nil)
        let output = try FileHandle(forWritingTo: log)
        defer { try? output.close() }  // the browser has its own copy once started
        process.standardOutput = output
        process.standardError = output
        process.standardInput = FileHandle.nullDevice
        try process.run()
        running.withLock { $0 = (process, profile) }
    }

    private static let logName = "chromium-output.log"

    /// The last lines the browser printed, for the message of a sign-in that did not complete.
    package func outputTail(lines: Int = 20) -> String {
        guard let profile = running.withLock({ $0?.profile }),
              let text = try? String(contentsOf: profile.appendingPathComponent(Self.logName), encoding: .utf8) else {
            return "(the browser was not started)"
        }
        return text.split(separator: "\n").suffix(lines).joined(separator: "\n")
    }

    /// Ends the browser (it keeps running after the flow) and removes its profile.
    package func close() {
        guard let (process, profile) = running.withLock({ value in defer { value = nil }; return value }) else { return }
        // Process starts Chromium as the leader of its own process group, which its helpers join:
        // end them all, and wait for them, since they write to the profile (history with the
        // redirect URL) after the main process is gone.
        let pid = process.processIdentifier
        let ownGroup = getpgid(pid) == pid
        if ownGroup { kill(-pid, SIGTERM) } else { process.terminate() }
        process.waitUntilExit()
        if ownGroup { Self.awaitGroupEnd(pid) }
        try? FileManager.default.removeItem(at: profile)
    }

    /// Ends process group `pid` (a browser and the helpers that joined it) and waits for it, since
    /// the helpers write the profile after the main process is gone. Clean-up after a test, not
    /// logic: a group has no exit event to wait on, so it checks every 20 ms, then kills what is left after 10 s.
    package static func endGroup(_ pid: Int32) {
        kill(-pid, SIGTERM)
        awaitGroupEnd(pid)
    }

    private static func awaitGroupEnd(_ pid: Int32) {
        let giveUp = Date().addingTimeInterval(10)
        while kill(-pid, 0) == 0 && Date() < giveUp { usleep(20_000) }
        if kill(-pid, 0) == 0 { kill(-pid, SIGKILL); usleep(100_000) }
    }

    deinit { close() }
}

extension FakeIdentityProvider {
    /// The sign-in side of /stats: authorization requests as received, device code polls.
    package struct SignInStats: Decodable {
        package struct Poll: Decodable {
            package var outcome: String
            package var at: Double
            /// The `claims` parameter the poll carried.
            package var claims: String?
        }
        /// A device authorization request and the `claims` it carried.
        package struct DeviceAuthorization: Decodable {
            package var client_id: String?
            package var claims: String?
        }
        /// Token requests; grant_type and client_info are set for authorization codes.
        package struct Grant: Decodable {
            package var grant_type: String?
            package var client_info: Bool?
            package var claims: String?
        }
        package var authorize_requests: [[String: String]]
        package var device_polls: [Poll]
        package var device_authorizations: [DeviceAuthorization]
        package var grants: [Grant]
    }

    package func signInStats() async throws -> SignInStats {
        let (data, _) = try await URLSession.shared.data(from: URL(string: "http://\(host):\(port)/stats")!)
        return try JSONDecoder().decode(SignInStats.self, from: data)
    }

    /// The provider plays Alice at its login page: `"submit"` signs in, `"cancel"` cancels.
    package func actAsUser(_ action: String, family: [String: String] = [:]) async throws {
        try await control(["browser_action": action, "family_clients": family,
                           "sign_in_user": ["uid": Fixtures.alice.uid, "utid": Fixtures.alice.tenant, "username": Fixtures.alice.username]])
    }
}

/// Headless Chromium as a command the program under test runs itself (`$BROWSER`, a .desktop
/// file's `Exec`): a script in `directory` that starts it detached and records its pid, so
/// ``close()`` can end its whole process group.
package struct BrowserCommand {
    /// The script: `browser.sh URL`.
    package let path: URL
    private let pidFile: URL

    package init(in directory: URL) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let profile = directory.appendingPathComponent("profile")
        pidFile = directory.appendingPathComponent("browser.pid")
        path = directory.appendingPathComponent("browser.sh")
        try """
            #!/bin/sh
            \(HeadlessChromium.detachedShellCommand(profile: profile.path))
            echo $! > '\(pidFile.path)'
            """.write(to: path, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: path.path)
    }

    /// Ends the browser and its helpers (they write the profile after the main process).
    package func close() {
        let text = (try? String(contentsOf: pidFile, encoding: .utf8)) ?? ""
        guard let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)) else { return }
        HeadlessChromium.endGroup(pid)
    }
}
