import Foundation
import Testing
@testable import SecretServiceStore
@_spi(Backend) @testable import TokenCacheCore
@testable import TokenCachePlatform
import TokenCacheTestSupport

/// What the Secret Service backend loads at run time: libgcrypt (for the encrypted transfer),
/// with dlopen when it connects; never libsecret, whose D-Bus calls the backend makes itself.
/// These run the built binaries with TOKENCACHE_LIBGCRYPT_PATH pointing at a file that does not
/// exist (or is not libgcrypt), so the real dlopen/dlsym failure paths run; inside the test
/// keyring session they also show that a working bus and provider are not used without it.
@Suite("Secret Service libraries loaded at run time", .harness)
struct SecretServiceLibraryLoadingTests {
    static let absent = ["TOKENCACHE_LIBGCRYPT_PATH": "/nonexistent/libgcrypt.so.20"]
    static let absentMessage = "libgcrypt, which encrypts secrets on their way from the Secret Service, could not be loaded (/nonexistent/libgcrypt.so.20: "
    static var helper: String { TestEnvironment.binDirectory.appendingPathComponent("TokenCacheTestHelper").path }

    static func cli(_ backend: String, _ overrides: [String: String] = absent) throws -> CLI {
        var cli = try CLI(backend: backend)
        cli.environmentOverrides = overrides
        return cli
    }

    @Test("Saving and reading through the Secret Service never maps libsecret (libgcrypt is mapped, for the transfer)",
          .enabled(if: TestEnvironment.runsSecretServiceTests))
    func libsecretNeverLoaded() throws {
        let group = "org.swift-tokencache.loading-\(UUID().uuidString.prefix(8).lowercased())"
        let probe = try runProcess(Self.helper, ["ss-probe", "save", group])
        defer { _ = try? SecretServiceBackend().removeAll(in: try CacheGroup(group)) }
        let json = try #require(try JSONSerialization.jsonObject(with: Data(probe.stdout.utf8)) as? [String: Any], "\(probe.stderr)")
        #expect(json["result"] as? String == "ok", "\(probe.stdout)")
        #expect(json["libsecret_mapped"] as? Bool == false)
        #expect(json["libgcrypt_mapped"] as? Bool == true)
    }

    @Test("--backend secret-service without libgcrypt: one-line libgcrypt error with the package to install, exit 1")
    func secretServiceRequested() throws {
        let cli = try Self.cli("secret-service")
        defer { cli.cleanUp() }
        let output = try cli.run(["list"])
        #expect(output.status == 1)
        #expect(output.stdout.isEmpty)
        let lines = output.stderr.split(separator: "\n")
        #expect(lines.count == 2, "\(output.stderr)")
        #expect(lines.first?.hasPrefix("error: " + Self.absentMessage) == true, "\(output.stderr)")
        #expect(lines.last?.hasPrefix("hint: Install it (Debian/Ubuntu: apt-get install libgcrypt20)") == true, "\(output.stderr)")
        #expect(!output.stderr.contains("libsecret"), "\(output.stderr)")
    }

    @Test("The library reports the typed libgcryptMissing code, for a missing file and for a library without libgcrypt's symbols")
    func typedCode() throws {
        var environment = ProcessInfo.processInfo.environment
        environment.merge(Self.absent) { _, override in override }
        let missing = try runProcess(Self.helper, ["ss-probe"], environment: environment)
        #expect(missing.stdout.contains(#""result":"libgcryptMissing""#), "\(missing.stdout)\(missing.stderr)")
        // GLib is loaded anyway; it has none of the gcry_* functions (the dlsym failure path).
        environment["TOKENCACHE_LIBGCRYPT_PATH"] = "libglib-2.0.so.0"
        let wrong = try runProcess(Self.helper, ["ss-probe"], environment: environment)
        #expect(wrong.stdout.contains(#""result":"libgcryptMissing""#), "\(wrong.stdout)\(wrong.stderr)")
        #expect(wrong.stdout.contains("gcry_check_version"), "\(wrong.stdout)")
    }

    @Test("--backend auto without libgcrypt falls back to the encrypted file, said with --verbose, and works")
    func automaticFallsBack() throws {
        let cli = try Self.cli("auto")
        defer { cli.cleanUp() }
        _ = try cli.save(Fixtures.alice, client: Fixtures.appOne)
        let list = try cli.run(["list", "--json", "--verbose"])
        #expect(list.status == 0, "\(list.stderr)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [String: Any])
        #expect((json["location"] as? String)?.hasPrefix("encrypted file") == true, "\(list.stdout)")
        #expect(list.stdout.contains(Fixtures.alice.username))
        #expect(list.stderr.contains("falls back to the encrypted file") && list.stderr.contains(Self.absentMessage), "\(list.stderr)")
    }

