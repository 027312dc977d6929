#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import FoundationEssentials
import Synchronization
import TokenCacheCore
import TokenCachePlatform

/// The consents users gave with their password (PAM): which app identity may use which group of
/// theirs although no apps file names it. `STATE/UID/consents.json`, root's, 0600, in the uid's
/// 0700 directory, replaced whole (a new file, synced, renamed) under `STATE/UID/consents.lock`,
/// so a crash leaves the old or the new list and two changes never lose one another.
package struct KeeperConsents: Sendable {
    /// One consent: `app` (as the keeper names a caller: an executable, `flatpak:ID`, `snap:NAME`)
    /// may use `group` of its uid's with client `clientID`.
    package struct Consent: Codable, Sendable, Hashable {
        package var app: String
        package var group: String
        /// The client ID it was given for; nil in an entry written before consents named one,
        /// which allows nothing (it would allow any client): the user consents again with `--client`.
        package var clientID: String?
        /// When it was given, ISO 8601 (UTC).
        package var time: String

        package init(app: String, group: String, clientID: ClientID, time: String) {
            (self.app, self.group, self.clientID, self.time) = (app, group, clientID.value, time)
        }

        /// Whether this consent is for `clientID` (case-insensitive, as client IDs compare).
        func isFor(clientID other: String?) -> Bool {
            switch (clientID, other) {
            case (nil, nil): true
            case (let mine?, let other?): ASCII.equalsIgnoringCase(mine, other)
            default: false
            }
        }
    }

    /// The keeper's state directory.
    package let directory: String

    package init(directory: String) { self.directory = directory }

    /// The path of `uid`'s consents.
    package func path(uid: UInt32) -> String { "\(directory)/\(uid)/consents.json" }

    /// `uid`'s consents, by app and group; none when it gave none. Blocking (file reads).
    package func consents(uid: UInt32) throws(TokenCacheError) -> [Consent] {
        let path = path(uid: uid)
        guard let file = try FileIO.openExisting(path) else { return [] }
        defer { close(file.descriptor) }
        let bytes = try FileIO.readAll(file.descriptor, path: path)
        guard let consents = try? JSONDecoder().decode([Consent].self, from: bytes) else {
            throw TokenCacheError(.fileSystem, "The keeper's consents \(path) do not read as a list of consents.",
                                  hint: "Remove the file (every consent of uid \(uid) is then withdrawn)")
        }
        return consents
    }

    /// The groups `uid` consented to `app` using, in the order of its consents, each with the
    /// client IDs consented for it. A consent without a client ID (an old entry) counts for none.
    package func allowed(uid: UInt32, app: String) throws(TokenCacheError) -> [(group: String, clientIDs: [String])] {
        var allowed: [(group: String, clientIDs: [String])] = []
        for consent in try consents(uid: uid) where consent.app == app {
            guard let client = consent.clientID else { continue }
            if let index = allowed.firstIndex(where: { $0.group == consent.group }) {
                allowed[index].clientIDs.append(client)
            } else {
                allowed.append((consent.group, [client]))
            }
        }
        return allowed
    }

    /// Records that `uid` consented to `app` using `group` with its client (kept once). Blocking (a lock and a sync).
    package func record(_ consent: Consent, uid: UInt32) throws(TokenCacheError) {
        try change(uid: uid) { consents in
            consents.removeAll { $0.app == consent.app && $0.group == consent.group && $0.isFor(clientID: consent.clientID) }
            consents.append(consent)
        }
    }

    /// Withdraws `uid`'s consents to `app` using `group`: the one for `clientID`, or with nil every
    /// one of that app and group (old entries without a client ID too). Blocking.
    /// - Returns: whether there was one.
    package func revoke(uid: UInt32, app: String, group: String, clientID: ClientID?) throws(TokenCacheError) -> Bool {
        var found = false
        try change(uid: uid) { consents in
            let matches = { (consent: Consent) in consent.app == app && consent.group == group && (clientID == nil || consent.isFor(clientID: clientID?.value)) }
            found = consents.contains(where: matches)
            consents.removeAll(where: matches)
        }
        return found
    }

    /// Withdraws every consent of `uid` for `group` (root's unenrolment: a later enrolment of the
    /// group, which needs no password the first time, must not let the old consents in). Blocking.
    /// - Returns: how many there were.
    package func revokeAll(uid: UInt32, group: String) throws(TokenCacheError) -> Int {
        guard try !consents(uid: uid).isEmpty else { return 0 }
        var count = 0
        try change(uid: uid) { consents in
            count = consents.filter { $0.group == group }.count
            consents.removeAll { $0.group == group }
        }
        return count
    }

    /// Reads, changes and replaces `uid`'s list under its lock.
    private func change(uid: UInt32, _ edit: (inout [Consent]) -> Void) throws(TokenCacheError) {
        let userDirectory = "\(directory)/\(uid)"
        try FileIO.ensureDirectory(URL(fileURLWithPath: userDirectory), purpose: "keeper's directory of uid \(uid)")
        let lock = try FileLock(path: "\(userDirectory)/consents.lock")
        defer { withExtendedLifetime(lock) {} }
        var consents = try self.consents(uid: uid)
        edit(&consents)
        consents.sort { ($0.app, $0.group, $0.clientID ?? "") < ($1.app, $1.group, $1.clientID ?? "") }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard let data = try? encoder.encode(consents) else {
            throw TokenCacheError(.fileSystem, "The keeper's consents of uid \(uid) could not be encoded.")
        }
        FileIO.removeStaleTemporaryFiles(in: URL(fileURLWithPath: userDirectory), prefix: ".consents.json.")
        _ = try FileIO.atomicReplace(path(uid: uid), with: data, temporaryPrefix: ".consents.json.")
    }
}

