import Foundation
import Testing
@testable import TokenCache
@testable import TokenCacheAgent
import TokenCacheCore
import TokenCacheTestSupport

/// The agent's listening socket, made in-process as `tokencache agent` makes it.
@Suite("Agent socket", .harness)
struct AgentSocketTests {
    /// The process's umask as the kernel reports it, read without changing it (umask(2) cannot).
    static func currentUmask() -> mode_t? {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Umask:") }) else { return nil }
        return mode_t(line.dropFirst("Umask:".count).trimmingCharacters(in: .whitespaces), radix: 8)
    }

    @Test("Listening leaves the process's umask alone (other threads' new files keep their modes) and the socket is 0600")
    func umaskUntouched() async throws {
        let directory = try TestEnvironment.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let before = try #require(Self.currentUmask())
        let listening = Locked(true), seen = Locked<Set<mode_t>>([])
        // Another thread watches the umask for as long as the listens below go on, as a thread of an app would create files.
        let watcher = Thread {
            while listening.withLock({ $0 }) {
                if let mask = Self.currentUmask() { seen.withLock { _ = $0.insert(mask) } }
            }
        }
        watcher.start()
        let path = directory.appendingPathComponent("s/agent.sock").path
        for _ in 0..<2_000 {
            let socket = try UnixSocket.listen(path)
            var status = stat()
            #expect(lstat(path, &status) == 0 && status.st_mode & 0o777 == 0o600 && status.st_uid == getuid())
            _ = socket
            unlink(path)
        }
        listening.withLock { $0 = false }
        #expect(seen.withLock { $0 } == [before], "the umask changed while the agent listened: \(seen.withLock { $0 })")
        #expect(Self.currentUmask() == before)
    }
}
