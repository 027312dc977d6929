import Foundation
import Synchronization
import Testing
// The CLI's module links the keeper (the only one: scripts/check-module-graph.sh); its package API is visible here.
import TokenCacheKeeper
import TokenCacheTestSupport

/// The keeper's consent back-off, on a clock the test moves (no sleep).
@Suite("Token keeper consent back-off", .harness)
struct KeeperConsentLimiterTests {
    @Test("Three failures in a row refuse a uid's attempts (PAM not asked) until the back-off has passed on the keeper's clock; other uids are not held back; a success clears the count; one attempt of a uid at a time")
    func backOffFollowsTheClock() throws {
        let clock = TestClock()
        let limiter = ConsentLimiter(backoff: .seconds(60), now: { clock.now.withLock { $0 } })
        for _ in 0..<ConsentLimiter.limit {
            try limiter.begin(uid: 1000)
            limiter.end(uid: 1000, outcome: .failed)
        }
        #expect(throws: ConsentLimiter.Refusal.tooManyFailures(retryAfter: .seconds(60))) { try limiter.begin(uid: 1000) }
        try limiter.begin(uid: 1001)  // another uid is not held back
        #expect(throws: ConsentLimiter.Refusal.attemptInProgress) { try limiter.begin(uid: 1001) }
        limiter.end(uid: 1001, outcome: .succeeded)

        clock.now.withLock { $0 = .seconds(59) }
        #expect(throws: ConsentLimiter.Refusal.tooManyFailures(retryAfter: .seconds(1))) { try limiter.begin(uid: 1000) }
        clock.now.withLock { $0 = .seconds(60) }
        try limiter.begin(uid: 1000)  // the back-off has passed: one more attempt, counted afresh
        limiter.end(uid: 1000, outcome: .failed)
        try limiter.begin(uid: 1000)
        limiter.end(uid: 1000, outcome: .succeeded)  // a success clears the count
        for _ in 0..<(ConsentLimiter.limit - 1) {
            try limiter.begin(uid: 1000)
            limiter.end(uid: 1000, outcome: .failed)
        }
        try limiter.begin(uid: 1000)
        limiter.end(uid: 1000, outcome: .succeeded)
    }
}

extension KeeperConsentLimiterTests {
    @Test("Saved in the state directory: each lockout in a row doubles (60 s, 120 s, 240 s … at most an hour), a new limiter on the same directory (a restarted keeper) keeps the count and the lockout, the file is 0600 and replaced whole, a success clears it")
    func backOffIsSavedAndGrows() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("limiter-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let clock = TestClock()
        clock.now.withLock { $0 = .seconds(1_800_000_000) }  // the wall clock: lockouts are saved as times since the epoch
        let now: @Sendable () -> Duration = { clock.now.withLock { $0 } }
        var limiter = ConsentLimiter(backoff: .seconds(60), directory: directory, now: now)
        func failLimit() throws {
            for _ in 0..<ConsentLimiter.limit {
                try limiter.begin(uid: 1000)
                limiter.end(uid: 1000, outcome: .failed)
            }
        }
        var expected: [Duration] = []
        var seen: [Duration] = []
        var length = Duration.seconds(60)
        for _ in 0..<8 {
            try failLimit()
            // A restarted keeper reads the saved count: still locked, for the whole length.
            limiter = ConsentLimiter(backoff: .seconds(60), directory: directory, now: now)
            do throws(ConsentLimiter.Refusal) {
                try limiter.begin(uid: 1000)
                Issue.record("not locked after \(ConsentLimiter.limit) failures")
            } catch {
                if case .tooManyFailures(let wait) = error { seen.append(wait) }
            }
            expected.append(length)
            clock.now.withLock { $0 += length }
            length = min(length * 2, ConsentLimiter.maximumBackoff)
        }
        #expect(seen == expected && expected.prefix(4) == [.seconds(60), .seconds(120), .seconds(240), .seconds(480)] && expected.last == .seconds(3600), "\(seen)")
        let path = try #require(limiter.path(uid: 1000))
        var info = stat()
        #expect(stat(path, &info) == 0 && info.st_mode & 0o777 == 0o600)
        #expect(try FileManager.default.contentsOfDirectory(atPath: "\(directory)/1000").filter { $0.hasPrefix(".") }.isEmpty, "no temporary file left")
        // A success clears the count and the doubling: the next lockout is 60 s again, also after a restart.
        try limiter.begin(uid: 1000)
        limiter.end(uid: 1000, outcome: .succeeded)
        try failLimit()
        limiter = ConsentLimiter(backoff: .seconds(60), directory: directory, now: now)
        #expect(throws: ConsentLimiter.Refusal.tooManyFailures(retryAfter: .seconds(60))) { try limiter.begin(uid: 1000) }
        // Another uid never failed: no file of its own.
        try limiter.begin(uid: 1001)
        limiter.end(uid: 1001, outcome: .succeeded)
        #expect(!FileManager.default.fileExists(atPath: "\(directory)/1001"))
    }
}

