// A GTK 4 desktop app on swift-tokencache, as MSAL's Quick Authentication sample: Sign in (system
// browser, or a device code without one), the account's name, email and photo, Call Graph (/me),
// Sign out, a logging toggle; and live updates through AccountsModel when the CLI or another app
// signs in or out of the group.
import CGtk
import Foundation
import Logging
import Observation
import TokenCache
import TokenCacheModel

/// The app's registration and cache, from the environment (defaults: Microsoft's public cloud).
enum Settings {
    static let environment = ProcessInfo.processInfo.environment
    /// Register `http://localhost` as a redirect URI ("Mobile and desktop applications").
    static let clientID = environment["TOKENCACHE_SAMPLE_CLIENT_ID"] ?? "04b07795-8ddb-461a-bbee-02f9e1bf7b46"
    static let authority = environment["TOKENCACHE_SAMPLE_AUTHORITY"] ?? "https://login.microsoftonline.com/common"
    static let backend = environment["TOKENCACHE_BACKEND"].flatMap(BackendPolicy.init(rawValue:)) ?? .automatic
    /// How often the group is checked for other apps' sign-ins and sign-outs.
    static let checkInterval = Duration.milliseconds(Int(environment["TOKENCACHE_SAMPLE_CHECK_MS"] ?? "") ?? 500)
}

@main
struct DesktopApp {
    static func main() {
        LoggingSystem.bootstrap { _ in SwitchableLogHandler() }
        let application = gtk_application_new("org.swifttokencache.DesktopApp", G_APPLICATION_NON_UNIQUE)
        tc_run_main_queue_in_glib()
        let activate: @convention(c) (UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) -> Void = { application, _ in
            MainActor.assumeIsolated { Window.open(on: application) }
        }
        tc_signal_connect(UnsafeMutableRawPointer(application), "activate", unsafeBitCast(activate, to: GCallback.self), nil)
        let status = g_application_run(UnsafeMutablePointer(OpaquePointer(application)), CommandLine.argc, CommandLine.unsafeArgv)
        exit(status)
    }
}

/// The window: widgets bound to the model, redrawn whenever what they read changes.
@MainActor
final class Window {
    static var shown: Window?

    let model: AccountsModel
    let window: UnsafeMutablePointer<GtkWidget>
    let status = gtk_label_new("Starting…")!
    let name = gtk_label_new("Name: –")!
    let email = gtk_label_new("Email: –")!
    let photo = gtk_picture_new()!
    let deviceCode = gtk_label_new("")!
    let graphResult = gtk_label_new("")!
    let signIn = gtk_button_new_with_label("Sign in")!
    let callGraph = gtk_button_new_with_label("Call Graph")!
    let signOut = gtk_button_new_with_label("Sign out")!
    let logging = gtk_toggle_button_new_with_label("Logging")!
    private var actions: [Action] = []

    static func open(on application: UnsafeMutableRawPointer?) {
        do {
            let configuration = AppConfiguration(clientID: Settings.clientID, authority: Settings.authority, scopes: ["User.Read"],
                                                 backend: Settings.backend)
            var options = PublicClientApplication.Options()
            options.logger = Logger(label: "tokencache")
            // A desktop app: the keyring's prompts are the user's to answer. An unlock dialog, and
            // in a session whose keyring has no 'default' collection (gnome-keyring without a
            // login keyring) "Choose password for new keyring", which creates it as libsecret does.
            options.secretService.allowsUnlockPrompt = true
            let app = try PublicClientApplication(configuration: configuration, options: options)
            shown = Window(application: application, model: AccountsModel(application: app, scopes: ["User.Read"],
                                                                          checkingEvery: Settings.checkInterval))
        } catch {
            FileHandle.standardError.write(Data("DesktopApp: \(error.message) \(error.hint ?? "")\n".utf8))
            exit(1)
        }
    }

