import CGtk
import Foundation
import Observation
import TokenCache
import TokenCacheModel

/// The window: a header bar with the app's title, the sign-in state and Sign in; an Account page
/// (the avatar, rows for the current account and its token, Call Graph, the accounts of the group
/// with a switcher) and a Log page; errors as toasts. Widgets are bound to the model and redrawn
/// whenever what they read changes. Which account is current, and what a sign-in or sign-out does,
/// is the model's to decide; the window only shows it and forwards the user's clicks.
@MainActor
final class AccountWindow {
    static var shown: AccountWindow?

    let model: AccountsModel
    let window: UnsafeMutablePointer<GtkWidget>
    private let title: UnsafeMutablePointer<GtkWidget>
    private let toasts = adw_toast_overlay_new()!
    private let signIn = Widgets.button("Sign in", classes: ["suggested-action"])
    private let avatar = adw_avatar_new(96, nil, 1)!
    private let deviceCode = gtk_label_new("")!
    private let nameRow = tc_action_row_new("Name")!
    private let emailRow = tc_action_row_new("Email")!
    private let tenantRow = tc_action_row_new("Tenant")!
    private let expiryRow = tc_action_row_new("Token expires")!
    private let scopesRow = tc_action_row_new("Scopes")!
    private let graphRow = tc_action_row_new("Profile (/me)")!
    private let callGraph = Widgets.button("Call Graph", classes: ["flat"])
    private let signOut = Widgets.button("Sign out", classes: ["flat"])
    private let accountsGroup = tc_preferences_group_new("Accounts", "Signed in to this app's group: switch to use another")!
    private let log = LogPage()
    private var actions: [Action] = []
    /// The switcher's rows, and what they were built for (the accounts' IDs and the current one).
    private var accountRows: [UnsafeMutablePointer<GtkWidget>] = []
    private var accountRowsShow: [String] = []
    /// The error last toasted, so a redraw does not toast it again.
    private var shownError: String?
    /// The current account's token (for its expiry and scopes), and the account it was asked for.
    private var token: TokenResult?
    private var tokenAccountID: String?
    private var tokenTask: Task<Void, Never>?
    /// The account whose Graph profile the Graph row shows.
    private var graphAccountID: String?

    init(application: UnsafeMutableRawPointer?, model: AccountsModel) {
        self.model = model
        window = tc_application_window_new(application)
        tc_window_set_title(window, Settings.title)
        tc_window_set_default_size(window, 600, 880)
        let header = Widgets.headerBar(subtitle: "Starting…")
        title = header.title
        tc_header_bar_pack_start(header.bar, signIn)

        let stack = adw_view_stack_new()!
        tc_view_stack_add(stack, Widgets.page(accountPage()), "account", "Account", "avatar-default-symbolic")
        tc_view_stack_add(stack, log.widget, "log", "Log", "utilities-terminal-symbolic")
        tc_toast_overlay_set_child(toasts, stack)
        gtk_widget_set_vexpand(toasts, 1)
        let switcher = adw_view_switcher_bar_new()!
        tc_view_switcher_bar_show(switcher, stack)
        let content = gtk_box_new(GTK_ORIENTATION_VERTICAL, 0)!
        for widget in [header.bar, toasts, switcher] { tc_box_append(content, widget) }
        tc_window_set_content(window, content)
        LogPage.shown = log

        actions.append(Signals.connect(signIn, "clicked") { [weak self] in self?.startSignIn() })
        actions.append(Signals.connect(signOut, "clicked") { [weak self] in self?.startSignOut() })
        actions.append(Signals.connect(callGraph, "clicked") { [weak self] in self?.showGraphProfile() })
        drawToken()
        log.append("Client \(Settings.clientID) at \(Settings.authority), backend \(Settings.backendName ?? "auto")")
        render()
        model.start()
        tc_window_present(window)
    }

