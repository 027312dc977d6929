import Foundation
import Testing
@testable import EncryptedFileStore
@_spi(Backend) @testable import TokenCacheCore
import TokenCacheTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The TPM key source against a real software TPM (swtpm), one per test: a TPM that is missing
/// in CI is a failure, not a skip.
@Suite("Encrypted file keyed by a TPM", .harness)
struct TPMKeySourceTests {
    let directory: URL
    let group = try! CacheGroup("org.swift-tokencache.tpm-test")

    init() throws { directory = try TestEnvironment.temporaryDirectory().appendingPathComponent("cache") }

    func save(_ backend: EncryptedFileBackend, tag: String = "one") throws -> AccountStore {
        let store = AccountStore(backend: backend, group: group)
        try store.save(Fixtures.tokenResponse(Fixtures.response(for: Fixtures.alice, tag: tag)), clientID: Fixtures.appOne,
                       authority: Fixtures.authority(), scopes: [], now: Fixtures.now)
        return store
    }

    @Test("Tokens saved through the TPM key source read back in a new process's backend; only the sealed key is on disk")
    func saveAndRead() throws {
        let tpm = try SoftwareTPM()
        let written = try save(EncryptedFileBackend(directory: directory, keySource: .tpm(tcti: tpm.tcti)))
        let reopened = AccountStore(backend: EncryptedFileBackend(directory: directory, keySource: .tpm(tcti: tpm.tcti)), group: group)
        #expect(try reopened.exportMSALJSON() == written.exportMSALJSON())
        #expect(try reopened.allAccounts().map(\.username) == [Fixtures.alice.username])
        let sealed = directory.appendingPathComponent("cache.key.tpm")
        #expect(try FileManager.default.attributesOfItem(atPath: sealed.path)[.posixPermissions] as? Int == 0o600)
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("cache.key").path))
        #expect(try Data(contentsOf: sealed).starts(with: Data("TCTPM1\n".utf8)))
    }

    @Test("A cache directory copied to another machine's TPM does not decrypt (tpmSealedElsewhere); on the original it does")
    func copiedHome() throws {
        let original = try SoftwareTPM()
        let written = try save(EncryptedFileBackend(directory: directory, keySource: .tpm(tcti: original.tcti)))
        let copy = try TestEnvironment.temporaryDirectory().appendingPathComponent("copied-home")
        try FileManager.default.copyItem(at: directory, to: copy)
        let otherMachine = try SoftwareTPM()
        let error = try #require(throws: TokenCacheError.self) {
            try EncryptedFileBackend(directory: copy, keySource: .tpm(tcti: otherMachine.tcti)).load(group)
        }
        #expect(error.reason == .tpmSealedElsewhere)
        #expect(error.code == .fileAuthenticationFailed)
        // Not changed by the failed read: the original TPM still reads the copy, whole.
        let back = AccountStore(backend: EncryptedFileBackend(directory: copy, keySource: .tpm(tcti: original.tcti)), group: group)
        #expect(try back.exportMSALJSON() == written.exportMSALJSON())
    }

    @Test("No TPM at the TCTI is tpmUnavailable, and nothing is created")
    func noTPM() throws {
        let tpm = try SoftwareTPM()
        let tcti = tpm.tcti
        tpm.stop()
        let error = try #require(throws: TokenCacheError.self) {
            _ = try save(EncryptedFileBackend(directory: directory, keySource: .tpm(tcti: tcti)))
        }
        #expect(error.reason == .tpmUnavailable(tcti: tcti))
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("cache.key.tpm").path))
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("\(group.name).tkc").path))
    }

    @Test("A busy TPM (its object memory full) is tpmLockedOut; nothing is created, and once it is free the save works")
    func busyTPM() throws {
        let tpm = try SoftwareTPM()
        try tpm.fillObjectMemory()
        let error = try #require(throws: TokenCacheError.self) {
            _ = try save(EncryptedFileBackend(directory: directory, keySource: .tpm(tcti: tpm.tcti)))
        }
        #expect(error.reason == .tpmLockedOut)
        #expect(error.code == .backendUnavailable)
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("cache.key.tpm").path))
        try tpm.flushTransientObjects()
        let store = try save(EncryptedFileBackend(directory: directory, keySource: .tpm(tcti: tpm.tcti)))
        #expect(try store.allAccounts().count == 1)
    }

    @Test("kill -9 while the key is sealed or during saves through the TPM key source loses nothing that was saved")
    func killDuringSaves() throws {
        let tpm = try SoftwareTPM()
        let helper = TestEnvironment.binDirectory.appendingPathComponent("TokenCacheTestHelper").path
        var environment = ProcessInfo.processInfo.environment
        environment["TOKENCACHE_TPM_TCTI"] = tpm.tcti
        func writer(_ directory: URL, _ prefix: String, _ count: Int) throws -> Process {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: helper)
            process.arguments = ["file-writer", directory.path, group.name, prefix, String(count), "tpm"]
            process.environment = environment
            try process.run()
            return process
        }
        func killed(_ process: Process) throws {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            try tpm.flushTransientObjects()
        }
        // While the first writer creates and seals the key: a fresh directory each time, and the
        // next writer must find a whole sealed key or none (never a torn one).
        for iteration in 0..<5 {
            let fresh = directory.deletingLastPathComponent().appendingPathComponent("fresh-\(iteration)")
            let first = try writer(fresh, "first", 1000)
            usleep(useconds_t(5_000 + iteration * 10_000))
            try killed(first)
            let next = try writer(fresh, "next", 1)
            next.waitUntilExit()
            #expect(next.terminationStatus == 0, "iteration \(iteration): the key left by a killed writer is unusable")
        }
        // During saves: each writer is killed once its first save is on disk, at varied points after.
        let seed = try writer(directory, "seed", 3)
        seed.waitUntilExit()
        #expect(seed.terminationStatus == 0)
        let path = directory.appendingPathComponent("\(group.name).tkc").path
        let iterations = max(10, Int(ProcessInfo.processInfo.environment["TOKENCACHE_KILL_ITERATIONS"] ?? "30")! / 10)
        var previous = try EncryptedFileBackend(directory: directory, keySource: .tpm(tcti: tpm.tcti)).load(group).entries.count
        for iteration in 0..<iterations {
            let before = try FileManager.default.attributesOfItem(atPath: path)[.systemFileNumber] as? Int
            let process = try writer(directory, "k\(iteration)", 1000)
            // Polled, at most 10 s: waiting for the writer's first rename is not a timing under test.
            for _ in 0..<1000 where (try FileManager.default.attributesOfItem(atPath: path)[.systemFileNumber] as? Int) == before {
                usleep(10_000)
            }
            usleep(useconds_t((iteration * 7_919) % 30_000))
            try killed(process)
            let entries = try EncryptedFileBackend(directory: directory, keySource: .tpm(tcti: tpm.tcti)).load(group).entries
            #expect(entries.count > previous, "iteration \(iteration): lost entries, or the writer saved nothing")
            previous = entries.count
            let mine = Set(entries.filter { $0.key.hasPrefix("k\(iteration)-") }.map(\.key))
            #expect(mine == Set((0..<mine.count).map { "k\(iteration)-\($0)" }))
        }
        print("KILL: 5 TPM-keyed writers killed while sealing, \(iterations) during saves, \(previous) entries kept")
    }
}
