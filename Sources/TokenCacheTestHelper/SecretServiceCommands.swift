import Foundation
@_spi(Testing) import TokenCache  // not @testable: the helper must build in release too
@_spi(Backend) import TokenCacheCore

/// Test-helper commands for the Secret Service tests; each prints a small JSON result. Run
/// inside scripts/with-test-keyring.sh (a fresh, isolated daemon) when they change its state.
let secretServiceCommands: [String: HelperCommand] = [
    // ss-save GROUP USERNAME CLIENT: saves a token response for a user.
    "ss-save": { arguments in
        let store = AccountStore(backend: try SecretServiceBackend(), group: try CacheGroup(arguments[0]))
        try store.save(helperResponse(username: arguments[1]), clientID: arguments[2],
                       authority: try Authority("https://login.microsoftonline.com/11111111-1111-1111-1111-111111111111"),
                       scopes: ["User.Read"])
        printJSON(["accounts": try store.allAccounts().count])
    },
    // ss-remove GROUP USERNAME: removes an account for every app.
    "ss-remove": { arguments in
        let store = AccountStore(backend: try SecretServiceBackend(), group: try CacheGroup(arguments[0]))
        if let account = try store.account(arguments[1]) { try store.remove(account) }
        printJSON(["accounts": try store.allAccounts().count])
    },
    // ss-reload-memory GROUP COUNT: reads the whole group COUNT times (a bulk read each time, as
    // after every change by another process) and reports the resident memory before and after,
    // and how many bytes of MSAL JSON the reads returned in all.
    "ss-reload-memory": { arguments in
        let backend = try SecretServiceBackend()
        let group = try CacheGroup(arguments[0])
        let count = Int(arguments[1])!
        for _ in 0..<5 { _ = try backend.load(group) }  // allocator and GLib warm-up
        let before = residentKilobytes()
        for _ in 0..<count { _ = try backend.load(group) }
        let after = residentKilobytes()
        let bytesPerRead = try AccountStore(backend: backend, group: group).exportMSALJSON().count
        printJSON(["entries": try backend.load(group).entries.count, "rssBeforeKB": before, "rssAfterKB": after,
                   "bytesRead": bytesPerRead * count])
    },
    // ss-probe [early | save GROUP]: connects (with `early`, through connectInBackground first)
    // and reads, or with `save` saves into GROUP (which needs the encrypted session), and reports
    // the outcome (used with no bus, no daemon, or no libgcrypt).
    "ss-probe": { arguments in
        do {
            if arguments.first == "early" { SecretServiceBackend.connectInBackground() }
            let backend = try SecretServiceBackend()
            if arguments.first == "save" {
                try AccountStore(backend: backend, group: try CacheGroup(arguments[1]))
                    .save(helperResponse(username: "probe@contoso.com"), clientID: "client-probe",
                          authority: try Authority("https://login.microsoftonline.com/common"), scopes: ["User.Read"])
            } else {
                _ = try backend.load(.universalStorage)
            }
            // Whether using the Secret Service mapped OpenSSL (only the encrypted file loads it),
            // libsecret (never loaded) and libgcrypt (the transfer session's).
            let maps = (try? String(contentsOfFile: "/proc/self/maps", encoding: .utf8)) ?? ""
            printJSON(["result": "ok", "libcrypto_mapped": maps.contains("libcrypto"), "libsecret_mapped": maps.contains("libsecret"),
                       "libgcrypt_mapped": maps.contains("libgcrypt")])
        } catch {
            printJSON(["result": code(error), "message": ((error as? TokenCacheError)?.message ?? "\(error)")])
        }
    },
    // ss-early GROUP: connectInBackground, then two backends read the group's accounts: which
    // of them took the background connection, and what each read.
    "ss-early": { arguments in
        let group = try CacheGroup(arguments[0])
        SecretServiceBackend.connectInBackground()
        let first = try SecretServiceBackend(), second = try SecretServiceBackend()
        printJSON(["firstEarly": first.connectedInBackground, "secondEarly": second.connectedInBackground,
                   "first": try AccountStore(backend: first, group: group).allAccounts().map(\.username),
                   "second": try AccountStore(backend: second, group: group).allAccounts().map(\.username)])
    },
    // ss-dedicated LABEL: round trip through a dedicated collection found by label.
    "ss-dedicated": { arguments in
        var options = SecretServiceBackend.Options()
        let group = try CacheGroup("org.swift-tokencache.dedicated")
        options.mappings[group] = .dedicated(label: arguments[0])
        options.allowsUnlockPrompt = true
        let backend = try SecretServiceBackend(options: options)
        let store = AccountStore(backend: backend, group: group)
        try store.save(helperResponse(username: "dedicated@contoso.com"), clientID: "client-d",
                       authority: try Authority("https://login.microsoftonline.com/common"), scopes: ["User.Read"])
        let path = try backend.collectionPath(for: group)
        let reread = AccountStore(backend: try SecretServiceBackend(options: options), group: group)
        printJSON(["collection": path, "accounts": try reread.allAccounts().count])
    },
    // ss-create-collection LABEL: asks to create a collection (needs a prompt, so fails headless).
    "ss-create-collection": { arguments in
        var options = SecretServiceBackend.Options()
        options.defaultMapping = .dedicated(label: arguments[0], createIfMissing: true)
        options.unlockTimeout = 5
        do {
            _ = try SecretServiceBackend(options: options).collectionPath(for: .universalStorage)
            printJSON(["result": "created"])
        } catch {
            printJSON(["result": code(error), "hint": ((error as? TokenCacheError)?.hint ?? ""), "message": ((error as? TokenCacheError)?.message ?? "")])
        }
    },
    // ss-kill-mid GROUP: a long-lived backend reads the group, the daemon is killed (by its own
    // process id, from the bus), and the same backend reads again: the outcome must be a typed
    // error or the full set of entries, never an empty or partial read.
    "ss-kill-mid": { arguments in
        let group = try CacheGroup(arguments[0])
        var options = SecretServiceBackend.Options()
        options.callTimeout = 3
        let backend = try SecretServiceBackend(options: options)
        let before = try backend.load(group).entries.count
        try run("/bin/sh", ["-c", "kill -9 $(dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus.GetConnectionUnixProcessID string:org.freedesktop.secrets | awk '/uint32/ {print $2}')"])
        let start = Date()
        var outcome: [String: Any] = ["before": before]
        do {
            outcome["after"] = try backend.load(group).entries.count
            outcome["result"] = "ok"
        } catch {
            outcome["result"] = code(error)
        }
        outcome["seconds"] = Date().timeIntervalSince(start)
        printJSON(outcome)
    },
    // ss-timeout GROUP: the daemon stops answering (SIGSTOP) during a long-lived backend's
    // read and a write; both must fail with timedOut within the bound (1 s here), then the daemon resumes.
    "ss-timeout": { arguments in
        let group = try CacheGroup(arguments[0])
        var options = SecretServiceBackend.Options()
        options.callTimeout = 1
        let backend = try SecretServiceBackend(options: options)
        let before = try backend.load(group).entries.count
        let pid = "$(dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus.GetConnectionUnixProcessID string:org.freedesktop.secrets | awk '/uint32/ {print $2}')"
        try run("/bin/sh", ["-c", "kill -STOP \(pid)"])
        let start = Date()
        var outcome: [String: Any] = ["before": before]
        do { outcome["result"] = "ok: \(try backend.load(group).entries.count)" } catch { outcome["result"] = code(error) }
        outcome["seconds"] = Date().timeIntervalSince(start)
        // A write sent to the stopped daemon: not confirmed in time, and made once it runs again.
        let late = CacheEntry(kind: .appMetadata, fields: ["client_id": .string("late-write"), "environment": .string("login.microsoftonline.com")])
        do { _ = try backend.apply([.upsert(late)], to: group, expected: nil); outcome["write"] = "ok" } catch {
            outcome["write"] = code(error)
            outcome["writeMessage"] = "\(error)"
        }
        try run("/bin/sh", ["-c", "kill -CONT \(pid)"])
        // Read with the default bound: the resumed daemon first makes the late write, on disk.
        do { outcome["afterResume"] = try SecretServiceBackend().load(group).entries.count } catch { outcome["afterResume"] = code(error) }
        printJSON(outcome)
    },
    // ss-count GROUP: entries of a group.
    "ss-count": { arguments in
        printJSON(["entries": try SecretServiceBackend().load(try CacheGroup(arguments[0])).entries.count])
    },
    // ss-measure: cost of currentRevision, and latency from another connection's write to the signal.
    "ss-measure": { _ in
        let group = try CacheGroup("org.swift-tokencache.measure")
        let reader = try SecretServiceBackend()
        let writer = try SecretServiceBackend()
        let rounds = 1_000_000
        var clock = ContinuousClock.now
        var same = 0
        let first = try reader.currentRevision(of: group)
        for _ in 0..<rounds where try reader.currentRevision(of: group) == first { same += 1 }
        let revisionNanos = milliseconds(ContinuousClock.now - clock) * 1e6 / Double(rounds)
        var afterReturn: [Double] = []
        var afterStart: [Double] = []
        var moved = 0, lost = 0
        for round in 0..<30 {
            let entry = CacheEntry(kind: .appMetadata, fields: ["client_id": .string("measure"), "environment": .string("login.microsoftonline.com"),
                                                              "family_id": .string("\(round)")])
            let received = reader.receivedSignalCount
            let before = try reader.currentRevision(of: group)
            clock = ContinuousClock.now
            _ = try writer.apply([.upsert(entry)], to: group, expected: nil)
            let returned = ContinuousClock.now
            // A hang guard, not a speed bound: a signal not there after a minute is lost.
            while reader.receivedSignalCount == received && ContinuousClock.now - returned < .seconds(60) { usleep(20) }
            guard reader.receivedSignalCount != received else { lost += 1; continue }
            if try reader.currentRevision(of: group) != before { moved += 1 }
            let seen = ContinuousClock.now
            afterReturn.append(milliseconds(seen - returned))
            afterStart.append(milliseconds(seen - clock))
        }
        let changed = try reader.currentRevision(of: group) != first
        try writer.removeAll(in: group)
        func median(_ values: [Double]) -> Double { values.isEmpty ? 0 : values.sorted()[values.count / 2] }
        printJSON(["currentRevisionNanoseconds": revisionNanos, "unchanged": same == rounds,
                   "writesSeen": afterReturn.count, "signalsLost": lost, "roundsRevisionMoved": moved, "revisionChangedByWrites": changed,
                   "signalAfterWriteReturnedMsMedian": median(afterReturn), "signalAfterWriteReturnedMsMax": afterReturn.max() ?? 0,
                   "signalAfterWriteStartedMsMedian": median(afterStart)])
    },
    // ss-locked GROUP: saves, locks the collection, then checks reads and writes are refused and
    // nothing was deleted.
    "ss-locked": { arguments in
        let group = try CacheGroup(arguments[0])
        let backend = try SecretServiceBackend()
        let store = AccountStore(backend: backend, group: group)
        try store.save(helperResponse(username: "locked@contoso.com"), clientID: "client-l",
                       authority: try Authority("https://login.microsoftonline.com/common"), scopes: ["User.Read"])
        let saved = try backend.load(group).entries.count
        let collection = try backend.resolvedCollectionPath(for: group)
        try lock(collection)
        var outcome: [String: Any] = ["saved": saved]
        do { outcome["longLivedRead"] = "ok: \(try backend.load(group).entries.count)" } catch {
            outcome["longLivedRead"] = code(error)
        }
        let fresh = try SecretServiceBackend()
        do { _ = try AccountStore(backend: fresh, group: group).allAccounts(); outcome["read"] = "ok" } catch {
            outcome["read"] = code(error)
        }
        do { try AccountStore(backend: fresh, group: group).removeAll(); outcome["removeAll"] = "ok" } catch {
            outcome["removeAll"] = code(error)
        }
        // The items are still there, behind the lock.
        let lockedCount = try fresh.lockedItemCount(group: group, collection: collection)
        outcome["stillThereLocked"] = lockedCount
        printJSON(outcome)
    },
    // ss-unlock-headless GROUP: locks the collection, then allows an unlock prompt, which a
    // headless daemon cannot show; then reads its state again without prompts.
    "ss-unlock-headless": { arguments in
        let group = try CacheGroup(arguments[0])
        try lock(try SecretServiceBackend().resolvedCollectionPath(for: group))
        var options = SecretServiceBackend.Options()
        options.allowsUnlockPrompt = true
        options.unlockTimeout = 5
        var outcome: [String: Any] = [:]
        let start = Date()
        do { try SecretServiceBackend(options: options).checkCollection(for: group); outcome["prompted"] = "ok" } catch {
            outcome["prompted"] = code(error)
        }
        outcome["seconds"] = Date().timeIntervalSince(start)
        do { try SecretServiceBackend().checkCollection(for: group); outcome["unprompted"] = "ok" } catch {
            outcome["unprompted"] = code(error)
        }
        printJSON(outcome)
    },
    // ss-no-default read|save|auto [prompt]: in a keyring with no 'default' collection (#60
    // item 5), reads the universal group, saves an account into it, or opens the `automatic`
    // backend, with or without prompts (30 s), and reports the outcome: the error's code and
    // reason, or the default collection's path and the accounts seen.
    "ss-no-default": { arguments in
        var options = SecretServiceBackend.Options()
        options.allowsUnlockPrompt = arguments.dropFirst().first == "prompt"
        options.unlockTimeout = 30
        var outcome: [String: Any] = [:]
        do {
            switch arguments.first {
            case "auto":
                let selection = try BackendSelection.open(policy: .automatic, secretService: options, announcesFallback: false)
                outcome["fallback"] = selection.isFallback
                outcome["why"] = selection.reason
            case "save":
                let backend = try SecretServiceBackend(options: options)
                let store = AccountStore(backend: backend, group: .universalStorage)
                try store.save(helperResponse(username: "keyring@contoso.com"), clientID: "client-no-default",
                               authority: try Authority("https://login.microsoftonline.com/common"), scopes: ["User.Read"])
                outcome["collection"] = try backend.resolvedCollectionPath(for: .universalStorage)
                outcome["accounts"] = try AccountStore(backend: SecretServiceBackend(), group: .universalStorage).allAccounts().map(\.username)
            default:
                let backend = try SecretServiceBackend(options: options)
                outcome["accounts"] = try AccountStore(backend: backend, group: .universalStorage).allAccounts().map(\.username)
                outcome["collection"] = try backend.resolvedCollectionPath(for: .universalStorage)
            }
            outcome["result"] = "ok"
        } catch {
            outcome["result"] = code(error)
            outcome["reason"] = (error as? TokenCacheError)?.reason.name
            outcome["message"] = (error as? TokenCacheError)?.message
            outcome["hint"] = (error as? TokenCacheError)?.hint
        }
        printJSON(outcome)
    },
]

