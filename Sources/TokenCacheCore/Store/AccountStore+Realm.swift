import FoundationEssentials
import Logging

extension AccountStore {
    /// Moves an account's records in one cloud from one realm to another: its account records,
    /// and the client's access and ID tokens (refresh tokens have no realm). For what an older
    /// version saved under an authority's path (`contoso.onmicrosoft.com`) instead of the
    /// tenant ID MSAL keys them by.
    ///
    /// A record the new realm already holds is kept: of two access tokens whose scopes overlap,
    /// the newer (`cached_at`), as a save replaces them; account and ID token records there were
    /// written by a later sign-in. New records are written before old ones are removed, so a
    /// batch cut short leaves a copy, never a loss.
    ///
    /// - Returns: the account as it reads afterwards, or nil when the cloud holds none.
    package func moveRealm(homeAccountID home: String, environment: String, clientID: ClientID,
                           from old: String, to new: String) throws(TokenCacheError) -> CachedAccount? {
        let cloud = Environment.canonical(environment)
        return try mutate { index in
            guard !ASCII.equalsIgnoringCase(old, new) else { return [] }
            var upserts: [CacheChange] = [], removals: [CacheChange] = []
            for kind in [EntityKind.account, .idToken, .accessToken] {
                for entry in index.entries(kind, homeAccountID: home)
                where Self.cloud(of: entry) == cloud && ASCII.equalsIgnoringCase(entry["realm"] ?? "", old)
                    && (kind == .account || ASCII.equalLowercased(entry["client_id"], clientID.value)) {
                    var fields = entry.fields
                    fields["realm"] = .string(new)
                    let moved = CacheEntry(kind: kind, fields: fields)
                    removals.append(.remove(kind, key: entry.key))
                    if kind == .accessToken {
                        let rivals = Self.overlapping(moved, in: index)
                        let age = { (at: CacheEntry) in at.fields["cached_at"]?.secondsValue ?? 0 }
                        guard rivals.allSatisfy({ age($0) < age(moved) }) else { continue }
                        removals += rivals.map { .remove(.accessToken, key: $0.key) }
                        upserts.append(.upsert(moved))
                    } else if index.existing(matching: moved) == nil {
                        upserts.append(.upsert(moved))
                    }
                }
            }
            if !removals.isEmpty {
                options.logger.debug("Moving account records to the tenant ID", metadata: [
                    "client_id": .string(clientID.value), "account": options.privacy.pii(home), "entries": .stringConvertible(removals.count)])
            }
            // An older copy stored under the moved record's own key is overwritten, not removed after.
            let written = Set(upserts.compactMap { if case .upsert(let entry) = $0 { entry.key } else { nil } })
            return upserts + removals.filter { if case .remove(_, let key) = $0 { !written.contains(key) } else { true } }
        } result: { index in
            account(homeAccountID: home, cloud: cloud, clientID: clientID, in: index)
        }
    }

    /// The stored access tokens of the same account, client, cloud and realm whose scopes
    /// overlap the token's (its own stored copy among them): those a save of it replaces.
    package static func overlapping(_ at: CacheEntry, in index: CacheIndex) -> [CacheEntry] {
        guard let home = at["home_account_id"] else { return [] }
        let targets = Scopes.comparableSet(target: at["target"] ?? "")
        return index.entries(.accessToken, homeAccountID: home).filter { old in
            sameSlot(old, at) && !Scopes.comparableSet(target: old["target"] ?? "").isDisjoint(with: targets)
        }
    }
}
