// GTK 4 for Swift: GTK's headers, and inline helpers for what Swift cannot call directly
// (cast macros such as GTK_WINDOW, the g_signal_connect macro, variadic functions).
#include <gtk/gtk.h>
#include <glib-unix.h>
#include <sys/eventfd.h>

static inline gulong tc_signal_connect(gpointer instance, const char *signal, GCallback callback, gpointer data) {
    return g_signal_connect(instance, signal, callback, data);
}

static inline void tc_window_set_child(GtkWidget *window, GtkWidget *child) { gtk_window_set_child(GTK_WINDOW(window), child); }
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
static inline gboolean tc_toggle_button_get_active(GtkWidget *button) { return gtk_toggle_button_get_active(GTK_TOGGLE_BUTTON(button)); }
static inline GtkWidget *tc_application_window_new(gpointer application) { return gtk_application_window_new(GTK_APPLICATION(application)); }
static inline void tc_window_present(GtkWidget *window) { gtk_window_present(GTK_WINDOW(window)); }

/// Shows encoded image bytes (PNG, JPEG) in a GtkPicture; false when GDK cannot decode them.
static inline gboolean tc_picture_set_image(GtkWidget *picture, const void *data, gsize length) {
    if (data == NULL) { gtk_picture_set_paintable(GTK_PICTURE(picture), NULL); return TRUE; }
    GBytes *bytes = g_bytes_new(data, length);
    GdkTexture *texture = gdk_texture_new_from_bytes(bytes, NULL);
    g_bytes_unref(bytes);
    if (texture == NULL) { gtk_picture_set_paintable(GTK_PICTURE(picture), NULL); return FALSE; }
    gtk_picture_set_paintable(GTK_PICTURE(picture), GDK_PAINTABLE(texture));
    g_object_unref(texture);
    return TRUE;
}

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
