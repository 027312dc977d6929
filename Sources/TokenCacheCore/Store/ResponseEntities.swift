import FoundationEssentials

/// The entities MSAL Python 1.39's `TokenCache.add` creates for one token response.
package struct ResponseEntities: Sendable {
    package var accessToken: CacheEntry
    package var account: CacheEntry?
    package var idToken: CacheEntry?
    package var refreshToken: CacheEntry?
    package var appMetadata: CacheEntry
    package var homeAccountID: String?
    package var claims: IDTokenClaims?

    package var all: [CacheEntry] { [accessToken, account, idToken, refreshToken, appMetadata].compactMap { $0 } }

    /// Builds the entities, validating everything first so a bad response changes nothing.
    package init(response: TokenResponse, clientID: ClientID, authority: Authority, scopes: [String],
         knownHomeAccountID: String? = nil, now: Date) throws(TokenCacheError) {
        let now = Int(now.timeIntervalSince1970)
        let claims = try response.idToken.map(IDTokenClaims.init(jwt:))
        self.claims = claims

        // home_account_id: <uid>.<utid> from client_info, else the ID token's sub (ADFS).
        var homeAccountID: String?
        var hasClientInfo = false
        var clientInfoHome: String?
        if let encoded = response.clientInfo, let info = try ClientInfo.parse(encoded) {
            homeAccountID = "\(info.uid).\(info.utid)"
            clientInfoHome = homeAccountID
            hasClientInfo = true
        }
        if homeAccountID == nil, let sub = claims?.subject {
            homeAccountID = sub
            hasClientInfo = true  // MSAL synthesises client_info {"uid": sub}
        }
        if let known = knownHomeAccountID {
            try Self.checkIdentity(derived: homeAccountID, fromClientInfo: clientInfoHome != nil,
                                   claims: claims, known: known)
            // The account's own ID as stored (the server may change its letter case).
            homeAccountID = known
        }
        self.homeAccountID = homeAccountID
        let home: JSONValue = homeAccountID.map(JSONValue.string) ?? .null

        // target: the granted scopes if the server said, else the requested ones; sorted.
        let granted = response.scope.map(Scopes.split) ?? scopes.filter { !Scopes.reserved.contains($0.lowercased()) }
        let target = granted.sorted().joined(separator: " ")
        let environment = JSONValue.string(authority.environment)
        let realm = JSONValue.string(authority.realm)
        let client = JSONValue.string(clientID.value)

        let expiresIn = response.expiresIn ?? response.expiresOn.map { $0 - now } ?? 600
        let extendedExpiresIn = response.extendedExpiresIn ?? expiresIn
        var at: JSONObject = [
            "credential_type": "AccessToken",
            "secret": .string(response.accessToken),
            "home_account_id": home,
            "environment": environment,
            "client_id": client,
            "target": .string(target),
            "realm": realm,
            "token_type": .string(response.tokenType ?? "Bearer"),
            "cached_at": .string(String(now)),
            "expires_on": .string(String(now + expiresIn)),
            "extended_expires_on": .string(String(now + extendedExpiresIn)),
        ]
        if let refreshIn = response.refreshIn { at["refresh_on"] = .string(String(now + refreshIn)) }
        accessToken = CacheEntry(kind: .accessToken, fields: at)

        if hasClientInfo {
            var fields: JSONObject = [
                "home_account_id": home,
                "environment": environment,
                "realm": realm,
                "local_account_id": claims?.objectID.map(JSONValue.string) ?? claims?.subject.map(JSONValue.string) ?? .null,
                "username": .string(claims?.username ?? ""),
                "authority_type": .string(authority.authorityType),
            ]
            // A port or scheme the host leaves out (a loopback provider): kept for a refresh rebuilt from the account.
            if let origin = authority.origin { fields[Authority.originField] = .string(origin) }
            account = CacheEntry(kind: .account, fields: fields)
        }
        if let idTokenSecret = response.idToken {
            idToken = CacheEntry(kind: .idToken, fields: [
                "credential_type": "IdToken",
                "secret": .string(idTokenSecret),
                "home_account_id": home,
                "environment": environment,
                "realm": realm,
                "client_id": client,
            ])
        }
        if let refreshSecret = response.refreshToken {
            var rt: JSONObject = [
                "credential_type": "RefreshToken",
                "secret": .string(refreshSecret),
                "home_account_id": home,
                "environment": environment,
                "client_id": client,
                "target": .string(target),
                "last_modification_time": .string(String(now)),
            ]
            if let family = response.familyID { rt["family_id"] = .string(family) }
            refreshToken = CacheEntry(kind: .refreshToken, fields: rt)
        }
        var metadata: JSONObject = ["client_id": client, "environment": environment]
        if let family = response.familyID { metadata["family_id"] = .string(family) }
        appMetadata = CacheEntry(kind: .appMetadata, fields: metadata)
    }

    /// A response for a known account (a refresh) must be that account's: the home account ID
    /// its `client_info` gives (or, without one, the ID token's `sub`, or its `oid` and `tid`)
    /// must be the account's. A response that says nothing of identity belongs to the account
    /// whose refresh token was redeemed.
    package static func checkIdentity(derived: String?, fromClientInfo: Bool, claims: IDTokenClaims?,
                              known: String) throws(TokenCacheError) {
        guard let derived else { return }
        if ASCII.equalsIgnoringCase(derived, known) { return }
        if !fromClientInfo, let oid = claims?.objectID, let tid = claims?.tenantID,
           ASCII.equalsIgnoringCase("\(oid).\(tid)", known) {
            return
        }
        throw TokenCacheError(
            .userMismatch,
            "The token endpoint answered a refresh for one account with tokens of another account (user_mismatch).",
            hint: "Nothing was saved. Sign the user in interactively; if it happens again, check which token endpoint the app uses",
            field: fromClientInfo ? "client_info" : "id_token", reason: .tokensOfAnotherAccount)
    }
}
