import TokenCacheCore
import FoundationEssentials

extension SecretServiceBackend: GroupListingBackend {
    package func groupsLocation(alongside group: CacheGroup) -> String {
        switch mapping(for: group) {
        case .defaultCollection: "Secret Service, collection alias 'default'"
        case .session: "Secret Service, in-memory collection alias 'session'"
        case .dedicated(let label, _): "Secret Service, collection '\(label)'"
        }
    }

    /// One search for every item of this schema in the collection, then each item's Attributes
    /// (group, kind, home account ID): no secret is read, so no session is needed.
    package func groupSummaries(alongside group: CacheGroup) throws(TokenCacheError) -> [GroupSummary] {
        let collection = try collectionPath(for: group)
        var items: [String: [(kind: EntityKind?, homeAccountID: String?)]] = [:]
        for attributes in try client.attributes(ofItems: try searchPaths([:], collection: collection)) {
            guard let name = attributes["group"] else { continue }
            items[name, default: []].append((attributes["kind"].flatMap(EntityKind.init(rawValue:)), attributes["home_account_id"]))
        }
        return items.map { GroupSummary(name: $0.key, items: $0.value) }.sorted { $0.name < $1.name }
    }
}
