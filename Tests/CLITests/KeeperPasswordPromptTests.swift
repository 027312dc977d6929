import Foundation
import Synchronization
import Testing
@testable import TokenCacheCLI
import TokenCacheTestSupport

/// The disposition a test puts on SIGUSR1 before a read: counts its calls.
private let oldHandlerCalls = Atomic<Int>(0)
private let countingHandler: @convention(c) (Int32) -> Void = { _ in oldHandlerCalls.add(1, ordering: .sequentiallyConsistent) }

/// The password prompt's signal handling, as OpenBSD's readpassphrase(3): on SIGUSR1 and SIGUSR2
/// (which no other suite touches) and a pseudo-terminal, in this process. Serialized: dispositions are the process's.
@Suite("tokencache CLI: the password prompt and signals", .serialized, .harness)
struct KeeperPasswordPromptTests {
    /// Runs `body` with SIGUSR1 counted by ``countingHandler`` and SIGUSR2 ignored, then puts the defaults back.
    private func withOldDispositions(_ body: () throws -> Void) rethrows {
        oldHandlerCalls.store(0, ordering: .sequentiallyConsistent)
        // The dispositions before, put back after (not SIG_DFL: the test process may have had its own).
        let (before1, before2) = (signal(SIGUSR1, countingHandler), signal(SIGUSR2, SIG_IGN))
        // The test runner's thread may block signals: raise delivers on this thread only where it does not.
        var unblocked = sigset_t(), old = sigset_t()
        sigemptyset(&unblocked)
        sigaddset(&unblocked, SIGUSR1)
        sigaddset(&unblocked, SIGUSR2)
        pthread_sigmask(SIG_UNBLOCK, &unblocked, &old)
        defer {
            pthread_sigmask(SIG_SETMASK, &old, nil)
            signal(SIGUSR1, before1)
            signal(SIGUSR2, before2)
        }
        try body()
    }

    private func disposition(_ number: Int32) -> Int {
        var action = sigaction()
        sigaction(number, nil, &action)
        return unsafeBitCast(action.__sigaction_handler.sa_handler, to: Int.self)
    }

    @Test("While it waits, a signal is only recorded (the old handler does not run); one ignored before stays ignored and is not recorded; at the end every disposition is the old one")
    func dispositionsAreSavedAndIgnoredStaysIgnored() throws {
        try withOldDispositions {
            let (counting, ignored) = (disposition(SIGUSR1), disposition(SIGUSR2))
            #expect(ignored == 1)  // SIG_IGN
            let watch = try PasswordSignals.Watch([SIGUSR1, SIGUSR2])
            #expect(disposition(SIGUSR2) == ignored, "an ignored signal stays ignored")
            #expect(disposition(SIGUSR1) != counting)
            raise(SIGUSR2)
            #expect(!watch.hasSignal)
            raise(SIGUSR1)
            #expect(watch.hasSignal && oldHandlerCalls.load(ordering: .sequentiallyConsistent) == 0)
            #expect(watch.end() == [SIGUSR1])
            #expect(disposition(SIGUSR1) == counting && disposition(SIGUSR2) == ignored)
        }
    }

    @Test("Two different signals while it waits are both recorded, to be raised again each with its old disposition (readpassphrase keeps one flag per signal)")
    func everySignalIsRecorded() throws {
        try withOldDispositions {
            var unblocked = sigset_t(), old = sigset_t()
            sigemptyset(&unblocked)
            sigaddset(&unblocked, SIGALRM)
            pthread_sigmask(SIG_UNBLOCK, &unblocked, &old)
            defer { pthread_sigmask(SIG_SETMASK, &old, nil) }
            let watch = try PasswordSignals.Watch([SIGUSR1, SIGALRM])
            raise(SIGALRM)
            raise(SIGUSR1)
            #expect(watch.end() == [SIGUSR1, SIGALRM])
        }
    }

