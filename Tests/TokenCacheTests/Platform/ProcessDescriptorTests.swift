import Foundation
import Testing
@testable import TokenCachePlatform
#if canImport(Glibc)
import Glibc
#endif

@Suite("pidfds")
struct ProcessDescriptorTests {
    @Test("isAlive: a running process is alive, and no longer once it has exited (asked by polling the pidfd, which needs no right to signal the process)")
    func aliveUntilExit() throws {
        let child = Process()
        child.executableURL = URL(fileURLWithPath: "/bin/sleep")
        child.arguments = ["3600"]
        try child.run()
        let pidfd = ProcessDescriptor.open(pid: child.processIdentifier)
        try #require(pidfd >= 0, "pidfd_open: \(String(cString: strerror(errno)))")
        defer { close(pidfd) }
        #expect(ProcessDescriptor.isAlive(pidfd))
        kill(child.processIdentifier, SIGKILL)
        child.waitUntilExit()
        #expect(!ProcessDescriptor.isAlive(pidfd))
    }

    @Test("isAlive: no descriptor, or one that is no pidfd (a file polls readable at once), is not a live process")
    func notAPidfd() throws {
        #expect(!ProcessDescriptor.isAlive(-1))
        let file = open("/dev/null", O_RDONLY | O_CLOEXEC)
        try #require(file >= 0)
        defer { close(file) }
        #expect(!ProcessDescriptor.isAlive(file), "a file polls readable")
    }
}
