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
    /// command line is the caller's to write), so refusing interpreter executables, by the
    /// name and the resolved name, covers every way a script is started; Flatpak and snap
    /// identities are confined apps and always can be.
    package static func reason(for app: String) -> UnconsentableApp? {
        guard app.hasPrefix("/") else { return nil }
        var paths = [app]
        if let resolved = realpath(app, nil) {
            paths.append(String(cString: resolved))
            free(resolved)
        }
        for path in paths {
            // By inode, and by name for another copy (/usr/local/bin/tokencache, an older version): each a token CLI.
            if KeeperServer.isOwnExecutable(path) || path.hasSuffix("/tokencache") { return .keeperProgram }
            if isInterpreter(name: String(path[(path.lastIndex(of: "/").map { path.index(after: $0) } ?? path.startIndex)...])) { return .interpreter }
        }
        return nil
    }

    /// Interpreters, shells, program runners and socket relays by executable name, a version
    /// suffix (`python3.11`, `perl5.36.0`, `lua5.4`, `node18`) stripped, also before a Debian
    /// alternative's variant (`vim.basic`, `emacs-gtk`, `nc.openbsd`, `gdb-multiarch`). A relay
    /// (`socat`, `nc -U`, `curl --unix-socket telnet://`) passes any process's bytes on as its own.
    static let interpreterNames: Set<String> = [
        "sh", "ash", "bash", "rbash", "dash", "zsh", "ksh", "ksh93", "mksh", "pdksh", "yash", "csh", "tcsh", "fish", "elvish", "nu", "xonsh",
        "busybox", "toybox", "env", "python", "pypy", "perl", "ruby", "irb", "jruby", "node", "nodejs", "deno", "bun", "qjs",
        "java", "jshell", "kotlin", "scala", "groovy", "php", "php-cgi", "php-fpm", "lua", "luajit", "tclsh", "wish", "expect",
        "awk", "gawk", "mawk", "nawk", "rscript", "r", "julia", "guile", "racket", "sbcl", "clisp", "ecl", "ocaml", "ghci",
        "runghc", "runhaskell", "swift", "dotnet", "mono", "pwsh", "osqueryi", "gdb", "lldb", "valgrind", "vim", "nvim", "emacs",
        "nc", "ncat", "netcat", "socat", "openssl", "curl", "sqlite",
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
        let variantless = lowered.prefix { $0 != "." && $0 != "-" }
        return [lowered, stripped(Substring(lowered)), stripped(variantless)].contains { interpreterNames.contains($0) }
    }
}

/// Failed consent attempts per uid: after ``limit`` failures in a row a uid's attempts are refused,
/// PAM not asked, for ``backoff``, doubled at each lockout in a row up to ``maximumBackoff``; one
/// attempt of a uid at a time, so parallel guesses cannot pass the limit. A success clears the
/// count. With a state directory the count survives a restart of the keeper:
/// `STATE/UID/consent-failures.json` (root's, 0600, replaced whole), its times on the wall clock.
package final class ConsentLimiter: Sendable {
    /// Failures in a row before a lockout.
    package static let limit = 3
    /// The longest lockout.
    package static let maximumBackoff: Duration = .seconds(3600)
    /// The first lockout; each further lockout in a row doubles it.
    package let backoff: Duration
    /// The time since the Unix epoch (saved lockouts must outlast a restart): injected, so a test moves it.
    private let now: @Sendable () -> Duration
    /// The keeper's state directory, where each uid's count is kept; nil: in memory only.
    private let directory: String?
    private let state = Mutex<[UInt32: Record]>([:])

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
    }

    /// - Parameters:
    ///   - directory: the keeper's state directory, to keep each uid's count across restarts; nil: in memory.
    ///   - now: the time since the Unix epoch (the wall clock: a saved lockout's end must mean the same after a restart).
    package init(backoff: Duration = .seconds(60), directory: String? = nil, now: @escaping @Sendable () -> Duration) {
        (self.backoff, self.directory, self.now) = (backoff, directory, now)
    }

    /// The wall clock as the default `now`.
    package static func wallClock() -> Duration {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return .seconds(time.tv_sec) + .nanoseconds(time.tv_nsec)
    }

    /// The path of `uid`'s saved count.
    package func path(uid: UInt32) -> String? { directory.map { "\($0)/\(uid)/consent-failures.json" } }

    /// Starts an attempt of `uid`; end it with ``end(uid:succeeded:)``. Blocking (reads the saved count).
    package func begin(uid: UInt32) throws(Refusal) {
        let time = now()
        let refusal: Refusal? = state.withLock { records in
            var record = records[uid] ?? load(uid: uid)
            defer { records[uid] = record }
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

    /// Ends `uid`'s attempt: a failure counts toward the next lockout, a success clears the count. Blocking (saves it).
    package func end(uid: UInt32, succeeded: Bool) {
        let time = now()
        state.withLock { records in
            var record = records[uid] ?? Record()
            record.inFlight = false
            if succeeded {
                (record.failures, record.lockouts, record.lockedUntilMilliseconds) = (0, 0, nil)
            } else {
                record.failures += 1
                if record.failures >= Self.limit {
                    let length = min(backoff * (1 << min(record.lockouts, 20)), Self.maximumBackoff)
                    let until = time + length
                    record.lockedUntilMilliseconds = until.components.seconds * 1000 + until.components.attoseconds / 1_000_000_000_000_000
                    (record.failures, record.lockouts) = (0, record.lockouts + 1)
                }
            }
            records[uid] = record
            save(record, uid: uid)
        }
    }

    /// `uid`'s saved count; none saved: a clean one. One that does not read (never written so:
    /// writes are atomic) counts as one failure short of a lockout.
    private func load(uid: UInt32) -> Record {
        guard let path = path(uid: uid), let file = try? FileIO.openExisting(path) else { return Record() }
        defer { close(file.descriptor) }
        guard let bytes = try? FileIO.readAll(file.descriptor, path: path), let record = try? JSONDecoder().decode(Record.self, from: bytes) else {
            return Record(failures: Self.limit - 1)
        }
        return record
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