    /// A pseudo-terminal: the controller (what the user's terminal would show and type) and the terminal the program reads.
    private func pseudoTerminal() throws -> (controller: Int32, terminal: Int32) {
        // posix_openpt and the rest need _XOPEN_SOURCE, which Glibc does not expose to Swift: looked up in libc.
        func libc<Function>(_ name: String, as type: Function.Type) throws -> Function {
            unsafeBitCast(try #require(dlsym(dlopen(nil, RTLD_NOW), name), "\(name)"), to: type)
        }
        let openController = try libc("posix_openpt", as: (@convention(c) (Int32) -> Int32).self)
        let (grant, unlock) = (try libc("grantpt", as: (@convention(c) (Int32) -> Int32).self), try libc("unlockpt", as: (@convention(c) (Int32) -> Int32).self))
        let terminalName = try libc("ptsname_r", as: (@convention(c) (Int32, UnsafeMutablePointer<CChar>, Int) -> Int32).self)
        let controller = openController(O_RDWR | O_NOCTTY | O_CLOEXEC)
        try #require(controller >= 0 && grant(controller) == 0 && unlock(controller) == 0)
        var name = [CChar](repeating: 0, count: 128)
        try #require(terminalName(controller, &name, name.count) == 0)
        let terminal = open(String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self), O_RDWR | O_NOCTTY | O_CLOEXEC)
        try #require(terminal >= 0)
        _ = fcntl(controller, F_SETFL, fcntl(controller, F_GETFL) | O_NONBLOCK)
        return (controller, terminal)
    }

    /// What the terminal showed, read until `enough` holds: output written to a pseudo-terminal
    /// reaches the controller through the kernel's queue, so one read may see only part of it.
    /// The poll's minute is a hang guard only.
    private func shown(_ controller: Int32, until enough: (String) -> Bool) -> String {
        var output = [UInt8]()
        var bytes = [UInt8](repeating: 0, count: 4096)
        while !enough(String(decoding: output, as: UTF8.self)) {
            var ready = pollfd(fd: controller, events: Int16(POLLIN), revents: 0)
            guard poll(&ready, 1, 60_000) > 0 else { break }
            let count = read(controller, &bytes, bytes.count)
            if count < 0, errno == EINTR || errno == EAGAIN { continue }
            guard count > 0 else { break }
            output += bytes.prefix(count)
        }
        return String(decoding: output, as: UTF8.self)
    }

    private func echoes(_ terminal: Int32) -> Bool {
        var now = termios()
        tcgetattr(terminal, &now)
        return now.c_lflag & tcflag_t(ECHO) != 0
    }

    @Test("A stop signal while it waits (^Z) restores echo, is raised again with its old disposition, and after the continue the prompt is shown again and the password read without echo")
    func stopPromptsAgain() throws {
        let (controller, terminal) = try pseudoTerminal()
        defer { close(controller); close(terminal) }
        try withOldDispositions {
            var prompts = 0
            var echoedWhileStopped = false
            let password = try TerminalPassword.read(prompt: "pw? ", on: terminal, signals: [SIGUSR1], stops: [SIGUSR1]) {
                prompts += 1
                if prompts == 1 {
                    // Typed, then flushed by the next prompt (TCSAFLUSH); read as the password only if the signal were missed.
                    _ = write(controller, "wrong\n", 6)
                    raise(SIGUSR1)
                } else {
                    echoedWhileStopped = oldHandlerCalls.load(ordering: .sequentiallyConsistent) == 1
                    _ = write(controller, "secret\n", 7)
                }
            }
            #expect(password == Array("secret".utf8))
            #expect(prompts == 2 && echoedWhileStopped, "the old disposition ran once, then the prompt again")
            let output = shown(controller) { $0.components(separatedBy: "pw? ").count >= 3 }
            #expect(output.components(separatedBy: "pw? ").count == 3 && !output.contains("secret"), "\(output)")
            #expect(echoes(terminal))
        }
    }

    @Test("Another signal while it waits restores echo, is raised again with its old disposition (here a handler that returns) and ends the read with an error; nothing typed is returned")
    func interruptEndsTheRead() throws {
        let (controller, terminal) = try pseudoTerminal()
        defer { close(controller); close(terminal) }
        withOldDispositions {
            #expect(throws: CLIError.self) {
                try TerminalPassword.read(prompt: "pw? ", on: terminal, signals: [SIGUSR1], stops: []) {
                    // A whole line: were the signal missed, the read would return it (and the test fail) rather than wait.
                    _ = write(controller, "sec\n", 4)
                    raise(SIGUSR1)
                }
            }
            #expect(oldHandlerCalls.load(ordering: .sequentiallyConsistent) == 1)
            #expect(echoes(terminal))
        }
    }
}