func helperResponse(username: String) -> TokenResponse {
    func b64(_ object: [String: String]) -> String {
        Data((try? JSONSerialization.data(withJSONObject: object, options: .sortedKeys)) ?? Data()).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }
    let uid = String(username.unicodeScalars.reduce(into: UInt64(1469598103934665603)) { $0 = ($0 ^ UInt64($1.value)) &* 1099511628211 }, radix: 16)
    return TokenResponse(
        accessToken: "secret-at-\(uid)", refreshToken: "secret-rt-\(uid)",
        idToken: b64(["alg": "none"]) + "." + b64(["oid": uid, "sub": uid, "tid": "t", "preferred_username": username]) + ".sig",
        clientInfo: b64(["uid": uid, "utid": "11111111-1111-1111-1111-111111111111"]),
        scope: "User.Read", expiresIn: 3600, familyID: "1")
}

func printJSON(_ object: [String: Any]) {
    let data = (try? JSONSerialization.data(withJSONObject: object, options: .sortedKeys)) ?? Data("{}".utf8)
    print(String(decoding: data, as: UTF8.self))
}

/// Locks a collection the way another program would (Service.Lock from dbus-send).
func lock(_ collection: String) throws {
    try run("/usr/bin/dbus-send", ["--session", "--print-reply", "--dest=org.freedesktop.secrets", "/org/freedesktop/secrets",
                                   "org.freedesktop.Secret.Service.Lock", "array:objpath:\(collection)"])
}

func code(_ error: any Error) -> String {
    (error as? TokenCacheError).map { "\($0.code)" } ?? "untyped: \(error)"
}

func run(_ executable: String, _ arguments: [String]) throws {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    process.standardOutput = FileHandle.nullDevice
    try process.run()
    process.waitUntilExit()
}

func milliseconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) * 1e3 + Double(duration.components.attoseconds) / 1e15
}

/// VmRSS from /proc/self/status, in kilobytes.
func residentKilobytes() -> Int {
    let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
    guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }) else { return 0 }
    return Int(line.split(separator: " ", omittingEmptySubsequences: true)[1]) ?? 0
}
