import Foundation
import Testing

/// The C tests of Tests/CTests, built with the system C compiler against the libTokenCacheC.so
/// SwiftPM built next to the tests.
package enum CTestPrograms {
    /// test_capi, built into `directory`.
    package static func testCAPI(in directory: URL) throws -> String {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let compiler = try #require(["/usr/bin/cc", "/usr/bin/gcc", "/usr/bin/clang"].first { FileManager.default.isExecutableFile(atPath: $0) },
                                    "a C compiler is needed to build Tests/CTests/test_capi.c")
        let output = directory.appendingPathComponent("test_capi").path
        let bin = TestEnvironment.binDirectory.path
        let build = try runProcess(compiler, ["-std=c11", "-Wall", "-Werror", "-o", output,
                                              root.appendingPathComponent("Tests/CTests/test_capi.c").path,
                                              "-I", root.appendingPathComponent("Sources/CTokenCache/include").path,
                                              "-L", bin, "-lTokenCacheC", "-Wl,-rpath,\(bin)"])
        try #require(build.status == 0, "compiling test_capi failed: \(build.stderr)")
        return output
    }
}
