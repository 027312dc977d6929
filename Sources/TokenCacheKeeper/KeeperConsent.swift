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
    /// may use `group` of its uid's.
    package struct Consent: Codable, Sendable, Hashable {
        package var app: String
        package var group: String
        /// When it was given, ISO 8601 (UTC).
        package var time: String

        package init(app: String, group: String, time: String) { (self.app, self.group, self.time) = (app, group, time) }
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

    /// Whether `uid` consented to `app` using `group`.
    package func allows(uid: UInt32, app: String, group: String) throws(TokenCacheError) -> Bool {
        try consents(uid: uid).contains { $0.app == app && $0.group == group }
    }

    /// Records that `uid` consented to `app` using `group` (kept once). Blocking (a lock and a sync).
    package func record(_ consent: Consent, uid: UInt32) throws(TokenCacheError) {
        try change(uid: uid) { consents in
            consents.removeAll { $0.app == consent.app && $0.group == consent.group }
            consents.append(consent)
        }
    }

    /// Withdraws `uid`'s consent to `app` using `group`. Blocking.
    /// - Returns: whether there was one.
    package func revoke(uid: UInt32, app: String, group: String) throws(TokenCacheError) -> Bool {
        var found = false
        try change(uid: uid) { consents in
            found = consents.contains { $0.app == app && $0.group == group }
            consents.removeAll { $0.app == app && $0.group == group }
        }
        return found
    }

    /// Reads, changes and replaces `uid`'s list under its lock.
    private func change(uid: UInt32, _ edit: (inout [Consent]) -> Void) throws(TokenCacheError) {
        let userDirectory = "\(directory)/\(uid)"
        try FileIO.ensureDirectory(URL(fileURLWithPath: userDirectory), purpose: "keeper's directory of uid \(uid)")
        let lock = try FileLock(path: "\(userDirectory)/consents.lock")
        defer { withExtendedLifetime(lock) {} }
        var consents = try self.consents(uid: uid)
        edit(&consents)
        consents.sort { ($0.app, $0.group) < ($1.app, $1.group) }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard let data = try? encoder.encode(consents) else {
            throw TokenCacheError(.fileSystem, "The keeper's consents of uid \(uid) could not be encoded.")
        }
        FileIO.removeStaleTemporaryFiles(in: URL(fileURLWithPath: userDirectory), prefix: ".consents.json.")
        _ = try FileIO.atomicReplace(path(uid: uid), with: data, temporaryPrefix: ".consents.json.")
    }
}

/// Failed consent attempts per uid: after ``limit`` failures in a row a uid's attempts are refused,
/// PAM not asked, until ``backoff`` has passed on the keeper's clock; one attempt of a uid at a
/// time, so parallel guesses cannot pass the limit. A success clears the count.
package final class ConsentLimiter: Sendable {
    /// Failures in a row before the back-off.
    package static let limit = 3
    /// How long a uid waits after ``limit`` failures.
    package let backoff: Duration
    /// The keeper's clock (time since some fixed start): injected, so a test moves it.
    private let now: @Sendable () -> Duration
    private let state = Mutex<[UInt32: Record]>([:])

    private struct Record {
        var failures = 0
        var lockedUntil: Duration?
        var inFlight = false
    }

    /// Why an attempt may not go ahead.
    package enum Refusal: Error, Equatable {
        /// ``limit`` failures in a row: try again after this long.
        case tooManyFailures(retryAfter: Duration)
        /// Another attempt of the uid is being checked.
        case attemptInProgress
    }

    package init(backoff: Duration = .seconds(60), now: @escaping @Sendable () -> Duration) { (self.backoff, self.now) = (backoff, now) }

    /// Starts an attempt of `uid`; end it with ``end(uid:succeeded:)``.
    package func begin(uid: UInt32) throws(Refusal) {
        let time = now()
        let refusal: Refusal? = state.withLock { records in
            var record = records[uid] ?? Record()
            if let until = record.lockedUntil {
                if time < until { return .tooManyFailures(retryAfter: until - time) }
                (record.lockedUntil, record.failures) = (nil, 0)
            }
            guard !record.inFlight else { return .attemptInProgress }
            record.inFlight = true
            records[uid] = record
            return nil
        }
        if let refusal { throw refusal }
    }

    /// Ends `uid`'s attempt: a failure counts toward the back-off, a success clears the count.
    package func end(uid: UInt32, succeeded: Bool) {
        let time = now()
        state.withLock { records in
            var record = records[uid] ?? Record()
            record.inFlight = false
            record.failures = succeeded ? 0 : record.failures + 1
            if record.failures >= Self.limit { record.lockedUntil = time + backoff }
            records[uid] = record
        }
    }
}
