// A GNOME app (GTK 4 and libadwaita) on swift-tokencache, as MSAL's Quick Authentication sample:
// Sign in (system browser, or a device code without one), the accounts of the app's group with a
// switcher, the current account's avatar, name, email, tenant and token, Call Graph (/me), Sign
// out, and a log view with the library's logging; live updates through AccountsModel when the CLI
// or another app signs in or out of the group.
import CGtk
import Foundation
import Logging
import TokenCache
import TokenCacheModel

/// The app's registration and cache, from the environment (defaults: Microsoft's public cloud).
enum Settings {
    static let title = "TokenCache Desktop Sample"
    static let environment = ProcessInfo.processInfo.environment
    /// Register `http://localhost` as a redirect URI ("Mobile and desktop applications").
    static let clientID = environment["TOKENCACHE_SAMPLE_CLIENT_ID"] ?? "04b07795-8ddb-461a-bbee-02f9e1bf7b46"
    static let authority = environment["TOKENCACHE_SAMPLE_AUTHORITY"] ?? "https://login.microsoftonline.com/common"
    /// `TOKENCACHE_BACKEND` as given (nil: `auto`).
    static let backendName = environment["TOKENCACHE_BACKEND"]
    /// How often the group is checked for other apps' sign-ins and sign-outs.
    static let checkInterval = Duration.milliseconds(Int(environment["TOKENCACHE_SAMPLE_CHECK_MS"] ?? "") ?? 500)
    /// Whether a sign-in can be started at all: a client ID and an authority to ask.
    static var canSignIn: Bool { !clientID.isEmpty && !authority.isEmpty }
}

@main
struct DesktopApp {
    static func main() {
        LoggingSystem.bootstrap { _ in SwitchableLogHandler() }
        let application = adw_application_new("org.swifttokencache.DesktopApp", G_APPLICATION_NON_UNIQUE)
        tc_run_main_queue_in_glib()
        let activate: @convention(c) (UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) -> Void = { application, _ in
            MainActor.assumeIsolated { Launch.open(on: application) }
        }
        tc_signal_connect(UnsafeMutableRawPointer(application), "activate", unsafeBitCast(activate, to: GCallback.self), nil)
        let status = g_application_run(UnsafeMutablePointer(OpaquePointer(application)), CommandLine.argc, CommandLine.unsafeArgv)
        exit(status)
    }
}

enum Launch {
    /// The account window once the cache is open; meanwhile a window saying so, since opening may
    /// wait for the keyring's own prompt (an unlock dialog, or "Choose password for new keyring" in
    /// a session whose keyring has no 'default' collection), which must not stall GTK's main loop.
    /// When the cache cannot be opened, a window that says why and what to do.
    @MainActor
    static func open(on application: UnsafeMutableRawPointer?) {
        guard let backend = Settings.backendName.map({ BackendPolicy(rawValue: $0) }) ?? .automatic else {
            let values = BackendPolicy.allCases.map(\.rawValue).joined(separator: ", ")
            return fail(on: application, TokenCacheError(.invalidArgument, "TOKENCACHE_BACKEND=\(Settings.backendName ?? "") is not a backend.",
                                                         hint: "Set it to one of \(values), or unset it for auto."))
        }
        let waiting = StatusWindow.show(on: application, subtitle: "Opening the token cache", icon: "dialog-password-symbolic",
                                        title: "Opening the keyring…",
                                        description: "If your keyring asks for a password, answer it to continue.")
        Task { @MainActor in
            let opened = await Task.detached { () -> Result<PublicClientApplication, TokenCacheError> in
                do throws(TokenCacheError) {
                    let configuration = AppConfiguration(clientID: Settings.clientID, authority: Settings.authority, scopes: ["User.Read"],
                                                         backend: backend)
                    var options = PublicClientApplication.Options()
                    options.logger = Logger(label: "tokencache")
                    // A desktop app: the keyring's prompts are the user's to answer. An unlock dialog, and
                    // in a session whose keyring has no 'default' collection (gnome-keyring without a
                    // login keyring) "Choose password for new keyring", which creates it as libsecret does.
                    options.secretService.allowsUnlockPrompt = true
                    return .success(try PublicClientApplication(configuration: configuration, options: options))
                } catch {
                    return .failure(error)
                }
            }.value
            switch opened {
            case .success(let app):
                AccountWindow.shown = AccountWindow(application: application, model: AccountsModel(
                    application: app, scopes: ["User.Read"], checkingEvery: Settings.checkInterval))
            case .failure(let error):
                fail(on: application, error)
            }
            tc_window_destroy(waiting)
        }
    }

    @MainActor
    private static func fail(on application: UnsafeMutableRawPointer?, _ error: TokenCacheError) {
        FileHandle.standardError.write(Data("DesktopApp: \(error.message) \(error.hint ?? "")\n".utf8))
        StatusWindow.show(on: application, subtitle: "Cannot open the token cache", icon: "dialog-error-symbolic",
                          title: error.message, description: error.hint ?? "")
    }
}
