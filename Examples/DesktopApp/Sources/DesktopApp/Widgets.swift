import CGtk
import TokenCache

/// A GTK signal handler's closure, as GTK's user data (kept alive by whoever connected it).
final class Action: Sendable {
    let body: @MainActor @Sendable () -> Void
    init(_ body: @escaping @MainActor @Sendable () -> Void) { self.body = body }
}

/// GTK signals handled by Swift closures; the returned action must outlive the widget's handler.
@MainActor
enum Signals {
    /// Connects `signal` of `widget` (a signal whose handler takes no argument, as `clicked`; with
    /// `hasArgument`, one pointer-sized argument, as `notify::active`'s GParamSpec).
    static func connect(_ widget: UnsafeMutablePointer<GtkWidget>, _ signal: String, hasArgument: Bool = false,
                        _ body: @escaping @MainActor @Sendable () -> Void) -> Action {
        let action = Action(body)
        let data = Unmanaged.passUnretained(action).toOpaque()
        if hasArgument {
            let handler: @convention(c) (UnsafeMutableRawPointer?, UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) -> Void = { _, _, data in
                let action = Unmanaged<Action>.fromOpaque(data!).takeUnretainedValue()
                MainActor.assumeIsolated { action.body() }
            }
            tc_signal_connect(UnsafeMutableRawPointer(widget), signal, unsafeBitCast(handler, to: GCallback.self), data)
        } else {
            let handler: @convention(c) (UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) -> Void = { _, data in
                let action = Unmanaged<Action>.fromOpaque(data!).takeUnretainedValue()
                MainActor.assumeIsolated { action.body() }
            }
            tc_signal_connect(UnsafeMutableRawPointer(widget), signal, unsafeBitCast(handler, to: GCallback.self), data)
        }
        return action
    }
}

/// Widgets built the same way in every window.
@MainActor
enum Widgets {
    /// A box with the GNOME spacing around its children.
    static func box(_ orientation: GtkOrientation, spacing: Int32, margin: Int32 = 0) -> UnsafeMutablePointer<GtkWidget> {
        let box = gtk_box_new(orientation, spacing)!
        for side in [gtk_widget_set_margin_top, gtk_widget_set_margin_bottom, gtk_widget_set_margin_start, gtk_widget_set_margin_end] {
            side(box, margin)
        }
        return box
    }

    /// A scrolled page whose content is clamped to a readable width, as GNOME Settings' pages.
    static func page(_ content: UnsafeMutablePointer<GtkWidget>) -> UnsafeMutablePointer<GtkWidget> {
        let clamp = adw_clamp_new()!
        tc_clamp_set_child(clamp, content)
        let scrolled = gtk_scrolled_window_new()!
        tc_scrolled_window_set_child(scrolled, clamp)
        gtk_widget_set_vexpand(scrolled, 1)
        return scrolled
    }

    /// A button of a group's header or a row: text, flat style classes, centred vertically.
    static func button(_ label: String, classes: [String] = []) -> UnsafeMutablePointer<GtkWidget> {
        let button = gtk_button_new_with_label(label)!
        gtk_widget_set_valign(button, GTK_ALIGN_CENTER)
        for name in classes { gtk_widget_add_css_class(button, name) }
        return button
    }

    /// The header bar, with the app's title and an optional subtitle.
    static func headerBar(subtitle: String) -> (bar: UnsafeMutablePointer<GtkWidget>, title: UnsafeMutablePointer<GtkWidget>) {
        let bar = adw_header_bar_new()!
        let title = adw_window_title_new(Settings.title, subtitle)!
        tc_header_bar_set_title_widget(bar, title)
        return (bar, title)
    }
}

/// A window with only a status: while the cache opens, and when it cannot be opened at all (the
/// problem and what to do, never a window that silently lacks its buttons).
@MainActor
enum StatusWindow {
    @discardableResult
    static func show(on application: UnsafeMutableRawPointer?, subtitle: String, icon: String, title: String,
                     description: String) -> UnsafeMutablePointer<GtkWidget> {
        let window = tc_application_window_new(application)!
        tc_window_set_title(window, Settings.title)
        tc_window_set_default_size(window, 560, 420)
        let content = gtk_box_new(GTK_ORIENTATION_VERTICAL, 0)!
        tc_box_append(content, Widgets.headerBar(subtitle: subtitle).bar)
        let status = adw_status_page_new()!
        tc_status_page_set(status, icon, title, description)
        gtk_widget_set_vexpand(status, 1)
        tc_box_append(content, status)
        tc_window_set_content(window, content)
        tc_window_present(window)
        return window
    }
}
