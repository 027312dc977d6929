@_spi(Backend) import TokenCache
@_spi(Backend) import TokenCacheCore

enum DemoBackend {
    /// The backend the demo uses, and why: automatic selection, as an app would use it
    /// (`--backend file|secret-service` to force one).
    static func open() throws -> (any CacheBackend, String) {
        let arguments = CommandLine.arguments
        let policy = arguments.firstIndex(of: "--backend").flatMap { index in
            arguments.indices.contains(index + 1) ? BackendPolicy(rawValue: arguments[index + 1]) : nil
        } ?? .automatic
        // The demo prints the reason itself, so the library need not announce the fallback.
        let selection = try BackendSelection.open(policy: policy, announcesFallback: false)
        return (selection.backend, selection.reason)
    }
}
