internal import CLinux
import FoundationEssentials
import TokenCacheCore
import Glibc

/// A C library opened at run time with `dlopen(RTLD_NOW | RTLD_LOCAL)`, its functions resolved
/// into a table up front, so a missing library or symbol is one typed error rather than a crash
/// later. Libraries are never unloaded once chosen (libsecret registers GObject types).
///
/// Why at run time: libsecret, libcurl and libcrypto are each needed by one part of the package
/// only; linked, every process would map and relocate all three (and libcurl's 25 dependencies)
/// at start-up, and programs would not start on machines without them.
package struct DynamicLibrary<Functions> {
    /// The function table, every entry non-nil.
    package let functions: Functions
    /// The file name the library was opened by (a soname is found through the usual search path).
    package let path: String

    /// Opens the file named by the environment variable `override` when it is set, else the first
    /// of `candidates` that opens, resolves every function and passes `prepare`.
    /// - Parameters:
    ///   - resolve: makes the table from a handle, with the name of the first missing function, or nil.
    ///   - prepare: one-time set-up once resolved (such as `curl_global_init`); returns why it
    ///     failed, or nil.
    /// - Returns: the library, or why each candidate failed, in one line.
    ///
    /// The override is read with `secure_getenv`: a setuid or file-capability program ignores it.
    /// Sonames are opened by absolute path from the system library directories first
    /// (``systemPaths(_:)``), never through the executable's `$ORIGIN` run path.
    package static func open(_ candidates: [String], override: String,
                     resolve: (UnsafeMutableRawPointer) -> (Functions, missing: UnsafePointer<CChar>?),
                     prepare: (Functions) -> String? = { _ in nil }) -> Result<Self, LoadFailure> {
        let requested = SecureEnvironment.value(override)
        var failure = LoadFailure()
        for candidate in requested.map({ [$0] }) ?? systemPaths(candidates) {
            guard let handle = dlopen(candidate, RTLD_NOW | RTLD_LOCAL) else {
                failure.notOpened.append(dlerror().map { String(cString: $0) } ?? "\(candidate): dlopen failed")
                continue
            }
            let (functions, missing) = resolve(handle)
            if let missing {
                failure.missingFunction.append((candidate, String(cString: missing)))
                dlclose(handle)  // nothing of it was called yet
                continue
            }
            if let problem = prepare(functions) {
                failure.notOpened.append("\(candidate): \(problem)")
                continue
            }
            return .success(DynamicLibrary(functions: functions, path: candidate))
        }
        return .failure(failure)
    }
}

extension DynamicLibrary {
    /// The sonames as absolute paths in the system library directories where such a file
    /// exists, in order; then each soname not present beside the executable, for the loader's
    /// own search (unusual layouts). Why: SwiftPM links executables with `RUNPATH $ORIGIN`, and
    /// dlopen of a bare soname consults the calling executable's run path before ld.so.cache,
    /// so a `libcurl.so.4` dropped beside the binary would be loaded instead of the system's.
    static func systemPaths(_ sonames: [String]) -> [String] {
        let directories = SystemLibraryDirectories.all
        let beside = SystemLibraryDirectories.executable
        var paths: [String] = []
        for soname in sonames {
            guard !soname.contains("/") else { paths.append(soname); continue }
            for directory in directories where access(directory + "/" + soname, F_OK) == 0 {
                paths.append(directory + "/" + soname)
            }
        }
        for soname in sonames where !soname.contains("/") {
            if let beside, access(beside + "/" + soname, F_OK) == 0 { continue }
            paths.append(soname)
        }
        return paths
    }
}

/// Where system libraries and the executable live, found once per process.
enum SystemLibraryDirectories {
    /// The directory libc was loaded from (the multiarch one: /lib/x86_64-linux-gnu, /lib64),
    /// then the usual system directories; each once.
    static let all: [String] = {
        var directories: [String] = []
        // The file libc was mapped from, as the kernel names it (absolute, links resolved).
        if let maps = try? String(contentsOfFile: "/proc/self/maps", encoding: .utf8),
           let line = maps.split(separator: "\n").first(where: { $0.hasSuffix("/libc.so.6") }),
           let start = line.firstIndex(of: "/"), let slash = line.lastIndex(of: "/") {
            directories.append(String(line[start..<slash]))
        }
        let multiarch = directories.first.map { URL(fileURLWithPath: $0).lastPathComponent }
        for directory in ["/usr/lib/" + (multiarch ?? "x86_64-linux-gnu"), "/lib/" + (multiarch ?? "x86_64-linux-gnu"),
                          "/usr/lib64", "/lib64", "/usr/lib", "/lib"] where !directories.contains(directory) {
            directories.append(directory)
        }
        return directories
    }()

    /// The directory of the running executable (`/proc/self/exe`), nil when unknown.
    static let executable: String? = {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        let path = String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return path.lastIndex(of: "/").map { String(path[..<$0]) }
    }()
}

/// Why no candidate of a ``DynamicLibrary`` could be used.
package struct LoadFailure: Error {
    /// dlopen's (or set-up's) reasons, one per candidate.
    package var notOpened: [String] = []
    /// Candidates that opened but lack a function: too old, or another library.
    package var missingFunction: [(path: String, function: String)] = []

    /// Every reason in one line (dlerror's text can hold newlines).
    package var reason: String {
        let reasons = notOpened + missingFunction.map { "\($0.path) has no \($0.function)" }
        return reasons.joined(separator: "; ").split(whereSeparator: \.isNewline).joined(separator: " ")
    }
}
