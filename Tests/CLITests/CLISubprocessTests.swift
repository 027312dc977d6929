import Foundation
import Testing
@testable import TokenCacheCLI
import TokenCacheTestSupport

/// The CLI's child processes (git, kubectl, the agent): what they inherit and how they end.
@Suite("The CLI's child processes", .harness)
struct CLISubprocessTests {
    // The hang is the failure tested: before the fix, a program writing past the limit blocked
    // on a full pipe while the CLI waited for it, forever. Generous, as a loaded machine is slow.
    @Test("A program that writes more than the limit ends (EPIPE once the CLI stops reading) rather than blocking on a full pipe while the CLI waits for it",
          .timeLimit(.minutes(2)))
    func outputPastTheLimitEnds() throws {
        let result = try Subprocess.run(["/usr/bin/head", "-c", "8388608", "/dev/zero"], limit: 1 << 16)
        #expect(result.output.isEmpty, "the output past the limit is not returned: \(result.output.count) bytes")
        #expect(result.status != 0, "the program could not have written all of it: status \(result.status)")
        let small = try Subprocess.run(["/bin/sh", "-c", "printf hello"], limit: 1 << 16)
        #expect(small.status == 0 && String(decoding: small.output, as: UTF8.self) == "hello")
    }

    @Test("Neither end of a child's output pipe is inherited by a program another thread starts meanwhile: the pipe is close-on-exec")
    func pipeIsCloseOnExec() throws {
        let (pid, output) = try Subprocess.spawn(["/bin/true"])
        defer {
            var status: Int32 = 0
            waitpid(pid, &status, 0)
            close(output)
        }
        let flags = fcntl(output, F_GETFD)
        #expect(flags >= 0 && flags & FD_CLOEXEC != 0, "flags \(flags)")
    }
}
