import Logging

/// The backend a policy chose, and why.
public struct BackendSelection: Sendable {
    /// The backend to use.
    public let backend: any CacheBackend
    /// Why this backend was chosen, for people (`tokencache doctor`).
    public let reason: String

    /// Opens the backend a policy selects.
    /// - Throws: ``TokenCacheError`` `backendUnavailable` when the policy's backend cannot work here.
    public static func open(policy: BackendPolicy, logger: Logger = Logger(label: "tokencache")) throws(TokenCacheError) -> BackendSelection {
        // Filled in when the Secret Service (issue 3) and encrypted-file (issue 4) backends land.
        throw TokenCacheError(.backendUnavailable, "The \(policy.rawValue) backend is not built yet.",
                              hint: "Use the library with InMemoryBackend for now")
    }

    /// Checks what the policy depends on without changing anything.
    public static func diagnose(policy: BackendPolicy, group: CacheGroup = .universalStorage) -> BackendDiagnosis {
        BackendDiagnosis(policy: policy, selected: nil, reason: "No persistent backend is built yet.",
                         checks: [], fix: "Use the library with InMemoryBackend for now")
    }
}
