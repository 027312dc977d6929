#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import CLinux
import FoundationEssentials
import TokenCacheCore

/// How a process finds the token keeper (#62) by itself: the keeper's socket at a fixed path and
/// the keeper's public list of the groups each user enrolled (`ENROLLED/UID`, one group name per
/// line; group names are no secret, apps files name them too), both root's in directories no
/// other user can write. Reading a file, not asking the keeper, keeps socket activation from
/// starting the keeper for every process of every user.
package struct KeeperDiscovery: Sendable {
    /// The keeper's socket (socket activation: `tokencache-keeper.socket`).
    package static let defaultSocket = "/run/tokencache/keeper.sock"
    /// Where the keeper lists each user's enrolled groups (made 0755 by the package's tmpfiles.d entry).
    package static let defaultEnrolledDirectory = "/var/lib/tokencache-enrolled"
    /// Set to `off`, a process never asks the keeper unless `TOKENCACHE_AGENT_SOCK` names it.
    package static let environmentVariable = "TOKENCACHE_KEEPER"

    /// The keeper's socket.
    package var socket: String
    /// The directory of the public lists.
    package var enrolledDirectory: String

    package init(socket: String = KeeperDiscovery.defaultSocket, enrolledDirectory: String = KeeperDiscovery.defaultEnrolledDirectory) {
        self.socket = socket
        self.enrolledDirectory = enrolledDirectory
    }

    /// The installed keeper, found at the default paths, unless `TOKENCACHE_KEEPER=off` (read with `secure_getenv`).
    package static var installed: KeeperDiscovery? {
        if let value = tc_secure_getenv(environmentVariable), String(cString: value) == "off" { return nil }
        return KeeperDiscovery()
    }

    /// The keeper as a token agent for `uid`, when that user enrolled a group and the socket is
    /// one root's keeper could have made; nil when the user enrolled nothing, or when the list or
    /// the socket is not root's or lies in a directory another user could write (anyone could
    /// have put it there). Reads two file names and one small file: no connection.
    package func keeper(for uid: UInt32) -> AgentClient? {
        guard !enrolledGroups(of: uid).isEmpty, Self.isRootsAlone(socket, type: S_IFSOCK) else { return nil }
        return AgentClient(path: socket, trustedUIDs: [0], isKeeper: true)
    }

    /// The keeper as a token agent answering from `group`, when `uid` enrolled that group (else nil, as ``keeper(for:)``).
    package func keeper(for uid: UInt32, group: String) -> AgentClient? {
        guard enrolledGroups(of: uid).contains(group), Self.isRootsAlone(socket, type: S_IFSOCK) else { return nil }
        return AgentClient(path: socket, trustedUIDs: [0], group: group, isKeeper: true)
    }

    /// The groups `uid` enrolled, as the keeper listed them; none when the list is missing or not root's alone.
    package func enrolledGroups(of uid: UInt32) -> [String] {
        let path = "\(enrolledDirectory)/\(uid)"
        guard Self.isRootsAlone(path, type: S_IFREG) else { return [] }
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return [] }
        defer { close(fd) }
        // The file opened is the one checked (no swap between), and a list is a few group names.
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_uid == 0, info.st_mode & 0o022 == 0, info.st_size <= Self.maximumListBytes else { return [] }
        var bytes = [UInt8](repeating: 0, count: Self.maximumListBytes)
        var count = 0
        while count < bytes.count {
            let read = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + count, $0.count - count) }
            if read < 0 && errno == EINTR { continue }
            guard read > 0 else { break }
            count += read
        }
        return String(decoding: bytes[..<count], as: UTF8.self).split(separator: "\n").map(String.init).filter { (try? CacheGroup($0)) != nil }
    }

    /// The largest list read: a few group names.
    static let maximumListBytes = 64 * 1024

    /// Whether `path` is a file of `type` that root owns and only root may write (no link), in
    /// directories up to `/` that root owns and only root may write.
    static func isRootsAlone(_ path: String, type: mode_t) -> Bool {
        var info = stat()
        guard path.hasPrefix("/"), lstat(path, &info) == 0, info.st_mode & S_IFMT == type, info.st_uid == 0,
              type == S_IFSOCK || info.st_mode & 0o022 == 0 else { return false }
        var directory = UnixSocket.parent(of: path)
        while true {
            guard lstat(directory, &info) == 0, info.st_mode & S_IFMT == S_IFDIR, info.st_uid == 0, info.st_mode & 0o022 == 0 else { return false }
            if directory == "/" { return true }
            directory = UnixSocket.parent(of: directory)
        }
    }
}