/// Why an app identity cannot be given a consent: whoever can make it run code of their choosing
/// (any process of the user) would get what the consent allows.
package enum UnconsentableApp: String, Codable, Sendable, Hashable {
    /// An interpreter, shell, loader or emulator: it runs whatever script or program it is given.
    case interpreter
    /// The keeper's own program (`tokencache`): every process of the user can run it.
    case keeperProgram

    /// Why, in words, for refusals (no secret).
    package var why: String {
        switch self {
        case .interpreter: "it is an interpreter or shell, which runs any script a process of yours gives it, so a consent would let in every such script"
        case .keeperProgram: "it is tokencache itself, which every process of yours can run, so a consent would let in every one of them"
        }
    }

    /// Why `app` (an identity as the keeper names callers) cannot be consented to; nil when it can.
    /// The rule is by name: a script's process always runs its interpreter (`/proc/PID/exe` is
    /// the interpreter for a `#!` script as for `python3 x.py`, and the script path in its
    /// command line is the caller's to write), so refusing interpreter executables by name
    /// covers every way a script is started; Flatpak and snap identities are confined apps and
    /// always can be.
    ///
    /// It never walks `app` as a path (no realpath, no stat): the path is the user's to choose, and
    /// root following it into a FUSE mount of theirs could block forever. None is needed: a caller
    /// is named by its `/proc/PID/exe` (the kernel's resolved path), so a consent to a symbolic
    /// link's path never matches a caller, and the rule is applied again to each caller's identity
    /// when it asks. `pid`, a caller whose identity is `app` (verified through its pidfd), adds the
    /// check by inode that its executable is the keeper's own program, through `/proc/PID/exe`.
    package static func reason(for app: String, pid: Int32? = nil) -> UnconsentableApp? {
        guard app.hasPrefix("/") else { return nil }
        // By inode (another name of the keeper's file), and by name for another copy (/usr/local/bin/tokencache, an older version).
        if let pid, KeeperServer.isOwnExecutable("/proc/\(pid)/exe") { return .keeperProgram }
        if app.hasSuffix("/tokencache") { return .keeperProgram }
        if isInterpreter(name: String(app[(app.lastIndex(of: "/").map { app.index(after: $0) } ?? app.startIndex)...])) { return .interpreter }
        return nil
    }

    /// Interpreters, shells, program runners and socket relays by executable name, a version
    /// suffix (`python3.11`, `perl5.36.0`, `lua5.4`, `node18`) stripped, also before a Debian
    /// alternative's variant after a dot (`vim.basic`, `nc.openbsd`, `python3.11-dbg`). After a
    /// dash only a version (`luajit-2.1.0-beta3`) or a known variant (``dashVariants``:
    /// `emacs-gtk`, `gdb-multiarch`, `zsh-static`) is stripped: another program's own name often
    /// starts with an interpreter's and a dash (`r-…`, `nu-…`, `swift-format`, `node-…`), and is not one.
    /// A relay (`socat`, `nc -U`, `curl --unix-socket telnet://`) passes any process's bytes on as its own.
    static let interpreterNames: Set<String> = [
        "sh", "ash", "bash", "rbash", "dash", "zsh", "ksh", "ksh93", "mksh", "pdksh", "yash", "csh", "tcsh", "fish", "elvish", "nu", "xonsh",
        "busybox", "toybox", "env", "python", "pypy", "perl", "ruby", "irb", "jruby", "node", "nodejs", "deno", "bun", "qjs",
        "java", "jshell", "kotlin", "scala", "groovy", "php", "php-cgi", "php-fpm", "lua", "luajit", "tclsh", "wish", "expect",
        "awk", "gawk", "mawk", "nawk", "rscript", "r", "julia", "guile", "racket", "sbcl", "clisp", "ecl", "ocaml", "ghci",
        "runghc", "runhaskell", "swift", "dotnet", "mono", "pwsh", "osqueryi", "gdb", "lldb", "valgrind", "vim", "nvim", "emacs",
        "nc", "ncat", "netcat", "socat", "openssl", "curl", "sqlite",
    ]

    /// Variants of a Debian (or other) build after a dash: emacs-gtk, emacs-nox, gdb-multiarch, mono-sgen, bash-static, python3-dbg.
    static let dashVariants: Set<String> = [
        "gtk", "gtk3", "pgtk", "nox", "lucid", "athena", "x11", "multiarch", "sgen", "static", "dbg", "debug", "cgi", "fpm", "cli",
        "basic", "tiny", "minimal", "openbsd", "traditional", "bin",
    ]

    package static func isInterpreter(name: String) -> Bool {
        let lowered = name.lowercased()
        // qemu-user runs any binary under its own name (qemu-x86_64, qemu-aarch64-static).
        if lowered.hasPrefix("qemu-") { return true }
        // The dynamic loader runs any program it is given (`ld.so /home/u/x` is named by the loader):
        // glibc's ld-linux-x86-64.so.2, ld-linux-armhf.so.3, ld-2.31.so, ld64.so.2, musl's ld-musl-*.so.1
        // and libc.musl-*.so.1 (Alpine's file of it).
        if (lowered.hasPrefix("ld-") || lowered.hasPrefix("ld.") || lowered.hasPrefix("ld64.")) && lowered.contains(".so") { return true }
        if lowered.hasPrefix("libc.musl-") || lowered.hasPrefix("libc.so") { return true }
        func stripped(_ name: Substring) -> String {
            var name = name
            while let last = name.last, last.isNumber || last == "." || last == "-" || last == "_" { name.removeLast() }
            return String(name)
        }
        // A dot starts a version or a variant: python3.11, vim.basic, nc.openbsd, perl5.36-x86_64-linux-gnu.
        let dotless = lowered.prefix { $0 != "." }
        var names = [lowered, stripped(Substring(lowered)), stripped(dotless)]
        // A dash starts a version or a known variant only: emacs-gtk, luajit-2.1.0-beta3 (not r-studio, nu-tool).
        if let dash = dotless.firstIndex(of: "-") {
            let rest = dotless[dotless.index(after: dash)...]
            if rest.first?.isNumber == true || dashVariants.contains(String(rest.prefix { $0 != "-" })) { names.append(stripped(dotless[..<dash])) }
        }
        return names.contains { interpreterNames.contains($0) }
    }
}

