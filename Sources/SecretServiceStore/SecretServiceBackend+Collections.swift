internal import CLibSecret
import TokenCacheCore
import TokenCachePlatform
import FoundationEssentials

extension SecretServiceBackend {
    /// The D-Bus object path the backend addresses the group's collection by: the collection's
    /// own path, resolved once (``resolvedCollectionPath(for:)``), then cached.
    ///
    /// Not the alias's object path (`/org/freedesktop/secrets/aliases/default`), which would
    /// save the ReadAlias round trip: gnome-keyring answers a call on it that arrives while the
    /// same client's session is being opened with "Object does not exist at path
    /// /org/freedesktop/secrets/collection/<garbage>" (2 % of cold `tokencache token` runs,
    /// 14 % of OpenSession + SearchItems pairs sent together; calls on the collection's own
    /// path and ReadAlias never failed). A locked collection is found where it shows: an empty
    /// search or a GetSecrets answer that leaves items out leads to one Locked check
    /// (`checkUnlocked(_:)`), and writes and deletes fail with IsLocked. With unlock prompts
    /// allowed, the collection is unlocked up front.
    ///
    /// Resolved with plain D-Bus calls (ReadAlias, Properties.Get) rather than libsecret's
    /// collection proxies, whose construction loads every property, including the path of every
    /// item in the collection: 12 ms of a cold lookup at 300 items, and a race with items
    /// being deleted meanwhile ("No such secret item").
    package func collectionPath(for group: CacheGroup) throws(TokenCacheError) -> String {
        let mapping = mapping(for: group)
        if let known = cachedCollectionPath(mapping) { return known }
        let path = try resolvedCollectionPath(for: group)
        if options.allowsUnlockPrompt { try checkUnlocked(path) }
        rememberCollectionPath(mapping, path)
        return path
    }

    /// The collection's own object path (an alias resolved with ReadAlias, a dedicated collection
    /// found by label or created), for people and for calls that need it, such as Unlock.
    package func resolvedCollectionPath(for group: CacheGroup) throws(TokenCacheError) -> String {
        let mapping = mapping(for: group)
        if let alias = Self.alias(of: mapping) { return try aliasPath(alias) }
        guard case .dedicated(let label, let createIfMissing) = mapping else { preconditionFailure("every other mapping is an alias") }
        if let found = try findCollection(labelled: label) { return found }
        return try createCollection(labelled: label, allowed: createIfMissing)
    }

    /// Checks that the group's collection exists and is unlocked (one Locked read), unlocking it
    /// when prompts are allowed. Backend selection calls it so that a locked keyring is reported
    /// up front.
    /// - Throws: `collectionMissing`, `keyringLocked`, `promptDismissed` or a connection error.
    package func checkCollection(for group: CacheGroup) throws(TokenCacheError) {
        try checkUnlocked(try collectionPath(for: group))
    }

    /// Throws `keyringLocked` when the collection is locked, or unlocks it when prompts are
    /// allowed. Returns whether it was locked (and so has just been unlocked): what was read
    /// from it before must be read again.
    @discardableResult
    func checkUnlocked(_ collection: String) throws(TokenCacheError) -> Bool {
        guard try property("Locked", of: collection, as: Self.bool) else { return false }
        try unlock(collection)
        return true
    }

    /// The error of a failed write into `collection`; when the collection turns out to be
    /// locked, `keyringLocked` (libsecret passes gnome-keyring's IsLocked on as a plain message:
    /// "Cannot delete a locked item").
    func writeFailure(_ error: TokenCacheError, in collection: String) -> TokenCacheError {
        guard error.code == .secretServiceFailure, (try? property("Locked", of: collection, as: Self.bool)) == true else { return error }
        return Self.locked(collection)
    }

    static func locked(_ collection: String) -> TokenCacheError {
        TokenCacheError(.keyringLocked, "The keyring collection \(collection) is locked.",
                        hint: "Unlock it (log in to the desktop, or allow an unlock prompt); nothing was read or changed")
    }

