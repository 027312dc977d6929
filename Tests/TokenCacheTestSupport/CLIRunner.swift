import Foundation
import Testing
import TokenCacheCore

/// Runs the built `tokencache` binary as a subprocess against an isolated store.
package struct CLI {
    package let backend: String
    package let dataHome: URL
    package let group: String
    /// Extra environment variables for the subprocess.
    package var environmentOverrides: [String: String] = [:]

    package init(backend: String) throws {
        self.backend = backend
        dataHome = try TestEnvironment.temporaryDirectory()
        // A group of its own per test, so tests sharing the keyring never see each other.
        group = "org.swift-tokencache.cli-test-\(UUID().uuidString.prefix(8).lowercased())"
    }

    /// The same store and group through another backend.
    package init(_ other: CLI, backend: String) {
        self.backend = backend
        dataHome = other.dataHome
        group = other.group
    }

    /// The group as MSAL JSON, parsed, through `export` to a fresh file.
    package func exported() throws -> NSDictionary {
        let file = dataHome.appendingPathComponent("export-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: file) }
        let output = try run(["export", "--format", "msal-json", "--output", file.path])
        #expect(output.status == 0, "export failed: \(output.stderr)")
        return try JSONSerialization.jsonObject(with: Data(contentsOf: file)) as? NSDictionary ?? [:]
    }

    package var environment: [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["XDG_DATA_HOME"] = dataHome.path
        // No config file or TOKENCACHE_* setting of the machine's may change what a test runs.
        environment["XDG_CONFIG_HOME"] = dataHome.appendingPathComponent("config").path
        for name in ["TOKENCACHE_BACKEND", "TOKENCACHE_GROUP", "TOKENCACHE_COLLECTION", "TOKENCACHE_PASSPHRASE_FILE",
                     "TOKENCACHE_KEY_SOURCE", "TOKENCACHE_TPM_TCTI"] {
            environment[name] = nil
        }
        environment["NO_COLOR"] = "1"
        environment.merge(environmentOverrides) { _, override in override }
        return environment
    }

    @discardableResult
    package func run(_ arguments: [String], input: Data? = nil, withGroup: Bool = true) throws -> ProcessOutput {
        let binary = TestEnvironment.binDirectory.appendingPathComponent("tokencache").path
        var arguments = arguments
        if withGroup, let subcommand = arguments.first, !subcommand.hasPrefix("-"), subcommand != "migrate" {
            arguments += ["--backend", backend, "--group", group]
        }
        return try runProcess(binary, arguments, input: input, environment: environment)
    }

    package func save(_ user: Fixtures.User, client: String, foci: String? = "1", scope: String = "User.Read Mail.Read") throws -> [String: Any] {
        let response = Fixtures.response(for: user, scope: scope, foci: foci, tag: client)
        let output = try run(["save", "--client", client, "--authority", Fixtures.authority().url.absoluteString,
                              "--scopes", scope], input: Fixtures.json(response))
        #expect(output.status == 0, "save failed: \(output.stderr)")
        return response
    }

    package func cleanUp() {
        _ = try? run(["remove", "--all", "--yes"])
        try? FileManager.default.removeItem(at: dataHome)
    }
}

/// The backends the CLI is tested on: the encrypted file always, the Secret Service inside the
/// isolated keyring session (and in CI, where it must work rather than skip).
package let cliBackends = ["file"] + (TestEnvironment.runsSecretServiceTests ? ["secret-service"] : [])