/// Failed consent attempts per uid: after ``limit`` failures in a row a uid's attempts are refused,
/// PAM not asked, for ``backoff``, doubled at each lockout in a row up to ``maximumBackoff``; one
/// attempt of a uid at a time, so parallel guesses cannot pass the limit. A success clears the
/// count; an attempt PAM could not check (``Outcome/notChecked``) does not count. With a state
/// directory the count survives a restart of the keeper: `STATE/UID/consent-failures.json` (root's,
/// 0600, replaced whole), its times on the wall clock. A saved count that is there but not a count
/// (corrupt, not a regular file of root's) is the longest lockout, never a fresh count: whoever could
/// spoil it would otherwise get new attempts; so is one whose open fails for good (ENOTDIR,
/// EACCES …). One that could not be read just now (no descriptor or memory left, an I/O error, an
/// interrupted call: ``passingErrors``) refuses that attempt only, saves nothing and is read
/// again at the next: a passing failure is no reason for an hour's lockout. Each uid's count is read and saved under a
/// lock of its own, so one uid's slow file never holds up another's attempt.
package final class ConsentLimiter: Sendable {
    /// Failures in a row before a lockout.
    package static let limit = 3
    /// The longest lockout.
    package static let maximumBackoff: Duration = .seconds(3600)
    /// Lockouts in a row from which each lasts ``maximumBackoff`` (2^20 × any back-off is longer).
    static let maximumLockouts = 20
    /// The first lockout; each further lockout in a row doubles it.
    package let backoff: Duration
    /// The time since the Unix epoch (saved lockouts must outlast a restart): injected, so a test moves it.
    private let now: @Sendable () -> Duration
    /// The keeper's state directory, where each uid's count is kept; nil: in memory only.
    private let directory: String?
    /// Opens a saved count for reading (`open(2)`; a test makes it fail with a chosen errno).
    private let openForReading: @Sendable (String) -> Int32
    /// The errno values of a read that may work at the next attempt.
    static let passingErrors: Set<Int32> = [EMFILE, ENFILE, ENOMEM, EIO, EINTR, EAGAIN]
    /// Each uid's slot; this lock is held only to find or add one, never over file I/O.
    private let slots = Mutex<[UInt32: Slot]>([:])

    /// One uid's count behind its own lock, nil until read from its file.
    private final class Slot: Sendable {
        let record = Mutex<Record?>(nil)
    }

    /// One uid's count, as saved.
    struct Record: Codable, Equatable {
        /// Failures since the last lockout or success.
        var failures = 0
        /// Lockouts in a row since the last success: the next lasts backoff × 2^lockouts.
        var lockouts = 0
        /// Until when attempts are refused, in milliseconds since the Unix epoch.
        var lockedUntilMilliseconds: Int64?
        var inFlight = false

        enum CodingKeys: String, CodingKey { case failures, lockouts, lockedUntilMilliseconds = "locked_until_ms" }
    }

    /// Why an attempt may not go ahead.
    package enum Refusal: Error, Equatable {
        /// ``limit`` failures in a row: try again after this long.
        case tooManyFailures(retryAfter: Duration)
        /// Another attempt of the uid is being checked.
        case attemptInProgress
        /// The uid's saved count at `path` does not read (`why`): locked for ``maximumBackoff``,
        /// then counted afresh (root may remove the file to end it sooner).
        case countUnreadable(path: String, why: String, retryAfter: Duration)
        /// The uid's saved count at `path` could not be read just now (`why`): this attempt is
        /// refused, PAM not asked, and the next one reads it again.
        case countNotRead(path: String, why: String)
    }

    /// Why a saved count does not read; `passing`: reading it failed (open, read), not what was read.
    private struct Unreadable: Error {
        let why: String
        var passing = false
    }

    /// How an attempt ended.
    package enum Outcome: Equatable {
        /// PAM accepted the password: the count is cleared.
        case succeeded
        /// PAM refused the password or the account: one more failure.
        case failed
        /// The password was not checked (PAM unavailable, no user name): not counted.
        case notChecked
    }

    /// - Parameters:
    ///   - directory: the keeper's state directory, to keep each uid's count across restarts; nil: in memory.
    ///   - now: the time since the Unix epoch (the wall clock: a saved lockout's end must mean the same after a restart).
    ///   - openForReading: opens a saved count (default `open(2)` with `O_NOFOLLOW`; tests inject a failure).
    package init(backoff: Duration = .seconds(60), directory: String? = nil, now: @escaping @Sendable () -> Duration,
                 openForReading: @escaping @Sendable (String) -> Int32 = { open($0, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK) }) {
        (self.backoff, self.directory, self.now, self.openForReading) = (backoff, directory, now, openForReading)
    }

    /// The wall clock as the default `now`.
    package static func wallClock() -> Duration {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return .seconds(time.tv_sec) + .nanoseconds(time.tv_nsec)
    }

    /// The path of `uid`'s saved count.
    package func path(uid: UInt32) -> String? { directory.map { "\($0)/\(uid)/consent-failures.json" } }

    private func slot(uid: UInt32) -> Slot {
        slots.withLock { slots in
            if let slot = slots[uid] { return slot }
            let slot = Slot()
            slots[uid] = slot
            return slot
        }
    }

    private static func milliseconds(_ time: Duration) -> Int64 {
        time.components.seconds * 1000 + time.components.attoseconds / 1_000_000_000_000_000
    }

    /// Starts an attempt of `uid`; end it with ``end(uid:outcome:)``. Blocking (reads the saved count).
    package func begin(uid: UInt32) throws(Refusal) {
        let time = now()
        let refusal: Refusal? = slot(uid: uid).record.withLock { slot in
            var unreadable: Refusal?
            var record: Record
            if let known = slot {
                record = known
            } else {
                switch load(uid: uid) {
                case .success(let saved): record = saved
                case .failure(let failure) where failure.passing:
                    // Nothing kept nor saved: the next attempt reads the file again.
                    return .countNotRead(path: path(uid: uid) ?? "-", why: failure.why)
                case .failure(let failure):
                    // The longest lockout, kept in memory and saved over the unreadable file.
                    record = Record(failures: 0, lockouts: Self.maximumLockouts, lockedUntilMilliseconds: Self.milliseconds(time + Self.maximumBackoff))
                    save(record, uid: uid)
                    unreadable = .countUnreadable(path: path(uid: uid) ?? "-", why: failure.why, retryAfter: Self.maximumBackoff)
                }
            }
            defer { slot = record }
            if let unreadable { return unreadable }
            if let until = record.lockedUntilMilliseconds.map({ Duration.milliseconds($0) }) {
                // A wall clock set back never makes a lockout longer than the longest.
                if time < until { return .tooManyFailures(retryAfter: min(until - time, Self.maximumBackoff)) }
                record.lockedUntilMilliseconds = nil
            }
            guard !record.inFlight else { return .attemptInProgress }
            record.inFlight = true
            return nil
        }
        if let refusal { throw refusal }
    }

    /// Ends `uid`'s attempt: a failure counts toward the next lockout, a success clears the count,
    /// one not checked changes nothing. Blocking (saves it).
    package func end(uid: UInt32, outcome: Outcome) {
        let time = now()
        slot(uid: uid).record.withLock { slot in
            var record = slot ?? Record()
            record.inFlight = false
            defer { slot = record }
            switch outcome {
            case .notChecked: return
            case .succeeded: (record.failures, record.lockouts, record.lockedUntilMilliseconds) = (0, 0, nil)
            case .failed:
                record.failures += 1
                if record.failures >= Self.limit {
                    let length = min(backoff * (1 << min(record.lockouts, Self.maximumLockouts)), Self.maximumBackoff)
                    record.lockedUntilMilliseconds = Self.milliseconds(time + length)
                    (record.failures, record.lockouts) = (0, record.lockouts + 1)
                }
            }
            save(record, uid: uid)
        }
    }

    /// `uid`'s saved count; none saved: a clean one.
    /// - Returns: why it does not read, when a file is there that does not (never written so: writes are atomic).
    private func load(uid: UInt32) -> Result<Record, Unreadable> {
        guard let path = path(uid: uid) else { return .success(Record()) }
        // O_NONBLOCK: a FIFO in its place would block the open; the checks below refuse it.
        let descriptor = openForReading(path)
        if descriptor < 0 {
            let code = errno
            if code == ENOENT { return .success(Record()) }
            return .failure(Unreadable(why: String(cString: strerror(code)), passing: Self.passingErrors.contains(code)))
        }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else {
            let code = errno
            return .failure(Unreadable(why: String(cString: strerror(code)), passing: Self.passingErrors.contains(code)))
        }
        if let problem = FileIO.unsafeReason(info, expectFile: true) { return .failure(Unreadable(why: problem)) }
        let bytes: Data
        // A read of a regular file of root's that fails is an I/O error or an interruption: passing.
        do throws(TokenCacheError) { bytes = try FileIO.readAll(descriptor, path: path) } catch {
            return .failure(Unreadable(why: error.message, passing: true))
        }
        guard let record = try? JSONDecoder().decode(Record.self, from: bytes) else { return .failure(Unreadable(why: "it is not a saved count (JSON)")) }
        return .success(record)
    }

    /// Saves `uid`'s count (a clean one only over a saved one: a uid that never failed gets no file).
    /// A save that fails leaves the count in memory, where it still holds until a restart.
    private func save(_ record: Record, uid: UInt32) {
        guard let directory, let path = path(uid: uid) else { return }
        let clean = record.failures == 0 && record.lockouts == 0 && record.lockedUntilMilliseconds == nil
        if clean, access(path, F_OK) != 0 { return }
        let userDirectory = "\(directory)/\(uid)"
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        guard (try? FileIO.ensureDirectory(URL(fileURLWithPath: userDirectory), purpose: "keeper's directory of uid \(uid)")) != nil,
              let data = try? encoder.encode(record) else { return }
        FileIO.removeStaleTemporaryFiles(in: URL(fileURLWithPath: userDirectory), prefix: ".consent-failures.json.")
        _ = try? FileIO.atomicReplace(path, with: data, temporaryPrefix: ".consent-failures.json.")
    }
}
