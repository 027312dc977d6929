import Foundation
import Testing
@_spi(Backend) @testable import TokenCacheCore
import TokenCacheTestSupport

@Suite("Account store: saving responses", .harness)
struct SavingTests {
    let store = AccountStore(backend: InMemoryBackend())

    @Test("Saving a response creates the five entities under MSAL Python's keys")
    func savesEntitiesUnderMSALKeys() throws {
        let alice = Fixtures.alice
        try store.save(Fixtures.tokenResponse(Fixtures.response(for: alice)), clientID: Fixtures.appOne,
                       authority: Fixtures.authority(), scopes: ["User.Read"], now: Fixtures.now)
        let entries = Dictionary(grouping: try store.entries(), by: \.kind)
        let home = alice.homeAccountID
        let env = "login.microsoftonline.com"
        #expect(entries[.accessToken]?.map(\.key) == ["\(home)-\(env)-accesstoken-\(Fixtures.appOne)-\(Fixtures.tenantA)-mail.read user.read"])
        #expect(entries[.refreshToken]?.map(\.key) == ["\(home)-\(env)-refreshtoken-\(Fixtures.appOne)--mail.read user.read"])
        #expect(entries[.idToken]?.map(\.key) == ["\(home)-\(env)-idtoken-\(Fixtures.appOne)-\(Fixtures.tenantA)-"])
        #expect(entries[.account]?.map(\.key) == ["\(home)-\(env)-\(Fixtures.tenantA)"])
        #expect(entries[.appMetadata]?.map(\.key) == ["appmetadata-\(env)-\(Fixtures.appOne)"])

        let at = try #require(entries[.accessToken]?.first)
        #expect(at["target"] == "Mail.Read User.Read")
        #expect(at["cached_at"] == "1800000000")
        #expect(at["expires_on"] == "1800003600")
        #expect(at["extended_expires_on"] == "1800007200")
        #expect(at["token_type"] == "Bearer")
        let account = try #require(entries[.account]?.first)
        #expect(account["username"] == alice.username)
        #expect(account["local_account_id"] == alice.uid)
        #expect(account["authority_type"] == "MSSTS")
        #expect(entries[.refreshToken]?.first?["family_id"] == "1")
        #expect(entries[.appMetadata]?.first?["family_id"] == "1")
        #expect(entries[.accountMetadata]?.first?["sign_in_state"] == "signed_in")
    }

    @Test("An ADFS response without client_info uses the ID token's sub as home account ID")
    func adfsResponseUsesSub() throws {
        var response = Fixtures.response(for: Fixtures.alice, foci: nil)
        response["client_info"] = nil
        response["id_token"] = Fixtures.idToken(["sub": "adfs-sub-1", "upn": "alice@adfs.contoso.com"])
        let authority = try Authority("https://adfs.contoso.com/adfs")
        try store.save(Fixtures.tokenResponse(response), clientID: Fixtures.appOne, authority: authority,
                       scopes: ["openid", "User.Read"], now: Fixtures.now)
        let account = try #require(try store.allAccounts().first)
        #expect(account.homeAccountID == "adfs-sub-1")
        #expect(account.authorityType == "ADFS")
        #expect(account.username == "alice@adfs.contoso.com")
        #expect(account.tenants == ["adfs"])
        #expect(try store.appMetadata(clientID: Fixtures.appOne).first?.familyID == nil)
    }

    @Test("Without a scope in the response the requested scopes are the target, reserved scopes dropped")
    func requestedScopesWithoutResponseScope() throws {
        try store.save(Fixtures.tokenResponse(Fixtures.response(for: Fixtures.alice, scope: nil)), clientID: Fixtures.appOne,
                       authority: Fixtures.authority(), scopes: ["offline_access", "User.Read", "openid", "Files.Read"], now: Fixtures.now)
        #expect(try store.entries().first { $0.kind == .accessToken }?["target"] == "Files.Read User.Read")
    }

