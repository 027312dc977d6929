import FoundationEssentials

extension AccountStore {
    /// Largest MSAL JSON cache accepted for import.
    package static let maximumImportSize = 64 << 20

    /// Imports an MSAL unified JSON cache (as MSAL Python, msal-extensions, Azure CLI or another
    /// SDK wrote it) into this group. Entries are matched on their fields, so importing the same
    /// cache twice changes nothing (``ImportReport/changedCount`` is then 0). Where the group
    /// holds the same entity written later (a refresh or access token of the same slot, by
    /// `last_modification_time`, else `cached_at`), the group's is kept
    /// (``ImportReport/keptNewerCount``): an older copy must not bring back a refresh token the
    /// server has rotated away. Nothing is dropped
    /// for being unfamiliar: unknown fields, entries without an account (app-only and managed
    /// identity tokens), empty secrets and unknown top-level members (other SDKs' sections such
    /// as `AccessToken_With_AuthScheme`, arrays, scalars) are kept and exported as they were; they
    /// are simply never returned by account lookups. Only what is not part of an MSAL document at
    /// all (an entry that is not a JSON object) is skipped, and reported with the reason.
    ///
    /// - Throws: ``TokenCacheError`` `invalidCacheData` when the data is not a JSON object, saying
    ///   what is wrong and at which byte, or a credential section (`AccessToken`, …) is not an
    ///   object; the store is then unchanged.
    @discardableResult
    public func importMSALJSON(_ data: Data) throws(TokenCacheError) -> ImportReport {
        var (entries, report) = try Self.parseMSALJSON(data)
        let (changed, keptNewer) = try merge(entries)
        report.changedCount = changed
        report.keptNewerCount = keptNewer.count
        entries.removeAll()
        options.logger.debug("Imported MSAL JSON cache", metadata: [
            "imported": .stringConvertible(report.importedCount), "changed": .stringConvertible(changed),
            "skipped": .stringConvertible(report.skipped.count)])
        return report
    }

    /// Writes `entries` into the group, except where it holds the same entity written later,
    /// which is kept. Returns how many entries changed and the entries not written.
    package func merge(_ entries: [CacheEntry]) throws(TokenCacheError) -> (changed: Int, keptNewer: [CacheEntry]) {
        var changed = 0
        var keptNewer: [CacheEntry] = []
        try mutate { index in
            var changes: [CacheChange] = []
            for entry in entries {
                if let there = index.existing(matching: entry), Self.writtenAt(there) > Self.writtenAt(entry) {
                    keptNewer.append(entry)
                    continue
                }
                changes += Self.upsert(entry, in: index)
            }
            changed = changes.count
            return changes
        } result: { _ in () }
        return (changed, keptNewer)
    }

    /// When an entry was written, as MSAL records it (0 when it does not say).
    package static func writtenAt(_ entry: CacheEntry) -> Double {
        entry.fields["last_modification_time"]?.secondsValue ?? entry.fields["cached_at"]?.secondsValue ?? 0
    }

    /// The group as MSAL unified JSON, loadable by every MSAL SDK (members this library does not
    /// know are written back as they were imported).
    /// The result holds secrets, refresh tokens included: not public API (apps never get a
    /// refresh token); `tokencache export` writes it to a file only the user can read.
    package func exportMSALJSON() throws(TokenCacheError) -> Data {
        let object = try read { index in MSALDocument.object(EntityKind.allCases.flatMap { index.all($0) }) }
        do {
            return try JSON.encode(object, pretty: true)
        } catch {
            throw TokenCacheError(.invalidCacheData, "The cache could not be encoded as JSON.")
        }
    }

