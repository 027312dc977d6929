import TokenCache

enum DemoBackend {
    /// The backend the demo uses, and why.
    /// TODO(issue 3/4): automatic selection (Secret Service, else encrypted file) once those
    /// backends land. Until then the demo keeps the cache in process memory.
    static func open() throws -> (any CacheBackend, String) {
        (InMemoryBackend(), "in-memory: the Secret Service and encrypted-file backends are not built yet")
    }
}