    static func alias(of mapping: CollectionMapping) -> String? {
        switch mapping {
        case .defaultCollection: "default"
        case .session: "session"
        case .dedicated: nil
        }
    }

    /// The object path an alias points at (one ReadAlias call).
    private func aliasPath(_ alias: String) throws(TokenCacheError) -> String {
        let path = try call("ReadAlias", on: TransferSession.servicePath, interface: "org.freedesktop.Secret.Service",
                            arguments: [g_variant_new_string(alias)], replyType: "(o)",
                            action: "find the '\(alias)' collection", read: { Self.objectPath($0) })
        // "/": the alias points nowhere.
        guard path != "/" else { throw Self.missingAlias(alias) }
        return path
    }

    static func missingAlias(_ alias: String) -> TokenCacheError {
        TokenCacheError(.collectionMissing, "The Secret Service has no '\(alias)' collection.",
                        hint: alias == "default"
                            ? "Log in to the desktop once so the login keyring exists, or use --backend file"
                            : "This Secret Service provider has no session collection; use the default mapping")
    }

    /// The collection labelled `label`: the service's Collections, then each one's Label.
    private func findCollection(labelled label: String) throws(TokenCacheError) -> String? {
        let paths = try property("Collections", of: "/org/freedesktop/secrets", interface: "org.freedesktop.Secret.Service", as: Self.paths)
        for path in paths {
            // A collection deleted meanwhile is simply not the one.
            do {
                if try property("Label", of: path, as: Self.string) == label { return path }
            } catch where error.code == .collectionMissing {}
        }
        return nil
    }

    private func createCollection(labelled label: String, allowed: Bool) throws(TokenCacheError) -> String {
        guard allowed else {
            throw TokenCacheError(.collectionMissing, "No Secret Service collection is labelled '\(label)'.",
                                  hint: "Create it in your keyring manager, allow creation, or use the default mapping")
        }
        let service = try libsecretService()
        let deadline = Deadline(seconds: options.unlockTimeout)
        var error: UnsafeMutablePointer<GError>?
        guard let created = libsecret.secret_collection_create_sync(service, label, nil, SECRET_COLLECTION_CREATE_NONE,
                                                                     deadline.cancellable, &error) else {
            let failure = Self.map(error, deadline: deadline, action: "create the collection '\(label)'")
            // A dismissed CreateCollection prompt comes back from libsecret as a collection at "/".
            if failure.code == .promptDismissed || failure.code == .timedOut || failure.message.hasSuffix("at path: /") {
                throw TokenCacheError(.promptDismissed,
                                      "Creating the collection '\(label)' needs a password prompt, which was dismissed or could not be shown.",
                                      hint: "Use the default mapping (items in the default collection, tagged with the group), which never prompts")
            }
            throw failure
        }
        defer { g_object_unref(UnsafeMutableRawPointer(created)) }
        return String(cString: g_dbus_proxy_get_object_path(UnsafeMutableRawPointer(created).assumingMemoryBound(to: GDBusProxy.self)))
    }

    // MARK: Properties

    /// One property of a Secret Service object, read with one Properties.Get call and converted
    /// by `read` (nil when the value has another type: a protocol error).
    func property<Value>(_ name: String, of path: String, interface: String = "org.freedesktop.Secret.Collection",
                                 as read: (OpaquePointer) -> Value?) throws(TokenCacheError) -> Value {
        try call("Get", on: path, interface: "org.freedesktop.DBus.Properties",
                 arguments: [g_variant_new_string(interface), g_variant_new_string(name)], replyType: "(v)",
                 action: "read the \(name) property of \(path)") { reply throws(TokenCacheError) in
            let boxed = g_variant_get_child_value(reply, 0)  // the reply is (v)
            defer { g_variant_unref(boxed) }
            let value = g_variant_get_variant(boxed)!
            defer { g_variant_unref(value) }
            guard let converted = read(value) else {
                throw TokenCacheError(.secretServiceFailure, "The Secret Service answered the \(name) property of \(path) with a value of the wrong type.",
                                      hint: "Check the keyring daemon (tokencache doctor); nothing was read or changed")
            }
            return converted
        }
    }

