import Foundation
import Testing
@testable import SandboxStore
@testable import TokenCacheCore
import TokenCacheTestSupport

/// A sandboxed app for real: `scripts/with-test-flatpak.sh` runs the `tokencache` CLI and
/// libsecret's `secret-tool` in bubblewrap with a `/.flatpak-info`, behind xdg-dbus-proxy, with
/// the real xdg-desktop-portal giving the app's secret from gnome-keyring's Secret portal backend
/// (the isolated test keyring of scripts/with-test-keyring.sh).
@Suite("Sandbox: portal-keyed file keyring (Flatpak)", .harness, .enabled(if: TestEnvironment.runsSecretServiceTests))
struct PortalKeyringTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardizedFileURL
    let appID = "org.swifttokencache.T" + UUID().uuidString.prefix(8).filter(\.isLetter)
        + String(Int.random(in: 1000...9999))
    let group = "org.swift-tokencache.sandbox-\(UUID().uuidString.prefix(8).lowercased())"

    /// Set: the sandbox is the test Snap of that name instead (with-test-flatpak.sh --snap).
    var snapName: String?

    var keyringPath: String { home + "/.var/app/\(appID)/data/keyrings/default.keyring" }
    var home: String { ProcessInfo.processInfo.environment["HOME"] ?? "/" }

    /// libsecret 0.20.5 subscribes to the portal's Response only after RetrieveSecret returns
    /// (fixed in 0.21.4): when the answer comes first, as it can on a loaded machine, its
    /// secret-tool waits forever. Its runs here are bounded (20 s: the harness is killed, and
    /// bubblewrap's --die-with-parent ends the sandbox) and retried, one at a time. (`timeout`
    /// inside cannot do it: the test process's children inherit a mask that blocks SIGALRM.)
    /// Five tries: pinned to one core in CI, three in a row lost the race (the Snap test, 2026-12-04).
    static let secretToolTurn = NSLock()

    func secretTool(_ arguments: [String], input: Data? = nil) throws -> ProcessOutput {
        Self.secretToolTurn.lock()
        defer { Self.secretToolTurn.unlock() }
        var output = try sandboxed(["secret-tool"] + arguments, input: input, bound: 20)
        for _ in 0..<4 where output.status == 124 { output = try sandboxed(["secret-tool"] + arguments, input: input, bound: 20) }
        return output
    }

    /// Runs `command` inside the test Flatpak sandbox of `app` (this test's app by default).
    /// With `bound`, a run still going after that many seconds is killed and reported as status 124.
    /// With `portal`, the sandbox's bus is a private one whose real xdg-desktop-portal has the
    /// test Secret backend answering so (scripts/with-test-portal-backend.sh), logging to `portalLog`.
    /// `talk` names more bus names the sandbox may talk to (as a manifest's --talk-name).
    func sandboxed(_ command: [String], input: Data? = nil, app: String? = nil, bound: Double? = nil,
                   portal: String? = nil, portalLog: String? = nil, talk: [String] = []) throws -> ProcessOutput {
        let harness = ["--app-id", app ?? appID] + talk.flatMap { ["--talk", $0] } + (snapName.map { ["--snap", $0] } ?? [])
        var environment = ProcessInfo.processInfo.environment
        for name in ["TOKENCACHE_BACKEND", "TOKENCACHE_GROUP", "TOKENCACHE_COLLECTION", "TOKENCACHE_PASSPHRASE_FILE"] { environment[name] = nil }
        environment["NO_COLOR"] = "1"
        if let portal {
            environment["PORTAL_BACKEND_LOG"] = portalLog
            return try runProcess(Self.repository.appendingPathComponent("scripts/with-test-portal-backend.sh").path,
                                  [portal, Self.repository.appendingPathComponent("scripts/with-test-flatpak.sh").path]
                                  + harness + command, input: input, environment: environment)
        }
        if let bound {
            let process = Process()
            process.executableURL = Self.repository.appendingPathComponent("scripts/with-test-flatpak.sh")
            process.arguments = harness + command
            process.environment = environment
            let stdout = Pipe(), stderr = Pipe(), stdin = Pipe()
            (process.standardOutput, process.standardError, process.standardInput) = (stdout, stderr, stdin)
            let finished = DispatchSemaphore(value: 0)
            process.terminationHandler = { _ in finished.signal() }
            try process.run()
            if let input { stdin.fileHandleForWriting.write(input) }
            try stdin.fileHandleForWriting.close()
            let timedOut = finished.wait(timeout: .now() + bound) == .timedOut
            if timedOut {
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
            }
            let out = String(decoding: stdout.fileHandleForReading.availableData, as: UTF8.self)
            let err = String(decoding: stderr.fileHandleForReading.availableData, as: UTF8.self)
            return ProcessOutput(status: timedOut ? 124 : process.terminationStatus, stdout: out, stderr: err)
        }
        return try runProcess(Self.repository.appendingPathComponent("scripts/with-test-flatpak.sh").path,
                              harness + command, input: input, environment: environment)
    }

    /// The `tokencache` CLI in the sandbox, on the automatic backend and this test's group.
    func tokencache(_ arguments: [String], input: Data? = nil, app: String? = nil, backend: String? = "auto",
                    portal: String? = nil, portalLog: String? = nil, talk: [String] = []) throws -> ProcessOutput {
        let binary = TestEnvironment.binDirectory.appendingPathComponent("tokencache").path
        return try sandboxed([binary] + arguments + (backend.map { ["--backend", $0] } ?? []) + ["--group", group], input: input, app: app,
                             portal: portal, portalLog: portalLog, talk: talk)
    }

    func save(_ user: Fixtures.User, app: String? = nil, backend: String = "auto") throws -> [String: Any] {
        let response = Fixtures.response(for: user, scope: "User.Read", foci: "1", tag: "sandbox")
        let saved = try tokencache(["save", "--client", Fixtures.appOne, "--authority", Fixtures.authority().url.absoluteString,
                                    "--scopes", "User.Read"], input: Fixtures.json(response), app: app, backend: backend)
        #expect(saved.status == 0, "\(saved.stderr)")
        return response
    }

    func cleanUp() { try? FileManager.default.removeItem(atPath: home + "/.var/app/\(appID)") }

    @Test("save, token, list and remove go through the portal-keyed keyring; no key is written")
    func saveTokenListRemove() async throws {
        defer { cleanUp() }
        try await offThePool {
            let response = try save(Fixtures.alice)
            #expect(FileManager.default.fileExists(atPath: keyringPath))
            let list = try tokencache(["list"])
            #expect(list.status == 0 && list.stdout.contains(Fixtures.alice.username), "\(list.stdout)\(list.stderr)")
            let token = try tokencache(["token", "--client", Fixtures.appOne, "--scopes", "User.Read", "--authority", Fixtures.authority().url.absoluteString])
            #expect(token.status == 0, "\(token.stderr)")
            #expect(token.stdout.contains(response["access_token"] as! String))
            // Nothing key-like beside the keyring: the app's directory holds the keyring only.
            let files = FileManager.default.enumerator(atPath: home + "/.var/app/\(appID)")?.allObjects as? [String] ?? []
            #expect(files.filter { !$0.hasPrefix("data/keyrings") && !["data", "config", "cache"].contains($0) }.isEmpty, "\(files)")
            #expect(Set(try FileManager.default.contentsOfDirectory(atPath: (keyringPath as NSString).deletingLastPathComponent))
                    .isSubset(of: ["default.keyring", "default.keyring.lock"]))
            let removed = try tokencache(["remove", "--all", "--yes"])
            #expect(removed.status == 0, "\(removed.stderr)")
            #expect(!(try tokencache(["list"]).stdout.contains(Fixtures.alice.username)))
        }
    }

    @Test("doctor in the sandbox shows the sandbox, the Secret portal and the keyring it selects")
    func doctor() async throws {
        defer { cleanUp() }
        try await offThePool {
            let doctor = try tokencache(["doctor"])
            let text = doctor.stdout + doctor.stderr
            #expect(text.contains("Flatpak") && text.contains("Secret portal") && text.contains("default.keyring"), "\(text)")
        }
    }

    @Test("secret-tool in the same sandbox finds and decrypts our item")
    func secretToolReadsOurItems() async throws {
        defer { cleanUp() }
        try await offThePool {
            _ = try save(Fixtures.alice)
            let search = try secretTool(["search", "--all", "group", group, "kind", "RefreshToken"])
            let text = search.stdout + search.stderr
            #expect(search.status == 0, "\(text)")
            #expect(text.contains("label = Refresh token") && text.contains("secret = {\"RefreshToken\""), "\(text)")
            #expect(text.contains("schema = org.swift-tokencache.Entry"))  // secret-tool shows xdg:schema so
        }
    }

    @Test("An item secret-tool stored in the sandbox with our schema is read by us")
    func weReadSecretToolsItem() async throws {
        defer { cleanUp() }
        try await offThePool {
            _ = try save(Fixtures.alice)  // creates the keyring, as the app's first run would
            let bob = Fixtures.bob
            let key = "\(bob.homeAccountID)-login.microsoftonline.com-\(bob.tenant)"
            let account: [String: Any] = ["Account": [key: [
                "home_account_id": bob.homeAccountID, "environment": "login.microsoftonline.com", "realm": bob.tenant,
                "local_account_id": bob.uid, "username": bob.username, "authority_type": "MSSTS"]]]
            let stored = try secretTool(["store", "--label=Account from secret-tool", "xdg:schema", "org.swift-tokencache.Entry",
                                        "schema_version", "1", "group", group, "kind", "Account", "key", key,
                                        "home_account_id", bob.homeAccountID], input: Fixtures.json(account))
            #expect(stored.status == 0, "\(stored.stderr)")
            let exported = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("sandbox-export-\(UUID().uuidString).json")
            defer { try? FileManager.default.removeItem(at: exported) }
            let export = try tokencache(["export", "--format", "msal-json", "--output", exported.path])
            #expect(export.status == 0, "\(export.stderr)")
            let json = try String(contentsOf: exported, encoding: .utf8)
            #expect(json.contains(bob.username) && json.contains(Fixtures.alice.username), "\(json)")
        }
    }

    @Test("The portal's secret is stable: a later run reads the file; another app cannot")
    func stableAndPerApp() async throws {
        let other = appID + "Other"
        defer {
            cleanUp()
            try? FileManager.default.removeItem(atPath: home + "/.var/app/\(other)")
        }
        try await offThePool {
            _ = try save(Fixtures.alice)
            // A new sandbox, proxy and portal request: same secret, same items.
            #expect(try tokencache(["list"]).stdout.contains(Fixtures.alice.username))
            // The file copied into another app's data: that app's secret does not open it.
            let otherKeyrings = home + "/.var/app/\(other)/data/keyrings"
            try FileManager.default.createDirectory(atPath: otherKeyrings, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            try FileManager.default.copyItem(atPath: keyringPath, toPath: otherKeyrings + "/default.keyring")
            let before = try Data(contentsOf: URL(fileURLWithPath: otherKeyrings + "/default.keyring"))
            let list = try tokencache(["list"], app: other)
            #expect(list.status != 0 && !list.stdout.contains(Fixtures.alice.username))
            #expect(list.stderr.contains("does not authenticate"), "\(list.stderr)")
            // A write is refused too, and the file stays as it was.
            let response = Fixtures.response(for: Fixtures.bob, scope: "User.Read", foci: "1", tag: "other")
            let saved = try tokencache(["save", "--client", Fixtures.appOne, "--authority", Fixtures.authority().url.absoluteString,
                                        "--scopes", "User.Read"], input: Fixtures.json(response), app: other)
            #expect(saved.status != 0 && saved.stderr.contains("does not authenticate"), "\(saved.stderr)")
            #expect(try Data(contentsOf: URL(fileURLWithPath: otherKeyrings + "/default.keyring")) == before)
        }
    }

    @Test("Two processes of the app save at once and lose nothing")
    func concurrentWriters() async throws {
        defer { cleanUp() }
        try await offThePool {
            let users = [Fixtures.alice, Fixtures.bob]
            DispatchQueue.concurrentPerform(iterations: users.count) { index in
                #expect(throws: Never.self) { _ = try save(users[index]) }
            }
            let list = try tokencache(["list"])
            #expect(users.allSatisfy { list.stdout.contains($0.username) }, "\(list.stdout)")
        }
    }
}