extension KeeperConsentLimiterTests {
    @Test("A saved count that does not read (corrupt, or not a regular file) is the longest lockout with a typed refusal naming the file, never a fresh count; it holds after a restart and ends after an hour on the clock")
    func unreadableCountIsTheLongestLockout() throws {
        for corrupt in ["{", "directory"] {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("limiter-\(UUID().uuidString)").path
            try FileManager.default.createDirectory(atPath: "\(directory)/1000", withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let clock = TestClock()
            clock.now.withLock { $0 = .seconds(1_800_000_000) }
            let now: @Sendable () -> Duration = { clock.now.withLock { $0 } }
            var limiter = ConsentLimiter(backoff: .seconds(60), directory: directory, now: now)
            let path = try #require(limiter.path(uid: 1000))
            if corrupt == "directory" {
                try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
            } else {
                #expect(FileManager.default.createFile(atPath: path, contents: Data(corrupt.utf8), attributes: [.posixPermissions: 0o600]))
            }
            do throws(ConsentLimiter.Refusal) {
                try limiter.begin(uid: 1000)
                Issue.record("\(corrupt): an unreadable count gave an attempt")
            } catch {
                guard case .countUnreadable(let named, _, let wait) = error else { Issue.record("\(corrupt): \(error)"); continue }
                #expect(named == path && wait == ConsentLimiter.maximumBackoff)
            }
            // In memory, and (over a corrupt file) saved: a restarted keeper still refuses.
            #expect(throws: ConsentLimiter.Refusal.tooManyFailures(retryAfter: ConsentLimiter.maximumBackoff)) { try limiter.begin(uid: 1000) }
            if corrupt != "directory" {
                limiter = ConsentLimiter(backoff: .seconds(60), directory: directory, now: now)
                #expect(throws: ConsentLimiter.Refusal.tooManyFailures(retryAfter: ConsentLimiter.maximumBackoff)) { try limiter.begin(uid: 1000) }
            }
            clock.now.withLock { $0 += ConsentLimiter.maximumBackoff }
            try limiter.begin(uid: 1000)
            limiter.end(uid: 1000, outcome: .succeeded)
        }
    }

    @Test("A saved count that could not be read just now (its open fails with EMFILE) refuses that attempt only (countNotRead, no lockout), saves and keeps nothing, and is read again at the next attempt, whose count then holds; one whose open fails for good (ENOTDIR) is the longest lockout")
    func passingReadFailureRefusesOnlyThatAttempt() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("limiter-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: "\(directory)/1000", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // Two failures saved; the first two opens fail as in a keeper out of descriptors.
        let failing = Mutex(2)
        let limiter = ConsentLimiter(backoff: .seconds(60), directory: directory, now: { .seconds(1_800_000_000) }, openForReading: { path in
            if failing.withLock({ left in defer { left -= 1 }; return left > 0 }) { errno = EMFILE; return -1 }
            return open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        })
        let path = try #require(limiter.path(uid: 1000))
        let saved = Data(#"{"failures":2,"lockouts":0}"#.utf8)
        #expect(FileManager.default.createFile(atPath: path, contents: saved, attributes: [.posixPermissions: 0o600]))
        for _ in 0..<2 {
            do throws(ConsentLimiter.Refusal) {
                try limiter.begin(uid: 1000)
                Issue.record("an unread count gave an attempt")
            } catch {
                guard case .countNotRead(let named, let why) = error else { Issue.record("\(error)"); continue }
                #expect(named == path && why.contains("Too many open files"), "\(why)")
            }
        }
        #expect(FileManager.default.contents(atPath: path) == saved, "nothing saved over it")
        // Read now: its two failures hold, and one more locks out.
        try limiter.begin(uid: 1000)
        limiter.end(uid: 1000, outcome: .failed)
        #expect(throws: ConsentLimiter.Refusal.tooManyFailures(retryAfter: .seconds(60))) { try limiter.begin(uid: 1000) }

        // The uid's directory a file: the open fails for good (ENOTDIR), which is the longest lockout.
        let lasting = ConsentLimiter(backoff: .seconds(60), directory: directory, now: { .seconds(1_800_000_000) })
        #expect(FileManager.default.createFile(atPath: "\(directory)/1001", contents: Data("x".utf8), attributes: [.posixPermissions: 0o600]))
        do throws(ConsentLimiter.Refusal) {
            try lasting.begin(uid: 1001)
            Issue.record("a count that cannot be opened gave an attempt")
        } catch {
            guard case .countUnreadable(_, let why, let wait) = error else { Issue.record("\(error)"); return }
            #expect(why.contains("Not a directory") && wait == ConsentLimiter.maximumBackoff, "\(why)")
        }
    }

    @Test("An attempt PAM could not check (unavailable) counts no failure: any number of them leaves the uid unlocked")
    func notCheckedDoesNotCount() throws {
        let limiter = ConsentLimiter(backoff: .seconds(60), now: { .zero })
        for _ in 0..<(ConsentLimiter.limit * 3) {
            try limiter.begin(uid: 1000)
            limiter.end(uid: 1000, outcome: .notChecked)
        }
        try limiter.begin(uid: 1000)
        limiter.end(uid: 1000, outcome: .failed)
        try limiter.begin(uid: 1000)  // one failure only: still not locked
        limiter.end(uid: 1000, outcome: .succeeded)
    }
}

/// The keeper's PAM conversation, as a module calls it (no PAM involved).
@Suite("Token keeper PAM conversation", .harness)
struct KeeperPAMConversationTests {
    @Test("Hidden prompts get the password, error and information messages none; a visible prompt, a binary prompt or a style it does not know fails the whole conversation (PAM_CONV_ERR) and hands nothing back")
    func unknownStylesFail() {
        let (promptEchoOff, promptEchoOn, errorMessage, textInfo, binaryPrompt, radio) = (Int32(1), Int32(2), Int32(3), Int32(4), Int32(7), Int32(5))
        let conversationError: Int32 = 19
        let answered = PAMConversationProbe.answer(styles: [textInfo, promptEchoOff, errorMessage], password: "pw-probe")
        #expect(answered.status == 0 && answered.answers == [nil, "pw-probe", nil], "\(answered)")
        for style in [promptEchoOn, binaryPrompt, radio, 99] {
            let refused = PAMConversationProbe.answer(styles: [promptEchoOff, style], password: "pw-probe")
            #expect(refused.status == conversationError && refused.answers.isEmpty, "style \(style): \(refused)")
        }
    }
}

/// A clock the test sets.
private final class TestClock: Sendable {
    let now = Mutex<Duration>(.zero)
}

@Suite("Token keeper: who can never be consented to")
struct KeeperUnconsentableNameTests {
    @Test("Interpreters, shells, loaders and relays are refused by name, with a version or a Debian variant after it; an app's own name is not")
    func names() {
        let refused = ["python3", "python3.11", "perl5.36-x86_64-linux-gnu", "vim.basic", "emacs-gtk", "gdb-multiarch", "mono-sgen",
                       "busybox.static", "nc.openbsd", "nc.traditional", "ncat", "socat", "curl", "sqlite3", "bash", "dash",
                       "ld-linux-x86-64.so.2", "ld-linux-armhf.so.3", "ld-2.31.so", "ld64.so.2", "ld-musl-x86_64.so.1",
                       "libc.musl-x86_64.so.1", "qemu-x86_64-static", "node18"]
        for name in refused { #expect(UnconsentableApp.isInterpreter(name: name), "\(name)") }
        for name in ["some-app", "evolution", "git-credential-tokencache", "kubectl", "firefox-esr", "gnome-text-editor", "ldconfig"] {
            #expect(!UnconsentableApp.isInterpreter(name: name), "\(name)")
        }
        #expect(UnconsentableApp.reason(for: "/usr/local/bin/tokencache") == .keeperProgram)
        #expect(UnconsentableApp.reason(for: "/opt/some-app") == nil)
    }

    @Test("After a dash only a version or a known build variant is stripped: a program whose name starts with an interpreter's and a dash (r-…, nu-…, env-…, swift-format) is not taken for it; bash-static, emacs-nox, python3-dbg, luajit-2.1.0-beta3 are",
          arguments: [("r-studio", false), ("nu-tool", false), ("env-check", false), ("sh-helper", false), ("swift-format", false),
                      ("node-app", false), ("awk-report", false), ("lua-app", false), ("php-app", false),
                      ("bash-static", true), ("zsh-static", true), ("emacs-nox", true), ("emacs-lucid", true), ("python3-dbg", true),
                      ("python3.11-dbg", true), ("luajit-2.1.0-beta3", true), ("r", true), ("nu", true), ("php-cgi", true), ("php8.2", true)])
    func dashedNames(name: String, isInterpreter: Bool) {
        #expect(UnconsentableApp.isInterpreter(name: name) == isInterpreter, "\(name)")
    }

    @Test("The rule never walks the named path as root: a symbolic link named like an app is judged by its own name, not its target's; with a caller's pid the keeper's own program is found by inode through /proc/PID/exe")
    func noPathIsWalked() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let link = directory.appendingPathComponent("my-app").path
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: "/usr/bin/python3")
        #expect(UnconsentableApp.reason(for: link) == nil, "resolved as root")
        // This process runs the same file as itself: as the keeper would see its own program calling.
        #expect(UnconsentableApp.reason(for: "/opt/some-app", pid: getpid()) == .keeperProgram)
        #expect(UnconsentableApp.reason(for: "/opt/some-app", pid: nil) == nil)
    }
}
