#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import FoundationEssentials
import TokenCache
import TokenCacheBroker
import TokenCacheCore
import TokenCachePlatform

/// Who called the keeper, as the kernel says: the uid and pid from SO_PEERCRED, the process
/// pinned by a pidfd (SO_PEERPIDFD) where the kernel has one and by its start time always, and
/// its identity (the broker's ``CallerIdentity``: a Flatpak app ID, a snap name, or its
/// executable), kept only when no one could have changed what runs under it.
package struct KeeperCaller: Sendable, Hashable {
    /// The caller's real uid (SO_PEERCRED): whose store it is served from, never the request's say.
    package var uid: UInt32
    /// The caller's pid.
    package var pid: Int32
    /// What the caller is identified as; nil when it is not identified.
    package var identity: CallerIdentity?
    /// Why it is not identified (nil when it is): for the refusal and the log, never a secret.
    package var unidentifiedBecause: String?
    /// Its start time (clock ticks since boot), which pins it against a reused pid.
    package var started: UInt64?
    /// The identity broker's pid, for an app whose call the broker forwarded (``forwarded(pid:started:by:)``).
    package var forwardedBy: Int32?

    /// How the log and refusals name it.
    package var described: String {
        "\(identity?.description ?? "an unidentified process") (pid \(pid), uid \(uid))" + via
    }

    /// What the audit log names as the app.
    package var audited: String {
        (identity?.description ?? "unidentified: \(unidentifiedBecause ?? "unknown")") + via
    }

    private var via: String { forwardedBy.map { " via broker pid \($0)" } ?? "" }

    /// The variables that make a process run code its executable does not hold.
    static let loaderVariables = ["LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH"]

    /// Identifies the process at the other end of `connection`; nil when the kernel does not say who it is.
    package static func identify(_ connection: SocketDescriptor) -> KeeperCaller? {
        guard let peer = connection.peerCredentials(), peer.pid > 0 else { return nil }
        let pinned = PeerPidFD(connection)
        var caller = KeeperCaller(uid: peer.uid, pid: peer.pid, identity: nil, unidentifiedBecause: nil)
        // Start time first and last: a pid reused between the reads shows a different one.
        guard let started = startTime(of: peer.pid) else {
            caller.unidentifiedBecause = "its process could not be read in /proc"
            return caller
        }
        caller.started = started
        let identity = CallerIdentity.identify(pid: UInt32(peer.pid), pidfd: pinned?.fd)
        let verdict = check(identity, pid: peer.pid)
        guard startTime(of: peer.pid) == started, pinned.map({ ProcessDescriptor.isAlive($0.fd) }) ?? true else {
            caller.unidentifiedBecause = "its process ended while it was being identified"
            return caller
        }
        switch verdict {
        case .success(let identity): caller.identity = identity
        case .failure(let why): caller.unidentifiedBecause = why.text
        }
        return caller
    }

    /// The identity when nothing else runs under it: not traced, no loader variables, and for a
    /// host program an executable only root can have changed.
    static func check(_ identity: CallerIdentity, pid: Int32) -> Result<CallerIdentity, Why> {
        if case .unknown(let reason) = identity { return .failure(Why(text: reason)) }
        guard let status = read("/proc/\(pid)/status") else { return .failure(Why(text: "its /proc status could not be read")) }
        let tracer = status.split(separator: "\n").first { $0.hasPrefix("TracerPid:") }
            .map { String($0.dropFirst("TracerPid:".count).filter { !$0.isWhitespace }) }
        guard tracer == "0" else { return .failure(Why(text: "it runs under a tracer (ptrace)")) }
        guard let environ = readBytes("/proc/\(pid)/environ") else {
            return .failure(Why(text: "its environment could not be read"))
        }
        for entry in environ.split(separator: 0) {
            let name = String(decoding: entry.prefix { $0 != UInt8(ascii: "=") }, as: UTF8.self)
            if loaderVariables.contains(name) { return .failure(Why(text: "it was started with \(name)")) }
        }
        guard case .host(let path) = identity else { return .success(identity) }
        guard path.hasPrefix("/"), !path.hasSuffix(" (deleted)") else { return .failure(Why(text: "its executable was deleted or replaced")) }
        // The file at the path must be the one the process runs (same device and inode).
        var running = stat(), named = stat()
        guard stat("/proc/\(pid)/exe", &running) == 0, lstat(path, &named) == 0,
              running.st_dev == named.st_dev, running.st_ino == named.st_ino else {
            return .failure(Why(text: "its executable \(path) was replaced since it started"))
        }
        if let why = rootOwnedChain(path) { return .failure(Why(text: why)) }
        return .success(identity)
    }

    struct Why: Error { var text: String }

    /// Nil when the file and every directory up to / are root's and not writable by group or
    /// others; else what is not.
    static func rootOwnedChain(_ path: String) -> String? {
        var current = path
        while true {
            var info = stat()
            guard lstat(current, &info) == 0 else { return "\(current) could not be inspected" }
            if info.st_mode & S_IFMT == S_IFLNK { return "\(current) is a symbolic link" }
            if info.st_uid != 0 { return "\(current) belongs to uid \(info.st_uid), not root" }
            if info.st_mode & 0o022 != 0 { return "\(current) can be written by group or others" }
            if current == "/" { return nil }
            current = UnixSocket.parent(of: current)
        }
    }

    /// The app whose call the identity broker `forwarder` forwarded, named by its pid and start
    /// time (``KeeperForwardRequest``), identified here as any caller is (``check(_:pid:)``),
    /// when it runs as the forwarder's uid alone and the broker and it talk over a genuine bus
    /// daemon (``ForwardingBus``). The broker's word names the process; the kernel says who it is.
    static func forwarded(pid: Int32, started: UInt64, by forwarder: KeeperCaller) -> KeeperCaller {
        var app = KeeperCaller(uid: forwarder.uid, pid: pid, identity: nil, unidentifiedBecause: nil, started: started, forwardedBy: forwarder.pid)
        func unidentified(_ why: String) -> KeeperCaller {
            app.unidentifiedBecause = why
            return app
        }
        guard pid > 0, pid != forwarder.pid else { return unidentified("the broker named no other process") }
        let pidfd = ProcessDescriptor.open(pid: pid)
        guard pidfd >= 0 else { return unidentified("process \(pid) is gone") }
        defer { close(pidfd) }
        // Start time and uid first and last: a pid reused, or a uid changed (a setuid exec), between the reads shows.
        let pinned = { CallerIdentity.startTime(pid: UInt32(pid), pidfd: pidfd) == started && runsAs(pid, uid: forwarder.uid) }
        guard pinned() else { return unidentified("process \(pid) is not the broker's caller as it identified it (ended, or not running as uid \(forwarder.uid) alone)") }
        let verdict = check(CallerIdentity.identify(pid: UInt32(pid), pidfd: pidfd), pid: pid)
        guard pinned() else { return unidentified("its process ended or changed while it was being identified") }
        switch verdict {
        case .success(let identity): app.identity = identity
        case .failure(let why): return unidentified(why.text)
        }
        if let why = ForwardingBus.check(forwarder: forwarder.pid, app: pid, uid: forwarder.uid) {
            app.identity = nil
            return unidentified("the broker's bus is not verified: \(why)")
        }
        // The bus was checked for the process identified: still that one.
        guard pinned() else {
            app.identity = nil
            return unidentified("its process ended or changed while its bus was being checked")
        }
        return app
    }

    /// Whether process `pid`'s real, effective, saved and file-system uids are all `uid`.
    static func runsAs(_ pid: Int32, uid: UInt32) -> Bool {
        guard let status = read("/proc/\(pid)/status"), let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Uid:") }) else { return false }
        let uids = line.dropFirst(4).split(whereSeparator: { $0 == " " || $0 == "\t" }).map { UInt32($0) }
        return uids.count == 4 && uids.allSatisfy { $0 == uid }
    }

    /// Field 22 of /proc/PID/stat (clock ticks since boot).
    static func startTime(of pid: Int32) -> UInt64? { CallerIdentity.startTime(of: pid) }

    static func read(_ path: String) -> String? { readBytes(path).map { String(decoding: $0, as: UTF8.self) } }

    /// A /proc file's bytes (at most 1 MiB); nil when it cannot be opened.
    static func readBytes(_ path: String) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while bytes.count < 1 << 20 {
            let got = Glibc.read(fd, &chunk, chunk.count)
            if got < 0, errno == EINTR { continue }
            guard got >= 0 else { return nil }
            if got == 0 { break }
            bytes += chunk[..<got]
        }
        return bytes
    }
}

