// GTK 4 and libadwaita 1.2 for Swift: their headers, and inline helpers for what Swift cannot
// call directly (cast macros such as GTK_WINDOW or ADW_ACTION_ROW, the g_signal_connect macro,
// variadic functions).
#include <adwaita.h>
#include <glib-unix.h>
#include <sys/eventfd.h>

static inline gulong tc_signal_connect(gpointer instance, const char *signal, GCallback callback, gpointer data) {
    return g_signal_connect(instance, signal, callback, data);
}

static inline void tc_window_set_title(GtkWidget *window, const char *title) { gtk_window_set_title(GTK_WINDOW(window), title); }
static inline void tc_window_set_default_size(GtkWidget *window, int width, int height) {
    gtk_window_set_default_size(GTK_WINDOW(window), width, height);
}
static inline void tc_box_append(GtkWidget *box, GtkWidget *child) { gtk_box_append(GTK_BOX(box), child); }
static inline void tc_label_set_text(GtkWidget *label, const char *text) { gtk_label_set_text(GTK_LABEL(label), text); }
static inline void tc_label_set_wrap(GtkWidget *label) {
    gtk_label_set_wrap(GTK_LABEL(label), TRUE);
    gtk_label_set_xalign(GTK_LABEL(label), 0);
}
static inline void tc_label_set_selectable(GtkWidget *label) { gtk_label_set_selectable(GTK_LABEL(label), TRUE); }
static inline void tc_button_set_label(GtkWidget *button, const char *label) { gtk_button_set_label(GTK_BUTTON(button), label); }
static inline gboolean tc_switch_get_active(GtkWidget *widget) { return gtk_switch_get_active(GTK_SWITCH(widget)); }
static inline void tc_scrolled_window_set_child(GtkWidget *scrolled, GtkWidget *child) {
    gtk_scrolled_window_set_child(GTK_SCROLLED_WINDOW(scrolled), child);
}

// libadwaita: the window, its header bar and pages.
static inline GtkWidget *tc_application_window_new(gpointer application) { return adw_application_window_new(GTK_APPLICATION(application)); }
static inline void tc_window_set_content(GtkWidget *window, GtkWidget *content) {
    adw_application_window_set_content(ADW_APPLICATION_WINDOW(window), content);
}
static inline void tc_header_bar_pack_start(GtkWidget *bar, GtkWidget *child) { adw_header_bar_pack_start(ADW_HEADER_BAR(bar), child); }
static inline void tc_header_bar_pack_end(GtkWidget *bar, GtkWidget *child) { adw_header_bar_pack_end(ADW_HEADER_BAR(bar), child); }
static inline void tc_header_bar_set_title_widget(GtkWidget *bar, GtkWidget *title) { adw_header_bar_set_title_widget(ADW_HEADER_BAR(bar), title); }
static inline void tc_window_title_set_subtitle(GtkWidget *title, const char *subtitle) {
    adw_window_title_set_subtitle(ADW_WINDOW_TITLE(title), subtitle);
}
static inline void tc_clamp_set_child(GtkWidget *clamp, GtkWidget *child) { adw_clamp_set_child(ADW_CLAMP(clamp), child); }
static inline void tc_toast_overlay_set_child(GtkWidget *overlay, GtkWidget *child) {
    adw_toast_overlay_set_child(ADW_TOAST_OVERLAY(overlay), child);
}
/// Adds a page to a view stack, with the title and icon its switcher shows.
static inline void tc_view_stack_add(GtkWidget *stack, GtkWidget *child, const char *name, const char *title, const char *icon) {
    adw_view_stack_add_titled_with_icon(ADW_VIEW_STACK(stack), child, name, title, icon);
}
static inline void tc_view_switcher_bar_show(GtkWidget *bar, GtkWidget *stack) {
    adw_view_switcher_bar_set_stack(ADW_VIEW_SWITCHER_BAR(bar), ADW_VIEW_STACK(stack));
    adw_view_switcher_bar_set_reveal(ADW_VIEW_SWITCHER_BAR(bar), TRUE);
}
/// The status page's icon, title and description, both as plain text (escaped: the description
/// is Pango markup, and an error's text may hold '<' or '&').
static inline void tc_status_page_set(GtkWidget *page, const char *icon, const char *title, const char *description) {
    adw_status_page_set_icon_name(ADW_STATUS_PAGE(page), icon);
    adw_status_page_set_title(ADW_STATUS_PAGE(page), title);
    gchar *escaped = g_markup_escape_text(description, -1);
    adw_status_page_set_description(ADW_STATUS_PAGE(page), escaped);
    g_free(escaped);
}

/// A toast at the foot of the window: `title` as plain text (escaped: toasts take Pango markup);
/// `timeout` 0 keeps it until the user dismisses it.
static inline void tc_toast_show(GtkWidget *overlay, const char *title, guint timeout) {
    char *escaped = g_markup_escape_text(title, -1);
    AdwToast *toast = adw_toast_new(escaped);
    g_free(escaped);
    adw_toast_set_timeout(toast, timeout);
    adw_toast_set_priority(toast, ADW_TOAST_PRIORITY_HIGH);
    adw_toast_overlay_add_toast(ADW_TOAST_OVERLAY(overlay), toast);
}

