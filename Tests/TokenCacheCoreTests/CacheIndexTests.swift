import Testing
@testable import TokenCacheCore
import TokenCacheTestSupport

/// The index matches an entry to a stored one on its fields, whatever key another SDK stored it
/// under, comparing only the entries of the same account.
@Suite("Cache index", .harness)
struct CacheIndexTests {
    static func accessToken(key: String, environment: String = "login.microsoftonline.com", target: String = "User.Read Mail.Read") -> CacheEntry {
        CacheEntry(kind: .accessToken, fields: [
            "credential_type": .string("AccessToken"), "home_account_id": .string("uid.utid"),
            "environment": .string(environment), "client_id": .string(Fixtures.appOne), "realm": .string(Fixtures.tenantA),
            "target": .string(target), "secret": .string("at-\(key)")], key: key)
    }

    @Test("An entry stored under another SDK's key is found by its fields, also when the home account ID differs in letter case; of several, the smallest key, and removing one keeps the others found; another account's token is not a match")
    func existingMatchesOnFields() {
        // Our key format for the token, and what other SDKs write: another scope order, an alias environment.
        let ours = Self.accessToken(key: "ours", target: "mail.read user.read")
        var upperCaseHome = Self.accessToken(key: "z-other", environment: "login.windows.net")
        upperCaseHome.fields["home_account_id"] = .string("UID.UTID")
        var otherAccount = Self.accessToken(key: "a-other-account")
        otherAccount.fields["home_account_id"] = .string("other.utid")
        var index = CacheIndex([upperCaseHome, Self.accessToken(key: "b-other", target: "Mail.Read User.Read"), otherAccount])
        #expect(index.existing(matching: ours)?.key == "b-other")
        // Changes keep the prepared lookup current.
        index.remove(.accessToken, key: "b-other")
        #expect(index.existing(matching: ours)?.key == "z-other")
        index.insert(Self.accessToken(key: "a-new"))
        #expect(index.existing(matching: ours)?.key == "a-new")
        index.remove(.accessToken, key: "a-new")
        index.remove(.accessToken, key: "z-other")
        #expect(index.existing(matching: ours) == nil)
        #expect(index.existing(matching: Self.accessToken(key: "x", target: "Files.Read")) == nil)
    }
    @Test("An access token's warm-lookup digest gives the result the store builds from the entry")
    func digestMatchesStoreResult() {
        var entry = Self.accessToken(key: "digest", target: "Mail.Read User.Read")
        entry.fields["expires_on"] = .string("1700003600")
        entry.fields["refresh_on"] = .string("1700001800")
        entry.fields["cached_at"] = .integer(1_700_000_000)
        entry.fields["token_type"] = .string("pop")
        let digest = IndexedAccessToken(entry)
        #expect(digest.result == AccountStore.result(AccessToken(entry: entry), account: nil))
        #expect(digest.expiresOn == 1_700_003_600 && digest.targets == ["mail.read", "user.read"] && !digest.isPlainBearer)
    }

    @Test("An entry replaced under the same key by one of another account moves to that account; removing it leaves neither holding it")
    func replacedEntryMovesAccount() {
        var index = CacheIndex([Self.accessToken(key: "k")])
        var moved = Self.accessToken(key: "k")
        moved.fields["home_account_id"] = .string("Other.Home")
        index.insert(moved)
        #expect(index.entries(.accessToken, homeAccountID: "uid.utid").isEmpty && index.accessTokens(homeAccountID: "uid.utid").isEmpty)
        #expect(index.entries(.accessToken, homeAccountID: "other.home").map(\.key) == ["k"])
        #expect(index.accessTokens(homeAccountID: "Other.Home").map(\.key) == ["k"])
        index.remove(.accessToken, key: "k")
        #expect(index.entries(.accessToken, homeAccountID: "other.home").isEmpty && index.accessTokens(homeAccountID: "Other.Home").isEmpty)
        #expect(index.count == 0)
    }

    @Test("A listing's index (no access token digests) holds the same entries by key and by account, small or large enough for two cores")
    func listingIndexWithoutDigests() {
        for count in [3, 600] {
            let tokens = (0..<count).map { Self.accessToken(key: "k\($0)", target: "Scope\($0).Read") }
            let full = CacheIndex(tokens), listing = CacheIndex(tokens, digestingAccessTokens: false)
            #expect(listing.entries == full.entries)
            #expect(listing.entries(.accessToken, homeAccountID: "UID.utid").map(\.key) == full.entries(.accessToken, homeAccountID: "uid.utid").map(\.key))
            #expect(full.accessTokens(homeAccountID: "uid.utid").count == count)
            #expect(listing.accessTokens(homeAccountID: "uid.utid").isEmpty, "nothing digested")
        }
    }
}
