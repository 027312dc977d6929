internal import CLibSecret
import TokenCacheCore
import TokenCachePlatform
import FoundationEssentials

/// A D-Bus object path, such as `/org/freedesktop/secrets/collection/login/12`.
package typealias ObjectPath = String

/// Typed calls to the Secret Service API (`org.freedesktop.Secret.*`) on one bus connection:
/// Swift values in, Swift values out, each call bounded by the call timeout and its errors typed
/// by ``SecretServiceErrors``. The backend's mapping of caches onto collections and items is
/// built on these calls only; GVariant values never leave this folder (``GVariantRef``).
///
/// Plain GDBus calls rather than libsecret's proxies, whose construction loads every property
/// (a GetAll round trip, and each collection's item list); prompts are shown and waited for
/// here too (SecretServiceClient+Prompts.swift).
package final class SecretServiceClient: Sendable {
    package static let servicePath: ObjectPath = "/org/freedesktop/secrets"
    package static let serviceInterface = "org.freedesktop.Secret.Service"
    package static let collectionInterface = "org.freedesktop.Secret.Collection"
    package static let itemInterface = "org.freedesktop.Secret.Item"

    /// The bus and the Secret Service's name on it (also what ``TransferSession`` calls through).
    package let bus: GDBusTarget
    /// The bound on each call, in seconds and as GDBus's milliseconds.
    package let callTimeout: TimeInterval
    package let timeoutMilliseconds: Int32

    package init(bus: GDBusTarget, callTimeout: TimeInterval) {
        self.bus = bus
        self.callTimeout = callTimeout
        timeoutMilliseconds = Self.milliseconds(callTimeout)
    }

    /// A bound in seconds as GDBus's milliseconds, clamped as a Double before the conversion,
    /// which traps out of range: G_MAXINT is GDBus's "no timeout" (for +infinity or NaN), and a
    /// bound below a millisecond is one millisecond.
    package static func milliseconds(_ seconds: TimeInterval) -> Int32 {
        let bound = (seconds * 1000).rounded(.up)
        return bound.isNaN ? Int32.max : Int32(max(1, min(bound, Double(Int32.max))))
    }

    // MARK: Calls

    /// One method call, bounded by the call timeout. GDBus checks the reply against `replyType`,
    /// so the readers below only meet the types they expect.
    package func call(_ method: String, on path: ObjectPath, interface: String, arguments: [GVariantRef],
              replyType: String, action: String) throws(TokenCacheError) -> GVariantRef {
        try withExtendedLifetime(arguments) { () throws(TokenCacheError) -> GVariantRef in
            try bus.call(method, on: path, interface: interface, arguments: arguments.map(\.pointer), replyType: replyType,
                         timeoutMilliseconds: timeoutMilliseconds, action: action) { GVariantRef(sinking: $0) }
        }
    }

    /// Opens the encrypted transfer session (one OpenSession call and the key agreement).
    package func openSession() throws(TokenCacheError) -> TransferSession {
        try TransferSession.open(bus, timeoutMilliseconds: timeoutMilliseconds)
    }

    /// The collection an alias (`default`, `session`) points at; nil when it points nowhere.
    package func readAlias(_ name: String) throws(TokenCacheError) -> ObjectPath? {
        let reply = try call("ReadAlias", on: Self.servicePath, interface: Self.serviceInterface, arguments: [.string(name)],
                             replyType: "(o)", action: "find the '\(name)' collection")
        return Self.path(reply[0])
    }

    /// Items of every collection whose attributes include `attributes`, split by lock state
    /// (Service.SearchItems).
    package func searchItems(_ attributes: [String: String]) throws(TokenCacheError) -> (unlocked: [ObjectPath], locked: [ObjectPath]) {
        let reply = try call("SearchItems", on: Self.servicePath, interface: Self.serviceInterface,
                             arguments: [.stringDictionary(attributes)], replyType: "(aoao)", action: "search the keyring")
        return (reply[0].objectPaths ?? [], reply[1].objectPaths ?? [])
    }

    /// Items of `collection` whose attributes include `attributes` (Collection.SearchItems;
    /// gnome-keyring lists locked items too).
    package func searchItems(in collection: ObjectPath, _ attributes: [String: String]) throws(TokenCacheError) -> [ObjectPath] {
        let reply = try call("SearchItems", on: collection, interface: Self.collectionInterface,
                             arguments: [.stringDictionary(attributes)], replyType: "(ao)", action: "search the keyring")
        return reply[0].objectPaths ?? []
    }

    /// The secrets of `items`, each decrypted with `session` and handed to `each` (one GetSecrets
    /// call). Returns how many items the service answered for: it leaves out locked ones, and
    /// ones deleted meanwhile. The plaintext is wiped once `each` returns, so it is never kept
    /// in a collection that could be copied unwiped.
    @discardableResult
    package func getSecrets(_ items: some Sequence<ObjectPath>, session: TransferSession,
                    each: (ObjectPath, UnsafeRawBufferPointer) throws(TokenCacheError) -> Void) throws(TokenCacheError) -> Int {
        let reply = try call("GetSecrets", on: Self.servicePath, interface: Self.serviceInterface,
                             arguments: [.objectPaths(items), .objectPath(session.path)],
                             replyType: "(a{o(oayays)})", action: "read secrets")
        return try Self.secrets(inGetSecretsReply: reply, session: session, each: each)
    }

    /// The secrets of a GetSecrets reply, `(a{o(oayays)})`, decrypted; returns how many items it
    /// answered for. A secret that does not decrypt (bad IV, length or padding) is skipped.
    /// - Throws: `secretServiceFailure` when a secret belongs to another session (the whole read
    ///   fails: an answer the backend did not ask for is never read as a partial one).
    package static func secrets(inGetSecretsReply reply: GVariantRef, session: TransferSession,
                        each: (ObjectPath, UnsafeRawBufferPointer) throws(TokenCacheError) -> Void) throws(TokenCacheError) -> Int {
        let pairs = reply[0]
        let count = pairs.count
        for index in 0..<count {
            let pair = pairs[index]
            guard var plaintext = try session.plaintext(ofSecretStruct: pair[1].pointer) else { continue }
            defer { explicit_bzero(&plaintext, plaintext.count) }
            let item = pair[0].objectPath ?? ""
            // A Result: withUnsafeBytes rethrows untyped errors.
            try plaintext.withUnsafeBytes { bytes in Result { () throws(TokenCacheError) in try each(item, bytes) } }.get()
        }
        return count
    }

    /// Stores an item (Collection.CreateItem): `secret` is a Secret struct sealed with the
    /// transfer session; with `replace`, an item with exactly these attributes is replaced
    /// (an atomic upsert). Returns the item, or the prompt the provider asks for instead.
    package func createItem(in collection: ObjectPath, label: String, attributes: [String: String], secret: GVariantRef,
                    replace: Bool) throws(TokenCacheError) -> (item: ObjectPath?, prompt: ObjectPath?) {
        let properties = GVariantRef.properties([("org.freedesktop.Secret.Item.Label", .string(label)),
                                                 ("org.freedesktop.Secret.Item.Attributes", .stringDictionary(attributes))])
        let reply = try call("CreateItem", on: collection, interface: Self.collectionInterface,
                             arguments: [properties, secret, .boolean(replace)], replyType: "(oo)", action: "store an item")
        return (Self.path(reply[0]), Self.path(reply[1]))
    }

    /// Deletes an item (Item.Delete). Returns the prompt the provider asks for instead, if any.
    package func delete(_ item: ObjectPath) throws(TokenCacheError) -> ObjectPath? {
        let reply = try call("Delete", on: item, interface: Self.itemInterface, arguments: [], replyType: "(o)",
                             action: "delete an item")
        return Self.path(reply[0])
    }

    /// "/" is the protocol's "none" (no prompt, no collection).
    package static func path(_ value: GVariantRef) -> ObjectPath? {
        value.objectPath.flatMap { $0 == "/" ? nil : $0 }
    }

    // MARK: Properties

    /// One property of a Secret Service object (one Properties.Get call), converted by `read`.
    /// - Throws: `secretServiceFailure` when the value has another type (a protocol error).
    package func property<Value>(_ name: String, of path: ObjectPath, interface: String = collectionInterface,
                         as read: (GVariantRef) -> Value?) throws(TokenCacheError) -> Value {
        let reply = try call("Get", on: path, interface: "org.freedesktop.DBus.Properties",
                             arguments: [.string(interface), .string(name)], replyType: "(v)",
                             action: "read the \(name) property of \(path)")
        guard let value = reply[0].unboxed, let converted = read(value) else {
            throw TokenCacheError(.secretServiceFailure, "The Secret Service answered the \(name) property of \(path) with a value of the wrong type.",
                                  hint: "Check the keyring daemon (tokencache doctor); nothing was read or changed")
        }
        return converted
    }

    /// Whether a collection is locked (its Locked property).
    package func isLocked(_ collection: ObjectPath) throws(TokenCacheError) -> Bool {
        try property("Locked", of: collection, as: \.bool)
    }

    /// A collection's Label.
    package func label(of collection: ObjectPath) throws(TokenCacheError) -> String {
        try property("Label", of: collection, as: { $0.typeString == "s" ? $0.string : nil })
    }

    /// The service's Collections.
    package func collections() throws(TokenCacheError) -> [ObjectPath] {
        try property("Collections", of: Self.servicePath, interface: Self.serviceInterface, as: \.objectPaths)
    }

    /// An item's Attributes (no secret is transferred).
    package func attributes(of item: ObjectPath) throws(TokenCacheError) -> [String: String] {
        try property("Attributes", of: item, interface: Self.itemInterface, as: \.stringDictionary)
    }

    /// The Attributes of the items a search found, in order; an item deleted since the search
    /// (another process's removal) is left out, as a search a moment later would leave it out.
    package func attributes(ofItems paths: [ObjectPath]) throws(TokenCacheError) -> [[String: String]] {
        var found: [[String: String]] = []
        for path in paths {
            do { found.append(try attributes(of: path)) } catch where error.code == .collectionMissing { continue }
        }
        return found
    }
}

extension SecretServiceClient {
    /// The process that owns the Secret Service's bus name, by its `/proc/<pid>/comm` name
    /// (`gnome-keyring-d`, `keepassxc`, `kwalletd5`), with its pid; nil when the bus does not say
    /// (GetConnectionUnixProcessID on org.freedesktop.DBus; for diagnostics only).
    package func providerProcess() -> (name: String, pid: UInt32)? {
        let daemon = GDBusTarget(connection: bus.unownedConnection, name: "org.freedesktop.DBus")
        let pid = try? daemon.call("GetConnectionUnixProcessID", on: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                                   arguments: [g_variant_new_string(bus.name)], replyType: "(u)",
                                   timeoutMilliseconds: timeoutMilliseconds, action: "find the Secret Service's process") { reply in
            let value = g_variant_get_child_value(reply, 0)!
            defer { g_variant_unref(value) }
            return g_variant_get_uint32(value)
        }
        guard let pid, let comm = try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8) else { return nil }
        return (String(comm.prefix { $0 != "\n" }), pid)
    }
}
