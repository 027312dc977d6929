/// Which storage a cache uses.
public enum BackendPolicy: String, Sendable, Hashable, CaseIterable, Codable {
    /// Inside a Flatpak or Snap whose Secret portal answers, the app's portal-keyed file keyring;
    /// else the Secret Service when a session bus and a provider are present, else the encrypted
    /// file (announced once at warning level). A locked keyring is reported, not a reason to
    /// fall back, unless the app allows it.
    case automatic = "auto"
    /// The Secret Service only; fails where there is none.
    case secretService = "secret-service"
    /// The encrypted file only.
    case file
}