    /// The paths of a collection's items whose attributes include `attributes`: one
    /// Collection.SearchItems call (locked items included; gnome-keyring lists them).
    func collectionSearch(_ attributes: [String: String], in collection: String) throws(TokenCacheError) -> [String] {
        try call("SearchItems", on: collection, interface: "org.freedesktop.Secret.Collection",
                 arguments: [Self.attributeDictionary(attributes)], replyType: "(ao)", action: "search the keyring", read: Self.searchReply)
    }

    /// Several Collection.SearchItems calls sent together and answered as gnome-keyring gets to
    /// them: one round trip for all instead of one after another (a cold lookup's app-metadata
    /// and account searches come after the session's key exchange, so each round trip counts).
    /// The replies are taken on this thread, from a GLib main context of its own.
    func collectionSearches(_ queries: [[String: String]], in collection: String) throws(TokenCacheError) -> [[String]] {
        guard queries.count > 1 else {
            return try queries.map { (query) throws(TokenCacheError) -> [String] in try collectionSearch(query, in: collection) }
        }
        let type = g_variant_type_new("(ao)")
        defer { g_variant_type_free(type) }
        let context = g_main_context_new()
        g_main_context_push_thread_default(context)
        defer {
            g_main_context_pop_thread_default(context)
            g_main_context_unref(context)
        }
        let replies = PendingReplies(count: queries.count)
        for (position, query) in queries.enumerated() {
            let slot = Unmanaged.passRetained(PendingReplies.Slot(replies: replies, position: position)).toOpaque()
            var arguments = [Self.attributeDictionary(query)]
            let parameters = arguments.withUnsafeMutableBufferPointer { g_variant_new_tuple($0.baseAddress, gsize($0.count)) }
            g_dbus_connection_call(bus.unownedConnection, bus.name, collection,
                                   "org.freedesktop.Secret.Collection", "SearchItems", parameters, type, G_DBUS_CALL_FLAGS_NONE,
                                   callTimeoutMilliseconds, nil, { source, result, slot in
                let slot = Unmanaged<PendingReplies.Slot>.fromOpaque(slot!).takeRetainedValue()
                var error: UnsafeMutablePointer<GError>?
                let reply = g_dbus_connection_call_finish(OpaquePointer(source), result, &error)
                slot.replies.store(reply, error, at: slot.position)
            }, slot)
        }
        // Every call ends in its callback (a reply, an error or GDBus's timeout), so this returns.
        while replies.outstanding > 0 { g_main_context_iteration(context, 1) }
        return try replies.take { (reply, error) throws(TokenCacheError) -> [String] in
            guard let reply else { throw Self.map(error, deadline: nil, action: "search the keyring") }
            return try Self.searchReply(reply)
        }
    }

    /// A SearchItems reply, `(ao)`, as paths.
    private static func searchReply(_ reply: OpaquePointer) throws(TokenCacheError) -> [String] {
        let array = g_variant_get_child_value(reply, 0)!  // the reply is (ao)
        defer { g_variant_unref(array) }
        return paths(array) ?? []
    }

    /// Item attributes as the `a{ss}` a search takes (a floating reference, for the call to sink).
    static func attributeDictionary(_ attributes: [String: String]) -> OpaquePointer? {
        let dictionaryType = g_variant_type_new("a{ss}")
        defer { g_variant_type_free(dictionaryType) }
        let builder = g_variant_builder_new(dictionaryType)!
        defer { g_variant_builder_unref(builder) }
        for (name, value) in attributes {
            var pair = [g_variant_new_string(name), g_variant_new_string(value)]
            g_variant_builder_add_value(builder, pair.withUnsafeMutableBufferPointer { g_variant_new_dict_entry($0[0], $0[1]) })
        }
        return g_variant_builder_end(builder)
    }

