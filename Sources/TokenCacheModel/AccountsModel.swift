import FoundationEssentials
import Observation
import TokenCache

/// The accounts of one app in its group, as a UI binds to them: the app's accounts, the current
/// one, its photo and the sign-in state, kept up to date from the store's change stream
/// (``PublicClientApplication/accountChanges(checkingEvery:)``), so an account another app or
/// process signs in or out appears or disappears without a reload. MSAL's SwiftUI samples keep
/// the same state in an `@Observable` `AppModel` injected through the environment.
///
/// Main-actor isolated, as UI state is: read and call it from the UI's thread; its async
/// methods do their work off it and come back to publish.
///
/// ```swift
/// @main struct NotesApp: App {
///     @State private var model = AccountsModel(application: app, scopes: ["User.Read"])
///     var body: some Scene {
///         WindowGroup { ContentView().environment(model).task { model.start() } }
///     }
/// }
/// struct ContentView: View {
///     @Environment(AccountsModel.self) private var model
///     var body: some View {
///         if let account = model.currentAccount {
///             Text(account.username)
///             Button("Sign out") { Task { try? await model.signOut() } }
///         } else {
///             Button("Sign in") { Task { try? await model.signIn() } }
///         }
///     }
/// }
/// ```
@MainActor @Observable
public final class AccountsModel {
    /// Where the app is with signing in.
    public enum SignInState: Sendable, Equatable {
        /// The app has no current account.
        case signedOut
        /// A sign-in (browser or device code) is under way.
        case signingIn
        /// ``AccountsModel/currentAccount`` is signed in.
        case signedIn
    }

    /// How ``AccountsModel/signIn(method:)`` signs the user in.
    public enum SignInMethod: Sendable {
        /// The system browser; the device code flow when no browser can be opened.
        case automatic
        /// The system browser only.
        case browser(InteractiveTokenParameters? = nil)
        /// A code entered on another device (``AccountsModel/deviceCodeMessage`` says which).
        case deviceCode
    }

    /// The app the model signs in and asks tokens of.
    @ObservationIgnored public let application: PublicClientApplication
    /// The scopes a sign-in asks for.
    @ObservationIgnored public let scopes: [String]
    @ObservationIgnored private let interval: Duration
    @ObservationIgnored private var watching: Task<Void, Never>?
    @ObservationIgnored private var photoTask: Task<Void, Never>?
    @ObservationIgnored private var signingIn = false

    /// The accounts the app can use, as the store has them now.
    public private(set) var accounts: [CachedAccount] = []
    /// The account the UI shows: the one signed in last, else the first of ``accounts``.
    public private(set) var currentAccount: CachedAccount?
    /// The current account's Microsoft Graph photo, once fetched (nil: none, or not yet).
    public private(set) var photo: AccountPhoto?
    /// Where the app is with signing in.
    public private(set) var signInState: SignInState = .signedOut
    /// While a device code sign-in waits: what to show the user.
    public private(set) var deviceCodeMessage: DeviceCodeMessage?
    /// The last error of watching the store, signing in or out, or fetching the photo.
    public private(set) var lastError: TokenCacheError?

    /// A model of `application`'s accounts; call ``start()`` to begin following the store.
    /// - Parameters:
    ///   - scopes: what a sign-in asks for.
    ///   - interval: how often the store's revision is checked for other processes' changes.
    public init(application: PublicClientApplication, scopes: [String], checkingEvery interval: Duration = .seconds(1)) {
        self.application = application
        self.scopes = scopes
        self.interval = interval
    }

    /// Starts following the store (the accounts as they are now, then each change); a second
    /// call does nothing until ``stop()``.
    public func start() {
        guard watching == nil else { return }
        let changes = application.accountChanges(checkingEvery: interval)
        watching = Task { [weak self] in
            do throws(TokenCacheError) {
                for try await accounts in changes {
                    guard let self else { return }
                    self.show(accounts)
                }
            } catch {
                self?.lastError = error
            }
        }
    }

    /// Stops following the store.
    public func stop() {
        watching?.cancel()
        watching = nil
        photoTask?.cancel()
    }