    @Test("A new access token replaces cached ones whose scopes overlap, and keeps disjoint ones")
    func overlappingAccessTokensReplaced() throws {
        let alice = Fixtures.alice
        for (scope, tag) in [("User.Read Mail.Read", "1"), ("Files.Read", "2"), ("Mail.Read Calendars.Read", "3")] {
            try store.save(Fixtures.tokenResponse(Fixtures.response(for: alice, scope: scope, tag: tag)), clientID: Fixtures.appOne,
                           authority: Fixtures.authority(), scopes: [], now: Fixtures.now)
        }
        let targets = try store.entries().filter { $0.kind == .accessToken }.compactMap { $0["target"] }.sorted()
        #expect(targets == ["Calendars.Read Mail.Read", "Files.Read"])
    }

    @Test("Saving the same response twice writes nothing the second time")
    func unchangedSaveWritesNothing() throws {
        let backend = InMemoryBackend()
        let store = AccountStore(backend: backend)
        let response = Fixtures.tokenResponse(Fixtures.response(for: Fixtures.alice))
        try store.save(response, clientID: Fixtures.appOne, authority: Fixtures.authority(), scopes: [], now: Fixtures.now)
        let revision = try backend.currentRevision(of: .universalStorage)
        try store.save(response, clientID: Fixtures.appOne, authority: Fixtures.authority(), scopes: [], now: Fixtures.now)
        #expect(try backend.currentRevision(of: .universalStorage) == revision)
    }

    @Test("App metadata keeps fields another SDK added, such as a display name")
    func appMetadataKeepsUnknownFields() throws {
        let json = #"{"AppMetadata": {"appmetadata-login.microsoftonline.com-\#(Fixtures.appOne)": {"client_id": "\#(Fixtures.appOne)", "environment": "login.microsoftonline.com", "display_name": "Mail App"}}}"#
        try store.importMSALJSON(Data(json.utf8))
        try store.save(Fixtures.tokenResponse(Fixtures.response(for: Fixtures.alice)), clientID: Fixtures.appOne,
                       authority: Fixtures.authority(), scopes: [], now: Fixtures.now)
        let metadata = try #require(try store.appMetadata(clientID: Fixtures.appOne).first)
        #expect(metadata.displayName == "Mail App")
        #expect(metadata.familyID == "1")
    }

    @Test("Naming an app before its first sign-in keeps the family refresh token in reach; its first response sets the real family")
    func displayNameBeforeSignIn() throws {
        try store.save(Fixtures.tokenResponse(Fixtures.response(for: Fixtures.alice, foci: "1", tag: "fam")), clientID: Fixtures.appOne,
                       authority: Fixtures.authority(), scopes: [], now: Fixtures.now)
        try store.setAppDisplayName("Notes", clientID: Fixtures.appTwo, authority: Fixtures.authority())
        let account = try #require(try store.allAccounts().first)
        #expect(try store.refreshToken(clientID: try ClientID(Fixtures.appTwo), account: account)?.secret == "rt-\(Fixtures.alice.uid)-fam")
        // App two's own sign-in answers without a family: from then on only its own token.
        try store.save(Fixtures.tokenResponse(Fixtures.response(for: Fixtures.alice, foci: nil, tag: "own")), clientID: Fixtures.appTwo,
                       authority: Fixtures.authority(), scopes: [], now: Fixtures.now)
        let metadata = try #require(try store.appMetadata(clientID: Fixtures.appTwo).first)
        #expect(metadata.displayName == "Notes")
        #expect(metadata.familyID == nil)
        #expect(try store.refreshTokens(clientID: try ClientID(Fixtures.appTwo), account: account).map(\.secret) == ["rt-\(Fixtures.alice.uid)-own"])
    }
}

@Suite("Account store: finding tokens", .harness)
struct LookupTests {
    let store = AccountStore(backend: InMemoryBackend())

