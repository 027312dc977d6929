import FoundationEssentials
import EncryptedFileStore
import SandboxStore
import SecretServiceStore
@_spi(Backend) import TokenCacheCore
import TokenCacheDBus
import TokenCacheHTTP
import TokenCachePlatform
import Logging

/// The backend a policy chose, and why.
public struct BackendSelection: Sendable {
    /// The backend to use: apps open a store on it with `AccountStore(selection:group:options:)`.
    @_spi(Backend) public let backend: any CacheBackend
    /// Why this backend was chosen, for people (`tokencache doctor`).
    public let reason: String
    /// Whether `automatic` fell back to the encrypted file because no Secret Service is usable.
    public var isFallback = false

    /// Whether the automatic fallback was already announced in this process.
    private static let announced = Locked(false)

    /// Opens the backend a policy selects.
    ///
    /// - `automatic`: inside a Flatpak or Snap sandbox whose Secret portal answers, the app's
    ///   file keyring keyed by the portal (`PortalKeyringBackend`); else the Secret Service
    ///   when a session bus and a provider answer, else the
    ///   encrypted file, announced once per process at warning level unless `announcesFallback`
    ///   is false (a tool that tells people itself; ``isFallback`` says it happened).
    /// - `secretService`, `file`: that backend only.
    ///
    /// - Throws: `TokenCacheError` `backendUnavailable` when the policy's backend cannot work here.
    public static func open(policy: BackendPolicy, logger: Logger = Logger(label: "tokencache"),
                            fileDirectory: URL? = nil,
                            keySource: EncryptedFileBackend.KeySource = .keyFile(),
                            secretService: SecretServiceBackend.Options = .init(),
                            fallsBackWhenLocked: Bool = false,
                            announcesFallback: Bool = true) throws(TokenCacheError) -> BackendSelection {
        let file = { EncryptedFileBackend(directory: fileDirectory, keySource: keySource) }
        switch policy {
        case .file:
            return BackendSelection(backend: file(), reason: "the file backend was requested")
        case .secretService:
            return BackendSelection(backend: try SecretServiceBackend(options: secretService),
                                    reason: "the Secret Service backend was requested")
        case .automatic:
            // Sandboxed (Flatpak, Snap) with the Secret portal answering: decided as libsecret
            // decides, so the app's libsecret/oo7 code and we use the same keyring file. A portal
            // that refuses the secret is an error, never a silent fallback to another store.
            if let sandbox = sandboxWithSecretPortal() {
                return BackendSelection(backend: try PortalKeyringBackend(), reason: sandbox)
            }
            let problem: TokenCacheError
            do {
                let backend = try SecretServiceBackend(options: secretService)
                // Make sure the group's collection is reachable and unlocked: a locked keyring is
                // reported, not a reason to fall back silently (unless the app allows it).
                try backend.checkCollection(for: .universalStorage)
                return BackendSelection(backend: backend, reason: "a Secret Service provider answers on the session bus")
            } catch let error where fallsBack(on: error, whenLocked: fallsBackWhenLocked) {
                problem = error
            }
            let reason = "no usable Secret Service (\(problem.message)); using the encrypted file"
            if announcesFallback {
                let first = announced.withLock { done in
                    defer { done = true }
                    return !done
                }
                if first { logger.warning("Token cache falls back to the encrypted file", metadata: ["reason": .string(reason)]) }
            }
            return BackendSelection(backend: file(), reason: reason, isFallback: true)
        }
    }

    /// Whether `automatic` uses the encrypted file after opening the Secret Service failed with
    /// `error`: only when there is no Secret Service to use here (no session bus, no provider, a
    /// library missing), when no keyring can ever be created here (no 'default' collection and
    /// no display for the provider's "Choose password for new keyring" prompt:
    /// `defaultCollectionUncreatable`), or a locked keyring when the app allows it. Any other
    /// problem of a provider that answers (no 'default' collection where its prompt could be
    /// shown, a dismissed prompt) is reported, so the accounts never seem to vanish into another
    /// backend. A missing collection holds nothing, so falling back loses nothing; a locked one
    /// is never taken for missing. ``open(policy:logger:fileDirectory:keySource:secretService:fallsBackWhenLocked:announcesFallback:)``
    /// and ``diagnose(policy:group:fileDirectory:keySource:secretService:)`` both decide by it
    /// (docs/SecretService.md, "No 'default' collection").
    static func fallsBack(on error: TokenCacheError, whenLocked: Bool = false) -> Bool {
        [.noSessionBus, .noSecretService, .libgcryptMissing].contains(error.code)
            || error.reason == .defaultCollectionUncreatable
            || (whenLocked && error.code == .keyringLocked)
    }

