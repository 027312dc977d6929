#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import TokenCacheBroker
import TokenCachePlatform

/// Whether an identity broker that forwards an app's call (``KeeperForwardRequest``) heard it
/// from a genuine bus daemon: else any process of the user could start the keeper's own
/// program against a bus of its own making that names an allowed app's pid as the caller, and
/// read the answer. A bus daemon as installed reports the kernel's credentials of each
/// connection whatever its configuration, so then the pid is the kernel's word, not the user's.
///
/// Checked from the kernel's socket tables (``PeerHolders``): every process of the user at the
/// other end of the broker's Unix sockets is one process, a root-owned bus daemon identified as
/// any caller is (not traced, no loader variables); the app holds a connection to that daemon,
/// and no other process of the user holds that connection (one that connected and then ran the
/// app could still read the answer).
enum ForwardingBus {
    /// The bus daemons a broker may hear apps through (dbus-broker since PR #312 also hands the broker a pidfd).
    static let daemons: Set<String> = ["/usr/bin/dbus-daemon", "/usr/bin/dbus-broker"]

    /// Nil when the bus is verified; else why not (for the refusal and the audit log).
    static func check(forwarder: Int32, app: Int32, uid: UInt32) -> String? {
        guard let forwarderSockets = PeerHolders.sockets(of: forwarder) else { return "the broker's descriptors could not be read" }
        guard let appSockets = PeerHolders.sockets(of: app) else { return "the app's descriptors could not be read" }
        var peer: [UInt32: UInt32] = [:]
        for socket in forwarderSockets.union(appSockets) {
            if let other = PeerHolders.peerInode(of: socket) { peer[socket] = other }
        }
        let forwarderPeers = Set(forwarderSockets.compactMap { peer[$0] })
        let appPeers = Set(appSockets.compactMap { peer[$0] })
        guard let holders = PeerHolders.holders(of: forwarderPeers.union(appPeers).union(appSockets), uid: uid) else {
            return "a process of the user could not be looked into"
        }
        let heard = forwarderPeers.reduce(into: Set<Int32>()) { $0.formUnion(holders[$1] ?? []) }.subtracting([forwarder])
        guard heard.count == 1, let bus = heard.first else {
            return heard.isEmpty ? "the broker is connected to no process of the user (no session bus)"
                : "the broker is connected to \(heard.count) processes of the user (pids \(heard.sorted().map(String.init).joined(separator: ", "))), not to one bus daemon"
        }
        let identity = CallerIdentity.identify(pid: UInt32(bus))
        guard case .success(.host(let executable)) = KeeperCaller.check(identity, pid: bus), daemons.contains(executable) else {
            return "the process the broker is connected to (pid \(bus), \(identity)) is not a bus daemon as installed (\(daemons.sorted().joined(separator: ", ")))"
        }
        let appConnections = appSockets.filter { socket in peer[socket].flatMap { holders[$0] }?.contains(bus) ?? false }
        guard !appConnections.isEmpty else { return "the app (pid \(app)) has no connection to the broker's bus (pid \(bus))" }
        guard appConnections.allSatisfy({ holders[$0] == [app] }) else {
            return "the app's connection to the bus is held by another process as well"
        }
        return connectionsNamingApp(app, bus: bus, uid: uid)
    }

    /// Nil when every connection the bus daemon credits to `app` (its socket's `SO_PEERCRED`, the
    /// pid the daemon reports) is held by `app` alone; else why not. The kernel records the pid at
    /// `connect`: a process of the user that connects, then has the app exec in a child of the
    /// same pid (or hands the app the pid by exec'ing it), holds a connection the daemon credits
    /// to the app. The daemon's sockets are copied here (`pidfd_getfd`, CAP_SYS_PTRACE) to read it.
    static func connectionsNamingApp(_ app: Int32, bus: Int32, uid: UInt32) -> String? {
        let pidfd = ProcessDescriptor.open(pid: bus)
        guard pidfd >= 0 else { return "the bus daemon (pid \(bus)) ended" }
        defer { close(pidfd) }
        guard let descriptors = opendir("/proc/\(bus)/fd") else { return "the bus daemon's descriptors could not be read" }
        var numbers: [Int32] = []
        while let entry = readdir(descriptors) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if let number = Int32(name) { numbers.append(number) }
        }
        closedir(descriptors)
        // The client ends of the daemon's connections credited to the app.
        var clientEnds = Set<UInt32>()
        for number in numbers {
            let copy = ProcessDescriptor.copy(number, of: pidfd)
            if copy < 0 {
                if errno == EBADF { continue }  // closed since the listing
                return "the bus daemon's connections could not be inspected (\(String(cString: strerror(errno))))"
            }
            defer { close(copy) }
            var status = stat()
            guard fstat(copy, &status) == 0, status.st_mode & S_IFMT == S_IFSOCK else { continue }
            // struct ucred: pid, uid, gid.
            var credentials: (pid: Int32, uid: UInt32, gid: UInt32) = (0, 0, 0)
            var length = socklen_t(MemoryLayout<(Int32, UInt32, UInt32)>.size)
            guard getsockopt(copy, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0, credentials.pid == app else { continue }
            guard let clientEnd = PeerHolders.peerInode(of: UInt32(truncatingIfNeeded: status.st_ino)) else {
                return "a connection the bus credits to the app has no client end the kernel names (a descriptor in flight)"
            }
            clientEnds.insert(clientEnd)
        }
        guard !clientEnds.isEmpty else { return "the bus daemon credits no connection to the app (pid \(app))" }
        guard let holders = PeerHolders.holders(of: clientEnds, uid: uid) else { return "a process of the user could not be looked into" }
        for end in clientEnds where holders[end] != [app] {
            let others = (holders[end] ?? []).subtracting([app]).sorted().map(String.init).joined(separator: ", ")
            return "a bus connection credited to the app (pid \(app)) is held by " + (others.isEmpty ? "no process the keeper can see" : "pid \(others)")
                + ", not by the app alone (a connection made before the app was started in its process)"
        }
        return nil
    }
}
