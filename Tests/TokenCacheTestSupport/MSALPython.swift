import Foundation
import Testing

/// The real MSAL Python (the venv made by scripts/install-deps.sh), driven by
/// Fixtures/msal_interop.py: one JSON request on stdin, one JSON answer on stdout.
package enum MSALPython {
    package static func interpreter() throws -> String {
        try #require(TestEnvironment.python, "MSAL Python venv missing: run scripts/install-deps.sh")
    }

    package static var script: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("Fixtures/msal_interop.py").standardizedFileURL.path
    }

    /// msal_interop.py's JSON answer.
    package static func answer(_ output: ProcessOutput) throws -> [String: Any] {
        try #require(output.status == 0, "msal_interop.py failed: \(output.stderr)")
        return try #require(try JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [String: Any])
    }

    /// Runs msal_interop.py (off the cooperative pool: MSAL Python takes a second to start).
    package static func run(_ request: [String: Any]) async throws -> [String: Any] {
        let python = try interpreter()
        let input = try JSONSerialization.data(withJSONObject: request)
        return try answer(try await offThePool { try runProcess(python, [script], input: input) })
    }
}
