import FoundationEssentials
import TokenCachePlatform
#if canImport(Glibc)
import Glibc
#endif

/// Who a bus caller is, as xdg-desktop-portal tells it: a Flatpak app by the app ID in its
/// `/.flatpak-info`, a Snap by the snap name in its AppArmor label (or, without AppArmor, its
/// cgroup), any other process by its executable. Never by `/proc/PID/comm`, which the caller sets.
package enum CallerIdentity: Sendable, Hashable, CustomStringConvertible {
    /// A Flatpak app: `[Application] name` of the `/.flatpak-info` in its root.
    case flatpak(appID: String)
    /// A strictly confined snap: `snap.NAME.APP` in its security label or cgroup.
    case snap(name: String)
    /// A process on the host: its executable (`/proc/PID/exe`).
    case host(executable: String)
    /// The process could not be looked at (gone, no pid from the bus, /proc hidden): served nothing
    /// that needs an identity.
    case unknown(reason: String)

    /// Whether the caller runs in a sandbox (and so gets only the client IDs allowed for its app ID).
    package var isSandboxed: Bool {
        switch self {
        case .flatpak, .snap: true
        case .host, .unknown: false
        }
    }

    /// The sandbox's app ID (a Flatpak app ID or a snap name), nil on the host.
    package var appID: String? {
        switch self {
        case .flatpak(let id): id
        case .snap(let name): name
        case .host, .unknown: nil
        }
    }

    /// `flatpak:ID`, `snap:NAME`, the executable's path, or `unknown (why)`: for logs and questions.
    package var description: String {
        switch self {
        case .flatpak(let id): "flatpak:\(id)"
        case .snap(let name): "snap:\(name)"
        case .host(let executable): executable
        case .unknown(let reason): "unknown (\(reason))"
        }
    }

    // MARK: Finding out

    /// Identifies process `pid`, whose pidfd the bus daemon gave (`ProcessFD`) or, from a bus that
    /// gives none, one opened here (racy only with a bus that gives none: the pid could be reused
    /// between the daemon's answer and the open). /proc/PID is opened, then the pidfd is checked to
    /// still name a live `pid`: the directory is that process's, and every file is read relative to it.
    package static func identify(pid: UInt32?, pidfd given: Int32? = nil, proc: String = "/proc") -> CallerIdentity {
        guard let pid, pid > 0, pid <= UInt32(Int32.max) else { return .unknown(reason: "the bus named no process") }
        let pidfd = given ?? ProcessDescriptor.open(pid: Int32(pid))
        guard pidfd >= 0 else { return .unknown(reason: "process \(pid) is gone") }
        defer { if given == nil { close(pidfd) } }
        guard pidOf(pidfd: pidfd, proc: proc) == Int(pid) else { return .unknown(reason: "the bus's process descriptor is not of pid \(pid)") }
        let directory = open("\(proc)/\(pid)", ProcessDescriptor.openPathFlag | O_DIRECTORY | O_CLOEXEC)
        guard directory >= 0 else { return .unknown(reason: "/proc/\(pid) cannot be opened") }
        defer { close(directory) }
        // Opened while the process lived: the directory is its, not a later process's of the same pid.
        guard ProcessDescriptor.isAlive(pidfd), pidOf(pidfd: pidfd, proc: proc) == Int(pid) else { return .unknown(reason: "process \(pid) is gone") }
        return identify(directory: directory)
    }

    /// The start time of process `pid` (field 22 of /proc/PID/stat, clock ticks since boot), read
    /// while `pidfd` pins it: with the pid it names that process and no later one (the token
    /// keeper identifies a broker's caller by both). Nil when the process ended meanwhile.
    package static func startTime(pid: UInt32, pidfd: Int32, proc: String = "/proc") -> UInt64? {
        guard pid > 0, pid <= UInt32(Int32.max), let started = startTime(of: Int32(pid), proc: proc) else { return nil }
        return ProcessDescriptor.isAlive(pidfd) && pidOf(pidfd: pidfd, proc: proc) == Int(pid) ? started : nil
    }

    /// Field 22 of /proc/PID/stat (clock ticks since boot), read after the command name's last ')'.
    package static func startTime(of pid: Int32, proc: String = "/proc") -> UInt64? {
        let file = open("\(proc)/\(pid)/stat", O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard file >= 0 else { return nil }
        defer { close(file) }
        guard let text = readAll(file), let close = text.lastIndex(of: ")") else { return nil }
        // After ") " come fields 3, 4, …: the start time is the 20th of them.
        let fields = text[text.index(after: close)...].split(separator: " ")
        return fields.count > 19 ? UInt64(fields[19]) : nil
    }

    /// The identity of the process whose /proc directory is `directory`.
    static func identify(directory: Int32) -> CallerIdentity {
        switch flatpakInfo(directory) {
        case .some(.some(let text)):
            guard let id = flatpakAppID(text) else { return .unknown(reason: "its /.flatpak-info names no app") }
            return .flatpak(appID: id)
        case .some(.none):
            return .unknown(reason: "its root cannot be looked at")
        case .none:
            break
        }
        if let name = read(directory, "attr/current").flatMap(snapName(label:)) ?? read(directory, "cgroup").flatMap(snapName(cgroup:)) {
            return .snap(name: name)
        }
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlinkat(directory, "exe", &buffer, buffer.count - 1)
        guard length > 0 else { return .unknown(reason: "its executable cannot be read") }
        return .host(executable: String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }

    /// The `/.flatpak-info` of the process's root: nil when there is none, `.some(nil)` when the
    /// root cannot be opened (not to be taken for "no sandbox"), else its text.
    private static func flatpakInfo(_ directory: Int32) -> String?? {
        let root = openat(directory, "root", ProcessDescriptor.openPathFlag | O_DIRECTORY | O_CLOEXEC)
        guard root >= 0 else { return .some(nil) }
        defer { close(root) }
        let file = openat(root, ".flatpak-info", O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard file >= 0 else { return errno == ENOENT ? nil : .some(nil) }
        defer { close(file) }
        var status = stat()
        guard fstat(file, &status) == 0, status.st_mode & S_IFMT == S_IFREG else { return .some(nil) }
        return .some(readAll(file))
    }

    /// The `Pid:` of a pidfd (/proc/self/fdinfo), -1 once its process is gone.
    private static func pidOf(pidfd: Int32, proc: String) -> Int? {
        guard let text = try? String(contentsOfFile: "\(proc)/self/fdinfo/\(pidfd)", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("Pid:") {
            return Int(trim(line.dropFirst(4)))
        }
        return nil
    }

    private static func read(_ directory: Int32, _ path: String) -> String? {
        let file = openat(directory, path, O_RDONLY | O_CLOEXEC)
        guard file >= 0 else { return nil }
        defer { close(file) }
        return readAll(file)
    }

    /// Up to 64 KiB of a file.
    private static func readAll(_ file: Int32) -> String? {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while bytes.count < 65_536 {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(file, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            bytes += chunk[..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    // MARK: Parsing

    /// `name` in the `[Application]` group of a `.flatpak-info` key file (as xdg-desktop-portal reads it).
    package static func flatpakAppID(_ text: String) -> String? {
        var group = ""
        for raw in text.split(separator: "\n", omittingEmptySubsequences: true) {
            let line = trim(raw)
            if line.hasPrefix("#") || line.isEmpty { continue }
            if line.hasPrefix("[") && line.hasSuffix("]") { group = String(line.dropFirst().dropLast()); continue }
            guard group == "Application", let equals = line.firstIndex(of: "=") else { continue }
            guard trim(line[..<equals]) == "name" else { continue }
            let id = trim(line[line.index(after: equals)...])
            return isAppID(id) ? id : nil
        }
        return nil
    }

    /// A Flatpak app ID's characters: letters, digits, `_`, `-` and dots, at least two elements.
    private static func isAppID(_ id: String) -> Bool {
        !id.isEmpty && id.count <= 255 && id.split(separator: ".", omittingEmptySubsequences: false).count >= 2
            && id.utf8.allSatisfy { ASCIIByte.isAlphanumeric($0) || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".") }
            && !id.split(separator: ".", omittingEmptySubsequences: false).contains { $0.isEmpty }
    }

    /// The snap of an AppArmor label `snap.NAME.APP (enforce)` (or `snap.NAME.hook.HOOK`).
    package static func snapName(label: String) -> String? {
        let profile = label.split(separator: " ").first.map(String.init) ?? ""
        let parts = profile.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count >= 3, parts[0] == "snap" else { return nil }
        return validSnap(String(parts[1]))
    }

    /// The snap of a cgroup line naming a snap's scope (`…/snap.NAME.APP-UUID.scope` or `snap.NAME.APP.service`).
    package static func snapName(cgroup: String) -> String? {
        for line in cgroup.split(separator: "\n") {
            guard let path = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false).last else { continue }
            guard let last = path.split(separator: "/").last, last.hasPrefix("snap.") else { continue }
            let parts = last.split(separator: ".", omittingEmptySubsequences: false)
            if parts.count >= 3, let name = validSnap(String(parts[1])) { return name }
        }
        return nil
    }

    /// A snap name's characters: lowercase letters, digits and `-`.
    private static func validSnap(_ name: String) -> String? {
        guard !name.isEmpty, name.count <= 40,
              name.utf8.allSatisfy({ ($0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "z")) || ($0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9")) || $0 == UInt8(ascii: "-") })
        else { return nil }
        return name
    }
}

/// Without spaces and tabs at either end.
private func trim(_ text: some StringProtocol) -> String {
    String(text.drop { $0 == " " || $0 == "\t" || $0 == "\r" }.reversed().drop { $0 == " " || $0 == "\t" || $0 == "\r" }.reversed())
}

/// Byte classes without Foundation's character sets.
private enum ASCIIByte {
    static func isAlphanumeric(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
            || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
    }
}