    init(application: UnsafeMutableRawPointer?, model: AccountsModel) {
        self.model = model
        window = tc_application_window_new(application)
        tc_window_set_title(window, "TokenCache Desktop Sample")
        tc_window_set_default_size(window, 520, 420)
        let box = gtk_box_new(GTK_ORIENTATION_VERTICAL, 8)!
        for side in [gtk_widget_set_margin_top, gtk_widget_set_margin_bottom, gtk_widget_set_margin_start, gtk_widget_set_margin_end] {
            side(box, 16)
        }
        gtk_widget_set_size_request(photo, 96, 96)
        gtk_widget_set_halign(photo, GTK_ALIGN_START)
        tc_set_accessible_label(photo, "Account photo")
        for label in [status, name, email, deviceCode, graphResult] { tc_label_set_wrap(label) }
        tc_set_accessible_label(graphResult, "Graph result")
        let buttons = gtk_box_new(GTK_ORIENTATION_HORIZONTAL, 8)!
        for button in [signIn, callGraph, signOut, logging] { tc_box_append(buttons, button) }
        for widget in [status, photo, name, email, buttons, deviceCode, graphResult] { tc_box_append(box, widget) }
        tc_window_set_child(window, box)

        connect(signIn, "clicked") { [model] in Task { try? await model.signIn() } }
        connect(signOut, "clicked") { [model] in Task { try? await model.signOut() } }
        connect(callGraph, "clicked") { [weak self] in self?.showGraphProfile() }
        connect(logging, "toggled") { [weak self] in
            guard let self else { return }
            SwitchableLogHandler.enabled.withLock { $0 = tc_toggle_button_get_active(self.logging) != 0 }
        }
        render()
        model.start()
        tc_window_present(window)
    }

    /// Draws the model, and draws again when anything it read changes (Observation).
    private func render() {
        withObservationTracking {
            draw()
        } onChange: {
            Task { @MainActor [weak self] in self?.render() }
        }
    }

    private func draw() {
        let account = model.currentAccount
        let state = switch model.signInState {
        case .signedOut: "Signed out"
        case .signingIn: "Signing in…"
        case .signedIn: "Signed in"
        }
        tc_label_set_text(status, model.lastError.map { "\(state) — \($0.message)" } ?? state)
        tc_label_set_text(name, "Name: \(account.map { $0.claims?.name ?? $0.username } ?? "–")")
        tc_label_set_text(email, "Email: \(account?.username ?? "–")")
        let image = model.photo
        _ = image.map { photo in photo.data.withUnsafeBytes { tc_picture_set_image(self.photo, $0.baseAddress, gsize($0.count)) } }
            ?? tc_picture_set_image(photo, nil, 0)
        tc_label_set_text(deviceCode, model.deviceCodeMessage?.message ?? "")
        if account == nil { tc_label_set_text(graphResult, "") }
        gtk_widget_set_sensitive(signIn, model.signInState == .signingIn ? 0 : 1)
        gtk_widget_set_sensitive(callGraph, account == nil ? 0 : 1)
        gtk_widget_set_sensitive(signOut, account == nil ? 0 : 1)
    }

    /// Call Graph: `/me` with the current account's silent token, shown as Graph returned it.
    private func showGraphProfile() {
        guard let account = model.currentAccount else { return }
        let app = model.application
        tc_label_set_text(graphResult, "Calling Graph…")
        Task { [weak self] in
            let text: String
            do throws(TokenCacheError) {
                text = String(decoding: try await app.graphProfile(for: account), as: UTF8.self)
            } catch {
                text = "Graph: \(error.message)"
            }
            guard let self else { return }
            tc_label_set_text(self.graphResult, text)
        }
    }

    /// A GTK signal handled by a Swift closure (kept alive by the window).
    private func connect(_ widget: UnsafeMutablePointer<GtkWidget>, _ signal: String, _ body: @escaping @MainActor @Sendable () -> Void) {
        let action = Action(body)
        actions.append(action)
        let handler: @convention(c) (UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) -> Void = { _, data in
            let action = Unmanaged<Action>.fromOpaque(data!).takeUnretainedValue()
            MainActor.assumeIsolated { action.body() }
        }
        tc_signal_connect(UnsafeMutableRawPointer(widget), signal, unsafeBitCast(handler, to: GCallback.self),
                          Unmanaged.passUnretained(action).toOpaque())
    }
}

/// A signal handler's closure, as GTK's user data.
final class Action: Sendable {
    let body: @MainActor @Sendable () -> Void
    init(_ body: @escaping @MainActor @Sendable () -> Void) { self.body = body }
}
