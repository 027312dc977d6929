/// What one group holds on a backend, counted by kind (for `tokencache groups` and for naming
/// the groups present when a requested one holds nothing). Holds no secret.
package struct GroupSummary: Sendable, Hashable, Codable {
    /// The group's name.
    package var name: String
    /// Accounts: distinct home account IDs of the group's account entries.
    package var accounts: Int
    package var accessTokens: Int
    package var refreshTokens: Int
    package var idTokens: Int
    /// Every entry, of any kind (app metadata, sign-in states and other SDKs' data too).
    package var entries: Int

    /// Counts `items`, each an entry's kind (nil when not one this library knows) and home account ID.
    package init(name: String, items: [(kind: EntityKind?, homeAccountID: String?)]) {
        self.name = name
        accounts = Set(items.compactMap { $0.kind == .account ? $0.homeAccountID.map(ASCII.lowercased) : nil }).count
        accessTokens = items.count(where: { $0.kind == .accessToken })
        refreshTokens = items.count(where: { $0.kind == .refreshToken })
        idTokens = items.count(where: { $0.kind == .idToken })
        entries = items.count
    }
}

/// A backend that can say which groups it holds, next to a given one: on the Secret Service the
/// groups tagged in the same collection, for the encrypted file the files in the same directory.
package protocol GroupListingBackend: CacheBackend {
    /// Where the groups are looked for, for people ("Secret Service, collection alias 'default'").
    func groupsLocation(alongside group: CacheGroup) -> String

    /// Every group with at least one entry where `group` is kept, sorted by name.
    func groupSummaries(alongside group: CacheGroup) throws(TokenCacheError) -> [GroupSummary]
}
