import CGtk
import Foundation

/// The Log page, as the MSAL samples' logging screen: what the app did (sign-in, sign-out,
/// Graph's answers, every error) as timestamped lines, and a switch that adds the library's own
/// debug lines (``SwitchableLogHandler``; never secrets).
@MainActor
final class LogPage {
    static var shown: LogPage?

    let widget: UnsafeMutablePointer<GtkWidget>
    private let view = tc_log_view_new()!
    private let libraryLogging = gtk_switch_new()!
    private var actions: [Action] = []

    init() {
        let content = Widgets.box(GTK_ORIENTATION_VERTICAL, spacing: 12, margin: 24)
        let group = tc_preferences_group_new("Logging", "What the app did, newest last")!
        let row = tc_action_row_new("Library logging")!
        tc_action_row_set_subtitle(row, "The library's debug lines (never a secret), also on standard error")
        gtk_widget_set_valign(libraryLogging, GTK_ALIGN_CENTER)
        tc_action_row_add_suffix(row, libraryLogging)
        tc_action_row_set_activatable_widget(row, libraryLogging)
        tc_preferences_group_add(group, row)
        let clear = Widgets.button("Clear", classes: ["flat"])
        tc_preferences_group_set_header_suffix(group, clear)
        tc_box_append(content, group)

        tc_set_accessible_label(view, "Log")
        for side in [gtk_text_view_set_left_margin, gtk_text_view_set_right_margin, gtk_text_view_set_top_margin, gtk_text_view_set_bottom_margin] {
            side(UnsafeMutablePointer(OpaquePointer(view)), 12)
        }
        let frame = gtk_frame_new(nil)!
        let scrolled = gtk_scrolled_window_new()!
        tc_scrolled_window_set_child(scrolled, view)
        gtk_widget_set_size_request(scrolled, -1, 320)
        gtk_widget_set_vexpand(scrolled, 1)
        gtk_frame_set_child(UnsafeMutablePointer(OpaquePointer(frame)), scrolled)
        tc_box_append(content, frame)
        widget = Widgets.page(content)

        actions.append(Signals.connect(libraryLogging, "notify::active", hasArgument: true) { [weak self] in
            guard let self else { return }
            let isOn = tc_switch_get_active(self.libraryLogging) != 0
            SwitchableLogHandler.enabled.withLock { $0 = isOn }
            self.append(isOn ? "Library logging on" : "Library logging off")
        })
        actions.append(Signals.connect(clear, "clicked") { [weak self] in
            guard let self else { return }
            tc_log_view_clear(self.view)
        })
    }

    /// Adds a line, with the time, at the end.
    func append(_ line: String) {
        tc_log_view_append(view, "\(Date.now.formatted(date: .omitted, time: .standard))  \(line)")
    }
}
