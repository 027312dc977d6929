import Foundation
import Testing
import TokenCacheTestSupport

/// The TPM key source through the CLI, against a real software TPM (swtpm) per test.
@Suite("CLI: TPM key source", .harness)
struct CLITPMTests {
    @Test("No TPM through a TOKENCACHE_TPM_TCTI that is set: the hint says it is set (not to set it), and the tpm2-tss code is explained (its layer and what it means) (#59 item 5)")
    func unreachableTCTI() throws {
        var cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        cli.environmentOverrides["TOKENCACHE_TPM_TCTI"] = "swtpm:host=127.0.0.1,port=1"
        let saved = try cli.run(["save", "--key-source", "tpm", "--client", Fixtures.appOne, "--authority", Fixtures.authority().url.absoluteString,
                                 "--scopes", "User.Read"], input: Fixtures.json(Fixtures.response(for: Fixtures.alice, tag: "tpm")))
        #expect(saved.status == 1, "\(saved.stderr)")
        #expect(saved.stderr.contains("TOKENCACHE_TPM_TCTI is set, to swtpm:host=127.0.0.1,port=1") && !saved.stderr.contains("or set TOKENCACHE_TPM_TCTI"),
                "\(saved.stderr)")
        #expect(saved.stderr.contains("the TCTI (the connection to the TPM) reported"), "\(saved.stderr)")
    }

    @Test("--key-source tpm seals the key; later commands use it without the option; doctor shows the TPM")
    func keySourceOption() throws {
        let tpm = try SoftwareTPM()
        var cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        cli.environmentOverrides["TOKENCACHE_TPM_TCTI"] = tpm.tcti
        let response = Fixtures.response(for: Fixtures.alice, tag: "tpm")
        let saved = try cli.run(["save", "--key-source", "tpm", "--client", Fixtures.appOne, "--authority", Fixtures.authority().url.absoluteString,
                                 "--scopes", "User.Read"], input: Fixtures.json(response))
        #expect(saved.status == 0, "\(saved.stderr)")
        let directory = cli.dataHome.appendingPathComponent("tokencache")
        #expect(FileManager.default.fileExists(atPath: directory.appendingPathComponent("cache.key.tpm").path))
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("cache.key").path))
        let listed = try cli.run(["list"])
        #expect(listed.status == 0 && listed.stdout.contains(Fixtures.alice.username), "\(listed.stderr)")
        let doctor = try cli.run(["doctor"])
        #expect(doctor.stdout.contains("TPM-sealed key"), "\(doctor.stdout)")
        #expect(doctor.stdout.contains("TPM 2.0, manufacturer IBM, via \(tpm.tcti)"), "\(doctor.stdout)")
        // Without its TPM the cache does not open, with the typed reason's message and status 1.
        tpm.stop()
        let failed = try cli.run(["list"])
        #expect(failed.status == 1)
        #expect(failed.stderr.contains("No TPM"), "\(failed.stderr)")
    }

    @Test("migrate --to-key-source: key file → TPM → passphrase → key file, byte-identical tokens, each old key removed")
    func migrateKeySources() throws {
        let tpm = try SoftwareTPM()
        var cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        cli.environmentOverrides["TOKENCACHE_TPM_TCTI"] = tpm.tcti
        _ = try cli.save(Fixtures.alice, client: Fixtures.appOne)
        _ = try cli.save(Fixtures.bob, client: Fixtures.appTwo)
        let original = try cli.exported()
        #expect(original.count > 0)
        let directory = cli.dataHome.appendingPathComponent("tokencache")
        func exists(_ name: String) -> Bool { FileManager.default.fileExists(atPath: directory.appendingPathComponent(name).path) }
        func migrate(_ source: String) throws {
            let output = try cli.run(["migrate", "--to-key-source", source, "--group", cli.group])
            #expect(output.status == 0, "migrate to \(source): \(output.stderr)")
            #expect(output.stdout.contains("read back"), "\(output.stdout)")
        }
        try migrate("tpm")
        #expect(exists("cache.key.tpm") && !exists("cache.key"))
        #expect(try cli.exported() == original)

        let passphraseFile = cli.dataHome.appendingPathComponent("passphrase")
        try Data("correct horse battery staple\n".utf8).write(to: passphraseFile)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: passphraseFile.path)
        cli.environmentOverrides["TOKENCACHE_PASSPHRASE_FILE"] = passphraseFile.path
        try migrate("passphrase")
        #expect(!exists("cache.key.tpm") && !exists("cache.key"))
        #expect(try cli.exported() == original)

        try migrate("key-file")
        #expect(exists("cache.key") && !exists("cache.key.tpm"))
        cli.environmentOverrides["TOKENCACHE_PASSPHRASE_FILE"] = nil
        #expect(try cli.exported() == original)
    }
}
