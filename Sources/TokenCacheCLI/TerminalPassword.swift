#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// A password typed on the controlling terminal (/dev/tty) with echo off: never standard input,
/// arguments or the environment, which another program of the user could fill.
enum TerminalPassword {
    /// The longest password read, in bytes.
    static let maximumBytes = 1024

    /// Asks on /dev/tty and reads one line without echo; the caller zeroes the bytes.
    /// - Throws: `CLIError` when the process has no controlling terminal, nothing was typed, or a
    ///   signal whose handler returns interrupted it.
    static func read(prompt: String) throws -> [UInt8] {
        let tty = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard tty >= 0 else {
            throw CLIError.usage("This command reads your password from your terminal (/dev/tty), and this process has none (\(String(cString: strerror(errno)))).",
                                 hint: "Run it in a terminal; it never reads a password from standard input, arguments or the environment")
        }
        defer { close(tty) }
        return try read(prompt: prompt, on: tty)
    }

    /// Reads one line without echo on the terminal `tty`, as OpenBSD's readpassphrase(3): a signal
    /// while it waits (``PasswordSignals``) restores the terminal and its disposition, and is raised
    /// again; after a stop (^Z, a background read or write) and `fg` the prompt is shown again.
    /// - Parameters:
    ///   - signals: the signals watched; the stop signals among them prompt again after a continue.
    ///   - prompted: called after each prompt is written (tests: raise a signal, type).
    static func read(prompt: String, on tty: Int32, signals: [Int32] = PasswordSignals.watched, stops: Set<Int32> = PasswordSignals.stops,
                     prompted: () -> Void = {}) throws -> [UInt8] {
        while true {
            var saved = termios()
            guard tcgetattr(tty, &saved) == 0 else {
                throw CLIError.usage("/dev/tty is not a terminal whose echo can be turned off.", hint: "Run it in a terminal")
            }
            let watch = try PasswordSignals.Watch(signals)
            var silent = saved
            silent.c_lflag &= ~tcflag_t(ECHO)
            silent.c_lflag |= tcflag_t(ECHONL)
            // TCSAFLUSH: what was typed before the prompt is discarded, as getpass does.
            let set = tcsetattr(tty, TCSAFLUSH, &silent)
            // tcsetattr succeeds when any one change was made: read back that echo really is off.
            var now = termios()
            guard set == 0, tcgetattr(tty, &now) == 0, now.c_lflag & tcflag_t(ECHO) == 0 else {
                tcsetattr(tty, TCSAFLUSH, &saved)
                let signals = watch.end()
                signals.forEach(PasswordSignals.raiseAgain)
                if !signals.isEmpty, signals.allSatisfy(stops.contains) { continue }
                throw CLIError.failed("Your password was not asked for: the terminal's echo could not be turned off, so it would show as you type.",
                                      hint: "Run it in a terminal that allows it (not a background job)")
            }
            _ = prompt.utf8CString.withUnsafeBufferPointer { write(tty, $0.baseAddress, $0.count - 1) }
            prompted()
            var bytes: [UInt8] = []
            bytes.reserveCapacity(maximumBytes)  // never reallocated: no unzeroed copy is left behind
            readLine(tty, into: &bytes, watch: watch)
            // The terminal first, then the dispositions, then the signal again (readpassphrase's order).
            tcsetattr(tty, TCSAFLUSH, &saved)
            let signals = watch.end()
            if !signals.isEmpty {
                for index in bytes.indices { bytes[index] = 0 }
                bytes.removeAll(keepingCapacity: true)
                // Each with its old disposition: the default ends or stops the process, an ignored one was never watched.
                signals.forEach(PasswordSignals.raiseAgain)
                if signals.allSatisfy(stops.contains) { continue }  // continued (fg): ask again, the terminal set anew
                throw CLIError.failed("Your password was not read: signal \(signals.map(String.init).joined(separator: ", ")) interrupted it; no consent was recorded.", hint: "Run it again")
            }
            if bytes.last == UInt8(ascii: "\r") { bytes.removeLast() }
            guard !bytes.isEmpty else { throw CLIError.usage("No password was typed; no consent was recorded.", hint: "Run it again and type your login password") }
            return bytes
        }
    }

    /// Reads up to a newline, the end or ``maximumBytes``, stopping when a watched signal arrives.
    private static func readLine(_ tty: Int32, into bytes: inout [UInt8], watch: PasswordSignals.Watch) {
        var byte: UInt8 = 0
        defer { byte = 0 }
        while bytes.count < maximumBytes {
            // The handler may run on any thread: its byte on the pipe wakes this poll wherever it ran.
            var fds = [pollfd(fd: tty, events: Int16(POLLIN), revents: 0), pollfd(fd: watch.wakeup, events: Int16(POLLIN), revents: 0)]
            let ready = poll(&fds, 2, -1)
            if watch.hasSignal { return }
            if ready < 0 { if errno == EINTR { continue } else { return } }
            if fds[1].revents != 0 {
                // A late byte of an earlier watch's signal (its handler ran as that watch ended): not ours.
                var stale = [UInt8](repeating: 0, count: 64)
                while Glibc.read(watch.wakeup, &stale, stale.count) > 0 {}
            }
            guard fds[0].revents != 0 else { continue }
            let count = Glibc.read(tty, &byte, 1)
            if count < 0 && (errno == EINTR || errno == EAGAIN) { continue }
            if count <= 0 || byte == UInt8(ascii: "\n") { return }
            bytes.append(byte)
        }
    }
}

