internal import CLibSecret
import Foundation

extension SecretServiceBackend {
    /// The D-Bus object path of the collection a group maps onto (resolved once, then cached).
    @_spi(Testing) public func collectionPath(for group: CacheGroup) throws(TokenCacheError) -> String {
        let mapping = mapping(for: group)
        if let known = cachedCollectionPath(mapping) { return known }
        let collection = try resolveCollection(mapping)
        defer { g_object_unref(UnsafeMutableRawPointer(collection)) }
        let path = String(cString: g_dbus_proxy_get_object_path(UnsafeMutableRawPointer(collection).assumingMemoryBound(to: GDBusProxy.self)))
        if libsecret.secret_collection_get_locked(collection) != 0 {
            try unlock(path)
        }
        rememberCollectionPath(mapping, path)
        return path
    }

    private func resolveCollection(_ mapping: CollectionMapping) throws(TokenCacheError) -> UnsafeMutablePointer<SecretCollection> {
        let deadline = Deadline(seconds: options.callTimeout)
        var error: UnsafeMutablePointer<GError>?
        switch mapping {
        case .defaultCollection, .session:
            let alias = mapping == .session ? "session" : "default"
            if let collection = libsecret.secret_collection_for_alias_sync(service, alias, SECRET_COLLECTION_NONE, deadline.cancellable, &error) {
                return collection
            }
            if error != nil { throw Self.map(error, deadline: deadline, action: "find the '\(alias)' collection") }
            throw TokenCacheError(.collectionMissing, "The Secret Service has no '\(alias)' collection.",
                                  hint: alias == "default"
                                    ? "Log in to the desktop once so the login keyring exists, or use --backend file"
                                    : "This Secret Service provider has no session collection; use the default mapping")
        case .dedicated(let label, let createIfMissing):
            if let found = try findCollection(labelled: label) { return found }
            guard createIfMissing else {
                throw TokenCacheError(.collectionMissing, "No Secret Service collection is labelled '\(label)'.",
                                      hint: "Create it in your keyring manager, allow creation, or use the default mapping")
            }
            let created = libsecret.secret_collection_create_sync(service, label, nil, SECRET_COLLECTION_CREATE_NONE,
                                                        Deadline(seconds: options.unlockTimeout).cancellable, &error)
            guard let created else {
                let failure = Self.map(error, deadline: deadline, action: "create the collection '\(label)'")
                // A dismissed CreateCollection prompt comes back from libsecret as a collection at "/".
                if failure.code == .promptDismissed || failure.code == .timedOut || failure.message.hasSuffix("at path: /") {
                    throw TokenCacheError(.promptDismissed,
                                          "Creating the collection '\(label)' needs a password prompt, which was dismissed or could not be shown.",
                                          hint: "Use the default mapping (items in the default collection, tagged with the group), which never prompts")
                }
                throw failure
            }
            return created
        }
    }

    private func findCollection(labelled label: String) throws(TokenCacheError) -> UnsafeMutablePointer<SecretCollection>? {
        let deadline = Deadline(seconds: options.callTimeout)
        var error: UnsafeMutablePointer<GError>?
        guard libsecret.secret_service_load_collections_sync(service, deadline.cancellable, &error) != 0 else {
            throw Self.map(error, deadline: deadline, action: "list the keyring collections")
        }
        guard let list = libsecret.secret_service_get_collections(service) else { return nil }
        defer { g_list_free_full(list, g_object_unref) }
        var node: UnsafeMutablePointer<GList>? = list
        while let current = node {
            if let data = current.pointee.data {
                let collection = data.assumingMemoryBound(to: SecretCollection.self)
                if let name = libsecret.secret_collection_get_label(collection) {
                    defer { g_free(name) }
                    if String(cString: name) == label {
                        g_object_ref(UnsafeMutableRawPointer(collection))
                        return collection
                    }
                }
            }
            node = current.pointee.next
        }
        return nil
    }