    /// `Options.callTimeout` for GDBus.
    var callTimeoutMilliseconds: Int32 { Self.milliseconds(options.callTimeout) }

    /// A bound in seconds as GDBus's milliseconds, clamped as a Double before the conversion,
    /// which traps out of range: G_MAXINT is GDBus's "no timeout" (for +infinity or NaN), and a
    /// bound below a millisecond is one millisecond.
    static func milliseconds(_ seconds: TimeInterval) -> Int32 {
        let bound = (seconds * 1000).rounded(.up)
        return bound.isNaN ? Int32.max : Int32(max(1, min(bound, Double(Int32.max))))
    }

    /// One D-Bus method call to the Secret Service, bounded by `Options.callTimeout`; errors are
    /// typed (``GDBusTarget/call(_:on:interface:arguments:replyType:timeoutMilliseconds:action:read:)``).
    func call<Value>(_ method: String, on path: String, interface: String, arguments: [OpaquePointer?],
                     replyType: String, action: String,
                     read: (OpaquePointer) throws(TokenCacheError) -> Value) throws(TokenCacheError) -> Value {
        try bus.call(method, on: path, interface: interface, arguments: arguments, replyType: replyType,
                     timeoutMilliseconds: callTimeoutMilliseconds, action: action, read: read)
    }

    private static func type(of value: OpaquePointer) -> String { String(cString: g_variant_get_type_string(value)) }

    private static func bool(_ value: OpaquePointer) -> Bool? {
        type(of: value) == "b" ? g_variant_get_boolean(value) != 0 : nil
    }

    private static func string(_ value: OpaquePointer) -> String? {
        type(of: value) == "s" ? String(cString: g_variant_get_string(value, nil)) : nil
    }

    /// An `a{ss}` value, such as an item's Attributes.
    static func stringDictionary(_ value: OpaquePointer) -> [String: String]? {
        guard type(of: value) == "a{ss}" else { return nil }
        var dictionary: [String: String] = [:]
        for index in 0..<g_variant_n_children(value) {
            let entry = g_variant_get_child_value(value, index)
            defer { g_variant_unref(entry) }
            let key = g_variant_get_child_value(entry, 0), value = g_variant_get_child_value(entry, 1)
            defer { g_variant_unref(key); g_variant_unref(value) }
            dictionary[String(cString: g_variant_get_string(key, nil))] = String(cString: g_variant_get_string(value, nil))
        }
        return dictionary
    }

    static func paths(_ value: OpaquePointer) -> [String]? {
        guard type(of: value) == "ao" else { return nil }
        return (0..<g_variant_n_children(value)).map { index in
            let child = g_variant_get_child_value(value, index)
            defer { g_variant_unref(child) }
            return String(cString: g_variant_get_string(child, nil))
        }
    }