/// The caller's process as a pidfd (SO_PEERPIDFD, Linux 6.5): it names that process and no
/// later one with the same pid. Closed in deinit.
final class PeerPidFD {
    /// SO_PEERPIDFD, which Glibc's headers here do not name yet.
    static let option: Int32 = 77
    let fd: Int32

    /// Nil where the kernel has no SO_PEERPIDFD: the start time alone then pins the process.
    init?(_ connection: SocketDescriptor) {
        var descriptor: Int32 = -1
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(connection.fd, SOL_SOCKET, Self.option, &descriptor, &length) == 0, descriptor >= 0 else { return nil }
        fd = descriptor
    }

    deinit { close(fd) }
}

extension KeeperCaller {
    /// This caller if it still is who sends on `connection`; else one not identified, saying why.
    /// Checked at each request: every byte of it was sent by the process that connected
    /// (`senders`, from SCM_CREDENTIALS: an unprivileged process cannot name another pid there), and that
    /// process is identified as it was at accept (same start time and identity, its pidfd alive),
    /// and no other process of its uid holds the connection (which it could read the answer
    /// from), so a process that connects and hands the socket to another, or execs, is not
    /// answered as the app.
    /// - Parameter holders: whether to look for other holders of the connection (a scan of the
    ///   uid's processes' descriptors, milliseconds: done at a connection's first request only;
    ///   after it only the identified process can hand the connection on).
    package func confirmed(on connection: SocketDescriptor, senders: Set<Int32>, holders: Bool) -> KeeperCaller {
        guard identity != nil else { return self }
        var changed = self
        changed.identity = nil
        guard senders == [pid] else {
            let others = senders.subtracting([pid]).sorted().map { $0 == 0 ? "an unknown process" : "pid \($0)" }.joined(separator: ", ")
            changed.unidentifiedBecause = "the request was sent by \(others), not by the process that connected (pid \(pid)): a connection handed to another process"
            return changed
        }
        guard let now = KeeperCaller.identify(connection), now.pid == pid, now.started == started, now.identity == identity else {
            changed.unidentifiedBecause = "its process is no longer the one identified when it connected (it ran another program or ended)"
            return changed
        }
        // The answer is read by whoever holds the connection: only the identified process may.
        guard !holders || PeerHolders.of(connection, uid: uid) == [pid] else {
            changed.unidentifiedBecause = "its connection is held by another process as well (a connection handed to another process) or could not be traced to it"
            return changed
        }
        return self
    }
}

