import Logging

/// The log levels MSAL apps know (`MSQALogLevel`), mapped onto swift-log levels.
public enum TokenCacheLogLevel: Int, Sendable, CaseIterable {
    /// Nothing is logged.
    case nothing
    /// Errors only.
    case error
    /// Warnings and errors.
    case warning
    /// Entry points and storage operations.
    case info
    /// Everything, including API tracing.
    case verbose

    /// The swift-log level to set on a `Logger`; `nothing` maps to `.critical`, which this
    /// library never uses.
    package var loggerLevel: Logger.Level {
        switch self {
        case .nothing: .critical
        case .error: .error
        case .warning: .warning
        case .info: .info
        case .verbose: .trace
        }
    }
}

/// How the library treats personal data in logs. Secrets (tokens, keys, passphrases) are never
/// logged, whatever this says.
public struct LogPrivacy: Sendable, Hashable {
    /// Whether usernames and account IDs appear in logs. Off by default.
    public var logsPersonalData: Bool

    /// Creates a policy.
    public init(logsPersonalData: Bool = false) { self.logsPersonalData = logsPersonalData }

    /// The value, or a placeholder when personal data is not logged.
    package func pii(_ value: String) -> Logger.MetadataValue {
        .string(logsPersonalData ? value : "<redacted>")
    }
}
