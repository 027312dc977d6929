import Foundation
import TokenCacheCore

/// A D-Bus session bus of its own (`dbus-daemon`), killed when released: a test owns names on it
/// alone, or sees a bus with no Secret Service at all.
public final class PrivateBus: @unchecked Sendable {
    // @unchecked: set once in init, only read afterwards.
    private let daemon: Process
    /// The bus's address, for `DBUS_SESSION_BUS_ADDRESS`.
    public let address: String

    /// Starts the bus with the machine's session configuration, or with `configuration` (a
    /// `busconfig` file, e.g. one with no service directories, so nothing is activated).
    public init(configuration: URL? = nil) throws {
        daemon = Process()
        daemon.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-daemon")
        daemon.arguments = [configuration.map { "--config-file=\($0.path)" } ?? "--session", "--nofork", "--print-address=1"]
        let output = Pipe()
        daemon.standardOutput = output
        daemon.standardError = FileHandle.nullDevice
        try daemon.run()
        var printed = Data()  // the address, on a line of its own once the bus listens
        while !printed.contains(UInt8(ascii: "\n")) {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            printed += chunk
        }
        let address = String(decoding: printed, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard address.hasPrefix("unix:") else {
            kill(daemon.processIdentifier, SIGKILL)
            daemon.waitUntilExit()
            throw TokenCacheError(.noSessionBus, "dbus-daemon printed no address: \(address)")
        }
        self.address = address
    }

    /// Ends the bus, as a session's end does (every connection closes).
    public func stop() {
        guard daemon.isRunning else { return }
        // SIGKILL: a process started from a Dispatch thread inherits its blocked signals, SIGTERM among them.
        kill(daemon.processIdentifier, SIGKILL)
        daemon.waitUntilExit()
    }

    deinit { stop() }
}