    @Test("doctor shows libgcrypt missing: auto selects the encrypted file, secret-service exits 1 with the package hint")
    func doctor() throws {
        let cli = try Self.cli("auto")
        defer { cli.cleanUp() }
        let automatic = try cli.run(["doctor", "--json"])
        #expect(automatic.status == 0, "\(automatic.stderr)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(automatic.stdout.utf8)) as? [String: Any])
        #expect((json["selected"] as? String)?.hasPrefix("encrypted file") == true)
        #expect((json["reason"] as? String)?.contains(Self.absentMessage) == true)
        let checks = try #require(json["checks"] as? [[String: Any]])
        let libgcrypt = try #require(checks.first { $0["name"] as? String == "libgcrypt" })
        #expect(libgcrypt["status"] as? String == "warning")
        #expect((libgcrypt["detail"] as? String)?.contains("could not be loaded") == true)
        #expect(!checks.contains { $0["name"] as? String == "libsecret" })

        let requested = try cli.run(["doctor", "--backend", "secret-service"], withGroup: false)
        #expect(requested.status == 1)
        // In words, not the internal code name (#46).
        #expect(requested.stdout.contains("libgcrypt, which encrypts secrets") && !requested.stdout.contains("libgcryptMissing"), "\(requested.stdout)")
        #expect(requested.stderr.contains("apt-get install libgcrypt20"))
    }

    @Test("With libgcrypt present, doctor says which file was loaded")
    func loadedReported() throws {
        let cli = try Self.cli("file", [:])
        defer { cli.cleanUp() }
        let output = try cli.run(["doctor", "--json"])
        let json = try #require(try JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [String: Any])
        let checks = try #require(json["checks"] as? [[String: Any]])
        let libgcrypt = try #require(checks.first { $0["name"] as? String == "libgcrypt" })
        #expect(libgcrypt["status"] as? String == "info")
        // By absolute path from the system's library directory, not by soname (SystemLibraryLoadingTests).
        let detail = libgcrypt["detail"] as? String ?? ""
        #expect(detail.hasPrefix("libgcrypt (loaded: /") && detail.contains("/libgcrypt.so.20)"), "\(detail)")
    }

    @Test("tokencache-config-gen, on the core only, links neither GLib nor GIO (readelf NEEDED); tokencache, with the façade, does")
    func configGeneratorLinksCoreOnly() throws {
        func needed(_ name: String) throws -> [String] {
            let output = try runProcess("/usr/bin/readelf", ["-d", TestEnvironment.binDirectory.appendingPathComponent(name).path])
            try #require(output.status == 0, "readelf: \(output.stderr)")
            return output.stdout.split(separator: "\n").filter { $0.contains("(NEEDED)") }.map(String.init)
        }
        let generator = try needed("tokencache-config-gen")
        #expect(!generator.isEmpty)
        #expect(!generator.contains { $0.contains("libgio") || $0.contains("libglib") || $0.contains("libgobject") }, "\(generator)")
        #expect(try needed("tokencache").contains { $0.contains("libgio-2.0") })
    }

    @Test("An app on the encrypted file only (the TokenCacheEncryptedFile product) links neither GLib/GIO nor libcurl, and lists the accounts the CLI saved")
    func encryptedFileOnlyAppLinksNoGLib() throws {
        let needed = try runProcess("/usr/bin/readelf", ["-d", TestEnvironment.binDirectory.appendingPathComponent("tokencache-file-example").path])
        try #require(needed.status == 0, "readelf: \(needed.stderr)")
        let libraries = needed.stdout.split(separator: "\n").filter { $0.contains("(NEEDED)") }
        #expect(!libraries.isEmpty)
        #expect(!libraries.contains { $0.contains("libgio") || $0.contains("libglib") || $0.contains("libgobject") || $0.contains("libcurl") },
                "\(libraries)")
        // And it works: it reads the encrypted file the CLI wrote.
        let cli = try Self.cli("file", [:])
        defer { cli.cleanUp() }
        _ = try cli.save(Fixtures.alice, client: Fixtures.appOne)
        let listed = try runProcess(TestEnvironment.binDirectory.appendingPathComponent("tokencache-file-example").path,
                                    [Fixtures.appOne, cli.group], environment: cli.environment)
        #expect(listed.status == 0, "\(listed.stderr)")
        #expect(listed.stdout.contains("alice@contoso.com"), "\(listed.stdout)")
    }
}
