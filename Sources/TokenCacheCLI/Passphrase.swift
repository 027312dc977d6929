import FoundationEssentials
import Synchronization
import TokenCache
#if canImport(Glibc)
import Glibc
#endif

/// The check of a file (or its directory) the CLI trusts: a passphrase file, the config file. One
/// owned by another user, or that group or others may change, is refused, as ssh refuses such a key or config.
enum OwnFile {
    /// What is wrong with `info` in words ("is owned by another user (uid 1001)"), nil when
    /// nothing: not this user's, or with any of the mode bits `refusing` set.
    static func problem(_ info: stat, refusing bits: mode_t) -> String? {
        if info.st_uid != geteuid() { return "is owned by another user (uid \(info.st_uid))" }
        guard info.st_mode & bits != 0 else { return nil }
        return "is \(bits & 0o044 != 0 ? "readable or writable" : "writable") by group or others (mode \(String(info.st_mode & 0o777, radix: 8)))"
    }
}

/// Where the CLI gets the passphrase of a passphrase-protected encrypted file: a file named by
/// `--passphrase-file` or `TOKENCACHE_PASSPHRASE_FILE`, else a prompt on the terminal. Errors are
/// ``TokenCacheError`` `invalidArgument` (exit 64) and never contain the passphrase.
enum Passphrase {
    /// How to give a passphrase, for hints.
    static let howToGive = "give it with --passphrase-file PATH or TOKENCACHE_PASSPHRASE_FILE=PATH (a file of mode 0600 whose first line is the passphrase)"

    /// How to give one where there is no --passphrase-file (`migrate`).
    static let howToGiveByVariable = "give it with TOKENCACHE_PASSPHRASE_FILE=PATH (a file of mode 0600 whose first line is the passphrase)"

    /// Tries a person gets on a terminal, as sudo and ssh give.
    static let tries = 3

    /// A key source that asks for the passphrase once, when the backend first needs it (never
    /// when the Secret Service is used instead): for a file that exists, up to ``tries`` times
    /// until one opens it; for one about to be created, a new passphrase typed twice.
    /// `flag`: whether the command takes --passphrase-file.
    static func keySource(cachePath: String, flag: Bool = true) -> EncryptedFileBackend.KeySource {
        let once = Once()
        return .passphraseProvider {
            try once.value { () throws(TokenCacheError) -> String in
                guard FileManager.default.fileExists(atPath: cachePath) else {
                    return try newPassphrase(for: cachePath, howToGive: flag ? howToGive : howToGiveByVariable)
                }
                return try existingPassphrase(for: cachePath, flag: flag)
            }
        }
    }

    /// A key source for the passphrase a file is about to be protected with (`migrate
    /// --to-key-source passphrase`): asked on a terminal, as a new passphrase.
    static func newKeySource(directory: String) -> EncryptedFileBackend.KeySource {
        let once = Once()
        return .passphraseProvider {
            try once.value { () throws(TokenCacheError) -> String in try newPassphrase(for: directory, howToGive: howToGiveByVariable) }
        }
    }

    /// The passphrase of an existing file, asked until one opens it, at most ``tries`` times.
    /// Each is checked here (one more scrypt derivation than the read's) so a mistyped one can
    /// be typed again; the read checks it once more.
    static func existingPassphrase(for cachePath: String, flag: Bool) throws(TokenCacheError) -> String {
        for attempt in 1...tries {
            let passphrase = try prompt(for: cachePath, flag: flag)
            guard try EncryptedFileBackend.passphraseOpens(passphrase, fileAt: cachePath) == false else { return passphrase }
            if attempt < tries { Terminal.note("That is not the passphrase \(Terminal.escape(cachePath)) was created with; try again.") }
        }
        throw TokenCacheError(.fileAuthenticationFailed, "None of the \(tries) passphrases typed is the one \(cachePath) was created with.",
                              hint: "Run the command again with the passphrase it was created with; the file was not changed")
    }

    /// A new passphrase, typed twice on a terminal, refused while weak or mistyped, at most
    /// ``tries`` times.
    static func newPassphrase(for what: String, howToGive: String) throws(TokenCacheError) -> String {
        guard Terminal.stdinIsTerminal else {
            throw TokenCacheError(.invalidArgument, "A new passphrase for the encrypted file (\(what)) is needed, and standard input is not a terminal to ask on.",
                                  hint: "Not on a terminal, so it cannot be asked for: \(howToGive). Nothing was changed", field: "passphrase")
        }
        var problem = ""
        for attempt in 1...tries {
            guard let first = hiddenLine(prompt: "New passphrase for the encrypted file (\(Terminal.escape(what))): ") else {
                throw TokenCacheError(.invalidArgument, "No new passphrase was entered.",
                                      hint: "Run the command again and type the new passphrase, or \(howToGive). Nothing was changed", field: "passphrase")
            }
            if let weakness = weakness(of: first) {
                problem = "it was too weak: \(weakness)"
            } else if hiddenLine(prompt: "Type it again: ") != first {
                problem = "the two did not match"
            } else {
                return first
            }
            if attempt < tries { Terminal.note("That passphrase was not taken: \(problem). Try again.") }
        }
        throw TokenCacheError(.invalidArgument, "No new passphrase was set after \(tries) tries: \(problem).",
                              hint: "Run the command again; a passphrase of several words is strong and easy to type. Nothing was changed", field: "passphrase")
    }

