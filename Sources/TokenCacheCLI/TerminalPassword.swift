#if canImport(Glibc)
import Glibc
#endif

/// A password typed on the controlling terminal (/dev/tty) with echo off: never standard input,
/// arguments or the environment, which another program of the user could fill.
enum TerminalPassword {
    /// The longest password read, in bytes.
    static let maximumBytes = 1024

    /// Asks on /dev/tty and reads one line without echo; the caller zeroes the bytes.
    /// - Throws: `CLIError` when the process has no controlling terminal, or nothing was typed.
    static func read(prompt: String) throws -> [UInt8] {
        let tty = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard tty >= 0 else {
            throw CLIError.usage("This command reads your password from your terminal (/dev/tty), and this process has none (\(String(cString: strerror(errno)))).",
                                 hint: "Run it in a terminal; it never reads a password from standard input, arguments or the environment")
        }
        defer { close(tty) }
        var saved = termios()
        guard tcgetattr(tty, &saved) == 0 else {
            throw CLIError.usage("/dev/tty is not a terminal whose echo can be turned off.", hint: "Run it in a terminal")
        }
        var silent = saved
        silent.c_lflag &= ~tcflag_t(ECHO)
        silent.c_lflag |= tcflag_t(ECHONL)
        // A signal while it waits restores echo before the process ends (the handler re-raises it).
        EchoRestorer.install(tty: tty, saved: saved)
        defer { EchoRestorer.remove() }
        // TCSAFLUSH: what was typed before the prompt is discarded, as getpass does.
        let set = tcsetattr(tty, TCSAFLUSH, &silent)
        defer { tcsetattr(tty, TCSAFLUSH, &saved) }
        // tcsetattr succeeds when any one change was made: read back that echo really is off.
        var now = termios()
        guard set == 0, tcgetattr(tty, &now) == 0, now.c_lflag & tcflag_t(ECHO) == 0 else {
            throw CLIError.failed("Your password was not asked for: the terminal's echo could not be turned off, so it would show as you type.",
                                  hint: "Run it in a terminal that allows it (not a background job)")
        }
        _ = prompt.utf8CString.withUnsafeBufferPointer { write(tty, $0.baseAddress, $0.count - 1) }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(maximumBytes)  // never reallocated: no unzeroed copy is left behind
        var byte: UInt8 = 0
        while bytes.count < maximumBytes {
            let count = Glibc.read(tty, &byte, 1)
            if count < 0 && errno == EINTR { continue }
            if count <= 0 || byte == UInt8(ascii: "\n") { break }
            bytes.append(byte)
        }
        byte = 0
        if bytes.last == UInt8(ascii: "\r") { bytes.removeLast() }
        guard !bytes.isEmpty else { throw CLIError.usage("No password was typed; no consent was recorded.", hint: "Run it again and type your login password") }
        return bytes
    }
}

/// Restores the terminal's settings when SIGINT, SIGTERM, SIGHUP or SIGQUIT ends the process while
/// a password is read with echo off, then lets the signal do what it did before (the default: end).
enum EchoRestorer {
    static let signals = [SIGINT, SIGTERM, SIGHUP, SIGQUIT]
    // Written before the handlers are installed and read only by them: what a handler may touch
    // (tcsetattr, signal and raise are async-signal-safe).
    nonisolated(unsafe) private static var tty: Int32 = -1
    nonisolated(unsafe) private static var saved = termios()
    nonisolated(unsafe) private static var previous: [Int32: sighandler_t?] = [:]

    static func install(tty: Int32, saved: termios) {
        (Self.tty, Self.saved) = (tty, saved)
        for number in signals {
            previous[number] = signal(number) { number in
                tcsetattr(EchoRestorer.tty, TCSANOW, &EchoRestorer.saved)
                signal(number, SIG_DFL)
                raise(number)
            }
        }
    }

    static func remove() {
        for number in signals { signal(number, previous[number] ?? SIG_DFL) }
        previous = [:]
    }
}
