internal import CLibSecret
import FoundationEssentials
import TokenCacheCore

/// The XDG desktop portal's OpenURI (org.freedesktop.portal.OpenURI), through GDBus: how a
/// sandboxed or desktop app asks the session to open a URL in the user's browser. The GLib
/// types stay in this module (GIO is already loaded for the Secret Service).
package enum DesktopPortal {
    /// Asks the portal to open `uri`, waiting at most `timeoutMilliseconds` for its answer.
    /// Returns nil when the portal took the request, else why not (no session bus, no portal
    /// on it, refused): the caller then opens the URL another way. Blocks: call it off the
    /// cooperative pool.
    package static func openURI(_ uri: String, timeoutMilliseconds: Int32) -> String? {
        guard GLib.sessionBusIsAddressed else { return "no D-Bus session bus" }
        var error: UnsafeMutablePointer<GError>?
        guard let connection = g_bus_get_sync(G_BUS_TYPE_SESSION, nil, &error) else {
            return "no D-Bus session bus (\(GLib.take(error).message))"
        }
        defer { g_object_unref(UnsafeMutableRawPointer(connection)) }
        let optionsType = g_variant_type_new("{sv}")
        defer { g_variant_type_free(optionsType) }
        // (s parent_window, s uri, a{sv} options): no parent window, no options.
        let arguments: [OpaquePointer?] = [g_variant_new_string(""), g_variant_new_string(uri), g_variant_new_array(optionsType, nil, 0)]
        let replyType = g_variant_type_new("(o)")
        defer { g_variant_type_free(replyType) }
        let reply = arguments.withUnsafeBufferPointer { pointers in
            g_dbus_connection_call_sync(connection, "org.freedesktop.portal.Desktop", "/org/freedesktop/portal/desktop",
                                        "org.freedesktop.portal.OpenURI", "OpenURI",
                                        g_variant_new_tuple(pointers.baseAddress, gsize(pointers.count)),
                                        replyType, G_DBUS_CALL_FLAGS_NONE, timeoutMilliseconds, nil, &error)
        }
        guard let reply else {
            let failure = GLib.take(error)
            // A portal without an OpenURI backend (xdg-desktop-portal alone, as headless) is no portal for this.
            switch failure.remote {
            case "org.freedesktop.DBus.Error.ServiceUnknown": return "no desktop portal on the session bus"
            case "org.freedesktop.DBus.Error.UnknownMethod", "org.freedesktop.DBus.Error.UnknownInterface":
                return "no desktop portal with OpenURI on the session bus"
            default: return failure.message
            }
        }
        g_variant_unref(reply)
        return nil
    }
}