/// The sender credentials of a connection's bytes: with SO_PASSCRED on the listening socket
/// (accepted connections inherit it), the kernel attaches to every message the pid of the process
/// that sent it, and one read never returns bytes of two senders.
package enum SenderCredentials {
    // <sys/socket.h>: SO_PASSCRED, SCM_RIGHTS, SCM_CREDENTIALS, MSG_CMSG_CLOEXEC (not all exposed to Swift).
    static let passCredentials: Int32 = 16
    static let rights: Int32 = 1
    static let credentials: Int32 = 2
    static let closeOnExec: Int32 = 0x4000_0000

    /// Asks the kernel for the sender's credentials on every message of `socket`'s connections.
    package static func enable(on socket: SocketDescriptor) {
        var on: Int32 = 1
        setsockopt(socket.fd, SOL_SOCKET, passCredentials, &on, socklen_t(MemoryLayout<Int32>.size))
    }

    /// Reads exactly `count` bytes, with the pids that sent them (0 for bytes that came without
    /// credentials); nil at end of file, on a timeout or an error, or once `deadline` has passed.
    /// Descriptors a peer passes (SCM_RIGHTS) are never received: the control buffer has no room
    /// for them, so the kernel drops them.
    package static func read(_ connection: SocketDescriptor, exactly count: Int, by deadline: ReadDeadline) -> (bytes: [UInt8], senders: Set<Int32>)? {
        var bytes = [UInt8](repeating: 0, count: count)
        var senders = Set<Int32>()
        var done = 0
        // CMSG_SPACE(sizeof(struct ucred)): room for the credentials (which come first) and no
        // more, so the kernel drops any descriptor a peer passes itself; closing one here could
        // wait on its file system (a FUSE file's flush), holding this connection's thread.
        var control = [UInt64](repeating: 0, count: 4)
        while done < count {
            let remaining = deadline.remaining
            guard remaining > .zero else { return nil }
            setReceiveTimeout(connection, min(remaining, deadline.perRead))
            var sender: Int32 = 0
            let got = bytes.withUnsafeMutableBytes { buffer -> Int in
                control.withUnsafeMutableBytes { controlBuffer -> Int in
                    var vector = iovec(iov_base: buffer.baseAddress! + done, iov_len: count - done)
                    return withUnsafeMutablePointer(to: &vector) { vectorPointer in
                        var message = msghdr()
                        message.msg_iov = vectorPointer
                        message.msg_iovlen = 1
                        message.msg_control = controlBuffer.baseAddress
                        message.msg_controllen = controlBuffer.count
                        let got = recvmsg(connection.fd, &message, closeOnExec)
                        if got > 0 { sender = parse(UnsafeRawBufferPointer(rebasing: controlBuffer[..<Int(message.msg_controllen)])) }
                        return got
                    }
                }
            }
            if got < 0, errno == EINTR { continue }
            guard got > 0 else { return nil }
            if deadline.remaining <= .zero { return nil }
            senders.insert(sender)
            done += got
        }
        return (bytes, senders)
    }

    /// The sending pid in one read's control messages (0 when none), closing any passed descriptor.
    static func parse(_ control: UnsafeRawBufferPointer) -> Int32 {
        var sender: Int32 = 0
        var offset = 0
        let header = 16  // struct cmsghdr: size_t cmsg_len, int cmsg_level, int cmsg_type
        while offset + header <= control.count {
            let length = control.loadUnaligned(fromByteOffset: offset, as: Int.self)
            let level = control.loadUnaligned(fromByteOffset: offset + 8, as: Int32.self)
            let type = control.loadUnaligned(fromByteOffset: offset + 12, as: Int32.self)
            guard length >= header, offset + length <= control.count else { break }
            if level == SOL_SOCKET, type == credentials, length >= header + 12 {
                sender = control.loadUnaligned(fromByteOffset: offset + header, as: Int32.self)
            } else if level == SOL_SOCKET, type == rights {
                for index in 0..<((length - header) / 4) { close(control.loadUnaligned(fromByteOffset: offset + header + index * 4, as: Int32.self)) }
            }
            offset += (length + 7) & ~7
        }
        return sender
    }

    /// Bounds the next blocking read by `duration` (at least 1 ms: a zero timeout would mean none).
    static func setReceiveTimeout(_ connection: SocketDescriptor, _ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        var time = timeval(tv_sec: Int(seconds), tv_usec: Int(attoseconds / 1_000_000_000_000))
        if time.tv_sec <= 0 && time.tv_usec < 1000 { time = timeval(tv_sec: 0, tv_usec: 1000) }
        setsockopt(connection.fd, SOL_SOCKET, SO_RCVTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
    }
}

/// The processes that hold a connection's other end: its inode from the kernel's socket
/// diagnostics (NETLINK_SOCK_DIAG, UNIX_DIAG_PEER), then every descriptor of the caller's uid's
/// processes naming it (`/proc/PID/fd`, as `ss -xp` finds them).
enum PeerHolders {
    /// The pids of `uid`'s processes holding the other end of `connection`; nil when the kernel
    /// did not say which socket that is, or a process of `uid` could not be looked into (an
    /// unread process is not taken to hold nothing; one that ended meanwhile is skipped).
    static func of(_ connection: SocketDescriptor, uid: UInt32) -> Set<Int32>? {
        var own = stat()
        guard fstat(connection.fd, &own) == 0, let peer = peerInode(of: UInt32(truncatingIfNeeded: own.st_ino)) else { return nil }
        return holders(of: [peer], uid: uid).map { $0[peer] ?? [] }
    }

    /// The socket inodes process `pid` holds (`/proc/PID/fd` links `socket:[N]`); nil when they cannot be read.
    static func sockets(of pid: Int32) -> Set<UInt32>? {
        guard let fds = opendir("/proc/\(pid)/fd") else { return nil }
        defer { closedir(fds) }
        var inodes = Set<UInt32>()
        var link = [CChar](repeating: 0, count: 64)
        while let entry = readdir(fds) {
            let fd = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            guard fd.first?.isNumber == true else { continue }
            let count = readlink("/proc/\(pid)/fd/\(fd)", &link, link.count - 1)
            if count < 0, errno != ENOENT { return nil }
            guard count > 0 else { continue }
            let text = String(decoding: link[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if text.hasPrefix("socket:["), text.hasSuffix("]"), let inode = UInt32(text.dropFirst(8).dropLast()) { inodes.insert(inode) }
        }
        return inodes
    }

    /// For each socket inode of `inodes`, the pids of `uid`'s processes holding it; nil when a
    /// process of `uid` could not be looked into (one that ended meanwhile is skipped).
    static func holders(of inodes: Set<UInt32>, uid: UInt32) -> [UInt32: Set<Int32>]? {
        var holders: [UInt32: Set<Int32>] = [:]
        guard !inodes.isEmpty else { return holders }
        guard let proc = opendir("/proc") else { return nil }
        defer { closedir(proc) }
        while let item = readdir(proc) {
            let name = withUnsafeBytes(of: item.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            guard let pid = Int32(name) else { continue }
            // Only the caller's uid's processes: another user's would need that user's help to get the socket.
            var info = stat()
            // /proc/PID itself stays its owner's when the process makes itself non-dumpable (only the files in it turn root's).
            guard stat("/proc/\(pid)", &info) == 0, info.st_uid == uid else { continue }
            guard let fds = opendir("/proc/\(pid)/fd") else {
                if errno == ENOENT || errno == ESRCH { continue }  // ended since readdir
                return nil
            }
            defer { closedir(fds) }
            var link = [CChar](repeating: 0, count: 64)
            while let entry = readdir(fds) {
                let fd = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
                guard fd.first?.isNumber == true else { continue }
                let count = readlink("/proc/\(pid)/fd/\(fd)", &link, link.count - 1)
                // Gone since the listing (closed, or the process ended) is no holder; any other failure is unknown.
                if count < 0, errno != ENOENT, errno != ESRCH { return nil }
                guard count > 9 else { continue }
                let text = String(decoding: link[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
                if text.hasPrefix("socket:["), text.hasSuffix("]"), let inode = UInt32(text.dropFirst(8).dropLast()), inodes.contains(inode) {
                    holders[inode, default: []].insert(pid)
                }
            }
        }
        return holders
    }

    /// The inode of the Unix socket connected to the one of inode `inode` (UNIX_DIAG_PEER).
    static func peerInode(of inode: UInt32) -> UInt32? {
        // socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG)
        let fd = socket(16, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 4)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        // struct nlmsghdr (16 bytes) + struct unix_diag_req (24 bytes), little-endian fields.
        var request = [UInt8](repeating: 0, count: 40)
        func put32(_ value: UInt32, at offset: Int) { withUnsafeBytes(of: value.littleEndian) { for i in 0..<4 { request[offset + i] = $0[i] } } }
        func put16(_ value: UInt16, at offset: Int) { withUnsafeBytes(of: value.littleEndian) { for i in 0..<2 { request[offset + i] = $0[i] } } }
        put32(40, at: 0)                          // nlmsg_len
        put16(20, at: 4)                          // SOCK_DIAG_BY_FAMILY
        put16(1, at: 6)                           // NLM_F_REQUEST: one socket by its inode, not a dump
        put32(1, at: 8)                           // nlmsg_seq
        request[16] = UInt8(AF_UNIX)              // sdiag_family
        put32(0xFFFF_FFFF, at: 20)                // udiag_states: any
        put32(inode, at: 24)                      // udiag_ino
        put32(1 << 2, at: 28)                     // UDIAG_SHOW_PEER
        put32(0xFFFF_FFFF, at: 32)                // udiag_cookie: INET_DIAG_NOCOOKIE
        put32(0xFFFF_FFFF, at: 36)
        var kernel = [UInt8](repeating: 0, count: 12)  // struct sockaddr_nl: family AF_NETLINK, pid 0
        kernel[0] = 16
        let sent = request.withUnsafeBytes { bytes in
            kernel.withUnsafeBytes { address in
                sendto(fd, bytes.baseAddress, bytes.count, 0, address.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(address.count))
            }
        }
        guard sent == request.count else { return nil }
        var time = timeval(tv_sec: 2, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
        var answer = [UInt8](repeating: 0, count: 8192)
        let received = answer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard received >= 16 else { return nil }
        func get32(_ offset: Int) -> UInt32 { answer.withUnsafeBytes { UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: offset, as: UInt32.self)) } }
        func get16(_ offset: Int) -> UInt16 { answer.withUnsafeBytes { UInt16(littleEndian: $0.loadUnaligned(fromByteOffset: offset, as: UInt16.self)) } }
        let length = Int(get32(0))
        // An answer of SOCK_DIAG_BY_FAMILY about this inode: struct unix_diag_msg (16 bytes), then attributes.
        guard length <= received, get16(4) == 20, length >= 32, get32(16 + 4) == inode else { return nil }
        var offset = 32
        while offset + 4 <= length {
            let size = Int(get16(offset)), type = get16(offset + 2)
            guard size >= 4, offset + size <= length else { break }
            if type == 2, size >= 8 { return get32(offset + 4) }  // UNIX_DIAG_PEER
            offset += (size + 3) & ~3
        }
        return nil
    }
}
