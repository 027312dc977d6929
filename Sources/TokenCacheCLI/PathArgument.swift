import FoundationEssentials
import TokenCache
#if canImport(Glibc)
import Glibc
#endif

/// Paths named on the command line, opened one way so that every command answers a path
/// problem alike: a path that cannot be used as given (missing, a directory, not readable or
/// writable, an --output that exists) is a usage error, exit 64, as a bad passphrase file is;
/// a failure while reading or writing a file that opened (a full disk) is exit 1.
enum PathArgument {
    /// Whether `errno` from opening a named path says the path itself is wrong (exit 64).
    static func isPathProblem(_ code: Int32) -> Bool {
        [ENOENT, ENOTDIR, EISDIR, EACCES, EPERM, EROFS, ELOOP, EEXIST, ENAMETOOLONG].contains(code)
    }

    /// `path` opened for reading: any file a read can take (a pipe such as `<(curl …)` too), but
    /// not a directory. `unchanged` ends the message ("nothing was imported").
    static func openForReading(_ path: String, unchanged: String, hint: String) throws(CLIError) -> Int32 {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            let code = errno
            throw CLIError(message: "Cannot read \(path): \(String(cString: strerror(code)).lowercased()); \(unchanged).",
                           hint: hint, exitCode: isPathProblem(code) ? 64 : 1)
        }
        var info = stat()
        if fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFDIR {
            close(descriptor)
            throw CLIError.usage("Cannot read \(path): it is a directory; \(unchanged).", hint: hint)
        }
        return descriptor
    }

    /// All of `path`, or of standard input for `-`, read no further than `limit` bytes: nil
    /// when there is more.
    static func read(_ path: String, limit: Int, unchanged: String, hint: String) throws(CLIError) -> Data? {
        let descriptor = path == "-" ? STDIN_FILENO : try openForReading(path, unchanged: unchanged, hint: hint)
        defer { if descriptor != STDIN_FILENO { close(descriptor) } }
        return StandardIO.readAll(from: descriptor, limit: limit)
    }

    /// The first command-line argument that is not valid UTF-8, shown with its other bytes as
    /// `\xNN`: such an argument cannot be taken as given (Swift would replace its bytes, and a
    /// path would name another file), so it is refused.
    static func argumentNotUTF8() -> String? {
        for index in 1..<Int(CommandLine.argc) {
            guard let pointer = CommandLine.unsafeArgv[index], String(validatingCString: pointer) == nil else { continue }
            let bytes = UnsafeBufferPointer(start: UnsafeRawPointer(pointer).assumingMemoryBound(to: UInt8.self), count: strlen(pointer))
            return bytes.map { $0 >= 0x20 && $0 < 0x7F ? String(UnicodeScalar($0)) : "\\x" + ($0 < 0x10 ? "0" : "") + String($0, radix: 16, uppercase: true) }.joined()
        }
        return nil
    }
}
