import Foundation
import Logging
import Synchronization

/// The "Logging" check box: the library's log lines (never secrets) go to standard error while
/// it is on, at debug level.
struct SwitchableLogHandler: LogHandler {
    static let enabled = Mutex(false)

    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .debug

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        guard Self.enabled.withLock({ $0 }) else { return }
        let fields = metadata.merging(event.metadata ?? [:]) { $1 }.map { "\($0)=\($1)" }.sorted().joined(separator: " ")
        FileHandle.standardError.write(Data("[\(event.level)] \(event.message) \(fields)\n".utf8))
    }
}
