import FoundationEssentials

/// What a group holds, without any secret: for admin tools (`tokencache list`) and apps that
/// show signed-in accounts. The JSON form (sorted keys) is a stable, documented schema.
package struct GroupInventory: Sendable, Hashable, Codable {
    /// One account, with what each client app holds for it.
    package struct Account: Sendable, Hashable, Codable {
        package var username: String
        package var homeAccountID: String
        package var environment: String
        package var tenants: [String]
        package var authorityType: String
        package var name: String?
        package var clients: [Client]
        /// Whether the account's Graph photo is cached (nil: not known, as an agent's inventory).
        package var hasPhoto: Bool? = nil
    }

    /// One client app's view of an account.
    package struct Client: Sendable, Hashable, Codable {
        package var clientID: String
        /// A display name the app registered in its app metadata, if any.
        package var displayName: String?
        /// `signed_in`, `signed_out`, or nil when the app never recorded a state.
        package var signInState: SignInState?
        /// The family the app belongs to, from its app metadata.
        package var familyID: String?
        package var accessTokens: [AccessTokenInfo]
        /// `own`, `family` or `none`: which refresh token the app would redeem.
        package var refreshToken: RefreshTokenKind
        package var hasIDToken: Bool
    }

    /// An access token, described without its secret.
    package struct AccessTokenInfo: Sendable, Hashable, Codable {
        package var scopes: [String]
        package var tenant: String
        package var expiresOn: Date?
        package var isExpired: Bool
    }

    /// Which refresh token a client would use.
    package enum RefreshTokenKind: String, Sendable, Hashable, Codable {
        case own, family, none
    }

    /// The group.
    package var group: String
    /// Where it was read from (backend and collection or file).
    package var location: String
    /// Accounts, sorted by username then home account ID.
    package var accounts: [Account]

    /// The inventory narrowed to the accounts `account` names (by username or home account ID,
    /// the rule every front end uses) and, within each, to the client `clientID` (an account
    /// with no such client is left out): what `list --account/--client` and the agent show.
    package func narrowed(toAccount account: String?, clientID: ClientID?) -> GroupInventory {
        var narrowed = self
        if let account {
            narrowed.accounts = accounts.filter { AccountName.matches(account, username: $0.username, homeAccountID: $0.homeAccountID) }
        }
        if let clientID {
            narrowed.accounts = narrowed.accounts.compactMap { account in
                var account = account
                account.clients = account.clients.filter { $0.clientID.lowercased() == clientID.value.lowercased() }
                return account.clients.isEmpty ? nil : account
            }
        }
        return narrowed
    }
}

extension AccountStore {
    /// Describes every account in the group and, for each client app that touched it, its
    /// sign-in state and tokens. Holds no secrets. Accounts are described on all cores when
    /// there are many (a listing of 1,000 is CPU-bound: about 25 microseconds each).
    package func inventory(now: Date = Date()) throws(TokenCacheError) -> GroupInventory {
        let location = backend.location(of: group)
        let groupName = group.name
        let index = try listingIndex()
        // Once, not for every client of every account; in key order, so that a client with app
        // metadata in two environments is described the same way in every run.
        let appMetadata = AppMetadataByClient(index.all(.appMetadata).sorted { $0.key < $1.key })
        let accounts = Self.accountKeys(in: index)
            .concurrentMap(minimumCount: 64) { self.describeAccount(home: $0.home, cloud: $0.cloud, in: index, appMetadata: appMetadata, now: now) }
            .compactMap { $0 }
            .sorted { ($0.username, $0.homeAccountID, $0.environment) < ($1.username, $1.homeAccountID, $1.environment) }
        return GroupInventory(group: groupName, location: location, accounts: accounts)
    }