    /// The other backend's copy of `group` when it holds entries, so a front end can say where
    /// accounts are after the backend changed (a migration, a keyring that came or went):
    /// beside the Secret Service the encrypted file, beside the encrypted file the Secret
    /// Service (read without prompts). Nil when it holds nothing or cannot be read here.
    package static func otherBackend(holding group: CacheGroup, besides backend: any CacheBackend,
                                     fileDirectory: URL? = nil, keySource: EncryptedFileBackend.KeySource = .keyFile(),
                                     secretService: SecretServiceBackend.Options = .init()) -> (policy: BackendPolicy, location: String, entries: Int)? {
        // `token --account` reads the Secret Service scoped to the account: the backend is its base (#59 item 5).
        if let scoped = backend as? AccountScopedBackend {
            return otherBackend(holding: group, besides: scoped.base, fileDirectory: fileDirectory, keySource: keySource, secretService: secretService)
        }
        let other: any CacheBackend
        let policy: BackendPolicy
        switch backend {
        case is SecretServiceBackend:
            let file = EncryptedFileBackend(directory: fileDirectory, keySource: keySource)
            // No file: nothing to say, and no key file created by looking.
            guard FileManager.default.fileExists(atPath: file.fileURL(for: group).path) else { return nil }
            (other, policy) = (file, .file)
        case is EncryptedFileBackend:
            var options = secretService
            options.allowsUnlockPrompt = false
            options.createsDefaultCollection = false
            guard let keyring = try? SecretServiceBackend(options: options) else { return nil }
            (other, policy) = (keyring, .secretService)
        default:
            return nil
        }
        guard let count = try? other.load(group).entries.count, count > 0 else { return nil }
        return (policy, other.location(of: group), count)
    }

    /// Whether `automatic` would open a backend of `policy`'s kind here (no prompt, nothing announced).
    package static func automaticChooses(_ policy: BackendPolicy, secretService: SecretServiceBackend.Options = .init()) -> Bool {
        guard let chosen = try? open(policy: .automatic, secretService: secretService, announcesFallback: false).backend else { return false }
        switch policy {
        case .file: return chosen is EncryptedFileBackend
        case .secretService: return chosen is SecretServiceBackend
        case .automatic: return true
        }
    }

    /// The sandboxed app's portal-keyed file keyring, the backend `automatic` picks inside a
    /// Flatpak or Snap sandbox, opened by itself: the destination of a one-time
    /// `CacheMigration.migrate(from:to:)` from the host's Secret Service or the encrypted
    /// file (as `oo7::migrate` does; ours verifies the copy before removing the source).
    /// - Throws: `TokenCacheError` `backendUnavailable` outside a sandbox (the host's keyring
    ///   file would be keyed by no app); `portalCancelled`, `portalFailed`, `noSessionBus`, `timedOut`.
    public static func openSandboxKeyring(portalTimeout: Double = 60) throws(TokenCacheError) -> PortalKeyringBackend {
        guard SecretPortal.isSandboxed() else {
            throw TokenCacheError(.backendUnavailable, "The sandbox keyring exists only inside a Flatpak or Snap sandbox (no /.flatpak-info, no SNAP_NAME).",
                                  hint: "Run the migration inside the app's sandbox, e.g. flatpak run --command=tokencache APP_ID migrate ...")
        }
        return try PortalKeyringBackend(portalTimeout: portalTimeout)
    }

    /// Why the portal-keyed file keyring is the automatic choice here, or nil when it is not:
    /// libsecret's test (`/.flatpak-info` or `SNAP_NAME`, and the portal's Secret `version` is 1).
    static func sandboxWithSecretPortal() -> String? {
        guard SecretPortal.isSandboxed(), case .success(1) = SecretPortal.version() else { return nil }
        return "sandboxed (\(SecretPortal.sandboxKind)) and the Secret portal answers (version 1)"
    }