    /// Unlocks a collection if the options allow prompting; otherwise reports it locked.
    func unlock(_ path: String) throws(TokenCacheError) {
        guard options.allowsUnlockPrompt else {
            throw Self.locked(path)
        }
        let service = try libsecretService()
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

    // MARK: Errors

    static let noProvider = TokenCacheError(.noSecretService, "No Secret Service provider is running on the session bus.",
                                            hint: "Start gnome-keyring-daemon (or KWallet, KeePassXC), or use --backend file")

    /// Turns a GError into a typed error, freeing it.
    /// - Parameter deadline: the call's deadline, if it had one rather than GDBus's own timeout.
    static func map(_ error: UnsafeMutablePointer<GError>?, deadline: Deadline?, action: String) -> TokenCacheError {
        let expired = deadline?.isExpired ?? false
        let (domain, code, message, remote) = GLib.take(error)
        let timedOut = domain == "g-io-error-quark" && [G_IO_ERROR_CANCELLED.rawValue, G_IO_ERROR_TIMED_OUT.rawValue].contains(UInt32(code))
        if expired || timedOut {
            return TokenCacheError(.timedOut, "The Secret Service did not answer in time (\(action)).",
                                   hint: "Check that the keyring daemon is responsive, then retry; nothing was changed")
        }
        let lower = message.lowercased()
        switch remote {
        case "org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.NameHasNoOwner":
            return noProvider
        case "org.freedesktop.Secret.Error.IsLocked":
            return TokenCacheError(.keyringLocked, "The keyring is locked (\(action)).",
                                   hint: "Unlock it and retry; nothing was read or changed")
        case "org.freedesktop.Secret.Error.NoSuchObject", "org.freedesktop.DBus.Error.UnknownObject":
            return TokenCacheError(.collectionMissing, "The keyring collection or item no longer exists (\(action)).",
                                   hint: "Retry; if it persists, check the mapping with `tokencache doctor`")
        case "org.freedesktop.DBus.Error.NoReply", "org.freedesktop.DBus.Error.Disconnected":
            return TokenCacheError(.secretServiceFailure, "The Secret Service stopped answering (\(action)).",
                                   hint: "The keyring daemon may have restarted; retry. Nothing was changed")
        case "org.freedesktop.DBus.Error.UnknownMethod" where lower.contains("does not exist"):
            // gnome-keyring's answer for an object path that is gone.
            return TokenCacheError(.collectionMissing, "The keyring collection or item no longer exists (\(action)).",
                                   hint: "Retry; if it persists, check the mapping with `tokencache doctor`")
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
            return noProvider
        }
        return TokenCacheError(.secretServiceFailure, "The Secret Service failed to \(action): \(message)",
                               hint: "Retry; nothing was deleted or overwritten because of this error")
    }
}

extension SecretServiceBackend {
    /// The libsecret this process uses: the file it was loaded from (libsecret exports no
    /// version), or why it could not be loaded. Loads it if that was not tried yet.
    package static var libsecretVersion: String { LibSecret.description }
    /// Whether libsecret loads here (for `tokencache doctor`).
    package static var isLibsecretLoadable: Bool { (try? LibSecret.shared()) != nil }
}

extension SecretServiceBackend {
    /// Items of a group that are behind a lock (for diagnostics and tests): never read, never deleted.
    package func lockedItemCount(group: CacheGroup, collection: String) throws(TokenCacheError) -> Int {
        try searchAllPaths(["group": group.name]).locked.filter { $0.hasPrefix(collection + "/") }.count
    }
}

extension SecretServiceBackend {
    /// Item signals this backend has received (for tests and measurements).
    package var receivedSignalCount: Int64 { signals.receivedCount }
}

/// The replies of calls sent together, filled in by their callbacks on the caller's thread
/// (the GLib main context it iterates), then taken in order. Owns the replies and errors until then.
private final class PendingReplies {
    final class Slot {
        let replies: PendingReplies
        let position: Int
        init(replies: PendingReplies, position: Int) { self.replies = replies; self.position = position }
    }

    private var replies: [OpaquePointer?]
    private var errors: [UnsafeMutablePointer<GError>?]
    private(set) var outstanding: Int

    init(count: Int) {
        replies = Array(repeating: nil, count: count)
        errors = Array(repeating: nil, count: count)
        outstanding = count
    }

    func store(_ reply: OpaquePointer?, _ error: UnsafeMutablePointer<GError>?, at position: Int) {
        replies[position] = reply
        errors[position] = error
        outstanding -= 1
    }

    /// Each reply read in order (`read` takes the error, if any, and owns it); the first failure
    /// is thrown. Frees every reply and the errors not handed to `read`.
    func take<T>(_ read: (OpaquePointer?, UnsafeMutablePointer<GError>?) throws(TokenCacheError) -> T) throws(TokenCacheError) -> [T] {
        defer {
            for reply in replies { if let reply { g_variant_unref(reply) } }
            for error in errors { if let error { g_error_free(error) } }
            replies = replies.map { _ in nil }
            errors = errors.map { _ in nil }
        }
        var values: [T] = []
        for position in replies.indices {
            let error = errors[position]
            errors[position] = nil
            values.append(try read(replies[position], error))
        }
        return values
    }
}
