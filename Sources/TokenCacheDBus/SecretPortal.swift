internal import CLibSecret
import FoundationEssentials
import TokenCacheCore
import TokenCacheCrypto
#if canImport(Glibc)
import Glibc
#endif

/// The XDG desktop portal's Secret interface (`org.freedesktop.portal.Secret`, version 1), as
/// libsecret's `secret-file-backend.c` and oo7 use it: inside a sandbox it gives each app a
/// secret of its own (64 bytes, stable across runs), from which the app's file keyring key is
/// derived. gnome-keyring implements its backend and keeps the secret in the login keyring.
package enum SecretPortal {
    package static let busName = "org.freedesktop.portal.Desktop"
    package static let objectPath = "/org/freedesktop/portal/desktop"
    package static let interface = "org.freedesktop.portal.Secret"
    /// The secret's size: libsecret refuses any other (PASSWORD_SIZE).
    package static let secretByteCount = 64

    /// Whether this process runs in a sandbox as libsecret tells: `/.flatpak-info` exists
    /// (Flatpak) or `SNAP_NAME` is set, even empty (Snap; libsecret's `g_getenv ("SNAP_NAME") != NULL`).
    package static func isSandboxed(environment: [String: String] = ProcessInfo.processInfo.environment) -> Bool {
        access("/.flatpak-info", F_OK) == 0 || environment["SNAP_NAME"] != nil
    }

    /// Which sandbox, for people: "Flatpak" or "Snap <name>".
    package static var sandboxKind: String {
        access("/.flatpak-info", F_OK) == 0 ? "Flatpak, /.flatpak-info" : "Snap \(ProcessInfo.processInfo.environment["SNAP_NAME"] ?? "")"
    }

    /// The portal's Secret `version` property; nil with the reason when there is no portal, no
    /// Secret portal backend, or no bus.
    package static func version(timeoutMilliseconds: Int32 = 5_000) -> Result<UInt32, TokenCacheError> {
        do {
            let connection = try SessionConnection()
            var error: UnsafeMutablePointer<GError>?
            let arguments = GVariantRef.tuple([.string(interface), .string("version")])
            let reply = withExtendedLifetime(arguments) { "(v)".withCString { type in
                g_dbus_connection_call_sync(connection.pointer, busName, objectPath, "org.freedesktop.DBus.Properties", "Get",
                                            arguments.pointer, OpaquePointer(type), G_DBUS_CALL_FLAGS_NONE, timeoutMilliseconds, nil, &error)
            } }
            guard let reply else { return .failure(failure("The desktop portal has no Secret interface", error)) }
            let value = GVariantRef(taking: reply)[0]
            guard let inner = value.unboxed, inner.typeString == "u" else {
                return .failure(TokenCacheError(.portalFailed, "The desktop portal's Secret version is not a number.", reason: .portalUnreachable))
            }
            return .success(inner.uint32)
        } catch {
            return .failure(error)
        }
    }

    /// Asks the portal for this app's secret: `RetrieveSecret(h fd, a{sv} options)`, with the
    /// write end of a pipe. The `Response` signal of the request is subscribed before the call
    /// (the request's path follows from our unique name and `handle_token`), so it cannot be
    /// missed; Response 0 means the 64 bytes are on the pipe, 1 cancelled, 2 failed.
    /// - Returns: the secret, in memory kept out of core dumps and wiped on release.
    /// - Throws: `portalCancelled`, `portalFailed`, `noSessionBus` or `timedOut`.
    package static func retrieveSecret(timeoutSeconds: Double = 60) throws(TokenCacheError) -> SecretPage {
        let connection = try SessionConnection()
        let context = g_main_context_new()
        g_main_context_push_thread_default(context)
        defer {
            g_main_context_pop_thread_default(context)
            g_main_context_unref(context)
        }
        var tokenBytes = [UInt8](repeating: 0, count: 8)
        try FileKeyringKey.random(&tokenBytes)
        let token = "tokencache_" + tokenBytes.map { String($0, radix: 16) }.joined()
        let sender = String(cString: g_dbus_connection_get_unique_name(connection.pointer)).dropFirst().map { $0 == "." ? "_" : String($0) }.joined()
        let requestPath = "\(objectPath)/request/\(sender)/\(token)"
        let response = ResponseBox()
        func subscribe(_ path: String) -> UInt32 {
            g_dbus_connection_signal_subscribe(
                connection.pointer, busName, "org.freedesktop.portal.Request", "Response", path, nil, G_DBUS_SIGNAL_FLAGS_NONE,
                { _, _, _, _, _, parameters, box in
                    guard let parameters, let box else { return }
                    let values = GVariantRef(sinking: parameters)  // (u response, a{sv} results)
                    let code = values.count > 0 && values[0].typeString == "u" ? values[0].uint32 : 2
                    Unmanaged<ResponseBox>.fromOpaque(box).takeUnretainedValue().code = code
                }, Unmanaged.passRetained(response).toOpaque(), { box in Unmanaged<ResponseBox>.fromOpaque(box!).release() })
        }
        // Before the call: AddMatch goes out first on the same connection, so the bus has the
        // rule before the portal can answer (the race libsecret 0.21.4 fixed).
        var subscriptions = [subscribe(requestPath)]
        defer {
            for id in subscriptions { g_dbus_connection_signal_unsubscribe(connection.pointer, id) }
            while g_main_context_iteration(context, 0) != 0 {}  // GDBus releases the box from an idle source here
        }

        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { throw TokenCacheError(.portalFailed, "Cannot create a pipe for the Secret portal: \(String(cString: strerror(errno))).") }
        let reader = fds[0]
        defer { close(reader) }
        _ = fcntl(reader, F_SETFD, FD_CLOEXEC)  // the write end goes only to the portal (GDBus dups it)
        _ = fcntl(fds[1], F_SETFD, FD_CLOEXEC)
        let fdList = g_unix_fd_list_new()!
        var error: UnsafeMutablePointer<GError>?
        let index = g_unix_fd_list_append(fdList, fds[1], &error)
        close(fds[1])  // the list holds its own duplicate
        guard index >= 0 else {
            g_object_unref(UnsafeMutableRawPointer(fdList))
            throw failure("Cannot pass a pipe to the Secret portal", error)
        }
        let options = GVariantRef.properties([(name: "handle_token", value: .string(token))])
        let arguments = GVariantRef.tuple([GVariantRef(sinking: g_variant_new_handle(index)), options])
        let reply = withExtendedLifetime(arguments) { "(o)".withCString { type in
            g_dbus_connection_call_with_unix_fd_list_sync(connection.pointer, busName, objectPath, interface, "RetrieveSecret",
                                                          arguments.pointer, OpaquePointer(type), G_DBUS_CALL_FLAGS_NONE,
                                                          Int32(timeoutSeconds * 1000), fdList, nil, nil, &error)
        } }
        // Our duplicate of the write end goes now: the pipe ends when the portal's backend closes its copy.
        g_object_unref(UnsafeMutableRawPointer(fdList))
        guard let reply else { throw failure("The Secret portal refused RetrieveSecret", error) }
        if let handle = GVariantRef(taking: reply)[0].string, handle != requestPath {
            // A portal older than handle_token: its own path, subscribed as soon as known.
            subscriptions.append(subscribe(handle))
        }

        let deadline = Date().addingTimeInterval(timeoutSeconds)
        while response.code == nil {
            guard Date() < deadline else {
                throw TokenCacheError(.timedOut, "The Secret portal did not answer within \(Int(timeoutSeconds)) s.",
                                      hint: "Check that xdg-desktop-portal and a Secret portal backend (gnome-keyring) run in the session")
            }
            if g_main_context_iteration(context, 0) == 0 { usleep(2_000) }
        }
        switch response.code {
        case 0: break
        case 1: throw TokenCacheError(.portalCancelled, "The request for this app's keyring secret was cancelled.",
                                      hint: "Retry and allow the request; nothing was read or changed", reason: .portalRequestCancelled)
        default: throw TokenCacheError(.portalFailed, "The Secret portal could not give this app's keyring secret.",
                                       hint: "Check that the keyring that keeps it (gnome-keyring's login keyring) is unlocked; nothing was changed",
                                       reason: .portalRequestFailed)
        }
        // Exactly 64 bytes, as libsecret reads them. The backend wrote them before it answered,
        // and the portal keeps a copy of the write end (no EOF): a short secret ends in 5 s.
        let secret = SecretPage(byteCount: secretByteCount)
        let readDeadline = min(deadline, Date().addingTimeInterval(5))
        var done = 0
        while done < secretByteCount {
            var ready = pollfd(fd: reader, events: Int16(POLLIN), revents: 0)
            let remaining = Int32(max(0, readDeadline.timeIntervalSinceNow) * 1000)
            guard poll(&ready, 1, remaining) > 0 else { break }
            let count = read(reader, secret.bytes.baseAddress! + done, secretByteCount - done)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            done += count
        }
        guard done == secretByteCount else {
            throw TokenCacheError(.portalFailed, "The Secret portal gave \(done) bytes instead of this app's \(secretByteCount)-byte secret.",
                                  hint: "Nothing was changed; check the Secret portal backend (gnome-keyring)", reason: .portalSecretSize(bytes: done))
        }
        return secret
    }

    private static func failure(_ what: String, _ error: UnsafeMutablePointer<GError>?) -> TokenCacheError {
        let reason = error.flatMap { $0.pointee.message.map { String(cString: $0) } } ?? "unknown error"
        if let error { g_error_free(error) }
        return TokenCacheError(.portalFailed, "\(what): \(reason).",
                               hint: "A sandboxed app needs --talk-name=org.freedesktop.portal.Desktop and a Secret portal backend (gnome-keyring) on the host",
                               reason: .portalUnreachable)
    }

    /// Where the response lands; read and written on the calling thread only (the main context
    /// is iterated there).
    private final class ResponseBox: @unchecked Sendable {
        var code: UInt32?
    }
}

/// The session bus connection (shared by GDBus in the process), released in deinit.
private final class SessionConnection {
    let pointer: OpaquePointer

    init() throws(TokenCacheError) {
        var error: UnsafeMutablePointer<GError>?
        guard let connection = g_bus_get_sync(G_BUS_TYPE_SESSION, nil, &error) else {
            let reason = error?.pointee.message.map { String(cString: $0) } ?? "unknown"
            if let error { g_error_free(error) }
            throw TokenCacheError(.noSessionBus, "No D-Bus session bus for the Secret portal: \(reason).",
                                  hint: "A sandboxed app reaches the portal on the session bus; run it in a desktop session")
        }
        pointer = connection
    }

    deinit { g_object_unref(UnsafeMutableRawPointer(pointer)) }
}