    func saveAlice(client: String = Fixtures.appOne, foci: String? = "1", expiresIn: Int = 3600, refreshIn: Int? = nil,
                   tag: String = "1", scope: String = "User.Read Mail.Read", at time: Date = Fixtures.now) throws {
        try store.save(Fixtures.tokenResponse(Fixtures.response(for: Fixtures.alice, scope: scope, foci: foci, tag: tag,
                                                                expiresIn: expiresIn, refreshIn: refreshIn)),
                       clientID: client, authority: Fixtures.authority(), scopes: [], now: time)
    }

    @Test("An access token is found for a subset of its scopes, case-insensitively, and not for a superset")
    func accessTokenScopeSubset() throws {
        try saveAlice()
        let account = try #require(try store.account(Fixtures.alice.username, clientID: Fixtures.appOne))
        let result = try #require(try store.accessToken(clientID: Fixtures.appOne, account: account, scopes: ["user.read", "openid"], now: Fixtures.now))
        #expect(result.accessToken == "at-\(Fixtures.alice.uid)-\(Fixtures.tenantA)-1")
        #expect(result.authorizationHeader == "Bearer at-\(Fixtures.alice.uid)-\(Fixtures.tenantA)-1")
        #expect(result.tenantID == Fixtures.tenantA)
        #expect(result.scopes == ["Mail.Read", "User.Read"])
        #expect(result.expiresOn == Fixtures.now.addingTimeInterval(3600))
        #expect(result.account?.username == Fixtures.alice.username)
        #expect(try store.accessToken(clientID: Fixtures.appOne, account: account, scopes: ["User.Read", "Files.Read"], now: Fixtures.now) == nil)
        #expect(try store.accessToken(clientID: Fixtures.appTwo, account: account, scopes: ["User.Read"], now: Fixtures.now) == nil)
    }

    @Test("A token expiring within the 5-minute margin is not returned; the margin is configurable")
    func expiryMargin() throws {
        try saveAlice(expiresIn: 240)
        let account = try #require(try store.allAccounts().first)
        #expect(try store.accessToken(clientID: Fixtures.appOne, account: account, scopes: ["User.Read"], now: Fixtures.now) == nil)
        var options = AccountStore.Options()
        options.expiryMargin = 60
        let lenient = AccountStore(backend: store.backend, options: options)
        #expect(try lenient.accessToken(clientID: Fixtures.appOne, account: account, scopes: ["User.Read"], now: Fixtures.now) != nil)
    }

    @Test("A token past refresh_on is still returned and says it needs refreshing")
    func refreshOnHonoured() throws {
        try saveAlice(refreshIn: 600)
        let account = try #require(try store.allAccounts().first)
        let early = try #require(try store.accessToken(clientID: Fixtures.appOne, account: account, scopes: ["User.Read"], now: Fixtures.now))
        #expect(!early.needsRefresh(now: Fixtures.now))
        let later = Fixtures.now.addingTimeInterval(900)
        let late = try #require(try store.accessToken(clientID: Fixtures.appOne, account: account, scopes: ["User.Read"], now: later))
        #expect(late.needsRefresh(now: later))
    }

    @Test("A tenant-specific authority finds that tenant's token; common means the home tenant")
    func tenantSelection() throws {
        try saveAlice()
        try store.save(Fixtures.tokenResponse(Fixtures.response(for: Fixtures.alice, realm: Fixtures.tenantB, tag: "B")),
                       clientID: Fixtures.appOne, authority: Fixtures.authority(Fixtures.tenantB), scopes: [], now: Fixtures.now)
        let account = try #require(try store.allAccounts().first)
        #expect(account.tenants == [Fixtures.tenantA, Fixtures.tenantB].sorted())
        let inB = try store.accessToken(clientID: Fixtures.appOne, account: account, scopes: ["User.Read"],
                                        authority: Fixtures.authority(Fixtures.tenantB), now: Fixtures.now)
        #expect(inB?.tenantID == Fixtures.tenantB)
        let common = try store.accessToken(clientID: Fixtures.appOne, account: account, scopes: ["User.Read"],
                                           authority: Authority("https://login.microsoftonline.com/common"), now: Fixtures.now)
        #expect(common?.tenantID == Fixtures.tenantA)
    }

