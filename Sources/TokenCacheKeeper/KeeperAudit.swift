#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import FoundationEssentials
import TokenCacheCore
import TokenCachePlatform

/// The keeper's audit log (#62, item 6): one JSON line per decision in `STATE/UID/audit.log`,
/// root's, 0600, in the uid's 0700 directory, so a user reads their own through the keeper
/// (`{"op": "log"}`) and never anyone else's. Appended with `O_APPEND`; past ``capBytes`` the
/// newest half is kept, written to a new file and renamed over the old one, so a crash leaves
/// either whole. Appends hold a shared `flock` on the uid's directory, the trim an exclusive
/// one: no append lands in a file that is being replaced. Never a token or a secret.
package struct KeeperAudit: Sendable {
    /// The keeper's state directory.
    package let directory: String
    /// The size past which the log is trimmed to its newest half.
    package let capBytes: Int

    /// The audit log of each uid under `directory` (the keeper's state directory).
    package init(directory: String, capBytes: Int = 1 << 20) { (self.directory, self.capBytes) = (directory, capBytes) }

    /// One decision, as the log and `--log` show it: who asked, what, and what the keeper did.
    package struct Entry: Codable, Sendable, Hashable {
        /// When, in ISO 8601 (UTC).
        package var time: String
        /// The caller's app identity (executable, `flatpak ID`, `snap NAME`), or why it is not identified.
        package var app: String
        /// The caller's uid (SO_PEERCRED): whose log this is.
        package var uid: UInt32
        package var pid: Int32
        package var op: String
        package var group: String?
        package var client: String?
        package var account: String?
        package var scopes: [String]
        /// `granted…`, `refused: …` or `failed: …`, with the reason.
        package var outcome: String

        package init(time: String, app: String, uid: UInt32, pid: Int32, op: String, group: String?, client: String?, account: String?,
                     scopes: [String], outcome: String) {
            (self.time, self.app, self.uid, self.pid, self.op, self.group) = (time, app, uid, pid, op, group)
            (self.client, self.account, self.scopes, self.outcome) = (client, account, scopes, outcome)
        }
    }

    /// The longest text of a field a caller chose (client, account, scope, group, outcome, app), in characters.
    package static let maximumFieldLength = 256
    /// The most scopes an entry keeps.
    package static let maximumScopes = 32

    /// `text` as the log keeps it: control characters as `\u{…}`, cut to ``maximumFieldLength``
    /// characters with `…`, so no field can forge a line or fill the log.
    package static func printable(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            if out.unicodeScalars.count >= maximumFieldLength { return out + "…" }
            if scalar.properties.generalCategory == .control { out += "\\u{\(String(scalar.value, radix: 16))}" } else { out.unicodeScalars.append(scalar) }
        }
        return out
    }

    /// The path of `uid`'s audit log.
    package func path(uid: UInt32) -> String { "\(directory)/\(uid)/audit.log" }

    /// Appends `entry` to its uid's log (made 0600 in a 0700 directory when missing), then trims
    /// the log to its newest half when it passed ``capBytes``.
    /// - Throws: `fileSystem` or `unsafeFile` (the log is a link, another user's or open to others).
    package func append(_ entry: Entry) throws(TokenCacheError) {
        let userDirectory = "\(directory)/\(entry.uid)"
        try FileIO.ensureDirectory(URL(fileURLWithPath: userDirectory), purpose: "keeper's directory of uid \(entry.uid)")
        let path = path(uid: entry.uid)
        let size: Int
        do {
            // Released at the end of this block, before ``trim(uid:)`` takes the exclusive lock
            // (flock locks of two descriptors of one process conflict too).
            let lock = try DirectoryLock(userDirectory, exclusive: false)
            defer { withExtendedLifetime(lock) {} }
            guard var line = try? JSONEncoder().encode(entry) else { return }
            line.append(UInt8(ascii: "\n"))
            let descriptor = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0o600)
            guard descriptor >= 0 else { throw FileIO.error("append to", path) }
            defer { close(descriptor) }
            var info = stat()
            guard fstat(descriptor, &info) == 0 else { throw FileIO.error("inspect", path) }
            if let problem = FileIO.unsafeReason(info, expectFile: true) {
                throw TokenCacheError(.unsafeFile, "The keeper's audit log \(path) is unsafe: \(problem).", hint: "Remove it; the keeper makes a new one")
            }
            // One write: O_APPEND puts it whole at the end, whatever other threads append.
            let written = line.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            guard written == line.count else { throw FileIO.error("append to", path) }
            size = Int(info.st_size) + written
        }
        if size > capBytes { try trim(uid: entry.uid) }
    }

    /// Keeps the newest half of `uid`'s log (from a line's start) when it is past the cap: a new
    /// file, synced, renamed over the log, under the exclusive lock.
    func trim(uid: UInt32) throws(TokenCacheError) {
        let lock = try DirectoryLock("\(directory)/\(uid)", exclusive: true)
        defer { withExtendedLifetime(lock) {} }
        let path = path(uid: uid)
        guard let file = try FileIO.openExisting(path) else { return }
        let bytes: Data
        do {
            defer { close(file.descriptor) }
            bytes = try FileIO.readAll(file.descriptor, path: path)
        }
        guard bytes.count > capBytes else { return }  // another thread trimmed it first
        // From the first line that starts in the newest half; when the newest line alone is longer
        // than that half, from its start: a trim never leaves the log empty.
        let newline = UInt8(ascii: "\n"), last = bytes.index(before: bytes.endIndex)
        var start = bytes.index(bytes.endIndex, offsetBy: -(capBytes / 2))
        if let found = bytes[start..<last].firstIndex(of: newline) {
            start = bytes.index(after: found)
        } else {
            start = bytes[..<last].lastIndex(of: newline).map { bytes.index(after: $0) } ?? bytes.startIndex
        }
        let kept = bytes[start...]
        // Under the exclusive lock no trim is under way: a temporary file here is one a crash left.
        FileIO.removeStaleTemporaryFiles(in: URL(fileURLWithPath: "\(directory)/\(uid)"), prefix: ".audit.log.")
        _ = try FileIO.atomicReplace(path, with: Data(kept), temporaryPrefix: ".audit.log.")
    }

    /// The newest `count` entries of `uid`'s log, oldest first; none when it has none. Lines that
    /// do not decode (one a crash cut short) are skipped.
    package func entries(uid: UInt32, last count: Int) throws(TokenCacheError) -> [Entry] {
        let path = path(uid: uid)
        guard let file = try FileIO.openExisting(path) else { return [] }
        defer { close(file.descriptor) }
        let bytes = try FileIO.readAll(file.descriptor, path: path)
        let decoder = JSONDecoder()
        var entries: [Entry] = []
        for line in bytes.split(separator: UInt8(ascii: "\n")).reversed() where entries.count < count {
            if let entry = try? decoder.decode(Entry.self, from: Data(line)) { entries.append(entry) }
        }
        return entries.reversed()
    }
}

/// A `flock` on a directory, shared or exclusive, released when it is freed.
private final class DirectoryLock {
    let descriptor: Int32

    init(_ path: String, exclusive: Bool) throws(TokenCacheError) {
        descriptor = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else { throw FileIO.error("open", path) }
        while flock(descriptor, exclusive ? LOCK_EX : LOCK_SH) != 0 {
            guard errno == EINTR else {
                let failure = FileIO.error("lock", path)
                close(descriptor)
                throw failure
            }
        }
    }

    deinit { close(descriptor) }
}