    /// One account: a home account ID in one cloud, with only that cloud's tokens.
    private func describeAccount(home: String, cloud: String, in index: CacheIndex, appMetadata: AppMetadataByClient, now: Date) -> GroupInventory.Account? {
        // Each token of the account read once: its client and whether it is in this cloud.
        let read = { (kind: EntityKind) in index.entries(kind, homeAccountID: home).map { ListedToken(entry: $0, cloud: cloud) } }
        let allAccessTokens = read(.accessToken), allIDTokens = read(.idToken), allRefreshTokens = read(.refreshToken)
        let accessTokens = allAccessTokens.filter(\.inCloud)
        let idTokens = allIDTokens.filter(\.inCloud)
        guard let account = Self.account(homeAccountID: home, cloud: cloud, clientID: nil, in: index, idTokens: idTokens.map(\.entry)) else { return nil }
        var clientIDs = Set<String>()
        for token in accessTokens + idTokens + allRefreshTokens where token.inCloud { if let id = token.clientID { clientIDs.insert(id) } }
        // A sign-in state names no cloud: its client shows where it has tokens, or everywhere when
        // it has none in any cloud (signed out), never in a cloud where only another cloud's tokens are.
        for entry in index.entries(.accountMetadata, homeAccountID: home) {
            guard let id = entry["client_id"] else { continue }
            let hasTokens = [allAccessTokens, allIDTokens, allRefreshTokens].contains { $0.contains { ASCII.equalLowercased($0.clientID, id) } }
            if !hasTokens { clientIDs.insert(id) }
        }
        let refreshTokens = Self.refreshTokenCandidates(allRefreshTokens.filter(\.inCloud).map(\.entry))  // once, not per client
        let clients = clientIDs.sorted().map { clientID -> GroupInventory.Client in
            let isClient = { (entry: CacheEntry) in entry["client_id"].map { ASCII.equalsIgnoringCase($0, clientID) } ?? false }
            let isClientsToken = { (token: ListedToken) in token.clientID.map { ASCII.equalsIgnoringCase($0, clientID) } ?? false }
            let clientMetadata = appMetadata.entries(of: clientID, where: isClient)
            // The account's own environment first, as a lookup at its authority reads it.
            let metadata = (clientMetadata.first { Environment.canonical($0["environment"] ?? "") == Environment.canonical(account.environment) }
                ?? clientMetadata.first).map(AppMetadata.init(entry:))
            let ats = accessTokens.filter(isClientsToken)
                .map { AccessToken(entry: $0.entry) }
                .map { at in
                    GroupInventory.AccessTokenInfo(scopes: at.scopes, tenant: at.realm, expiresOn: at.expiresOn,
                                                   isExpired: (at.expiresOn ?? .distantPast) <= now)
                }
                .sorted { ($0.tenant, $0.scopes.joined(separator: " ")) < ($1.tenant, $1.scopes.joined(separator: " ")) }
            let state = index.signInState(homeAccountID: home, clientID: clientID)  // a stored client_id, not a request's
            let refresh = state == .signedOut ? nil
                : Self.refreshTokens(from: refreshTokens, clientID: clientID, environment: nil,
                                     appMetadata: appMetadata.entries(of: clientID) { ASCII.equalLowercased($0["client_id"], clientID) }).first
            let refreshKind: GroupInventory.RefreshTokenKind = refresh.map {
                ASCII.equalLowercased($0["client_id"], clientID) && ($0["family_id"] ?? "").isEmpty ? .own : .family
            } ?? .none
            let hasIDToken = idTokens.contains(where: isClientsToken)
            return GroupInventory.Client(clientID: clientID, displayName: metadata?.displayName, signInState: state,
                                         familyID: metadata?.familyID, accessTokens: ats, refreshToken: refreshKind,
                                         hasIDToken: hasIDToken)
        }
        return GroupInventory.Account(username: account.username, homeAccountID: home, environment: account.environment,
                                      tenants: account.tenants, authorityType: account.authorityType,
                                      name: account.claims?.name, clients: clients,
                                      hasPhoto: Self.hasPhoto(home: home, inCloud: cloud, in: index))
    }
}

/// A token of an account being listed, with what describing the account asks of it again and
/// again read once.
struct ListedToken {
    let entry: CacheEntry
    let clientID: String?
    /// Whether it belongs to the cloud being described.
    let inCloud: Bool

    init(entry: CacheEntry, cloud: String) {
        self.entry = entry
        clientID = entry["client_id"]
        inCloud = AccountStore.cloud(of: entry) == cloud
    }
}

/// A group's app metadata by client ID, for a listing: describing each client of each account
/// looks its entries up instead of comparing every entry's client ID (a group can hold many apps).
struct AppMetadataByClient: Sendable {
    /// In key order.
    private let all: [CacheEntry]
    /// Entries with an ASCII client ID, by that ID lower-cased, each list in key order.
    private let byASCIIClientID: [String: [CacheEntry]]
    /// Entries whose client ID is not ASCII or missing: compared one by one (a non-ASCII ID can
    /// still be equal to an ASCII one once lower-cased: K, the Kelvin sign, is k).
    private let others: [CacheEntry]