// Boxed lists of rows (preferences groups of action rows), titles and subtitles as plain text.
static inline GtkWidget *tc_preferences_group_new(const char *title, const char *description) {
    GtkWidget *group = adw_preferences_group_new();
    adw_preferences_group_set_title(ADW_PREFERENCES_GROUP(group), title);
    if (description != NULL) adw_preferences_group_set_description(ADW_PREFERENCES_GROUP(group), description);
    return group;
}
static inline void tc_preferences_group_add(GtkWidget *group, GtkWidget *row) { adw_preferences_group_add(ADW_PREFERENCES_GROUP(group), row); }
static inline void tc_preferences_group_remove(GtkWidget *group, GtkWidget *row) {
    adw_preferences_group_remove(ADW_PREFERENCES_GROUP(group), row);
}
static inline void tc_preferences_group_set_header_suffix(GtkWidget *group, GtkWidget *suffix) {
    adw_preferences_group_set_header_suffix(ADW_PREFERENCES_GROUP(group), suffix);
}
static inline GtkWidget *tc_action_row_new(const char *title) {
    GtkWidget *row = adw_action_row_new();
    adw_preferences_row_set_use_markup(ADW_PREFERENCES_ROW(row), FALSE);
    adw_preferences_row_set_title(ADW_PREFERENCES_ROW(row), title);
    return row;
}
static inline void tc_action_row_set_subtitle(GtkWidget *row, const char *subtitle) { adw_action_row_set_subtitle(ADW_ACTION_ROW(row), subtitle); }
static inline void tc_action_row_add_prefix(GtkWidget *row, GtkWidget *widget) { adw_action_row_add_prefix(ADW_ACTION_ROW(row), widget); }
static inline void tc_action_row_add_suffix(GtkWidget *row, GtkWidget *widget) { adw_action_row_add_suffix(ADW_ACTION_ROW(row), widget); }
static inline void tc_action_row_set_activatable_widget(GtkWidget *row, GtkWidget *widget) {
    adw_action_row_set_activatable_widget(ADW_ACTION_ROW(row), widget);
}

/// The avatar shows encoded image bytes (PNG, JPEG) when given and GDK decodes them, else the
/// initials of its text; false when the bytes were given but not decoded.
static inline gboolean tc_avatar_show(GtkWidget *avatar, const char *text, const void *data, gsize length) {
    adw_avatar_set_text(ADW_AVATAR(avatar), text);
    GdkTexture *texture = NULL;
    if (data != NULL) {
        GBytes *bytes = g_bytes_new(data, length);
        texture = gdk_texture_new_from_bytes(bytes, NULL);
        g_bytes_unref(bytes);
    }
    adw_avatar_set_custom_image(ADW_AVATAR(avatar), texture == NULL ? NULL : GDK_PAINTABLE(texture));
    if (texture != NULL) g_object_unref(texture);
    return data == NULL || texture != NULL;
}

// The log view: a read-only text view that lines are appended to, kept scrolled to the end.
static inline GtkWidget *tc_log_view_new(void) {
    GtkWidget *view = gtk_text_view_new();
    gtk_text_view_set_editable(GTK_TEXT_VIEW(view), FALSE);
    gtk_text_view_set_monospace(GTK_TEXT_VIEW(view), TRUE);
    gtk_text_view_set_wrap_mode(GTK_TEXT_VIEW(view), GTK_WRAP_WORD_CHAR);
    gtk_text_view_set_cursor_visible(GTK_TEXT_VIEW(view), FALSE);
    return view;
}
static inline void tc_log_view_append(GtkWidget *view, const char *line) {
    GtkTextBuffer *buffer = gtk_text_view_get_buffer(GTK_TEXT_VIEW(view));
    GtkTextIter end;
    gtk_text_buffer_get_end_iter(buffer, &end);
    gtk_text_buffer_insert(buffer, &end, line, -1);
    gtk_text_buffer_get_end_iter(buffer, &end);
    gtk_text_buffer_insert(buffer, &end, "\n", -1);
    gtk_text_buffer_place_cursor(buffer, &end);
    gtk_text_view_scroll_to_mark(GTK_TEXT_VIEW(view), gtk_text_buffer_get_insert(buffer), 0, FALSE, 0, 0);
}
static inline void tc_log_view_clear(GtkWidget *view) { gtk_text_buffer_set_text(gtk_text_view_get_buffer(GTK_TEXT_VIEW(view)), "", 0); }
static inline void tc_window_present(GtkWidget *window) { gtk_window_present(GTK_WINDOW(window)); }
static inline void tc_window_destroy(GtkWidget *window) { gtk_window_destroy(GTK_WINDOW(window)); }

/// The accessible name assistive technologies (and the AT-SPI test) read for a widget.
static inline void tc_set_accessible_label(GtkWidget *widget, const char *label) {
    gtk_accessible_update_property(GTK_ACCESSIBLE(widget), GTK_ACCESSIBLE_PROPERTY_LABEL, label, -1);
}

// Swift's main actor runs on the main dispatch queue, which only dispatch_main() or a run loop
// drains; GTK's main loop is neither. libdispatch's hooks for CoreFoundation's run loop (exported
// on Linux) give an eventfd that becomes readable when main-queue work is waiting: GLib watches it
// and drains the queue, so main-actor tasks run inside GTK's loop.
extern int _dispatch_get_main_queue_handle_4CF(void);
extern void _dispatch_main_queue_callback_4CF(void *message);

static inline gboolean tc_drain_main_queue(gint fd, GIOCondition condition, gpointer data) {
    (void)condition; (void)data;
    eventfd_t value;
    eventfd_read(fd, &value);  // before draining: work queued meanwhile writes it again
    _dispatch_main_queue_callback_4CF(NULL);
    return G_SOURCE_CONTINUE;
}

static inline void tc_run_main_queue_in_glib(void) {
    g_unix_fd_add(_dispatch_get_main_queue_handle_4CF(), G_IO_IN, tc_drain_main_queue, NULL);
}
