internal import CLibSecret
import TokenCacheCore
import FoundationEssentials

extension SecretServiceClient {
    /// Several Collection.SearchItems calls sent together and answered as gnome-keyring gets to
    /// them: one round trip for all instead of one after another (a cold lookup's app-metadata
    /// and account searches come after the session's key exchange, so each round trip counts).
    /// The replies are taken on this thread, from a GLib main context of its own.
    package func searchItems(in collection: ObjectPath, eachOf queries: [[String: String]]) throws(TokenCacheError) -> [[ObjectPath]] {
        guard queries.count > 1 else {
            return try queries.map { (query) throws(TokenCacheError) -> [ObjectPath] in try searchItems(in: collection, query) }
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
            let parameters = GVariantRef.tuple([.stringDictionary(query)])
            g_dbus_connection_call(bus.unownedConnection, bus.name, collection,
                                   "org.freedesktop.Secret.Collection", "SearchItems", parameters.pointer, type, G_DBUS_CALL_FLAGS_NONE,
                                   timeoutMilliseconds, nil, { source, result, slot in
                let slot = Unmanaged<PendingReplies.Slot>.fromOpaque(slot!).takeRetainedValue()
                var error: UnsafeMutablePointer<GError>?
                let reply = g_dbus_connection_call_finish(OpaquePointer(source), result, &error)
                slot.replies.store(reply.map { GVariantRef(taking: $0) }, error, at: slot.position)
            }, slot)
        }
        // Every call ends in its callback (a reply, an error or GDBus's timeout), so this returns.
        while replies.outstanding > 0 { g_main_context_iteration(context, 1) }
        return try replies.take { (reply, error) throws(TokenCacheError) -> [ObjectPath] in
            guard let reply else { throw SecretServiceErrors.map(error, action: "search the keyring", object: collection) }
            return reply[0].objectPaths ?? []
        }
    }
}

/// The replies of calls sent together, filled in by their callbacks on the caller's thread
/// (the GLib main context it iterates), then taken in order. Owns the errors until then.
private final class PendingReplies {
    package final class Slot {
        let replies: PendingReplies
        let position: Int
        init(replies: PendingReplies, position: Int) { self.replies = replies; self.position = position }
    }

    private var replies: [GVariantRef?]
    private var errors: [UnsafeMutablePointer<GError>?]
    private(set) var outstanding: Int

    package init(count: Int) {
        replies = Array(repeating: nil, count: count)
        errors = Array(repeating: nil, count: count)
        outstanding = count
    }

    deinit { for error in errors { if let error { g_error_free(error) } } }

    package func store(_ reply: GVariantRef?, _ error: UnsafeMutablePointer<GError>?, at position: Int) {
        replies[position] = reply
        errors[position] = error
        outstanding -= 1
    }

    /// Each reply read in order (`read` takes the error, if any, and owns it); the first failure
    /// is thrown. The errors not handed to `read` are freed with this.
    package func take<T>(_ read: (GVariantRef?, UnsafeMutablePointer<GError>?) throws(TokenCacheError) -> T) throws(TokenCacheError) -> [T] {
        var values: [T] = []
        for position in replies.indices {
            let error = errors[position]
            errors[position] = nil
            values.append(try read(replies[position], error))
        }
        return values
    }
}
