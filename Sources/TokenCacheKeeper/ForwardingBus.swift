#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import TokenCacheBroker

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
        return nil
    }
}