/// The signals a password read watches, handled as OpenBSD's readpassphrase(3) does: the handler
/// only records the signal (an atomic store and a write(2) to a pipe, both async-signal-safe); the
/// read loop restores the terminal, puts the old disposition back and raises the signal again.
/// A signal that was ignored before is not watched, so it stays ignored.
enum PasswordSignals {
    static let watched = [SIGALRM, SIGHUP, SIGINT, SIGPIPE, SIGQUIT, SIGTERM, SIGTSTP, SIGTTIN, SIGTTOU]
    /// Stops: after the process is continued the prompt is shown again.
    static let stops: Set<Int32> = [SIGTSTP, SIGTTIN, SIGTTOU]

    /// The signals recorded (bit N: signal N), and the pipe's write end the handler wakes the read with (-1: none).
    /// Atomics: lock-free loads and stores are what a handler may do. Both are first touched by
    /// ``Watch/init(_:)`` before any handler is installed, so a handler never runs their lazy initialisation.
    private static let received = Atomic<UInt64>(0)
    private static let wakeupWriter = Atomic<Int32>(-1)

    /// The wake-up pipe (read end, write end), made once and never closed: a handler already
    /// running on another thread as a watch ends may still write to it, and a closed descriptor's
    /// number could by then name another file. Nil when no pipe could be made.
    private static let wakeupPipe: (read: Int32, write: Int32)? = {
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { return nil }
        for end in ends {
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
            _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
        }
        return (ends[0], ends[1])
    }()

    /// The handler: records the signal and wakes the read, nothing else (errno kept: the
    /// interrupted code may be about to read it).
    private static let handler: @convention(c) (Int32) -> Void = { number in
        let interruptedErrno = errno
        defer { errno = interruptedErrno }
        if number > 0 && number < 64 { PasswordSignals.received.bitwiseOr(1 << UInt64(number), ordering: .sequentiallyConsistent) }
        let writer = PasswordSignals.wakeupWriter.load(ordering: .sequentiallyConsistent)
        if writer >= 0 {
            var byte: UInt8 = 1
            _ = write(writer, &byte, 1)
        }
    }

    /// The watch over one prompt: handlers installed at init, the old dispositions back at ``end()``.
    final class Watch {
        /// The pipe's read end, readable once a signal was recorded.
        let wakeup: Int32
        private let writer: Int32
        private var saved: [(Int32, sigaction)] = []
        private var ended = false

        init(_ signals: [Int32]) throws {
            guard let ends = PasswordSignals.wakeupPipe else { throw CLIError.failed("Your password was not asked for: no pipe could be made.") }
            (wakeup, writer) = (ends.read, ends.write)
            // A wake-up left by an earlier watch's last signal is not this one's.
            var drained = [UInt8](repeating: 0, count: 64)
            while read(wakeup, &drained, drained.count) > 0 {}
            PasswordSignals.received.store(0, ordering: .sequentiallyConsistent)
            PasswordSignals.wakeupWriter.store(writer, ordering: .sequentiallyConsistent)
            for number in signals {
                var old = sigaction()
                guard sigaction(number, nil, &old) == 0, !PasswordSignals.isIgnored(old) else { continue }
                var new = sigaction()
                new.__sigaction_handler.sa_handler = PasswordSignals.handler
                sigemptyset(&new.sa_mask)
                new.sa_flags = 0  // no SA_RESTART: a blocked read returns EINTR on the thread it reached
                if sigaction(number, &new, &old) == 0 { saved.append((number, old)) }
            }
        }

        /// Whether a signal was recorded.
        var hasSignal: Bool { PasswordSignals.received.load(ordering: .sequentiallyConsistent) != 0 }

        /// Puts every old disposition back. - Returns: the signals recorded, in order of number, to raise again.
        func end() -> [Int32] {
            guard !ended else { return [] }
            ended = true
            for (number, old) in saved.reversed() {
                var old = old
                sigaction(number, &old, nil)
            }
            saved = []
            PasswordSignals.wakeupWriter.store(-1, ordering: .sequentiallyConsistent)
            let recorded = PasswordSignals.received.exchange(0, ordering: .sequentiallyConsistent)
            return (1..<64).filter { recorded & (1 << UInt64($0)) != 0 }.map { Int32($0) }
        }

        deinit { _ = end() }
    }

    /// Raises `number` again, its old disposition back: on this thread (delivered before it
    /// returns) unless this thread blocks it, then to the process (a thread that does not takes it).
    static func raiseAgain(_ number: Int32) {
        var mask = sigset_t()
        if pthread_sigmask(SIG_BLOCK, nil, &mask) == 0, sigismember(&mask, number) == 1 {
            kill(getpid(), number)
        } else {
            raise(number)
        }
    }

    /// Whether a disposition is SIG_IGN.
    static func isIgnored(_ action: sigaction) -> Bool {
        action.sa_flags & Int32(SA_SIGINFO) == 0 && unsafeBitCast(action.__sigaction_handler.sa_handler, to: Int.self) == 1
    }
}