    /// Checks what the policy depends on without changing anything.
    package static func diagnose(policy: BackendPolicy, group: CacheGroup = .universalStorage,
                                fileDirectory: URL? = nil,
                                keySource: EncryptedFileBackend.KeySource = .keyFile(),
                                secretService: SecretServiceBackend.Options = .init()) -> BackendDiagnosis {
        var checks: [BackendDiagnosis.Check] = []
        let environment = ProcessInfo.processInfo.environment
        // Sandboxed apps: what libsecret's choice rests on, and the keyring it leads to.
        if SecretPortal.isSandboxed() {
            let version = SecretPortal.version()
            checks.append(.init(name: "sandbox", status: .info, detail: SecretPortal.sandboxKind))
            switch version {
            case .success(let number):
                checks.append(.init(name: "Secret portal", status: number == 1 ? .ok : .warning, detail: "version \(number)"))
            case .failure(let error):
                checks.append(.init(name: "Secret portal", status: .warning, detail: error.message))
            }
            if policy == .automatic, case .success(1) = version {
                do {
                    let backend = try PortalKeyringBackend()
                    let count = try backend.load(group).entries.count
                    checks.append(.init(name: "file keyring", status: .ok, detail: "\(backend.path): \(count) entries in group \(group)"))
                    return BackendDiagnosis(policy: policy, selected: backend.location(of: group),
                                            reason: sandboxWithSecretPortal() ?? "sandboxed", checks: checks, fix: nil)
                } catch {
                    checks.append(.init(name: "file keyring", status: .failed, detail: error.message))
                    return BackendDiagnosis(policy: policy, selected: nil, reason: "sandboxed, but the portal-keyed keyring cannot be used",
                                            checks: checks, fix: error.hint, problem: error)
                }
            }
        }
        let bus = environment["DBUS_SESSION_BUS_ADDRESS"]
        checks.append(.init(name: "session bus", status: bus == nil ? .warning : .info,
                            detail: bus.map { "DBUS_SESSION_BUS_ADDRESS=\($0)" } ?? "DBUS_SESSION_BUS_ADDRESS is not set"))
        var secretServiceProblem: TokenCacheError?
        var secretServiceLocation: String?
        do {
            // A look changes nothing: no default collection is created (without a display the
            // answer is the one open() reaches after its prompt is dismissed: uncreatable).
            var lookOptions = secretService
            lookOptions.createsDefaultCollection = false
            let backend = try SecretServiceBackend(options: lookOptions)
            let provider = backend.provider
            checks.append(.init(name: "Secret Service provider", status: .info,
                                detail: [provider.product, provider.process].compactMap { $0 }.joined(separator: ": ")
                                    + (provider.needs.map { "; needs: \($0)" } ?? "")))
            try backend.checkCollection(for: group)
            let path = try backend.resolvedCollectionPath(for: group)
            secretServiceLocation = backend.location(of: group)
            checks.append(.init(name: "Secret Service", status: .ok, detail: "provider answers; \(backend.location(of: group)) -> \(path), unlocked"))
            let count = try backend.load(group).entries.count
            checks.append(.init(name: "Secret Service items", status: .ok, detail: "\(count) entries in group \(group)"))
        } catch {
            secretServiceProblem = error
            checks.append(.init(name: "Secret Service", status: policy == .secretService ? .failed : .warning,
                                detail: error.message))
        }
        let hasLibgcrypt = SecretServiceBackend.isLibgcryptLoadable
        checks.append(.init(name: "libgcrypt", status: hasLibgcrypt ? .info : policy == .secretService ? .failed : .warning,
                            detail: SecretServiceBackend.libgcryptDescription + " (Secret Service transfer)"))
        // Where the encrypted file is the normal backend (asked for, or a headless machine with no
        // session bus or no provider on it), what the Secret Service lacks is said, not warned of (#59 item 11).
        let fileIsNormal = policy == .file
            || (policy == .automatic && secretServiceProblem.map { [.noSessionBus, .noSecretService].contains($0.code) } ?? false)
        if fileIsNormal {
            for index in checks.indices where ["session bus", "Secret Service", "libgcrypt"].contains(checks[index].name)
                && checks[index].status == .warning {
                checks[index].status = .info
            }
        }
        let file = EncryptedFileBackend(directory: fileDirectory, keySource: keySource)
        checks.append(contentsOf: file.diagnose(group))
        // The encrypted file cannot work without libcrypto: a failure when the file would be used.
        let fileWouldBeUsed = policy == .file || (policy == .automatic && secretServiceProblem != nil)
        let libcrypto = EncryptedFileBackend.libcryptoStatus
        checks.append(.init(name: "OpenSSL", status: libcrypto.isLoadable ? .info : fileWouldBeUsed ? .failed : .warning,
                            detail: libcrypto.description + " (encrypted file)"))
        // Only token refresh needs libcurl: without it the cache works and refresh fails, typed.
        checks.append(.init(name: "libcurl", status: (try? LibCurl.shared()) != nil ? .info : .warning,
                            detail: LibCurl.description + " (token refresh)"))

        let fileFailure = checks.first { $0.status == .failed && $0.name != "Secret Service" }
        switch policy {
        case .secretService:
            return BackendDiagnosis(policy: policy, selected: secretServiceLocation,
                                    reason: secretServiceProblem.map { "the Secret Service cannot be used: \($0.message)" }
                                        ?? "the Secret Service backend was requested",
                                    checks: checks, fix: secretServiceProblem?.hint, problem: secretServiceProblem)
        case .automatic where secretServiceProblem == nil:
            return BackendDiagnosis(policy: policy, selected: secretServiceLocation,
                                    reason: "a Secret Service provider answers on the session bus", checks: checks, fix: nil)
        case .automatic where secretServiceProblem.map { !fallsBack(on: $0) } ?? false:
            // What open() does too: a provider that answers but cannot be used is an error, not a fallback.
            let problem = secretServiceProblem!
            return BackendDiagnosis(policy: policy, selected: nil,
                                    reason: problem.code == .keyringLocked ? "the keyring is locked; automatic selection does not fall back silently"
                                        : "a Secret Service provider answers but cannot be used (\(problem.message)); automatic selection does not fall back to the encrypted file",
                                    checks: checks, fix: problem.hint, problem: problem)
        case .file, .automatic:
            let reason = policy == .file ? "the file backend was requested"
                : "no usable Secret Service (\(secretServiceProblem?.message ?? "")); using the encrypted file"
            return BackendDiagnosis(policy: policy, selected: fileFailure == nil ? file.location(of: group) : nil, reason: reason,
                                    checks: checks, fix: fileFailure.map { "Fix \($0.name): \($0.detail)" })
        }
    }
}

