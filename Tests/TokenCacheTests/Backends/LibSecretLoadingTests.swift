import Foundation
import Testing
@testable import EncryptedFileStore
@testable import SecretServiceStore
@testable import TokenCache
@testable import TokenCacheCore
@testable import TokenCachePlatform

/// libsecret is loaded with dlopen on first use. These run the built binaries with
/// TOKENCACHE_LIBSECRET_PATH pointing at a file that does not exist (or is not libsecret), so
/// the real dlopen/dlsym failure paths run. They never reach a keyring (loading fails first), so
/// they run everywhere; inside the test keyring session they also show that a working bus and
/// provider are not used without libsecret.
@Suite("libsecret loaded at run time")
struct LibSecretLoadingTests {
    static let absent = ["TOKENCACHE_LIBSECRET_PATH": "/nonexistent/libsecret-1.so.0"]

    static func cli(_ backend: String, _ overrides: [String: String] = absent) throws -> CLI {
        var cli = try CLI(backend: backend)
        cli.environmentOverrides = overrides
        return cli
    }

    @Test("--backend secret-service without libsecret: one-line libsecret error with the package to install, exit 1")
    func secretServiceRequested() throws {
        let cli = try Self.cli("secret-service")
        defer { cli.cleanUp() }
        let output = try cli.run(["list"])
        #expect(output.status == 1)
        #expect(output.stdout.isEmpty)
        let lines = output.stderr.split(separator: "\n")
        #expect(lines.count == 2, "\(output.stderr)")
        #expect(lines.first?.hasPrefix("error: libsecret is not installed (/nonexistent/libsecret-1.so.0: ") == true, "\(output.stderr)")
        #expect(lines.last?.hasPrefix("hint: ") == true)
        #expect(lines.last?.contains("apt-get install libsecret-1-0") == true)
        #expect(lines.last?.contains("--backend file") == true)
    }

    @Test("The library reports the typed libsecretMissing code, for a missing file and for a library without libsecret's symbols")
    func typedCode() throws {
        let helper = TestEnvironment.binDirectory.appendingPathComponent("TokenCacheTestHelper").path
        var environment = ProcessInfo.processInfo.environment
        environment.merge(Self.absent) { _, override in override }
        let missing = try runProcess(helper, ["ss-probe"], environment: environment)
        #expect(missing.stdout.contains(#""result":"libsecretMissing""#), "\(missing.stdout)\(missing.stderr)")
        // GLib is loaded anyway; it has none of the secret_* functions (the dlsym failure path).
        environment["TOKENCACHE_LIBSECRET_PATH"] = "libglib-2.0.so.0"
        let wrong = try runProcess(helper, ["ss-probe"], environment: environment)
        #expect(wrong.stdout.contains(#""result":"libsecretMissing""#), "\(wrong.stdout)\(wrong.stderr)")
        #expect(wrong.stdout.contains("has no secret_service_get_type"), "\(wrong.stdout)")
    }

    @Test("Without libgcrypt (libsecret present) a save reports libgcrypt itself: its own message, code and package, not libsecret's",
          .enabled(if: TestEnvironment.runsSecretServiceTests))
    func libgcryptMissing() throws {
        let cli = try Self.cli("secret-service", ["TOKENCACHE_LIBGCRYPT_PATH": "/nonexistent/libgcrypt.so.20"])
        defer { cli.cleanUp() }
        let output = try cli.run(["save", "--client", Fixtures.appOne, "--authority", Fixtures.authority().url.absoluteString,
                                  "--scopes", "User.Read"], input: Fixtures.json(Fixtures.response(for: Fixtures.alice, tag: Fixtures.appOne)))
        #expect(output.status == 1)
        let lines = output.stderr.split(separator: "\n")
        #expect(lines.count == 2, "\(output.stderr)")
        #expect(lines.first?.hasPrefix("error: libgcrypt, which encrypts secrets on their way from the Secret Service, could not be loaded (/nonexistent/libgcrypt.so.20: ") == true,
                "\(output.stderr)")
        #expect(lines.last?.hasPrefix("hint: Install it (Debian/Ubuntu: apt-get install libgcrypt20)") == true, "\(output.stderr)")
        #expect(!output.stderr.contains("libsecret"), "\(output.stderr)")

        // The typed code, from the library (it was libsecretMissing, which named the wrong package).
        let helper = TestEnvironment.binDirectory.appendingPathComponent("TokenCacheTestHelper").path
        var environment = ProcessInfo.processInfo.environment
        environment["TOKENCACHE_LIBGCRYPT_PATH"] = "/nonexistent/libgcrypt.so.20"
        let probe = try runProcess(helper, ["ss-probe", "save", cli.group], environment: environment)
        #expect(probe.stdout.contains(#""result":"libgcryptMissing""#), "\(probe.stdout)\(probe.stderr)")
    }

    @Test("--backend auto without libsecret falls back to the encrypted file, said with --verbose, and works")
    func automaticFallsBack() throws {
        let cli = try Self.cli("auto")
        defer { cli.cleanUp() }
        _ = try cli.save(Fixtures.alice, client: Fixtures.appOne)
        let list = try cli.run(["list", "--json", "--verbose"])
        #expect(list.status == 0, "\(list.stderr)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [String: Any])
        #expect((json["location"] as? String)?.hasPrefix("encrypted file") == true, "\(list.stdout)")
        #expect(list.stdout.contains(Fixtures.alice.username))
        #expect(list.stderr.contains("falls back to the encrypted file") && list.stderr.contains("libsecret is not installed"),
                "\(list.stderr)")
    }

    @Test("doctor shows libsecret missing: auto selects the encrypted file, secret-service exits 1 with the package hint")
    func doctor() throws {
        let cli = try Self.cli("auto")
        defer { cli.cleanUp() }
        let automatic = try cli.run(["doctor", "--json"])
        #expect(automatic.status == 0, "\(automatic.stderr)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(automatic.stdout.utf8)) as? [String: Any])
        #expect((json["selected"] as? String)?.hasPrefix("encrypted file") == true)
        #expect((json["reason"] as? String)?.contains("libsecret is not installed") == true)
        let checks = try #require(json["checks"] as? [[String: Any]])
        let libsecret = try #require(checks.first { $0["name"] as? String == "libsecret" })
        #expect(libsecret["status"] as? String == "warning")
        #expect((libsecret["detail"] as? String)?.contains("not installed") == true)

        let requested = try cli.run(["doctor", "--backend", "secret-service"], withGroup: false)
        #expect(requested.status == 1)
        #expect(requested.stdout.contains("libsecretMissing"))
        #expect(requested.stderr.contains("apt-get install libsecret-1-0"))
    }

    @Test("With libsecret present, doctor says it was loaded")
    func loadedReported() throws {
        let cli = try Self.cli("file", [:])
        defer { cli.cleanUp() }
        let output = try cli.run(["doctor", "--json"])
        let json = try #require(try JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [String: Any])
        let checks = try #require(json["checks"] as? [[String: Any]])
        let libsecret = try #require(checks.first { $0["name"] as? String == "libsecret" })
        #expect(libsecret["status"] as? String == "info")
        // By absolute path from the system's library directory, not by soname (SystemLibraryLoadingTests).
        let detail = libsecret["detail"] as? String ?? ""
        #expect(detail.hasPrefix("libsecret (loaded: /") && detail.hasSuffix("/libsecret-1.so.0)"), "\(detail)")
    }
}