    /// Unlocks a collection if the options allow prompting; otherwise reports it locked.
    func unlock(_ path: String) throws(TokenCacheError) {
        guard options.allowsUnlockPrompt else {
            throw TokenCacheError(.keyringLocked, "The keyring collection \(path) is locked.",
                                  hint: "Unlock it (log in to the desktop, or allow an unlock prompt); nothing was read or changed")
        }
        let deadline = Deadline(seconds: options.unlockTimeout)
        var error: UnsafeMutablePointer<GError>?
        var unlocked: UnsafeMutablePointer<UnsafeMutablePointer<gchar>?>?
        let count = withCStringArray([path]) { paths in
            libsecret.secret_service_unlock_dbus_paths_sync(service, paths, deadline.cancellable, &unlocked, &error)
        }
        let unlockedPaths = takeStringArray(unlocked)
        if count < 1 || !unlockedPaths.contains(path) {
            if error != nil {
                let failure = Self.map(error, deadline: deadline, action: "unlock \(path)")
                if failure.code == .timedOut {
                    throw TokenCacheError(.timedOut, "Nobody answered the unlock prompt within \(Int(options.unlockTimeout)) s.",
                                          hint: "Unlock the keyring and retry; nothing was read or changed")
                }
                throw failure
            }
            throw TokenCacheError(.promptDismissed, "The unlock prompt for \(path) was dismissed.",
                                  hint: "Unlock the keyring and retry; nothing was read or changed")
        }
    }

    func resolvedCollectionPrefix(_ path: String) throws(TokenCacheError) -> String { path + "/" }

    // MARK: Errors

    /// Turns a GError into a typed error, freeing it.
    static func map(_ error: UnsafeMutablePointer<GError>?, deadline: Deadline, action: String) -> TokenCacheError {
        let expired = deadline.isExpired
        let (domain, code, message, remote) = GLib.take(error)
        if expired || (domain == "g-io-error-quark" && code == Int32(G_IO_ERROR_CANCELLED.rawValue)) {
            return TokenCacheError(.timedOut, "The Secret Service did not answer in time (\(action)).",
                                   hint: "Check that the keyring daemon is responsive, then retry; nothing was changed")
        }
        let lower = message.lowercased()
        switch remote {
        case "org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.NameHasNoOwner":
            return TokenCacheError(.noSecretService, "No Secret Service provider is running on the session bus.",
                                   hint: "Start gnome-keyring-daemon (or KWallet, KeePassXC), or use --backend file")
        case "org.freedesktop.Secret.Error.IsLocked":
            return TokenCacheError(.keyringLocked, "The keyring is locked (\(action)).",
                                   hint: "Unlock it and retry; nothing was read or changed")
        case "org.freedesktop.Secret.Error.NoSuchObject":
            return TokenCacheError(.collectionMissing, "The keyring collection or item no longer exists (\(action)).",
                                   hint: "Retry; if it persists, check the mapping with `tokencache doctor`")
        case "org.freedesktop.DBus.Error.NoReply", "org.freedesktop.DBus.Error.Disconnected":
            return TokenCacheError(.secretServiceFailure, "The Secret Service stopped answering (\(action)).",
                                   hint: "The keyring daemon may have restarted; retry. Nothing was changed")
        default:
            break
        }
        if lower.contains("prompt") && lower.contains("dismiss") {
            return TokenCacheError(.promptDismissed, "A keyring prompt was dismissed or could not be shown (\(action)).",
                                   hint: "Use the default collection mapping, which never prompts")
        }
        if lower.contains("autolaunch") || lower.contains("could not connect") || lower.contains("no such file or directory")
            || lower.contains("connection refused") {
            return TokenCacheError(.noSessionBus, "Cannot reach the D-Bus session bus: \(message)",
                                   hint: "Use --backend file, or run inside a desktop session")
        }
        if lower.contains("was not provided by any .service files") {
            return TokenCacheError(.noSecretService, "No Secret Service provider is running on the session bus.",
                                   hint: "Start gnome-keyring-daemon (or KWallet, KeePassXC), or use --backend file")
        }
        return TokenCacheError(.secretServiceFailure, "The Secret Service failed to \(action): \(message)",
                               hint: "Retry; nothing was deleted or overwritten because of this error")
    }
}

extension SecretServiceBackend {
    /// The libsecret this process uses: the file it was loaded from (libsecret exports no
    /// version), or why it could not be loaded. Loads it if that was not tried yet.
    public static var libsecretVersion: String { LibSecret.description }
}

extension SecretServiceBackend {
    /// Items of a group that are behind a lock (for diagnostics and tests): never read, never deleted.
    @_spi(Testing) public func lockedItemCount(group: CacheGroup, collection: String) throws(TokenCacheError) -> Int {
        try searchAllPaths(["group": group.name]).locked.filter { $0.hasPrefix(collection + "/") }.count
    }
}

extension SecretServiceBackend {
    /// Item signals this backend has received (for tests and measurements).
    @_spi(Testing) public var receivedSignalCount: Int64 { signals.receivedCount }
}