extension AccountStore {
    /// Opens `group` on the backend `policy` selects: the one place a store is opened for an app
    /// (``PublicClientApplication/init(configuration:options:)``), the C interface and the CLI,
    /// so they pick the same backend for the same settings.
    /// - Parameter account: on the Secret Service, a store that reads only this account's items
    ///   (`AccountScopedBackend`: cheaper for one lookup); elsewhere the whole group.
    /// - Parameter keySource: the encrypted file's; nil: the one the cache has (sealed to the TPM,
    ///   a passphrase from the session keyring, else the key file: `EncryptedFileBackend.defaultKeySource(directory:tcti:group:)`).
    /// - Returns: the store, and the selection it was made from (why this backend; a fallback).
    package static func open(group: CacheGroup, policy: BackendPolicy, logger: Logger, fileDirectory: URL? = nil,
                             keySource: EncryptedFileBackend.KeySource? = nil,
                             secretService: SecretServiceBackend.Options = .init(), announcesFallback: Bool = true,
                             scopedTo account: String? = nil) throws(TokenCacheError) -> (store: AccountStore, selection: BackendSelection) {
        let selection = try BackendSelection.open(policy: policy, logger: logger, fileDirectory: fileDirectory,
                                                  keySource: keySource ?? EncryptedFileBackend.defaultKeySource(directory: fileDirectory, group: group),
                                                  secretService: secretService, announcesFallback: announcesFallback)
        var backend = selection.backend
        if let account, backend is SecretServiceBackend {
            backend = try AccountScopedBackend(backend, account: account, in: group)
        }
        var options = AccountStore.Options()
        options.logger = logger
        return (AccountStore(backend: backend, group: group, options: options), selection)
    }
}


extension AccountStore {
    /// Opens the store for a group on the backend a policy selected (``BackendSelection/open(policy:logger:fileDirectory:keySource:secretService:fallsBackWhenLocked:announcesFallback:)``).
    /// Nothing is read until the first call.
    public convenience init(selection: BackendSelection, group: CacheGroup = .universalStorage, options: Options = Options()) {
        self.init(backend: selection.backend, group: group, options: options)
    }
}
