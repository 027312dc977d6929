import Foundation
import Testing

/// The C tests of Tests/CTests, built with the system C compiler against the libTokenCacheC.so
/// SwiftPM built next to the tests: each once per test process (the first caller builds it, the
/// others wait for that build). Each test compiling its own copy, twice in one test, cost a
/// compile per call and ran a file its compiler had just written with the process's umask.
package enum CTestPrograms {
    /// Tests/CTests/test_capi.c, built.
    package static func testCAPI() throws -> String {
        try capi.get()
    }

    /// Tests/CTests/test_native_auth.c, built.
    package static func testNativeAuth() throws -> String {
        try nativeAuth.get()
    }

    private static let capi = Result { try build("test_capi", warnings: ["-Wall"]) }
    private static let nativeAuth = Result { try build("test_native_auth", warnings: ["-Wall", "-Wextra"]) }

    private struct BuildFailed: Error, CustomStringConvertible {
        var description: String
    }

    /// Compiled to a name of this process's own, made executable and renamed into place, so the
    /// path never names a half-written or not yet executable file (another test process may be
    /// building the same program).
    private static func build(_ name: String, warnings: [String]) throws -> String {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        guard let compiler = ["/usr/bin/cc", "/usr/bin/gcc", "/usr/bin/clang"].first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw BuildFailed(description: "a C compiler is needed to build Tests/CTests/\(name).c")
        }
        // Beside the build, not in the run's temporary folder: the programs hold test secrets as
        // literals, and scripts/test.sh checks what tests leave there for secrets.
        let directory = TestEnvironment.binDirectory.appendingPathComponent("c-tests")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let output = directory.appendingPathComponent(name).path, partial = output + ".\(getpid()).partial"
        let bin = TestEnvironment.binDirectory.path
        let build = try runProcess(compiler, ["-std=c11"] + warnings + ["-Werror", "-o", partial,
                                              root.appendingPathComponent("Tests/CTests/\(name).c").path,
                                              "-I", root.appendingPathComponent("Sources/CTokenCache/include").path,
                                              "-L", bin, "-lTokenCacheC", "-Wl,-rpath,\(bin)"])
        guard build.status == 0 else { throw BuildFailed(description: "compiling \(name) failed: \(build.stderr)") }
        // The mode is set here, not left to the linker and the process's umask.
        guard chmod(partial, 0o755) == 0, rename(partial, output) == 0 else {
            throw BuildFailed(description: "could not put \(name) in place: \(String(cString: strerror(errno)))")
        }
        return output
    }
}