    /// Signs the user in and makes the account current; every app of the group sees it.
    /// - Throws: what ``PublicClientApplication/acquireToken(_:)`` or
    ///   ``PublicClientApplication/acquireTokenWithDeviceCode(_:onCode:)`` throws (also kept in ``lastError``).
    @discardableResult
    public func signIn(method: SignInMethod = .automatic) async throws(TokenCacheError) -> TokenResult {
        signingIn = true
        updateState()
        lastError = nil
        defer {
            deviceCodeMessage = nil
            signingIn = false
            updateState()
        }
        do {
            let result = try await signedIn(method)
            try await reload(current: result.account)
            return result
        } catch {
            lastError = error
            throw error
        }
    }

    private func signedIn(_ method: SignInMethod) async throws(TokenCacheError) -> TokenResult {
        switch method {
        case .browser(let parameters):
            return try await application.acquireToken(parameters ?? InteractiveTokenParameters(scopes: scopes))
        case .deviceCode:
            return try await application.acquireTokenWithDeviceCode(DeviceCodeParameters(scopes: scopes)) { message in
                Task { @MainActor [weak self] in self?.deviceCodeMessage = message }
            }
        case .automatic:
            do {
                return try await application.acquireToken(InteractiveTokenParameters(scopes: scopes))
            } catch where error.code == .browserUnavailable {
                return try await signedIn(.deviceCode)
            }
        }
    }

    /// Signs this app out of the current account (other apps of the group keep it, as MSAL's
    /// `remove(account)`); the next account, if any, becomes current.
    public func signOut() async throws(TokenCacheError) {
        guard let account = currentAccount else { return }
        do {
            try await application.remove(account)
            try await reload(current: nil)
        } catch {
            lastError = error
            throw error
        }
    }

    /// A token for the current account without user interaction (the model's scopes when nil).
    /// - Throws: `notFound` (reason ``TokenCacheError/Reason/noAccount``) with no current
    ///   account, and what ``PublicClientApplication/acquireTokenSilent(_:)`` throws.
    public func token(scopes: [String]? = nil) async throws(TokenCacheError) -> TokenResult {
        guard let account = currentAccount else {
            throw TokenCacheError(.notFound, "No account is signed in.", hint: "Sign in first", reason: .noAccount)
        }
        return try await application.acquireTokenSilent(scopes: scopes ?? self.scopes, account: account)
    }

    /// Makes one of ``accounts`` current.
    public func select(_ account: CachedAccount) {
        guard accounts.contains(account) else { return }
        setCurrent(account)
    }

    /// Fetches the current account's photo again from Graph.
    public func refreshPhoto() {
        loadPhoto(refresh: true)
    }

    /// Reads the accounts now (not at the next check) and shows them, with `current` current.
    private func reload(current: CachedAccount?) async throws(TokenCacheError) {
        let accounts = try await application.accounts()
        show(accounts, preferring: current)
    }

    private func show(_ accounts: [CachedAccount], preferring preferred: CachedAccount? = nil) {
        if self.accounts != accounts { self.accounts = accounts }
        let keep = [preferred, currentAccount].compactMap { $0 }.first { wanted in accounts.contains { $0.id == wanted.id } }
        setCurrent(keep.flatMap { wanted in accounts.first { $0.id == wanted.id } } ?? accounts.first)
    }

    private func setCurrent(_ account: CachedAccount?) {
        let changed = account?.id != currentAccount?.id
        if account != currentAccount { currentAccount = account }
        updateState()
        if changed {
            photo = nil
            loadPhoto(refresh: false)
        }
    }

    /// Writes the state only when it changes, so observers hear of real changes only.
    private func updateState() {
        let state: SignInState = signingIn ? .signingIn : currentAccount == nil ? .signedOut : .signedIn
        if signInState != state { signInState = state }
    }

    private func loadPhoto(refresh: Bool) {
        photoTask?.cancel()
        guard let account = currentAccount else { return }
        let application = self.application
        photoTask = Task { [weak self] in
            do throws(TokenCacheError) {
                let photo = try await application.photo(for: account, refresh: refresh)
                guard !Task.isCancelled, let self, self.currentAccount?.id == account.id else { return }
                self.photo = photo
            } catch {
                guard !Task.isCancelled else { return }
                self?.lastError = error
            }
        }
    }
}
