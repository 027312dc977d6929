/// An in-memory, indexed view of one group: lookups touch the few entries of one account
/// instead of scanning the cache, as MSAL Python does on every lookup.
package struct CacheIndex: Sendable {
    private(set) var entries: [EntityKind: [String: CacheEntry]] = [:]
    /// Entries by kind and lower-cased home account ID, in insertion order (a replaced entry
    /// moves last): an account has a handful of each kind, so they are kept whole rather than as
    /// keys to look up.
    private var entriesByAccount: [EntityKind: [String: [CacheEntry]]] = [:]
    /// Access tokens by home account ID exactly as stored, pre-digested for warm lookups.
    private(set) var accessTokensByHome: [String: [IndexedAccessToken]] = [:]
    /// Sign-in states by home account ID exactly as stored.
    private(set) var signInStatesByHome: [String: [(clientID: String, state: SignInState)]] = [:]
    /// Whether access tokens are digested for lookups (``accessTokens(homeAccountID:)``); a
    /// listing's index, which reads them through ``entries(_:homeAccountID:)``, does without.
    private var digestsAccessTokens = true

    package init() {}

    /// Indexes entries. Kinds are indexed apart from one another, so a large group's access
    /// tokens (their digests are most of the work) are indexed on another core meanwhile; for a
    /// listing, whose index digests nothing, ID tokens go with them, which halves the work.
    /// - Parameter digestingAccessTokens: false for an index that only lists (no token lookups).
    package init(_ entries: some Sequence<CacheEntry>, digestingAccessTokens: Bool = true) {
        var first: [CacheEntry] = [], second: [CacheEntry] = []
        for entry in entries {
            let firstPart = entry.kind == .accessToken || (!digestingAccessTokens && entry.kind == .idToken)
            if firstPart { first.append(entry) } else { second.append(entry) }
        }
        guard first.count >= 500 else {
            self.init(inserting: second + first, digestingAccessTokens: digestingAccessTokens)
            return
        }
        // Two parts, one per core (a machine with one core indexes them one after the other).
        let parts = [first, second].concurrentMap(minimumCount: 2) {
            CacheIndex(inserting: $0, digestingAccessTokens: digestingAccessTokens)
        }
        self = parts[1]
        // The first part's kinds (sign-in states come from account metadata, in the second).
        for (kind, entries) in parts[0].entries {
            self.entries[kind] = entries
            entriesByAccount[kind] = parts[0].entriesByAccount[kind]
        }
        accessTokensByHome = parts[0].accessTokensByHome
    }

    private init(inserting entries: [CacheEntry], digestingAccessTokens: Bool) {
        digestsAccessTokens = digestingAccessTokens
        // Each kind's table at its final size: growing one rehashes every (long) key at each doubling.
        var counts: [EntityKind: Int] = [:]
        for entry in entries { counts[entry.kind, default: 0] += 1 }
        for (kind, count) in counts { self.entries[kind] = Dictionary(minimumCapacity: count) }
        for entry in entries { insert(entry) }
    }

    package var count: Int { entries.values.reduce(0) { $0 + $1.count } }

    package func all(_ kind: EntityKind) -> Dictionary<String, CacheEntry>.Values {
        (entries[kind] ?? [:]).values
    }

    package func entry(_ kind: EntityKind, key: String) -> CacheEntry? { entries[kind]?[key] }

    /// The stored entry describing the same thing as `entry`, matched on its fields (its
    /// identity) whatever key another SDK stored it under; of several, the one with the smallest
    /// key. Every identity but app metadata's begins with the lower-cased home account ID, so
    /// only the entries of that account are compared (app metadata: the few of the group).
    package func existing(matching entry: CacheEntry) -> CacheEntry? {
        if let same = entries[entry.kind]?[entry.key] { return same }
        let identity = entry.identity
        let candidates = entry.kind == .appMetadata ? Array(all(.appMetadata))
            : entries(entry.kind, homeAccountID: entry["home_account_id"] ?? "")
        return candidates.filter { $0.identity == identity }.min { $0.key < $1.key }
    }

    /// Entries of one kind for one home account ID.
    package func entries(_ kind: EntityKind, homeAccountID: String) -> [CacheEntry] {
        entriesByAccount[kind]?[Self.accountKey(homeAccountID)] ?? []
    }

    package mutating func apply(_ change: CacheChange) {
        switch change {
        case .upsert(let entry): insert(entry)
        case .remove(let kind, let key): remove(kind, key: key)
        }
    }

    package mutating func insert(_ entry: CacheEntry) {
        if let replaced = entries[entry.kind, default: [:]].updateValue(entry, forKey: entry.key) { unlink(replaced) }
        let home = entry["home_account_id"] ?? ""
        entriesByAccount[entry.kind, default: [:]][Self.accountKey(home), default: []].append(entry)
        switch entry.kind {
        case .accessToken where digestsAccessTokens:
            accessTokensByHome[home, default: []].append(IndexedAccessToken(entry))
        case .accountMetadata:
            signInStatesByHome[home, default: []].append((entry["client_id"] ?? "", AccountMetadata(entry: entry).signInState))
        default:
            break
        }
    }

    /// A home account ID lower-cased, as entries are filed: itself (no allocation) when it is
    /// ASCII without a capital, as every real one is; anything else as `lowercased()` folds it.
    /// One pass over the contiguous bytes (`utf8.allSatisfy` goes through unspecialized generic code).
    package static func accountKey(_ home: String) -> String {
        var contiguous = home
        let folded = contiguous.withUTF8 { !$0.contains { $0 >= 0x80 || ($0 >= 65 && $0 <= 90) } }
        return folded ? home : home.lowercased()
    }

    /// Access tokens of an account (home account ID in any case).
    package func accessTokens(homeAccountID: String) -> [IndexedAccessToken] {
        accessTokensByHome[homeAccountID] ?? accessTokensByHome[homeAccountID.lowercased()]
            ?? accessTokensByHome.first { ASCII.equalsIgnoringCase($0.key, homeAccountID) }?.value ?? []
    }

    /// The sign-in state a client recorded for an account, if any.
    package func signInState(homeAccountID: String, clientID: String) -> SignInState? {
        let states = signInStatesByHome[homeAccountID] ?? entries(.accountMetadata, homeAccountID: homeAccountID)
            .map { ($0["client_id"] ?? "", AccountMetadata(entry: $0).signInState) }
        return states.first { ASCII.equalsIgnoringCase($0.clientID, clientID) }?.state
    }

    package mutating func remove(_ kind: EntityKind, key: String) {
        guard let old = entries[kind]?.removeValue(forKey: key) else { return }
        unlink(old)
    }

    /// Removes a replaced or removed entry from the per-account lookups.
    private mutating func unlink(_ old: CacheEntry) {
        let kind = old.kind, key = old.key
        let storedHome = old["home_account_id"] ?? ""
        let home = Self.accountKey(storedHome)
        entriesByAccount[kind]?[home]?.removeAll { $0.key == key }
        if entriesByAccount[kind]?[home]?.isEmpty == true { entriesByAccount[kind]?[home] = nil }
        switch kind {
        case .accessToken:
            accessTokensByHome[storedHome]?.removeAll { $0.key == key }
            if accessTokensByHome[storedHome]?.isEmpty == true { accessTokensByHome[storedHome] = nil }
        case .accountMetadata:
            let client = old["client_id"] ?? ""
            signInStatesByHome[storedHome]?.removeAll { $0.clientID == client }
            if signInStatesByHome[storedHome]?.isEmpty == true { signInStatesByHome[storedHome] = nil }
        default:
            break
        }
    }
}

/// An access token digested once at load, so a warm lookup compares prepared fields and returns
/// a prepared result without parsing or allocating.
package struct IndexedAccessToken: Sendable {
    package let key: String
    package let clientID: String
    /// Canonical environment (alias group).
    package let environment: String
    package let realm: String
    /// Scopes, lower-cased.
    package let targets: Set<String>
    package let expiresOn: Double
    /// ``AccessToken/isPlainBearer``.
    package let isPlainBearer: Bool
    /// The token as a result, without its account.
    package let result: TokenResult

    package init(_ entry: CacheEntry) {
        let token = AccessToken(entry: entry)
        key = entry.key
        clientID = token.clientID
        environment = Environment.canonical(token.environment)
        realm = token.realm
        // Every field once: an index of 1,000 accounts digests 3,000 of these.
        let scopes = token.scopes
        targets = Scopes.comparableSet(scopes)
        let expires = entry.fields["expires_on"]?.secondsValue
        expiresOn = expires ?? 0
        isPlainBearer = token.isPlainBearer
        result = AccountStore.result(token, scopes: scopes, expiresOn: expires, account: nil)
    }
}
