import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A real software TPM 2.0 (`swtpm socket`, Debian's swtpm) for one test: its state in a
/// temporary directory of its own, listening on two free loopback ports (the TCTI's port and
/// the next one, its control channel), killed by ``stop()`` or when released. A missing swtpm
/// is an error, never a skip: scripts/install-deps.sh installs it.
package final class SoftwareTPM: @unchecked Sendable {
    // @unchecked: the process is started in init and only killed afterwards.
    /// The TCTI that reaches it, for `TOKENCACHE_TPM_TCTI` or ``EncryptedFileBackend/KeySource/tpm(sealedKeyFile:tcti:)``.
    package let tcti: String
    /// Its state directory (another instance has another storage seed: another machine).
    package let stateDirectory: URL
    private let process: Process

    package init() throws {
        let swtpm = "/usr/bin/swtpm"
        guard FileManager.default.isExecutableFile(atPath: swtpm) else {
            throw SoftwareTPMError.missing("swtpm is not installed (Debian: apt-get install swtpm swtpm-tools libtss2-tcti-swtpm0; scripts/install-deps.sh does)")
        }
        stateDirectory = try TestEnvironment.temporaryDirectory()
        // A free pair of ports: another test's swtpm may take one between our check and its
        // bind, so a start that fails is tried again on another pair.
        for _ in 0..<20 {
            let port = try Self.freePortPair()
            let process = Process()
            process.executableURL = URL(fileURLWithPath: swtpm)
            process.arguments = ["socket", "--tpm2", "--server", "type=tcp,port=\(port),bindaddr=127.0.0.1",
                                 "--ctrl", "type=tcp,port=\(port + 1),bindaddr=127.0.0.1",
                                 "--tpmstate", "dir=\(stateDirectory.path)", "--flags", "not-need-init,startup-clear"]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            if Self.waitUntilListening(port: port + 1, while: process) {
                self.process = process
                tcti = "swtpm:host=127.0.0.1,port=\(port)"
                return
            }
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        throw SoftwareTPMError.missing("swtpm did not start on any of 20 port pairs")
    }

    /// Flushes the transient objects a killed client left loaded: a TCTI straight to the TPM has
    /// no resource manager to do it, as the kernel's /dev/tpmrm0 does when a process dies.
    package func flushTransientObjects() throws {
        let output = try runProcess("/usr/bin/tpm2_flushcontext", ["--transient-object"],
                                    environment: ProcessInfo.processInfo.environment.merging(["TPM2TOOLS_TCTI": tcti]) { $1 })
        guard output.status == 0 else { throw SoftwareTPMError.missing("tpm2_flushcontext failed: \(output.stderr)") }
    }

    /// Fills the TPM's transient object slots (swtpm has 3) with primary keys that tpm2-tools
    /// leaves loaded, as clients killed without a resource manager would: the TPM is then busy.
    package func fillObjectMemory() throws {
        let scratch = try TestEnvironment.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: scratch) }
        let environment = ProcessInfo.processInfo.environment.merging(["TPM2TOOLS_TCTI": tcti]) { $1 }
        for slot in 0..<3 {
            let output = try runProcess("/usr/bin/tpm2_createprimary", ["-Q", "-C", "o", "-c", scratch.appendingPathComponent("\(slot).ctx").path],
                                        environment: environment)
            guard output.status == 0 else { throw SoftwareTPMError.missing("tpm2_createprimary failed: \(output.stderr)") }
        }
    }

    /// Kills it (SIGKILL: Foundation's children have every other signal blocked).
    package func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(at: stateDirectory)
    }

    /// Two consecutive loopback ports that are free now.
    private static func freePortPair() throws -> Int {
        for _ in 0..<100 {
            let first = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(first) }
            guard bind(first, port: 0) else { continue }
            var address = sockaddr_in()
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(first, $0, &length) } }
            let port = Int(UInt16(bigEndian: address.sin_port))
            guard port < 65535 else { continue }
            let second = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(second) }
            if bind(second, port: port + 1) { return port }
        }
        throw SoftwareTPMError.missing("no two consecutive free loopback ports")
    }

    private static func bind(_ descriptor: Int32, port: Int) -> Bool {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } == 0
    }

    /// Polls until the control port accepts a connection (at most 10 s), or the process exited.
    private static func waitUntilListening(port: Int, while process: Process) -> Bool {
        for _ in 0..<1000 {
            guard process.isRunning else { return false }
            let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = UInt16(port).bigEndian
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            } == 0
            close(descriptor)
            if connected { return true }
            usleep(10_000)
        }
        return false
    }
}

/// Why no software TPM could be started.
package enum SoftwareTPMError: Error, CustomStringConvertible {
    case missing(String)
    package var description: String {
        switch self { case .missing(let why): why }
    }
}
