import FoundationEssentials
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// Appends every log record, one line each, to a file several processes may share (the
/// `tokencache` CLI's `TOKENCACHE_LOG_FILE`; the test suite and its helper processes), so a
/// run's whole log can be read, or checked for secrets, afterwards. Each line goes out in one
/// `write(2)` on an `O_APPEND` descriptor, so lines from different processes never interleave.
/// The library never logs secrets at any level.
package struct LineFileLogHandler: LogHandler {
    private let descriptor: Int32
    private let label: String
    package var metadata: Logger.Metadata = [:]
    package var logLevel: Logger.Level = .trace

    /// Bootstraps the logging system with a handler on the file named by `environmentVariable`,
    /// when it is set. Returns whether it did. Call once per process, before any logger exists.
    @discardableResult
    package static func bootstrapFromEnvironment(_ environmentVariable: String = "TOKENCACHE_TEST_LOG_FILE") -> Bool {
        guard let path = ProcessInfo.processInfo.environment[environmentVariable], !path.isEmpty,
              let makeHandler = appending(to: path) else { return false }
        LoggingSystem.bootstrap(makeHandler)
        return true
    }

    /// Opens `path` for appending (created with mode 0600) and returns a factory of handlers
    /// that share it, logging at trace level; nil when the file cannot be opened.
    package static func appending(to path: String) -> (@Sendable (String) -> LineFileLogHandler)? {
        let descriptor = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { return nil }
        return { label in LineFileLogHandler(descriptor: descriptor, label: label) }
    }

    init(descriptor: Int32, label: String) {
        self.descriptor = descriptor
        self.label = label
    }

    package subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    package func log(event: LogEvent) {
        let merged = metadata.merging(event.metadata ?? [:]) { $1 }
        var fields = merged.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        if let error = event.error { fields.append("error=\(error)") }
        let text = "\(getpid()) \(event.level) \(label): \(event.message) \(fields.joined(separator: " "))"
            .replacing("\n", with: "\\n") + "\n"
        var bytes = Array(text.utf8)
        _ = bytes.withUnsafeMutableBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
    }
}
