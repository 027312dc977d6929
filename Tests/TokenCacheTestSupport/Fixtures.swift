import Foundation
@_spi(Backend) import TokenCacheCore

/// Synthetic token responses, shaped like Microsoft identity platform responses.
package enum Fixtures {
    package static let tenantA = "11111111-1111-1111-1111-111111111111"
    package static let tenantB = "22222222-2222-2222-2222-222222222222"
    package static let appOne = "aaaaaaaa-0000-0000-0000-000000000001"
    package static let appTwo = "aaaaaaaa-0000-0000-0000-000000000002"
    package static let appThree = "aaaaaaaa-0000-0000-0000-000000000003"
    package static let now = Date(timeIntervalSince1970: 1_800_000_000)

    package static func authority(_ tenant: String = tenantA) -> Authority {
        try! Authority("https://login.microsoftonline.com/\(tenant)")
    }

    package static func base64URL(_ object: [String: Any]) -> String {
        Base64URL.encode(try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]))
    }

    package static func idToken(_ claims: [String: Any]) -> String {
        "\(base64URL(["alg": "none", "typ": "JWT"])).\(base64URL(claims)).c2lnbmF0dXJl"
    }

    package struct User {
        package var uid: String
        package var tenant: String
        package var username: String
        package var name: String
        package var homeAccountID: String { "\(uid).\(tenant)" }

        package init(uid: String, tenant: String, username: String, name: String) {
            self.uid = uid
            self.tenant = tenant
            self.username = username
            self.name = name
        }
    }

    package static let alice = User(uid: "a11ce000-0000-0000-0000-000000000000", tenant: tenantA,
                            username: "alice@contoso.com", name: "Alice Example")
    package static let bob = User(uid: "b0b00000-0000-0000-0000-000000000000", tenant: tenantA,
                          username: "bob@contoso.com", name: "Bob Example")

    /// A response JSON object (as the token endpoint would send it) for a user.
    package static func response(for user: User, realm: String? = nil, scope: String? = "User.Read Mail.Read",
                         foci: String? = "1", tag: String = "1", expiresIn: Any = 3600,
                         refreshIn: Int? = nil) -> [String: Any] {
        let realm = realm ?? user.tenant
        var object: [String: Any] = [
            "token_type": "Bearer",
            "expires_in": expiresIn,
            "ext_expires_in": 7200,
            "access_token": "at-\(user.uid)-\(realm)-\(tag)",
            "refresh_token": "rt-\(user.uid)-\(tag)",
            "id_token": idToken([
                "aud": "x", "iss": "https://login.microsoftonline.com/\(realm)/v2.0",
                "sub": "sub-\(user.uid)", "oid": user.uid, "tid": realm,
                "preferred_username": user.username, "name": user.name,
                "given_name": "Given", "family_name": "Family", "email": user.username,
            ]),
            "client_info": base64URL(["uid": user.uid, "utid": user.tenant]),
        ]
        if let scope { object["scope"] = scope }
        if let foci { object["foci"] = foci }
        if let refreshIn { object["refresh_in"] = refreshIn }
        return object
    }

    package static func json(_ object: [String: Any]) -> Data {
        try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
    }

    package static func tokenResponse(_ object: [String: Any]) -> TokenResponse {
        try! TokenResponse(json: json(object))
    }

    /// The entries of `count` accounts signed in to app one, saved through the account store in
    /// memory: 400 make about 1.3 MB of cache.
    package static func largeCache(accounts count: Int = 400, group: CacheGroup) throws -> [CacheEntry] {
        let memory = InMemoryBackend()
        let store = AccountStore(backend: memory, group: group)
        for index in 0..<count {
            let user = User(uid: String(format: "%08x-0000-0000-0000-000000000000", index), tenant: tenantA,
                            username: "user\(index)@contoso.com", name: "User \(index)")
            try store.save(tokenResponse(response(for: user, tag: "large")), clientID: appOne,
                           authority: authority(), scopes: [], now: now)
        }
        return try memory.load(group).entries
    }
}