    private func accountPage() -> UnsafeMutablePointer<GtkWidget> {
        let page = Widgets.box(GTK_ORIENTATION_VERTICAL, spacing: 18, margin: 24)
        gtk_widget_set_halign(avatar, GTK_ALIGN_CENTER)
        tc_set_accessible_label(avatar, "Account photo")
        tc_label_set_wrap(deviceCode)
        tc_label_set_selectable(deviceCode)
        gtk_widget_set_visible(deviceCode, 0)
        let account = tc_preferences_group_new("Account", nil)!
        for row in [nameRow, emailRow, tenantRow, expiryRow, scopesRow] {
            gtk_widget_add_css_class(row, "property")
            tc_preferences_group_add(account, row)
        }
        tc_preferences_group_set_header_suffix(account, signOut)
        let graph = tc_preferences_group_new("Microsoft Graph", nil)!
        gtk_widget_add_css_class(graphRow, "property")
        tc_preferences_group_add(graph, graphRow)
        tc_preferences_group_set_header_suffix(graph, callGraph)
        gtk_widget_set_visible(accountsGroup, 0)
        for widget in [avatar, deviceCode, account, graph, accountsGroup] { tc_box_append(page, widget) }
        return page
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
        case .signedIn: "Signed in as \(account?.username ?? "")"
        }
        tc_window_title_set_subtitle(title, state)
        let name = account.map { $0.claims?.name ?? $0.username }
        let photo = model.photo
        _ = photo.map { photo in photo.data.withUnsafeBytes { tc_avatar_show(avatar, name ?? "", $0.baseAddress, gsize($0.count)) } }
            ?? tc_avatar_show(avatar, name ?? "", nil, 0)
        tc_action_row_set_subtitle(nameRow, name ?? "–")
        tc_action_row_set_subtitle(emailRow, account?.username ?? "–")
        tc_action_row_set_subtitle(tenantRow, account.flatMap { $0.claims?.tenantID ?? $0.homeTenantID } ?? "–")
        if account?.id != tokenAccountID { loadToken(for: account) }
        let code = model.deviceCodeMessage?.message
        tc_label_set_text(deviceCode, code ?? "")
        gtk_widget_set_visible(deviceCode, code == nil ? 0 : 1)
        if account?.id != graphAccountID {
            graphAccountID = nil
            tc_action_row_set_subtitle(graphRow, "–")
        }
        // Sign in while there is no account; with one, the same button adds another to the group.
        tc_button_set_label(signIn, account == nil ? "Sign in" : "Add account")
        gtk_widget_set_sensitive(signIn, Settings.canSignIn && model.signInState != .signingIn ? 1 : 0)
        gtk_widget_set_sensitive(callGraph, account == nil ? 0 : 1)
        gtk_widget_set_sensitive(signOut, account == nil ? 0 : 1)
        drawSwitcher(accounts: model.accounts, current: account)
        let problem = model.lastError.map { error in [error.message, error.hint].compactMap { $0 }.joined(separator: " ") }
        if problem != shownError {
            shownError = problem
            if let problem { report(problem) }
        }
    }

    /// The group's accounts, the current one checked and each other one with a Switch button.
    private func drawSwitcher(accounts: [CachedAccount], current: CachedAccount?) {
        let show = accounts.map { $0.id == current?.id ? "*" + $0.id : $0.id }
        guard show != accountRowsShow else { return }
        accountRowsShow = show
        for row in accountRows { tc_preferences_group_remove(accountsGroup, row) }
        accountRows = accounts.map { account in
            let name = account.claims?.name ?? account.username
            let row = tc_action_row_new(name)!
            tc_action_row_set_subtitle(row, account.username)
            tc_action_row_add_prefix(row, adw_avatar_new(32, name, 1))
            if account.id == current?.id {
                let check = gtk_image_new_from_icon_name("object-select-symbolic")!
                tc_set_accessible_label(check, "Current account")
                tc_action_row_add_suffix(row, check)
            } else {
                let use = Widgets.button("Switch")
                tc_set_accessible_label(use, "Use \(account.username)")
                tc_action_row_add_suffix(row, use)
                tc_action_row_set_activatable_widget(row, use)
                actions.append(Signals.connect(use, "clicked") { [weak self] in
                    self?.log.append("Switched to \(account.username)")
                    self?.model.select(account)
                })
            }
            tc_preferences_group_add(accountsGroup, row)
            return row
        }
        gtk_widget_set_visible(accountsGroup, accounts.isEmpty ? 0 : 1)
    }

    /// The current account's token from the cache (refreshed if it must be), for the expiry and scopes rows.
    private func loadToken(for account: CachedAccount?) {
        tokenTask?.cancel()
        tokenAccountID = account?.id
        token = nil
        drawToken()
        guard account != nil else { return }
        tokenTask = Task { [weak self, model] in
            do throws(TokenCacheError) {
                let token = try await model.token()
                guard !Task.isCancelled, let self, token.account?.id ?? account?.id == self.tokenAccountID else { return }
                self.token = token
                self.drawToken()
            } catch {
                guard !Task.isCancelled else { return }
                self?.report([error.message, error.hint].compactMap { $0 }.joined(separator: " "))
            }
        }
    }

    private func drawToken() {
        guard let token else {
            tc_action_row_set_subtitle(expiryRow, "–")
            tc_action_row_set_subtitle(scopesRow, "–")
            return
        }
        let minutes = max(0, Int(token.expiresOn.timeIntervalSinceNow / 60))
        tc_action_row_set_subtitle(expiryRow, "\(token.expiresOn.formatted(date: .abbreviated, time: .shortened)) (in \(minutes) min)")
        tc_action_row_set_subtitle(scopesRow, token.scopes.joined(separator: " "))
    }

    private func startSignIn() {
        log.append(model.currentAccount == nil ? "Signing in…" : "Adding an account…")
        Task { [weak self, model] in
            // An error is the model's lastError, which draw() toasts and logs.
            guard let result = try? await model.signIn() else { return }
            self?.log.append("Signed in as \(result.account?.username ?? "?")")
        }
    }

    private func startSignOut() {
        guard let account = model.currentAccount else { return }
        Task { [weak self, model] in
            guard (try? await model.signOut()) != nil else { return }
            self?.log.append("Signed out of \(account.username)")
        }
    }

    /// Call Graph: `/me` with the current account's silent token; the profile's name and address
    /// in the Graph row, the whole answer in the log.
    private func showGraphProfile() {
        guard let account = model.currentAccount else { return }
        let app = model.application
        tc_action_row_set_subtitle(graphRow, "Calling Graph…")
        log.append("Calling Graph /me for \(account.username)")
        Task { [weak self] in
            do throws(TokenCacheError) {
                let profile = try await app.graphProfile(for: account)
                guard let self else { return }
                let fields = (try? JSONSerialization.jsonObject(with: profile)) as? [String: Any] ?? [:]
                let summary = ["displayName", "userPrincipalName"].compactMap { fields[$0] as? String }.joined(separator: " · ")
                guard self.model.currentAccount?.id == account.id else { return }
                self.graphAccountID = account.id
                tc_action_row_set_subtitle(self.graphRow, summary.isEmpty ? "(no profile)" : summary)
                self.log.append("Graph /me: \(String(decoding: profile, as: UTF8.self))")
                self.loadToken(for: self.model.currentAccount)  // the call may have refreshed it
            } catch {
                guard let self else { return }
                tc_action_row_set_subtitle(self.graphRow, "–")
                self.report("Graph: " + [error.message, error.hint].compactMap { $0 }.joined(separator: " "))
            }
        }
    }

    /// An error: a toast that stays until dismissed, and a line in the log.
    private func report(_ problem: String) {
        tc_toast_show(toasts, problem, 0)
        log.append("Error: \(problem)")
    }
}
