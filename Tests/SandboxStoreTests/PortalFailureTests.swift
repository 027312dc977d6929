import Foundation
import Testing
import TokenCacheTestSupport
@testable import TokenCacheCore

/// How the Secret portal can refuse, each produced for real: the real xdg-desktop-portal on a
/// private bus, with a Secret backend that answers as the documented backend protocol allows
/// (scripts/test-secret-portal-backend.py): 1 as a backend whose dialog the user dismissed
/// (gnome-keyring never prompts, so never answers 1), 2, a failing backend (the portal
/// answers 2), or 0 with a secret of the wrong size.
extension PortalKeyringTests {
    struct Refusal: Sendable, CustomTestStringConvertible {
        let answer: String
        let code: TokenCacheError.Code
        let message: String
        var testDescription: String { answer }
    }

    static let refusals = [
        Refusal(answer: "cancel", code: .portalCancelled, message: "The request for this app's keyring secret was cancelled."),
        Refusal(answer: "fail", code: .portalFailed, message: "The Secret portal could not give this app's keyring secret."),
        Refusal(answer: "error", code: .portalFailed, message: "The Secret portal could not give this app's keyring secret."),
        Refusal(answer: "short", code: .portalFailed, message: "The Secret portal gave 10 bytes instead of this app's 64-byte secret."),
    ]

    /// Every file under the app's directory with its bytes.
    func appFiles() throws -> [String: Data] {
        let root = home + "/.var/app/\(appID)"
        var files: [String: Data] = [:]
        for case let path as String in FileManager.default.enumerator(atPath: root)?.allObjects ?? [] {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: root + "/" + path, isDirectory: &isDirectory), !isDirectory.boolValue {
                files[path] = try Data(contentsOf: URL(fileURLWithPath: root + "/" + path))
            }
        }
        return files
    }

    @Test("A cancelled or failed Secret portal request gives its typed error and changes nothing", arguments: refusals)
    func portalRefusal(_ refusal: Refusal) async throws {
        defer { cleanUp() }
        try await offThePool {
            _ = try save(Fixtures.alice)  // the keyring, keyed by gnome-keyring's portal secret
            let before = try appFiles()
            #expect(before.keys.contains("data/keyrings/default.keyring"))
            let log = NSTemporaryDirectory() + "portal-backend-\(UUID().uuidString).log"
            defer { try? FileManager.default.removeItem(atPath: log) }

            let response = Fixtures.response(for: Fixtures.bob, scope: "User.Read", foci: "1", tag: "refused")
            let saved = try tokencache(["save", "--client", Fixtures.appOne, "--authority", Fixtures.authority().url.absoluteString,
                                        "--scopes", "User.Read"], input: Fixtures.json(response), portal: refusal.answer, portalLog: log)
            #expect(saved.status == 1 && saved.stderr.contains(refusal.message), "\(saved.stdout)\(saved.stderr)")
            #expect(saved.stderr.lowercased().contains("nothing was"), "\(saved.stderr)")  // the hint says so
            #expect(!(saved.stdout + saved.stderr).contains(response["refresh_token"] as! String))
            let list = try tokencache(["list"], portal: refusal.answer, portalLog: log)
            #expect(list.status == 1 && list.stderr.contains(refusal.message) && !list.stdout.contains(Fixtures.alice.username),
                    "\(list.stdout)\(list.stderr)")
            // The library's diagnosis, in words (not its internal code name, #46).
            let doctor = try tokencache(["doctor"], portal: refusal.answer, portalLog: log)
            #expect(doctor.stdout.contains(refusal.message) && !doctor.stdout.contains("\(refusal.code):"), "\(doctor.stdout)\(doctor.stderr)")

            // The real portal asked the backend for this sandboxed app, once per run.
            let calls = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n")
            #expect(calls.count == 3 && calls.allSatisfy { $0 == "RetrieveSecret app_id='\(appID)'" }, "\(calls)")
            // Nothing was written, created or lost.
            #expect(try appFiles() == before)
            #expect(try tokencache(["list"]).stdout.contains(Fixtures.alice.username))
        }
    }

    @Test("Without a Secret portal backend the sandbox keyring is not used, and doctor says why")
    func noSecretBackend() async throws {
        defer { cleanUp() }
        try await offThePool {
            _ = try save(Fixtures.alice)
            let before = try appFiles()
            let doctor = try tokencache(["doctor"], portal: "none")
            #expect(doctor.stdout.contains("Secret portal") && doctor.stdout.contains("No such interface “org.freedesktop.portal.Secret”"),
                    "\(doctor.stdout)\(doctor.stderr)")
            #expect(!doctor.stdout.contains("default.keyring"), "\(doctor.stdout)")
            #expect(try appFiles() == before)
        }
    }
}