    @Test("A token saved through a generic authority (organizations) is found through the same authority")
    func genericAuthorityRealm() throws {
        let organizations = try Authority("https://login.microsoftonline.com/organizations")
        try store.save(Fixtures.tokenResponse(Fixtures.response(for: Fixtures.alice)), clientID: Fixtures.appOne,
                       authority: organizations, scopes: [], now: Fixtures.now)
        let account = try #require(try store.allAccounts().first)
        #expect(try store.accessToken(clientID: Fixtures.appOne, account: account, scopes: ["User.Read"],
                                      authority: organizations, now: Fixtures.now) != nil)
        #expect(try store.accessToken(clientID: Fixtures.appOne, account: account, scopes: ["User.Read"],
                                      authority: Fixtures.authority(Fixtures.tenantB), now: Fixtures.now) == nil)
    }

    @Test("Refresh tokens come in MSAL's order: family from app metadata, then the app's own newest")
    func refreshTokenOrder() throws {
        // App two has its own (non-family) tokens, saved at two times, and app one a family token.
        try saveAlice(client: Fixtures.appTwo, foci: nil, tag: "old", scope: "Files.Read", at: Fixtures.now)
        try saveAlice(client: Fixtures.appTwo, foci: nil, tag: "new", scope: "Notes.Read", at: Fixtures.now.addingTimeInterval(60))
        try saveAlice(client: Fixtures.appOne, foci: "1", tag: "fam")
        let account = try #require(try store.allAccounts().first)
        // App two's metadata has no family: only its own tokens, newest first.
        #expect(try store.refreshTokens(clientID: try ClientID(Fixtures.appTwo), account: account).map(\.secret)
                == ["rt-\(Fixtures.alice.uid)-new", "rt-\(Fixtures.alice.uid)-old"])
        // App three has no metadata: family "1" is tried.
        #expect(try store.refreshToken(clientID: try ClientID(Fixtures.appThree), account: account)?.secret == "rt-\(Fixtures.alice.uid)-fam")
        #expect(try store.refreshToken(clientID: try ClientID(Fixtures.appOne), account: account)?.familyID == "1")
    }

    @Test("ID-token claims are exposed on the account")
    func idTokenClaims() throws {
        try saveAlice()
        let claims = try #require(try store.account(Fixtures.alice.homeAccountID)?.claims)
        #expect(claims.name == Fixtures.alice.name)
        #expect(claims.givenName == "Given")
        #expect(claims.familyName == "Family")
        #expect(claims.email == Fixtures.alice.username)
        #expect(claims.preferredUsername == Fixtures.alice.username)
        #expect(claims.objectID == Fixtures.alice.uid)
        #expect(claims.tenantID == Fixtures.tenantA)
    }

    @Test("Environment aliases match: a token saved at login.windows.net is found for login.microsoftonline.com")
    func environmentAliases() throws {
        try store.save(Fixtures.tokenResponse(Fixtures.response(for: Fixtures.alice)), clientID: Fixtures.appOne,
                       authority: Authority("https://login.windows.net/\(Fixtures.tenantA)"), scopes: [], now: Fixtures.now)
        let account = try #require(try store.allAccounts().first)
        #expect(try store.accessToken(clientID: Fixtures.appOne, account: account, scopes: ["User.Read"],
                                      authority: Fixtures.authority(), now: Fixtures.now) != nil)
    }
}

@Suite("Account store: several apps, sign-out and removal", .harness)
struct MultiAppTests {
    let store = AccountStore(backend: InMemoryBackend())

    func save(_ user: Fixtures.User, client: String, foci: String? = "1") throws {
        try store.save(Fixtures.tokenResponse(Fixtures.response(for: user, foci: foci, tag: client)), clientID: client,
                       authority: Fixtures.authority(), scopes: [], now: Fixtures.now)
    }

