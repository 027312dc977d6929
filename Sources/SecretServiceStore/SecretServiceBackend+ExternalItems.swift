import TokenCacheCore
import TokenCacheDBus
import TokenCachePlatform
import FoundationEssentials

/// One Secret Service item another tool keeps its whole MSAL cache in (msal-extensions'
/// LibsecretPersistence, MSAL.NET's LinuxKeyringAccessor): found by attributes as its owner
/// finds it, read and replaced in place. docs/EXTERNAL-STORES.md §4.2, §4.3, §6.
package struct ExternalKeyringItem: Sendable, Hashable {
    /// The item's object path.
    package var path: String
    /// The collection holding it (where a replacement is written).
    package var collection: String
    /// Its attributes as stored (with `xdg:schema`), so a replacement is the same item.
    package var attributes: [String: String]
    /// Its label, kept on replacement.
    package var label: String
}

extension SecretServiceBackend {
    /// The first item (by path, so every process picks the same) whose attributes include one of
    /// `attributeSets`, tried in order; with `schema`, only items whose `xdg:schema` is it (the
    /// owner's schema flag is NONE, as Python's and Java's are; .NET's DONT_MATCH_NAME ignores it).
    /// - Throws: `keyringLocked` when the only match is in a locked collection.
    package func findExternalItem(attributeSets: [[String: String]], schema: String?) throws(TokenCacheError) -> ExternalKeyringItem? {
        for attributes in attributeSets {
            var query = attributes
            if let schema { query["xdg:schema"] = schema }
            let (unlocked, locked) = try client.searchItems(query)
            if let path = unlocked.sorted().first {
                let collection = String(path[..<(path.lastIndex(of: "/") ?? path.endIndex)])
                let label = try client.property("Label", of: path, interface: SecretServiceClient.itemInterface,
                                                as: { $0.typeString == "s" ? $0.string : nil })
                return ExternalKeyringItem(path: path, collection: collection, attributes: try client.attributes(of: path), label: label)
            }
            if !locked.isEmpty {
                throw TokenCacheError(.keyringLocked, "The keyring item holding this cache is in a locked collection.",
                                      hint: "Unlock the keyring (tokencache unlock), then retry; nothing was read or changed")
            }
        }
        return nil
    }

    /// The item's secret, as bytes (the caller decodes and wipes them).
    /// - Throws: `keyringLocked` when the service left it out (locked meanwhile), `notFound` when deleted.
    package func readExternalSecret(_ item: ExternalKeyringItem) throws(TokenCacheError) -> [UInt8] {
        var secret: [UInt8]?
        let session = try session.session()
        try client.getSecrets([item.path], session: session) { (_, bytes) throws(TokenCacheError) in secret = Array(bytes) }
        guard let secret else {
            throw TokenCacheError(.keyringLocked, "The Secret Service did not hand out the cache item (locked, or deleted meanwhile).",
                                  hint: "Unlock the keyring (tokencache unlock), then retry; nothing was read or changed")
        }
        return secret
    }

    /// Replaces the item's secret in place: the same collection, attributes and label (another
    /// attribute set would make a second item its owner never finds). Content type text/plain,
    /// as libsecret's password_store writes.
    package func replaceExternalSecret(_ item: ExternalKeyringItem, with secret: Data) throws(TokenCacheError) {
        let current = try session.session()
        let sealed = GVariantRef(sinking: try current.secretStruct(secret, contentType: "text/plain"))
        try write(in: item.collection) { () throws(TokenCacheError) in
            try client.createItem(in: item.collection, label: item.label, attributes: item.attributes, secret: sealed, replace: true).prompt
        }
    }

    /// Creates the item another tool would create with libsecret's `password_store`: in the
    /// collection with this alias or label (nil: `default`), attributes plus `xdg:schema`,
    /// content type text/plain.
    /// - Throws: `collectionMissing` when there is no such collection; keyring errors.
    package func createExternalItem(collection: String?, schema: String, attributes: [String: String], label: String,
                                    secret: Data) throws(TokenCacheError) {
        let name = collection ?? "default"
        let path: String
        if let alias = try client.readAlias(name) {
            path = alias
        } else if let labelled = try findCollection(labelled: name) {
            path = labelled
        } else {
            throw Self.missingAlias(name)
        }
        let sealed = GVariantRef(sinking: try session.session().secretStruct(secret, contentType: "text/plain"))
        let stored = attributes.merging(["xdg:schema": schema]) { current, _ in current }
        try write(in: path) { () throws(TokenCacheError) in
            try client.createItem(in: path, label: label, attributes: stored, secret: sealed, replace: true).prompt
        }
    }

    /// Deletes the item (another tool's whole cache).
    package func deleteExternalItem(_ item: ExternalKeyringItem) throws(TokenCacheError) {
        try write(in: item.collection) { () throws(TokenCacheError) in try client.delete(item.path) }
    }
}