    /// - Parameter appMetadata: sorted by key.
    init(_ appMetadata: [CacheEntry]) {
        all = appMetadata
        var byID: [String: [CacheEntry]] = [:], others: [CacheEntry] = []
        for entry in appMetadata {
            if let id = entry["client_id"], ASCII.isASCII(id) { byID[ASCII.lowercased(id), default: []].append(entry) } else { others.append(entry) }
        }
        byASCIIClientID = byID
        self.others = others
    }

    /// The entries `matches` accepts, in key order, where `matches` accepts only entries whose
    /// client ID equals `clientID` in some letter case (ASCII's, or Unicode's lower case).
    func entries(of clientID: String, where matches: (CacheEntry) -> Bool) -> [CacheEntry] {
        guard ASCII.isASCII(clientID) else { return all.filter(matches) }
        let listed = (byASCIIClientID[ASCII.lowercased(clientID)] ?? []).filter(matches)
        let unlisted = others.filter(matches)
        return unlisted.isEmpty ? listed : (listed + unlisted).sorted { $0.key < $1.key }
    }}

extension GroupInventory {
    /// The documented JSON form, as `tokencache list --json` prints it: snake_case keys, sorted;
    /// dates in ISO 8601; absent values left out. The same document JSONEncoder writes with
    /// `.convertToSnakeCase` and `.iso8601`, streamed member by member in key order (building a
    /// JSONValue tree and sorting its keys was a tenth of listing 1,000 accounts). Many accounts
    /// are written on all cores, each apart, then joined.
    package func jsonData(pretty: Bool = true) -> Data {
        var writer = JSONWriter(pretty: pretty)
        writer.beginObject()
        writer.key("accounts")
        writer.beginArray()
        let depth = writer.depth
        let written = accounts.concurrentMap(minimumCount: 64) { account in
            var element = JSONWriter(pretty: pretty, depth: depth)
            account.write(to: &element)
            return element.bytes
        }
        for account in written { writer.element(account) }
        writer.endArray()
        writer.key("group")
        writer.string(group)
        writer.key("location")
        writer.string(location)
        writer.endObject()
        return Data(writer.bytes)
    }
}

extension GroupInventory.Account {
    package func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.key("authority_type")
        writer.string(authorityType)
        writer.key("clients")
        writer.beginArray()
        for client in clients { client.write(to: &writer) }
        writer.endArray()
        writer.key("environment")
        writer.string(environment)
        if let hasPhoto {
            writer.key("has_photo")
            writer.bool(hasPhoto)
        }
        writer.key("home_account_id")
        writer.string(homeAccountID)
        if let name {
            writer.key("name")
            writer.string(name)
        }
        writer.key("tenants")
        writer.beginArray()
        for tenant in tenants { writer.string(tenant) }
        writer.endArray()
        writer.key("username")
        writer.string(username)
        writer.endObject()
    }
}

extension GroupInventory.Client {
    package func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.key("access_tokens")
        writer.beginArray()
        for token in accessTokens { token.write(to: &writer) }
        writer.endArray()
        writer.key("client_id")
        writer.string(clientID)
        if let displayName {
            writer.key("display_name")
            writer.string(displayName)
        }
        if let familyID {
            writer.key("family_id")
            writer.string(familyID)
        }
        writer.key("has_id_token")
        writer.bool(hasIDToken)
        writer.key("refresh_token")
        writer.string(refreshToken.rawValue)
        if let signInState {
            writer.key("sign_in_state")
            writer.string(signInState.rawValue)
        }
        writer.endObject()
    }
}

extension GroupInventory.AccessTokenInfo {
    package func write(to writer: inout JSONWriter) {
        writer.beginObject()
        if let expiresOn {
            writer.key("expires_on")
            writer.string(ISO8601.string(expiresOn))
        }
        writer.key("is_expired")
        writer.bool(isExpired)
        writer.key("scopes")
        writer.beginArray()
        for scope in scopes { writer.string(scope) }
        writer.endArray()
        writer.key("tenant")
        writer.string(tenant)
        writer.endObject()
    }
}
