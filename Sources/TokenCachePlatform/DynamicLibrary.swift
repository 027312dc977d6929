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
    ///   - resolve: fills the table; returns the name of the first missing function, or nil.
    ///   - prepare: one-time set-up once resolved (such as `curl_global_init`); returns why it
    ///     failed, or nil.
    /// - Returns: the library, or why each candidate failed, in one line.
    package static func open(_ candidates: [String], override: String, empty: Functions,
                     resolve: (UnsafeMutableRawPointer, inout Functions) -> UnsafePointer<CChar>?,
                     prepare: (Functions) -> String? = { _ in nil }) -> Result<Self, LoadFailure> {
        let requested = ProcessInfo.processInfo.environment[override].flatMap { $0.isEmpty ? nil : $0 }
        var failure = LoadFailure()
        for candidate in requested.map({ [$0] }) ?? candidates {
            guard let handle = dlopen(candidate, RTLD_NOW | RTLD_LOCAL) else {
                failure.notOpened.append(dlerror().map { String(cString: $0) } ?? "\(candidate): dlopen failed")
                continue
            }
            var functions = empty
            if let missing = resolve(handle, &functions) {
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
