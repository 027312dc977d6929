import FoundationEssentials

extension AccountStore {
    /// Largest MSAL JSON cache accepted for import.
    package static let maximumImportSize = 64 << 20

    /// Imports an MSAL unified JSON cache (as MSAL Python, msal-extensions, Azure CLI or another
    /// SDK wrote it) into this group. Entries are matched on their fields, so importing the same
    /// cache twice changes nothing. Variants other SDKs write are accepted: a list-valued
    /// `target`, float timestamps, .NET's `kid`; unknown fields are kept. Entries that cannot
    /// be used and unknown sections (for example `AccessToken_With_AuthScheme`) are skipped and
    /// reported.
    ///
    /// - Throws: ``TokenCacheError`` `invalidCacheData` when the data is not a JSON object;
    ///   the store is then unchanged.
    @discardableResult
    public func importMSALJSON(_ data: Data) throws(TokenCacheError) -> ImportReport {
        let (entries, report) = try Self.parseMSALJSON(data)
        try mutate { index in
            entries.flatMap { Self.upsert($0, in: index) }
        } result: { _ in () }
        options.logger.debug("Imported MSAL JSON cache", metadata: [
            "imported": .stringConvertible(report.importedCount), "skipped": .stringConvertible(report.skipped.count)])
        return report
    }

    /// The group as MSAL unified JSON, loadable by MSAL Python's `SerializableTokenCache`.
    /// The result holds secrets: write it only to files only the user can read.
    public func exportMSALJSON() throws(TokenCacheError) -> Data {
        let object = try read { index in Self.msalJSONObject(EntityKind.allCases.flatMap { index.all($0) }) }
        do {
            return try JSON.encode(object, pretty: true)
        } catch {
            throw TokenCacheError(.invalidCacheData, "The cache could not be encoded as JSON.")
        }
    }

    /// The MSAL JSON top-level object for a set of entries.
    package static func msalJSONObject(_ entries: [CacheEntry]) -> JSONObject {
        var sections: [String: JSONObject] = [:]
        for entry in entries { sections[entry.kind.rawValue, default: [:]][entry.key] = .object(entry.fields) }
        return sections.mapValues { .object($0) }
    }

    /// Parses MSAL unified JSON into entries, validating each one.
    package static func parseMSALJSON(_ data: Data) throws(TokenCacheError) -> ([CacheEntry], ImportReport) {
        guard data.count <= maximumImportSize else {
            throw TokenCacheError(.invalidCacheData, "The MSAL JSON cache is larger than \(maximumImportSize >> 20) MiB.",
                                  hint: "Check that the file is a token cache")
        }
        let root: JSONObject
        do {
            root = try JSON.decodeObject(data)
        } catch {
            throw TokenCacheError(.invalidCacheData, "The data is not an MSAL JSON cache (not a JSON object).",
                                  hint: "Export the cache with MSAL's serialize() or `tokencache export`; nothing was imported")
        }
        var report = ImportReport()
        var entries: [CacheEntry] = []
        for (section, value) in root.sorted(by: { $0.key < $1.key }) {
            guard let kind = EntityKind(rawValue: section) else {
                report.skipped.append(.init(section: section, key: nil, reason: "unknown section, not supported by this library"))
                continue
            }
            guard case .object(let items) = value else {
                report.skipped.append(.init(section: section, key: nil, reason: "section is not a JSON object"))
                continue
            }
            for (key, item) in items.sorted(by: { $0.key < $1.key }) {
                guard case .object(var fields) = item else {
                    report.skipped.append(.init(section: section, key: key, reason: "entry is not a JSON object"))
                    continue
                }
                // Old MSAL Python files stored target as a list of scopes.
                if case .array(let scopes)? = fields["target"] {
                    let strings = scopes.compactMap(\.stringValue)
                    guard strings.count == scopes.count else {
                        report.skipped.append(.init(section: section, key: key, reason: "target list holds non-strings"))
                        continue
                    }
                    fields["target"] = .string(strings.joined(separator: " "))
                }
                if let problem = validationProblem(kind, fields) {
                    report.skipped.append(.init(section: section, key: key, reason: problem))
                    continue
                }
                entries.append(CacheEntry(kind: kind, fields: fields, key: key))
                report.imported[kind, default: 0] += 1
            }
        }
        return (entries, report)
    }

    /// Why an entry cannot be used, or nil when it can.
    package static func validationProblem(_ kind: EntityKind, _ fields: JSONObject) -> String? {
        func requireString(_ names: String...) -> String? {
            for name in names {
                guard let value = fields[name]?.stringValue, !value.isEmpty else { return "field '\(name)' is missing or not a string" }
                _ = value
            }
            return nil
        }
        switch kind {
        case .accessToken:
            if let problem = requireString("secret", "home_account_id", "environment", "client_id", "target") { return problem }
            guard fields["expires_on"]?.secondsValue != nil else { return "field 'expires_on' is missing or not a number" }
        case .refreshToken:
            return requireString("secret", "home_account_id", "environment", "client_id")
        case .idToken:
            return requireString("secret", "home_account_id", "environment", "client_id")
        case .account:
            return requireString("home_account_id", "environment")
        case .appMetadata:
            return requireString("client_id", "environment")
        case .accountMetadata:
            return requireString("home_account_id", "client_id")
        }
        return nil
    }
}
