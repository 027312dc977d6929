import Foundation
import Logging
import Synchronization

/// The "Library logging" switch of the Log page: the library's log lines (never secrets) go to
/// the log view and to standard error while it is on, at debug level.
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
        let line = "[\(event.level)] \(event.message) \(fields)"
        FileHandle.standardError.write(Data((line + "\n").utf8))
        // The library logs from any thread; the view is the main actor's.
        Task { @MainActor in LogPage.shown?.append(line) }
    }
}
