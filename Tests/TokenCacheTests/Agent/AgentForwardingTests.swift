import Foundation
import Testing
@testable import TokenCache
@testable import TokenCacheCore
import TokenCacheTestSupport

/// The agent's socket reached from elsewhere: forwarded by OpenSSH (`ssh -R`, a private sshd on
/// loopback with throw-away keys) and bind-mounted into a second mount namespace (a container's view).
@Suite("AgentForwarding", .harness, .serialized)
struct AgentForwardingTests {
    /// A private sshd on 127.0.0.1 for one test: its own host key, one authorized client key.
    final class PrivateSSHServer {
        let directory: URL
        let port: Int
        /// The daemon's process ID (from its pid file).
        let pid: Int32
        var clientKey: String { directory.appendingPathComponent("client_key").path }

        init() throws {
            directory = URL(fileURLWithPath: "/tmp/tc-ssh-\(UUID().uuidString.prefix(8))")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
            for key in ["host_key", "client_key"] {
                let made = try runProcess("/usr/bin/ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", directory.appendingPathComponent(key).path])
                guard made.status == 0 else { throw TokenCacheError(.fileSystem, "ssh-keygen failed: \(made.stderr)") }
            }
            try FileManager.default.copyItem(at: directory.appendingPathComponent("client_key.pub"), to: directory.appendingPathComponent("authorized_keys"))
            // sshd's privilege separation directory.
            try FileManager.default.createDirectory(atPath: "/run/sshd", withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
            var started: (Int, Int32)?
            for _ in 0..<5 where started == nil {
                // A free port from the kernel; another program could take it before sshd does, hence the retries.
                guard let port = Self.loopbackPort(connect: nil) else { continue }
                let config = directory.appendingPathComponent("sshd_config")
                // StrictModes no: the key files sit under /tmp, which is world-writable (sticky).
                try """
                    Port \(port)
                    ListenAddress 127.0.0.1
                    HostKey \(directory.path)/host_key
                    AuthorizedKeysFile \(directory.path)/authorized_keys
                    PidFile \(directory.path)/sshd.pid
                    UsePAM no
                    PermitRootLogin prohibit-password
                    PasswordAuthentication no
                    KbdInteractiveAuthentication no
                    StrictModes no
                    AllowStreamLocalForwarding yes
                    StreamLocalBindUnlink yes

                    """.write(to: config, atomically: true, encoding: .utf8)
                // Daemonised (not a child of the test, which would leave Foundation's reaping of
                // later children waiting on it): it writes its pid file once it listens.
                let pidFile = directory.appendingPathComponent("sshd.pid")
                try? FileManager.default.removeItem(at: pidFile)
                guard try runProcess("/usr/sbin/sshd", ["-f", config.path]).status == 0 else { continue }
                let deadline = Date().addingTimeInterval(10)
                while Date() < deadline {
                    if let text = try? String(contentsOf: pidFile, encoding: .utf8), let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)),
                       Self.loopbackPort(connect: port) != nil {
                        started = (port, pid)
                        break
                    }
                    usleep(50_000)
                }
            }
            guard let started else { throw TokenCacheError(.portUnavailable, "sshd did not start") }
            (port, pid) = started
        }

        /// With `connect` nil, a port free on 127.0.0.1 now (bound and released); otherwise
        /// `connect` when something listens there, else nil.
        static func loopbackPort(connect port: Int?) -> Int? {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { return nil }
            defer { close(fd) }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port ?? 0)).bigEndian
            address.sin_addr.s_addr = in_addr_t(0x7f00_0001).bigEndian
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let result = withUnsafeMutablePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                    port == nil ? (bind(fd, address, length) == 0 ? getsockname(fd, address, &length) : -1) : connect(fd, address, length)
                }
            }
            guard result == 0 else { return nil }
            return port ?? Int(UInt16(bigEndian: address.sin_port))
        }

        /// `ssh -R remote:local` to this server, running `command` there.
        func run(forwarding remote: String, to local: String, _ command: String) throws -> ProcessOutput {
            try runProcess("/usr/bin/ssh", [
                "-i", clientKey, "-p", "\(port)", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
                "-o", "UserKnownHostsFile=/dev/null", "-o", "ExitOnForwardFailure=yes", "-o", "LogLevel=ERROR",
                "-R", "\(remote):\(local)", "root@127.0.0.1", command])
        }

        deinit {
            kill(pid, SIGTERM)
            try? FileManager.default.removeItem(at: directory)
        }
    }

    static func shellQuoted(_ value: String) -> String { "'" + value.replacingOccurrences(of: "'", with: "'\\''") + "'" }

    @Test("ssh -R forwards the agent's socket into an SSH session: tokencache token there gets the desktop's token (refreshed by the agent), and the forwarded socket is 0600")
    func sshForwardedSocket() async throws {
        let scenario = try await AgentScenario()
        defer { scenario.cleanUp() }
        let agent = try scenario.startAgent(["--authority", scenario.authority])
        defer { agent.stop() }
        let server = try PrivateSSHServer()
        let remote = server.directory.appendingPathComponent("forwarded.sock").path
        let binary = TestEnvironment.binDirectory.appendingPathComponent("tokencache").path
        // The session's own home, with nothing of the desktop's: only the forwarded socket.
        let command = "stat -c %a \(remote) && env -i PATH=/usr/bin:/bin HOME=\(Self.shellQuoted(scenario.containerHome.path)) "
            + "TOKENCACHE_AGENT_SOCK=\(remote) \(Self.shellQuoted(binary)) token --client \(Fixtures.appTwo) --scopes User.Read"
        let session = try server.run(forwarding: remote, to: agent.socket, command)
        #expect(session.status == 0, "\(session.stderr)")
        #expect(session.stdout == "600\nat-issued-1\n", "\(session.stdout) \(session.stderr)")
        #expect(try await scenario.idp.stats().grants.first?.redeemed == AgentScenario.refreshToken)
        // The agent saw the forwarding ssh process as the peer (same user).
        #expect(agent.log.contains("ssh["), "\(agent.log)")
        #expect(!scenario.containerFiles().values.contains { $0.contains("rt-") })
    }

    @Test("a bind mount of the socket into another mount namespace (a container's view) serves the token there")
    func bindMountedSocket() async throws {
        let scenario = try await AgentScenario()
        defer { scenario.cleanUp() }
        let agent = try scenario.startAgent(["--authority", scenario.authority])
        defer { agent.stop() }
        let mountPoint = scenario.containerHome.appendingPathComponent("agent.sock").path
        FileManager.default.createFile(atPath: mountPoint, contents: nil)
        let binary = TestEnvironment.binDirectory.appendingPathComponent("tokencache").path
        let inside = "mount --bind \(Self.shellQuoted(agent.socket)) \(Self.shellQuoted(mountPoint)) && "
            + "\(Self.shellQuoted(binary)) token --client \(Fixtures.appTwo) --scopes User.Read"
        let output = try runProcess("/usr/bin/unshare", ["-m", "--propagation", "private", "/bin/sh", "-c", inside],
                                    environment: scenario.containerEnvironment(socket: mountPoint))
        #expect(output.status == 0, "\(output.stderr)")
        #expect(output.stdout == "at-issued-1\n")
        // The mount lived in the other namespace only.
        #expect(!(try String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8)).contains(mountPoint))
    }
}