    @Test("An app in the family sees an account another app signed in, with the family refresh token")
    func familyMemberSeesAccount() throws {
        try save(Fixtures.alice, client: Fixtures.appOne)
        let accounts = try store.accounts(clientID: Fixtures.appTwo)
        #expect(accounts.map(\.username) == [Fixtures.alice.username])
        let rt = try #require(try store.refreshToken(clientID: try ClientID(Fixtures.appTwo), account: accounts[0]))
        #expect(rt.familyID == "1")
        #expect(rt.clientID == Fixtures.appOne)
    }

    @Test("An app outside any family does not see another app's accounts")
    func nonFamilyAppIsolated() throws {
        try save(Fixtures.alice, client: Fixtures.appOne, foci: nil)
        try save(Fixtures.bob, client: Fixtures.appTwo, foci: nil)
        #expect(try store.accounts(clientID: Fixtures.appOne).map(\.username) == [Fixtures.alice.username])
        #expect(try store.accounts(clientID: Fixtures.appTwo).map(\.username) == [Fixtures.bob.username])
        #expect(try store.allAccounts().count == 2)
    }

    @Test("Signing one app out removes its credentials and hides the account from it; other apps keep SSO")
    func signOutOneApp() throws {
        try save(Fixtures.alice, client: Fixtures.appOne)
        try save(Fixtures.alice, client: Fixtures.appTwo)
        let account = try #require(try store.account(Fixtures.alice.username, clientID: Fixtures.appOne))
        try store.signOut(account, clientID: Fixtures.appOne)

        #expect(try store.accounts(clientID: Fixtures.appOne).isEmpty)
        #expect(try store.signInState(of: account, clientID: Fixtures.appOne) == .signedOut)
        #expect(try store.accessToken(clientID: Fixtures.appOne, account: account, scopes: ["User.Read"], now: Fixtures.now) == nil)
        #expect(try store.refreshToken(clientID: try ClientID(Fixtures.appOne), account: account) == nil)
        #expect(!(try store.entries()).contains { $0.kind == .accessToken && $0["client_id"] == Fixtures.appOne })

        #expect(try store.accounts(clientID: Fixtures.appTwo).map(\.username) == [Fixtures.alice.username])
        #expect(try store.accessToken(clientID: Fixtures.appTwo, account: account, scopes: ["User.Read"], now: Fixtures.now) != nil)
        #expect(try store.signInState(of: account, clientID: Fixtures.appTwo) == .signedIn)

        // Signing in again makes the account visible again.
        try save(Fixtures.alice, client: Fixtures.appOne)
        #expect(try store.accounts(clientID: Fixtures.appOne).count == 1)
    }

    @Test("Removing an account removes it for every app and leaves other accounts")
    func removeAccountEverywhere() throws {
        try save(Fixtures.alice, client: Fixtures.appOne)
        try save(Fixtures.alice, client: Fixtures.appTwo)
        try save(Fixtures.bob, client: Fixtures.appOne)
        let alice = try #require(try store.account(Fixtures.alice.username))
        #expect(try store.remove(alice) > 0)
        #expect(try store.allAccounts().map(\.username) == [Fixtures.bob.username])
        #expect(!(try store.entries()).contains { $0["home_account_id"] == Fixtures.alice.homeAccountID })
        #expect(try store.accounts(clientID: Fixtures.appTwo).map(\.username) == [Fixtures.bob.username])
    }

    @Test("Wiping the group removes everything")
    func wipeGroup() throws {
        try save(Fixtures.alice, client: Fixtures.appOne)
        try store.removeAll()
        #expect(try store.entries().isEmpty)
    }

    @Test("Two stores on one backend see each other's writes and removals")
    func storesShareBackend() throws {
        let other = AccountStore(backend: store.backend)
        try save(Fixtures.alice, client: Fixtures.appOne)
        let account = try #require(try other.account(Fixtures.alice.username, clientID: Fixtures.appOne))
        #expect(try other.accessToken(clientID: Fixtures.appOne, account: account, scopes: ["User.Read"], now: Fixtures.now) != nil)
        try store.remove(account)
        #expect(try other.accessToken(clientID: Fixtures.appOne, account: account, scopes: ["User.Read"], now: Fixtures.now) == nil)
    }

