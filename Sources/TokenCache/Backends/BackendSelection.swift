import Foundation
import Logging
import Synchronization

/// The backend a policy chose, and why.
public struct BackendSelection: Sendable {
    /// The backend to use.
    public let backend: any CacheBackend
    /// Why this backend was chosen, for people (`tokencache doctor`).
    public let reason: String

    /// Whether the automatic fallback was already announced in this process.
    private static let announced = Mutex(false)

    /// Opens the backend a policy selects.
    ///
    /// - `automatic`: the Secret Service when a session bus and a provider answer, else the
    ///   encrypted file, announced once per process at warning level.
    /// - `secretService`, `file`: that backend only.
    ///
    /// - Throws: ``TokenCacheError`` `backendUnavailable` when the policy's backend cannot work here.
    public static func open(policy: BackendPolicy, logger: Logger = Logger(label: "tokencache"),
                            fileDirectory: URL? = nil,
                            keySource: EncryptedFileBackend.KeySource = .keyFile()) throws(TokenCacheError) -> BackendSelection {
        let file = { EncryptedFileBackend(directory: fileDirectory, keySource: keySource) }
        switch policy {
        case .file:
            return BackendSelection(backend: file(), reason: "the file backend was requested")
        case .secretService:
            let problem = secretServiceUnavailableReason()
            throw TokenCacheError(.backendUnavailable, "The Secret Service backend cannot be used: \(problem).",
                                  hint: "Use --backend file (the encrypted file) instead")
        case .automatic:
            let reason = "no Secret Service: \(secretServiceUnavailableReason()); using the encrypted file"
            let first = announced.withLock { done in
                defer { done = true }
                return !done
            }
            if first { logger.warning("Token cache falls back to the encrypted file", metadata: ["reason": .string(reason)]) }
            return BackendSelection(backend: file(), reason: reason)
        }
    }

    /// Why the Secret Service cannot be used here.
    static func secretServiceUnavailableReason() -> String {
        "the Secret Service backend is not built yet (issue 3)"
    }

    /// Checks what the policy depends on without changing anything.
    public static func diagnose(policy: BackendPolicy, group: CacheGroup = .universalStorage,
                                fileDirectory: URL? = nil,
                                keySource: EncryptedFileBackend.KeySource = .keyFile()) -> BackendDiagnosis {
        var checks: [BackendDiagnosis.Check] = []
        let environment = ProcessInfo.processInfo.environment
        let bus = environment["DBUS_SESSION_BUS_ADDRESS"]
        checks.append(.init(name: "session bus", status: bus == nil ? .warning : .info,
                            detail: bus.map { "DBUS_SESSION_BUS_ADDRESS=\($0)" } ?? "DBUS_SESSION_BUS_ADDRESS is not set"))
        checks.append(.init(name: "Secret Service", status: .warning, detail: secretServiceUnavailableReason()))
        let file = EncryptedFileBackend(directory: fileDirectory, keySource: keySource)
        checks.append(contentsOf: file.diagnose(group))
        checks.append(.init(name: "OpenSSL", status: .info, detail: OpenSSL.version))

        switch policy {
        case .secretService:
            return BackendDiagnosis(policy: policy, selected: nil, reason: secretServiceUnavailableReason(), checks: checks,
                                    fix: "Use --backend file (the encrypted file)")
        case .file, .automatic:
            let failed = checks.first { $0.status == .failed }
            let reason = policy == .file ? "the file backend was requested"
                : "no Secret Service: \(secretServiceUnavailableReason()); using the encrypted file"
            return BackendDiagnosis(policy: policy, selected: failed == nil ? file.location(of: group) : nil, reason: reason,
                                    checks: checks, fix: failed.map { "Fix: \($0.name) - \($0.detail)" })
        }
    }
}
