/// When an app's silent requests go to the identity broker on the session bus instead of this
/// cache (`PublicClientApplication.Options.broker`; the CLI's `--broker`, C and Python's flag).
/// The engine applies it (``TokenEngine/brokerNow()``).
public enum BrokerUse: String, Sendable, Hashable, CaseIterable {
    /// Never: tokens come from this cache (the default).
    case never
    /// Through the broker when one answers (other than `tokencache broker`); else from this cache.
    case whenAvailable = "when-available"
    /// Through the broker only: without one the request fails (`brokerUnavailable`).
    case always
}
