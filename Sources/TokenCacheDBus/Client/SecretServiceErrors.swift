package import CLibSecret
import TokenCacheCore
import FoundationEssentials

/// The one place a GError from the Secret Service, the bus or libsecret becomes a typed
/// ``TokenCacheError``, keyed on the D-Bus error name (`g_dbus_error_get_remote_error`) and on
/// GIO's error codes, not on the message text, which providers and locales word differently
/// (save kwalletd5's lost session, which only its text names).
package enum SecretServiceErrors {
    package static let noProvider = TokenCacheError(.noSecretService, "No Secret Service provider is running on the session bus.",
                                            hint: "Start gnome-keyring-daemon (or KWallet, KeePassXC), or use --backend file")

    /// Turns a GError from a call into a typed error, freeing it.
    /// - Parameters:
    ///   - deadline: the call's deadline, if it had one rather than GDBus's own timeout.
    ///   - object: the object path called, when known: an unknown method on a collection or
    ///     item is gnome-keyring's answer for an object that is gone.
    package static func map(_ error: UnsafeMutablePointer<GError>?, deadline: Deadline? = nil, action: String,
                    object: String? = nil) -> TokenCacheError {
        let expired = deadline?.isExpired ?? false
        let (domain, code, message, remote) = GLib.take(error)
        let timedOut = domain == "g-io-error-quark" && [G_IO_ERROR_CANCELLED.rawValue, G_IO_ERROR_TIMED_OUT.rawValue].contains(UInt32(code))
        switch remote {
        case _ where expired || timedOut,
             "org.freedesktop.DBus.Error.Timeout", "org.freedesktop.DBus.Error.TimedOut":
            return TokenCacheError(.timedOut, "The Secret Service did not answer in time (\(action)).",
                                   hint: "Check that the keyring daemon is responsive, then retry")
        case "org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.NameHasNoOwner":
            return noProvider
        case "org.freedesktop.Secret.Error.IsLocked":
            return TokenCacheError(.keyringLocked, "The keyring is locked (\(action)).",
                                   hint: "Unlock it and retry; nothing was read or changed")
        case "org.freedesktop.Secret.Error.NoSuchObject", "org.freedesktop.DBus.Error.UnknownObject":
            return gone(action)
        case "org.freedesktop.DBus.Error.UnknownMethod" where object != nil && object != SecretServiceClient.servicePath,
             "org.freedesktop.DBus.Error.UnknownInterface" where object != nil && object != SecretServiceClient.servicePath:
            // The answer for a collection or item path that is gone: gnome-keyring's UnknownMethod
            // ("Object does not exist"), KeePassXC's UnknownInterface (its Qt node outlives the item).
            return gone(action)
        case "org.freedesktop.DBus.Error.NoReply", "org.freedesktop.DBus.Error.Disconnected":
            return TokenCacheError(.secretServiceFailure, "The Secret Service stopped answering (\(action)).",
                                   hint: "The keyring daemon may have restarted; retry. Nothing was changed")
        case "org.freedesktop.Secret.Error.NoSession",
             // Foreign text, parsed as nothing else tells: kwalletd5's generic InvalidObjectPath says "Can't find session".
             "org.qtproject.QtDBus.Error.InvalidObjectPath" where message.lowercased().contains("session"):
            return TokenCacheError(.secretServiceFailure, "The Secret Service no longer knows the encrypted session (\(action)).",
                                   hint: "Retry; nothing was deleted or overwritten because of this error",
                                   reason: .secretServiceSessionLost)
        default:
            return TokenCacheError(.secretServiceFailure, "The Secret Service failed to \(action): \(message)",
                                   hint: "Retry; nothing was deleted or overwritten because of this error")
        }
    }

    /// Turns the GError of a failed connection to the session bus into a typed error, freeing it:
    /// whatever GIO says (no socket, refused, no X11 to autolaunch from), the bus is out of reach.
    package static func connectionFailure(_ error: UnsafeMutablePointer<GError>?, deadline: Deadline) -> TokenCacheError {
        guard !deadline.isExpired else { return map(error, deadline: deadline, action: "connect to the D-Bus session bus") }
        return TokenCacheError(.noSessionBus, "Cannot reach the D-Bus session bus: \(GLib.take(error).message)",
                               hint: "Use --backend file, or run inside a desktop session")
    }

    private static func gone(_ action: String) -> TokenCacheError {
        TokenCacheError(.collectionMissing, "The keyring collection or item no longer exists (\(action)).",
                        hint: "Retry; if it persists, check the mapping with `tokencache doctor`")
    }
}