    @Test("Groups are isolated from each other")
    func groupsIsolated() throws {
        let custom = AccountStore(backend: store.backend, group: try CacheGroup("com.example.isolated"))
        try save(Fixtures.alice, client: Fixtures.appOne)
        #expect(try custom.allAccounts().isEmpty)
        #expect(try AccountStore(backend: store.backend, group: .adalCache).allAccounts().isEmpty)
    }

    @Test("The accounts of a group, found in one pass over its account records, are those found home account ID by home account ID: IDs in two letter cases, an empty ID, a record without one, two clouds")
    func accountKeysInOnePass() {
        let records: [(home: String?, environments: [String])] = [
            ("uid.tid", ["login.microsoftonline.com", "login.windows.net"]), ("UID.TID", ["login.microsoftonline.us"]),
            ("other.tid", ["login.chinacloudapi.cn", "login.microsoftonline.com"]), ("", ["login.microsoftonline.com"]),
            (nil, ["login.microsoftonline.us"]), ("uid.tid", ["login.chinacloudapi.cn"]),
        ]
        var entries: [CacheEntry] = []
        for (index, (home, environments)) in records.enumerated() {
            for environment in environments {
                var fields: JSONObject = ["environment": .string(environment), "realm": "tid"]
                if let home { fields["home_account_id"] = .string(home) }
                entries.append(CacheEntry(kind: .account, fields: fields, key: "account-\(index)-\(environment)"))
            }
        }
        let index = CacheIndex(entries)
        let oneByOne = AccountStore.homeAccountIDs(in: index).flatMap { home in
            AccountStore.clouds(ofHomeAccountID: home, in: index).map { (home, $0) }
        }
        let onePass = AccountStore.accountKeys(in: index)
        #expect(onePass.map { "\($0.home) \($0.cloud)" } == oneByOne.map { "\($0.0) \($0.1)" })
        #expect(onePass.count > 6)
    }

