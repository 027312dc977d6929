import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Facts about the environment the tests run in, set by scripts/with-test-keyring.sh.
package enum TestEnvironment {
    package static var environment: [String: String] { ProcessInfo.processInfo.environment }

    /// True inside the isolated keyring session (scripts/test.sh).
    package static var hasTestKeyring: Bool { environment["TOKENCACHE_TEST_KEYRING"] == "1" }

    /// True in CI, where a test that needs the keyring or MSAL Python must run, never skip.
    /// The Secret Service provider the tests run against (TOKENCACHE_TEST_PROVIDER, set by
    /// scripts/with-test-keepassxc.sh and scripts/with-test-kwallet.sh; else GNOME Keyring).
    package enum SecretServiceProvider: String { case gnomeKeyring = "gnome-keyring", keepassxc, kwallet }
    package static var provider: SecretServiceProvider {
        environment["TOKENCACHE_TEST_PROVIDER"].flatMap(SecretServiceProvider.init(rawValue:)) ?? .gnomeKeyring
    }

    package static var isCI: Bool { environment["CI"] != nil }

    /// Secret Service tests run in the isolated session, and in CI always (where a missing
    /// session makes them fail rather than skip). Outside both they are skipped, so plain
    /// `swift test` never touches a developer's real login keyring.
    package static var runsSecretServiceTests: Bool { hasTestKeyring || isCI }

    /// The Python with MSAL installed (made by scripts/install-deps.sh).
    package static var python: String? {
        if let path = environment["TOKENCACHE_TEST_PYTHON"] { return path }
        // Not standardized: that would resolve the venv's python symlink and leave the venv.
        let local = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent(".venv/bin/python").path
        return FileManager.default.isExecutableFile(atPath: local) ? local : nil
    }

    package static var runsInteropTests: Bool { python != nil || isCI }

    /// The real Azure CLI from PyPI (made by scripts/install-deps.sh in .venv-azure-cli).
    package static var azureCLI: String? {
        let local = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent(".venv-azure-cli/bin/az").path
        return FileManager.default.isExecutableFile(atPath: local) ? local : nil
    }

    /// The directory holding built products (tokencache, helpers).
    package static var binDirectory: URL {
        if let path = environment["TOKENCACHE_BUILD_DIR"] { return URL(fileURLWithPath: path) }
        return URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../.build/debug").standardizedFileURL
    }

    /// A fresh temporary directory, removed by the caller's `defer`.
    package static func temporaryDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("tokencache-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        return url
    }
}

/// Output of a finished subprocess.
package struct ProcessOutput {
    package var status: Int32
    package var stdout: String
    package var stderr: String

    package init(status: Int32, stdout: String, stderr: String) {
        self.status = status
        self.stdout = stdout
        self.stderr = stderr
    }
}

/// Runs a program to completion, feeding `input` on stdin.
@discardableResult
package func runProcess(_ executable: String, _ arguments: [String], input: Data? = nil,
                environment: [String: String]? = nil) throws -> ProcessOutput {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    if let environment { process.environment = environment }
    let stdout = Pipe(), stderr = Pipe(), stdin = Pipe()
    process.standardOutput = stdout
    process.standardError = stderr
    process.standardInput = stdin
    try process.run()
    if let input { stdin.fileHandleForWriting.write(input) }
    try stdin.fileHandleForWriting.close()
    // Read both pipes concurrently so a chatty child never blocks on a full pipe.
    nonisolated(unsafe) var errData = Data()
    let group = DispatchGroup()
    group.enter()
    DispatchQueue.global().async { errData = stderr.fileHandleForReading.readDataToEndOfFile(); group.leave() }
    let outData = stdout.fileHandleForReading.readDataToEndOfFile()
    group.wait()
    process.waitUntilExit()
    let output = ProcessOutput(status: process.terminationStatus,
                               stdout: String(decoding: outData, as: UTF8.self),
                               stderr: String(decoding: errData, as: UTF8.self))
    recordOutput(output, of: executable, arguments)
    return output
}

/// Appends what the project's own programs printed to the file named by
/// `TOKENCACHE_TEST_OUTPUT_FILE` (scripts/test.sh checks it for secrets after the run). Left out:
/// `tokencache token`, `export`, `git-credential` and `kubectl-credential` and the helper's `app-token` (a Swift app printing its token),
/// whose job is to print a secret, and other programs (secret-tool, MSAL Python), which are
/// peers reading secrets on purpose.
package func recordOutput(_ output: ProcessOutput, of executable: String, _ arguments: [String]) {
    guard let path = TestEnvironment.environment["TOKENCACHE_TEST_OUTPUT_FILE"], !path.isEmpty,
          ["tokencache", "TokenCacheTestHelper"].contains(URL(fileURLWithPath: executable).lastPathComponent),
          !["token", "export", "app-token", "git-credential", "kubectl-credential"].contains(arguments.first ?? "") else { return }
    let text = "$ \(URL(fileURLWithPath: executable).lastPathComponent) \(arguments.joined(separator: " ")) -> \(output.status)\n"
        + output.stdout + output.stderr
    let descriptor = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
    guard descriptor >= 0 else { return }
    defer { close(descriptor) }
    var bytes = Array(text.utf8)
    _ = bytes.withUnsafeMutableBytes { write(descriptor, $0.baseAddress, $0.count) }
}

/// Runs blocking work (waiting for subprocesses) on a thread of its own, so that neither the
/// test threads (``TestThreads``) nor Dispatch's global queue (which adds a thread only about
/// once a second when all of its block) wait for it.
package func offThePool<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try work() }) }.start()
    }
}