    /// Parses MSAL unified JSON into entries.
    package static func parseMSALJSON(_ data: Data) throws(TokenCacheError) -> ([CacheEntry], ImportReport) {
        guard data.count <= maximumImportSize else {
            throw TokenCacheError(.invalidCacheData, "The MSAL JSON cache is larger than \(maximumImportSize >> 20) MiB.",
                                  hint: "Check that the file is a token cache")
        }
        // A UTF-8 byte-order mark, which some Windows tools write, is accepted as the SDKs accept it.
        let body = data.starts(with: [0xEF, 0xBB, 0xBF]) ? data.dropFirst(3) : data[...]
        let parsed = body.withUnsafeBytes { bytes in
            Result { () throws(JSONParser.SyntaxError) in
                try JSONParser.parse(bytes, maximumDepth: JSON.maximumDepth, allowingTrailingCommas: true)
            }
        }
        let value: JSONValue
        do {
            value = try parsed.get()
        } catch {
            throw TokenCacheError(.invalidCacheData, "The data is not valid JSON: \(error.reason) at byte \(error.offset + data.count - body.count).",
                                  hint: "Export the cache with MSAL's serialize() or `tokencache export`; nothing was imported")
        }
        guard case .object(let root) = value else {
            throw TokenCacheError(.invalidCacheData, "The data is JSON but not an MSAL cache: its top level is not an object.",
                                  hint: "Export the cache with MSAL's serialize() or `tokencache export`; nothing was imported")
        }
        // Every MSAL SDK writes its sections as objects; kept as they are, another shape would be
        // exported again and make every SDK that reads the export fail, so the file is refused.
        if let (name, value) = root.sorted(by: { $0.key < $1.key }).first(where: { if case .object = $0.value { false } else { EntityKind(section: $0.key) != nil } }) {
            throw TokenCacheError(.invalidCacheData, "The MSAL JSON cache's \(name) section is \(MSALDocument.describe(value)), not an object of entries; nothing was imported.",
                                  hint: "Export the cache again with MSAL's serialize() or `tokencache export`; other SDKs cannot read it either")
        }
        let (entries, skipped) = MSALDocument.entries(of: root)
        var report = ImportReport()
        report.skipped = skipped
        for entry in entries { report.imported[entry.kind, default: 0] += 1 }
        return (entries, report)
    }
}

/// The MSAL unified JSON document (schema: DESIGN.md section 4): a section per credential kind
/// holding entries by key. Everything else at the top level is kept as an
/// ``EntityKind/unknownSection`` entry, so a document read and written back loses nothing.
package enum MSALDocument {
    /// The document holding `entries`.
    package static func object(_ entries: [CacheEntry]) -> JSONObject {
        var sections: [String: JSONObject] = [:]
        var unknown: JSONObject = [:]
        for entry in entries {
            if entry.kind == .unknownSection {
                unknown[entry.key] = entry.fields["value"] ?? .null
            } else {
                sections[entry.kind.rawValue, default: [:]][entry.key] = .object(entry.fields)
            }
        }
        // A known section always wins over an unknown member of the same name (which only a
        // section that was not an object could have left).
        return unknown.merging(sections.mapValues { .object($0) }) { $1 }
    }

    /// One entry as a document of its own (a Secret Service item's secret).
    package static func fragment(_ entry: CacheEntry) -> JSONObject {
        object([entry])
    }

    /// The entries of a document, and what could not be kept, with the reason.
    package static func entries(of root: JSONObject) -> (entries: [CacheEntry], skipped: [ImportReport.Skipped]) {
        var entries: [CacheEntry] = []
        var skipped: [ImportReport.Skipped] = []
        for (name, value) in root.sorted(by: { $0.key < $1.key }) {
            guard let kind = EntityKind(section: name), case .object(let items) = value else {
                entries.append(unknownMember(name, value))
                continue
            }
            for (key, item) in items.sorted(by: { $0.key < $1.key }) {
                guard case .object(var fields) = item else {
                    skipped.append(.init(section: name, key: key, reason: "the entry is \(describe(item)), not a JSON object"))
                    continue
                }
                // Old MSAL Python files stored target as a list of scopes: read as the string SDKs write now.
                if case .array(let scopes)? = fields["target"], scopes.allSatisfy({ $0.stringValue != nil }) {
                    fields["target"] = .string(scopes.compactMap(\.stringValue).joined(separator: " "))
                }
                entries.append(CacheEntry(kind: kind, fields: fields, key: key))
            }
        }
        return (entries, skipped)
    }

    /// A top-level member kept as it is.
    package static func unknownMember(_ name: String, _ value: JSONValue) -> CacheEntry {
        CacheEntry(kind: .unknownSection, fields: ["section": .string(name), "value": value], key: name)
    }

    static func describe(_ value: JSONValue) -> String {
        switch value {
        case .null: "null"
        case .bool: "a boolean"
        case .integer, .double: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }
}