    @Test("A listing finds a client's app metadata by client ID exactly as comparing every entry finds it: any letter case, a non-ASCII ID that lower-cases to an ASCII one, a missing ID, in key order")
    func appMetadataByClientMatchesTheScan() {
        let ids: [String?] = ["aaaa-bbbb", "AAAA-BBBB", "aaaa-bbbk", "aaaa-bbb\u{212A}", "\u{e9}t\u{e9}", "\u{c9}T\u{c9}", nil, "other"]
        let entries = ids.enumerated().flatMap { index, id in
            ["login.microsoftonline.com", "login.windows.net"].map { environment in
                var fields: JSONObject = ["environment": .string(environment), "family_id": .string("\(index)")]
                if let id { fields["client_id"] = .string(id) }
                return CacheEntry(kind: .appMetadata, fields: fields, key: "appmetadata-\(environment)-\(index)")
            }
        }.sorted { $0.key < $1.key }
        let table = AppMetadataByClient(entries)
        for query in ["aaaa-bbbb", "Aaaa-Bbbb", "aaaa-bbbk", "AAAA-BBBK", "aaaa-bbb\u{212A}", "\u{e9}t\u{e9}", "\u{c9}t\u{e9}", "other", "none", ""] {
            let ignoringASCIICase = { (entry: CacheEntry) in entry["client_id"].map { ASCII.equalsIgnoringCase($0, query) } ?? false }
            let lowerCased = { (entry: CacheEntry) in ASCII.equalLowercased(entry["client_id"], query) }
            #expect(table.entries(of: query, where: ignoringASCIICase).map(\.key) == entries.filter(ignoringASCIICase).map(\.key), "\(query)")
            #expect(table.entries(of: query, where: lowerCased).map(\.key) == entries.filter(lowerCased).map(\.key), "\(query)")
        }
        #expect(table.entries(of: "aaaa-bbbk") { ASCII.equalLowercased($0["client_id"], "aaaa-bbbk") }.count == 4,
                "the Kelvin sign's entries, found apart from the table, join the ASCII ones")
    }

    @Test("The inventory's JSON form is the document JSONEncoder writes for it (snake_case keys, ISO 8601 dates)")
    func inventoryJSONMatchesEncodable() throws {
        try save(Fixtures.alice, client: Fixtures.appOne)
        try save(Fixtures.bob, client: Fixtures.appTwo)
        let account = try #require(try store.account(Fixtures.bob.username, clientID: Fixtures.appTwo))
        try store.signOut(account, clientID: Fixtures.appTwo)
        try store.setAppDisplayName("Notes", clientID: Fixtures.appOne, authority: Fixtures.authority())
        let inventory = try store.inventory(now: Fixtures.now)
        #expect(inventory.accounts.contains { $0.clients.contains { $0.displayName != nil && $0.signInState == .signedIn } })
        #expect(inventory.accounts.contains { $0.clients.contains { $0.signInState == .signedOut && $0.familyID != nil } })
        #expect(inventory.accounts.contains { $0.clients.contains { $0.accessTokens.contains { $0.expiresOn != nil } } })
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        encoder.keyEncodingStrategy = .convertToSnakeCase
        let reference = JSONParserTests.parsed(try encoder.encode(inventory))
        #expect(reference != nil && JSONParserTests.parsed(inventory.jsonData()) == reference)
        #expect(inventory.jsonData() == (try encoder.encode(inventory)), "same bytes: these keys sort alike both ways")
    }

    @Test("With many accounts, written on all cores and joined, the inventory's JSON is still the document JSONEncoder writes, pretty or compact")
    func inventoryJSONOfManyAccounts() throws {
        for index in 0..<70 {
            let user = Fixtures.User(uid: String(format: "%08x-0000-0000-0000-0000000000aa", index), tenant: Fixtures.tenantA,
                                     username: "user\(index)@contoso.com", name: "User \(index)")
            try save(user, client: index % 3 == 0 ? Fixtures.appTwo : Fixtures.appOne)
        }
        let inventory = try store.inventory(now: Fixtures.now)
        #expect(inventory.accounts.count == 70)
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.keyEncodingStrategy = .convertToSnakeCase
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        #expect(inventory.jsonData(pretty: false) == (try encoder.encode(inventory)))
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        #expect(inventory.jsonData() == (try encoder.encode(inventory)))
    }
}

/// An account is a home account ID in one cloud, as in MSAL (#34 item 1): a response another
/// host saves claiming alice's `uid.utid` is another account, never alice's description or tokens.
@Suite("Account store: one home account ID at two clouds", .harness)
struct AccountStoreCloudTests {
    let store = AccountStore(backend: InMemoryBackend())
    // Sorts before login.microsoftonline.com: the planted record is the first by key.
    let planted = try! Authority("https://evil.example/\(Fixtures.tenantA)")
    let impostor = Fixtures.User(uid: Fixtures.alice.uid, tenant: Fixtures.tenantA, username: Fixtures.alice.username, name: "Planted")

    func saveBoth() throws -> CachedAccount {
        try store.save(Fixtures.tokenResponse(Fixtures.response(for: Fixtures.alice, scope: "User.Read", tag: "alice")),
                       clientID: Fixtures.appOne, authority: Fixtures.authority(), scopes: [])
        let alice = try #require(try store.account(Fixtures.alice.username))
        var response = Fixtures.response(for: impostor, scope: "User.Read", tag: "planted")
        response["id_token"] = Fixtures.idToken(["sub": "sub-x", "oid": "planted-oid", "tid": Fixtures.tenantA,
                                                 "preferred_username": Fixtures.alice.username, "name": "Planted"])
        try store.save(Fixtures.tokenResponse(response), clientID: Fixtures.appOne, authority: planted, scopes: [])
        return alice
    }

