/// A view of a group that reads only what lookups for some accounts need: their account
/// records, tokens and sign-in states, plus every app's metadata. Writes, revisions and
/// targeted searches go to the underlying backend unchanged.
///
/// For short-lived processes that serve one account, such as `tokencache token --account`: on a
/// backend with one item per entry (the Secret Service) it reads through targeted attribute
/// searches instead of the whole group, so a cold lookup costs about the same with 1 or 1,000
/// accounts in the group. (On a one-blob backend such as the encrypted file every targeted
/// search reads the blob; use the backend itself there.)
///
/// An ``AccountStore`` over this view sees the chosen accounts exactly as over the whole group;
/// other accounts are not in it, so it must not be used to list or remove them.
package struct AccountScopedBackend: CacheBackend {
    /// The backend that holds the group.
    package let base: any CacheBackend
    /// The home account IDs whose records, tokens and sign-in states are read.
    package let homeAccountIDs: Set<String>

    /// - Parameters:
    ///   - base: the backend that holds the group.
    ///   - homeAccountIDs: the accounts whose records, tokens, ID tokens and sign-in states are read.
    package init(_ base: any CacheBackend, homeAccountIDs: Set<String>) {
        self.base = base
        self.homeAccountIDs = homeAccountIDs
    }

    /// A view for the accounts whose username (case-insensitive) or home account ID is
    /// `usernameOrHomeAccountID`: found by the `username` attribute, else the home account ID
    /// attribute (attributes only: on the Secret Service no secret is read, so this goes ahead
    /// of the session's key exchange), else (records written before the `username` attribute
    /// existed, or a home account ID in other letter case) by reading every account record.
    package init(_ base: any CacheBackend, account usernameOrHomeAccountID: String,
                in group: CacheGroup) throws(TokenCacheError) {
        let wanted = usernameOrHomeAccountID.lowercased()
        var records = try base.attributes(of: .account, matching: [.username: wanted], in: group)
        if records.isEmpty { records = try base.attributes(of: .account, matching: [.homeAccountID: usernameOrHomeAccountID], in: group) }
        if records.isEmpty { records = try base.entries(of: .account, matching: [:], in: group).map(\.queryableAttributes) }
        let matching = records.filter { AccountName.matches(wanted, username: $0[.username], homeAccountID: $0[.homeAccountID]) }
        self.init(base, homeAccountIDs: Set(matching.compactMap { $0[.homeAccountID] }))
    }

    package func location(of group: CacheGroup) -> String { base.location(of: group) }

    /// App metadata and every entry of the chosen accounts, in one read where the backend can
    /// (on the Secret Service: a search per query, then one GetSecrets). The revision is read
    /// first, so a change made while reading shows as a new revision.
    package func load(_ group: CacheGroup) throws(TokenCacheError) -> CacheSnapshot {
        let revision = try base.currentRevision(of: group)
        let queries = [CacheQuery(kind: .appMetadata)] + homeAccountIDs.sorted().map { CacheQuery(attributes: [.homeAccountID: $0]) }
        return CacheSnapshot(entries: try base.entries(matchingAny: queries, in: group), revision: revision)
    }

    package func entries(of kind: EntityKind, matching attributes: [CacheAttribute: String],
                        in group: CacheGroup) throws(TokenCacheError) -> [CacheEntry] {
        try base.entries(of: kind, matching: attributes, in: group)
    }

    package func entries(matchingAny queries: [CacheQuery], in group: CacheGroup) throws(TokenCacheError) -> [CacheEntry] {
        try base.entries(matchingAny: queries, in: group)
    }

    package func attributes(of kind: EntityKind, matching attributes: [CacheAttribute: String],
                           in group: CacheGroup) throws(TokenCacheError) -> [[CacheAttribute: String]] {
        try base.attributes(of: kind, matching: attributes, in: group)
    }

    package func apply(_ changes: [CacheChange], to group: CacheGroup,
                      expected: CacheRevision?) throws(TokenCacheError) -> CacheRevision? {
        try base.apply(changes, to: group, expected: expected)
    }

    package func currentRevision(of group: CacheGroup) throws(TokenCacheError) -> CacheRevision? {
        try base.currentRevision(of: group)
    }

    package func removeAll(in group: CacheGroup) throws(TokenCacheError) {
        try base.removeAll(in: group)
    }
}
