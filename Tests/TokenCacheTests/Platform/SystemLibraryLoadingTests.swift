import Foundation
import Testing
@testable import EncryptedFileStore
@testable import SecretServiceStore
@testable import TokenCache
@testable import TokenCacheCore
@testable import TokenCachePlatform
import TokenCacheTestSupport

/// System libraries are opened by absolute path from the system's library directories: a
/// library dropped beside the executable (which SwiftPM links with RUNPATH $ORIGIN) is never
/// loaded in their place.
@Suite("System libraries loaded from system directories", .harness)
struct SystemLibraryLoadingTests {
    @Test("Sonames become absolute paths in the system directories, ahead of any bare soname; none is relative")
    func candidates() throws {
        let paths = DynamicLibrary<Void>.systemPaths(["libcrypto.so.3", "libcurl.so.4"])
        let first = try #require(paths.first)
        #expect(first.hasPrefix("/") && first.hasSuffix("/libcrypto.so.3"), "\(paths)")
        #expect(FileManager.default.fileExists(atPath: first))
        for path in paths { #expect(path.hasPrefix("/") || !path.contains("/"), "\(path) is relative") }
        let bare = paths.firstIndex { !$0.hasPrefix("/") } ?? paths.count
        #expect(paths[..<bare].count >= 2, "each soname found in a system directory first: \(paths)")
    }

    @Test("A fake libcrypto.so.3 beside a copy of tokencache is not loaded; the system's is",
          .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/cc")))
    func besideTheBinaryIgnored() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let bin = directory.appendingPathComponent("bin")
        try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: TestEnvironment.binDirectory.appendingPathComponent("tokencache"),
                                         to: bin.appendingPathComponent("tokencache"))
        // Its constructor leaves a marker: proof that the loader mapped it at all.
        let source = directory.appendingPathComponent("fake.c")
        try Data("""
            #include <stdio.h>
            #include <stdlib.h>
            __attribute__((constructor)) static void loaded(void) {
                const char *marker = getenv("FAKE_LIBRARY_MARKER");
                FILE *file = marker ? fopen(marker, "a") : NULL;
                if (file) { fputs("fake library loaded\\n", file); fclose(file); }
            }
            """.utf8).write(to: source)
        for soname in ["libcrypto.so.3", "libcurl.so.4"] {
            let built = try runProcess("/usr/bin/cc", ["-shared", "-fPIC", "-o", bin.appendingPathComponent(soname).path, source.path])
            #expect(built.status == 0, "\(built.stderr)")
        }
        let marker = directory.appendingPathComponent("marker")
        var environment = ProcessInfo.processInfo.environment
        environment["XDG_DATA_HOME"] = directory.appendingPathComponent("data").path
        environment["FAKE_LIBRARY_MARKER"] = marker.path
        environment["NO_COLOR"] = "1"
        for override in ["TOKENCACHE_LIBCRYPTO_PATH", "TOKENCACHE_LIBCURL_PATH", "LD_LIBRARY_PATH"] { environment[override] = nil }
        let doctor = try runProcess(bin.appendingPathComponent("tokencache").path, ["doctor", "--backend", "file", "--json"],
                                    environment: environment)
        #expect(!FileManager.default.fileExists(atPath: marker.path), "the library beside the binary was loaded")
        #expect(doctor.status == 0, "\(doctor.stdout)\(doctor.stderr)")
        #expect(doctor.stdout.contains("OpenSSL 3"), "\(doctor.stdout)")
    }

    @Test("TOKENCACHE_LIB*_PATH overrides are ignored in secure-execution mode (a setuid copy run by nobody) and honoured otherwise",
          .enabled(if: geteuid() == 0, "needs root to make a setuid copy and run it as nobody"))
    func overridesIgnoredWhenSetuid() throws {
        let directory = try TestEnvironment.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        #expect(chmod(directory.path, 0o711) == 0)  // nobody must reach the copy
        let binary = directory.appendingPathComponent("tokencache")
        try FileManager.default.copyItem(at: TestEnvironment.binDirectory.appendingPathComponent("tokencache"), to: binary)
        #expect(chmod(binary.path, 0o4755) == 0)
        var environment = ProcessInfo.processInfo.environment
        environment["XDG_DATA_HOME"] = directory.appendingPathComponent("data").path
        environment["TOKENCACHE_LIBCRYPTO_PATH"] = "/nonexistent/libcrypto.so.3"
        environment["NO_COLOR"] = "1"
        func openSSL(_ output: ProcessOutput) throws -> String {
            let json = try #require(try JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [String: Any], "\(output.stderr)")
            let check = (json["checks"] as? [[String: Any]] ?? []).first { $0["name"] as? String == "OpenSSL" }
            return try #require(check?["detail"] as? String)
        }
        let honoured = try runProcess(binary.path, ["doctor", "--backend", "file", "--json"], environment: environment)
        #expect(try openSSL(honoured).contains("/nonexistent/libcrypto.so.3"), "not setuid-run: the override applies")
        let setuid = try runProcess("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", binary.path,
                                                          "doctor", "--backend", "file", "--json"], environment: environment)
        let detail = try openSSL(setuid)
        #expect(!detail.contains("/nonexistent") && detail.contains("loaded: /"), "\(detail)")
        #expect(setuid.status == 0, "\(setuid.stdout)\(setuid.stderr)")
    }
}