    @Test("The planted host's records never describe alice: accounts() and allAccounts() list two accounts, alice's unchanged")
    func descriptionUnchanged() throws {
        let alice = try saveBoth()
        let all = try store.allAccounts()
        #expect(all.count == 2)
        #expect(all.first { $0.environment == "login.microsoftonline.com" } == alice)
        #expect(Set(try store.accounts(clientID: Fixtures.appOne).map(\.environment)) == ["login.microsoftonline.com", "evil.example"])
        let inventory = try store.inventory()
        #expect(inventory.accounts.map(\.environment).sorted() == ["evil.example", "login.microsoftonline.com"])
        #expect(inventory.accounts.first { $0.environment == "login.microsoftonline.com" }?.name == Fixtures.alice.name)
    }

    @Test("A lookup without an authority throws ambiguousAccount naming both hosts; with one, each cloud's own account and token")
    func lookupWithoutAuthorityRefused() throws {
        _ = try saveBoth()
        for name in [Fixtures.alice.username, Fixtures.alice.homeAccountID] {
            let error = #expect(throws: TokenCacheError.self) { try store.account(name) }
            #expect(error?.code == .ambiguousAccount)
            #expect(error?.message.contains("login.microsoftonline.com") == true && error?.message.contains("evil.example") == true, "\(String(describing: error))")
            #expect(throws: TokenCacheError.self) { try store.account(name, clientID: Fixtures.appOne) }
        }
        let alice = try #require(try store.account(Fixtures.alice.username, authority: Fixtures.authority()))
        #expect(alice.localAccountID == Fixtures.alice.uid && alice.environment == "login.microsoftonline.com")
        #expect(try store.accessToken(clientID: Fixtures.appOne, account: alice, scopes: ["User.Read"])?.accessToken
                == "at-\(Fixtures.alice.uid)-\(Fixtures.tenantA)-alice")
        #expect(try store.accessTokensByTenant(clientID: Fixtures.appOne, account: alice, scopes: ["User.Read"]).map(\.accessToken)
                == ["at-\(Fixtures.alice.uid)-\(Fixtures.tenantA)-alice"])
        let other = try #require(try store.account(Fixtures.alice.username, authority: planted))
        #expect(other.localAccountID == "planted-oid")
        #expect(try store.accessToken(clientID: Fixtures.appOne, account: other, scopes: ["User.Read"])?.accessToken
                == "at-\(Fixtures.alice.uid)-\(Fixtures.tenantA)-planted")
    }

    @Test("Records at aliases of one cloud (login.windows.net) stay one account, found without an authority")
    func aliasesAreOneAccount() throws {
        try store.save(Fixtures.tokenResponse(Fixtures.response(for: Fixtures.alice, scope: "User.Read", tag: "a")),
                       clientID: Fixtures.appOne, authority: Fixtures.authority(), scopes: [])
        try store.save(Fixtures.tokenResponse(Fixtures.response(for: Fixtures.alice, scope: "Mail.Read", tag: "b")),
                       clientID: Fixtures.appTwo, authority: try Authority("https://login.windows.net/\(Fixtures.tenantA)"), scopes: [])
        #expect(try store.allAccounts().count == 1)
        let alice = try #require(try store.account(Fixtures.alice.username))
        #expect(try store.accessToken(clientID: Fixtures.appTwo, account: alice, scopes: ["Mail.Read"]) != nil)
    }

    @Test("Removing or signing out of the planted account leaves alice's records and tokens")
    func removeTouchesOneCloud() throws {
        let alice = try saveBoth()
        let other = try #require(try store.account(Fixtures.alice.username, authority: planted))
        try store.signOut(other, clientID: Fixtures.appOne)
        #expect(try store.entries().contains { $0.kind == .accessToken && $0["environment"] == "login.microsoftonline.com" })
        try store.remove(other)
        #expect(try store.allAccounts() == [alice])
        // App metadata is the client's, not the account's: it stays, as after any removal.
        #expect(try store.entries().filter { $0.kind != .appMetadata }.allSatisfy { $0["environment"].map { $0 == "login.microsoftonline.com" } ?? true })
    }
}
