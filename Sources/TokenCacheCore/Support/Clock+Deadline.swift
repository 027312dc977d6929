extension Clock where Duration == Swift.Duration {
    /// A deadline `timeout` from now on this clock, as a test of whether it has passed: usable
    /// through `any Clock<Duration>`, whose instants cannot be compared.
    package func deadline(after timeout: Duration) -> @Sendable () -> Bool {
        let end = now.advanced(by: timeout)
        return { [self] in now >= end }
    }
}

extension Clock where Duration == Swift.Duration {
    /// The time left until `timeout` from now on this clock (zero or less once it passed),
    /// usable through `any Clock<Duration>`.
    package func countdown(from timeout: Duration) -> @Sendable () -> Duration {
        let end = now.advanced(by: timeout)
        return { [self] in now.duration(to: end) }
    }
}