    /// Why a new passphrase is too weak, nil when it is not. The file can be copied and guessed
    /// at offline, where only scrypt's cost and the passphrase's length stand in the way.
    static func weakness(of passphrase: String) -> String? {
        if passphrase.count < 12 { return "it has \(passphrase.count) characters, and at least 12 are needed" }
        if Set(passphrase).count < 5 { return "it repeats too few different characters" }
        return nil
    }

    /// The first line of the file at `path`, without its line ending.
    /// - Throws: when the file is missing, not a regular file, readable or writable by group or
    ///   others (as ssh refuses a private key), owned by someone else, or its first line is empty.
    ///   `what` names the secret in errors (a password file is read the same way).
    static func read(_ path: String, from source: SettingSource, what: String = "passphrase") throws(TokenCacheError) -> String {
        func refused(_ problem: String, hint: String) -> TokenCacheError {
            TokenCacheError(.invalidArgument, "The \(what) file \(path) (from \(source)) \(problem).", hint: hint, field: "\(what)-file")
        }
        // O_NONBLOCK: a FIFO would block open until a writer came (#44); it is refused below as
        // not a regular file, and reads of a regular file ignore the flag.
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard descriptor >= 0 else {
            throw refused("cannot be opened: \(String(cString: strerror(errno)))", hint: "Check the path; nothing was read or changed")
        }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            throw refused("is not a regular file", hint: "Name a file whose first line is the \(what)")
        }
        if let problem = OwnFile.problem(info, refusing: 0o077) {
            throw refused(problem, hint: info.st_uid == geteuid() ? "Run `chmod 600 \(path)`; it was not used" : "Use a \(what) file you own, mode 0600")
        }
        // One line is all that is read: at most 4 KiB, stopping at the first newline.
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        defer { wipe(&buffer); wipe(&bytes) }
        reading: while bytes.count < 4096 {
            let count = Glibc.read(descriptor, &buffer, buffer.count)
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { throw refused("cannot be read: \(String(cString: strerror(errno)))", hint: "Check its permissions") }
            if count == 0 { break }
            for byte in buffer[..<count] {
                if byte == UInt8(ascii: "\n") { break reading }
                bytes.append(byte)
            }
        }
        if bytes.last == UInt8(ascii: "\r") { bytes.removeLast() }
        guard !bytes.isEmpty else { throw refused("has an empty first line", hint: "Write the \(what) on its first line") }
        guard let passphrase = String(validating: bytes, as: UTF8.self) else {
            throw refused("is not UTF-8 text", hint: "Write the \(what) as UTF-8 text on its first line")
        }
        return passphrase
    }

    /// Asks on the terminal, without echo. Only when standard input is a terminal: elsewhere a
    /// script would hang or feed the wrong line.
    static func prompt(for cachePath: String, flag: Bool = true) throws(TokenCacheError) -> String {
        let howToGive = flag ? howToGive : howToGiveByVariable
        guard Terminal.stdinIsTerminal else {
            throw TokenCacheError(.invalidArgument, "\(cachePath) was created with a passphrase, and none was given.",
                                  hint: "Not on a terminal, so it cannot be asked for: \(howToGive). The file was not changed", field: "passphrase")
        }
        guard let passphrase = hiddenLine(prompt: "Passphrase for \(Terminal.escape(cachePath)): ") else {
            throw TokenCacheError(.invalidArgument, "No passphrase was entered for \(cachePath).",
                                  hint: "Run the command again and type the passphrase, or \(howToGive). The file was not changed", field: "passphrase")
        }
        return passphrase
    }

    /// One line typed on the terminal without echo (nil when empty or not UTF-8).
    static func hiddenLine(prompt: String) -> String? {
        var saved = termios()
        let canHide = tcgetattr(STDIN_FILENO, &saved) == 0
        if canHide {
            var silent = saved
            silent.c_lflag &= ~tcflag_t(ECHO)
            silent.c_lflag |= tcflag_t(ECHONL)
            tcsetattr(STDIN_FILENO, TCSAFLUSH, &silent)
        }
        defer { if canHide { tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved) } }
        // Asked only once echo is off: TCSAFLUSH discards what was typed before it (as getpass does).
        StandardIO.write(Data(prompt.utf8), to: STDERR_FILENO)
        var bytes: [UInt8] = []
        defer { wipe(&bytes) }
        var byte: UInt8 = 0
        var sawEnd = false
        while bytes.count < 4096 {
            let count = Glibc.read(STDIN_FILENO, &byte, 1)
            if count < 0 && errno == EINTR { continue }
            if count <= 0 || byte == UInt8(ascii: "\n") { sawEnd = count > 0; break }
            bytes.append(byte)
        }
        if !sawEnd, !canHide { StandardIO.write(Data("\n".utf8), to: STDERR_FILENO) }
        if bytes.last == UInt8(ascii: "\r") { bytes.removeLast() }
        return bytes.isEmpty ? nil : String(validating: bytes, as: UTF8.self)
    }

    /// Zeroes a buffer that held passphrase bytes.
    private static func wipe(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { buffer in
            if let base = buffer.baseAddress { explicit_bzero(base, buffer.count) }
        }
    }

    /// The first answer of a passphrase source, kept: the library may ask again, a person
    /// should be asked once.
    private final class Once: Sendable {
        private let answer = Mutex<String?>(nil)

        func value(_ produce: () throws(TokenCacheError) -> String) throws(TokenCacheError) -> String {
            try answer.withLock { (answer) throws(TokenCacheError) -> String in
                if let answer { return answer }
                let value = try produce()
                answer = value
                return value
            }
        }
    }
}
