import FoundationEssentials
import TokenCacheCore

/// A browser sign-in finished by the token keeper (#62 item 4, docs/KEEPER.md "Signing in"):
/// the app ran the sign-in (its loopback listener, the browser, PKCE, the state check) and sends
/// the authorization code with its PKCE verifier and nonce; the keeper redeems it at the token
/// endpoint its own discovery finds, keeps the refresh token in its store, and answers with the
/// access token, ID token and account (``AgentProtocol/Token``), never a refresh token.
package struct KeeperCodeRedemption: Codable, Sendable {
    /// The keeper's operation.
    package static let operation = "redeem-code"

    package var version = AgentProtocol.version
    package var op = KeeperCodeRedemption.operation
    /// Which of the app's groups the account is saved to (nil: the first its apps file names).
    package var group: String?
    package var clientID: String
    /// The authority the user signed in at: the keeper discovers its token endpoint itself.
    package var authority: String
    package var scopes: [String]
    /// The authorization code (single use, bound to `redirectURI` and the verifier's challenge).
    package var code: String
    /// The loopback redirect URI the code was sent to.
    package var redirectURI: String
    /// The PKCE verifier (RFC 7636) whose challenge the authorization request carried.
    package var codeVerifier: String
    /// The nonce the authorization request carried: the ID token must carry it.
    package var nonce: String
    /// A claims challenge (JSON) the sign-in answered.
    package var claims: String?
    /// The authority's kind (`aad`, `b2c`, `adfs`, `oidc`), as the app set or inferred it.
    package var authorityType: String?
    /// The app's client capabilities (`cp1`), merged into the redemption's claims as the app's own would be.
    package var clientCapabilities: [String]?

    package init(group: String?, clientID: ClientID, authority: Authority, scopes: [String], code: String, redirectURI: String,
                 codeVerifier: String, nonce: String, claims: String?, clientCapabilities: [String]) {
        (self.group, self.clientID, self.authority, self.scopes) = (group, clientID.value, authority.url.absoluteString, scopes)
        (self.code, self.redirectURI, self.codeVerifier, self.nonce, self.claims) = (code, redirectURI, codeVerifier, nonce, claims)
        (authorityType, self.clientCapabilities) = (authority.kind.rawValue, clientCapabilities.isEmpty ? nil : clientCapabilities)
    }

    enum CodingKeys: String, CodingKey {
        case version, op, group, clientID = "client_id", authority, scopes, code, redirectURI = "redirect_uri",
             codeVerifier = "code_verifier", nonce, claims, authorityType = "authority_type", clientCapabilities = "client_capabilities"
    }

    /// The grant the token endpoint is sent.
    package var grant: [String: String] {
        var grant = ["grant_type": "authorization_code", "code": code, "redirect_uri": redirectURI, "code_verifier": codeVerifier]
        if let claims { grant["claims"] = claims }
        return grant
    }

    /// Checks what the keeper redeems: a PKCE verifier of RFC 7636's form, a loopback `http`
    /// redirect (RFC 8252 7.3: a desktop app's), a nonce and a scope. The token endpoint checks
    /// the code against them; the keeper refuses anything that is not a desktop sign-in first.
    /// - Throws: `invalidArgument` naming the field.
    package func check() throws(TokenCacheError) {
        let unreserved = codeVerifier.utf8.allSatisfy { byte in
            (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || byte == 0x2D || byte == 0x2E || byte == 0x5F || byte == 0x7E
        }
        guard (43...128).contains(codeVerifier.utf8.count), unreserved else {
            throw TokenCacheError.invalidArgument("code_verifier", "is not a PKCE verifier (43 to 128 letters, digits, '-', '.', '_' or '~')",
                                                  hint: "The keeper redeems only codes of a sign-in with PKCE")
        }
        guard Self.isLoopback(redirectURI) else {
            throw TokenCacheError.invalidArgument("redirect_uri", "is not a loopback redirect (http://localhost:PORT, http://127.0.0.1:PORT or http://[::1]:PORT)",
                                                  hint: "The keeper redeems only codes of a desktop sign-in's loopback redirect")
        }
        guard !code.isEmpty, code.utf8.count <= 8192 else { throw TokenCacheError.invalidArgument("code", "is empty or longer than 8192 bytes") }
        guard !nonce.isEmpty else { throw TokenCacheError.invalidArgument("nonce", "is empty", hint: "Send the nonce the authorization request carried") }
        guard !scopes.isEmpty else { throw TokenCacheError.invalidArgument("scopes", "is empty", hint: "Name at least one scope") }
    }

    /// Whether `uri` is `http://` to a loopback host with a port (and any path, no query or fragment).
    static func isLoopback(_ uri: String) -> Bool {
        guard let components = URLComponents(string: uri), components.scheme == "http", let port = components.port, (1...65535).contains(port),
              components.user == nil, components.password == nil, components.query == nil, components.fragment == nil else { return false }
        return ["localhost", "127.0.0.1", "[::1]", "::1"].contains(components.host?.lowercased() ?? "")
    }
}

/// A device code sign-in (RFC 8628) the token keeper runs for the app: the keeper asks for the
/// code and answers twice on the connection, first with what to show the user
/// (``AgentProtocol/DeviceCode``: never the device code it polls with), then, once the user signed
/// in, with the token, ID token and account; the refresh token stays in its store. The app
/// closing the connection ends the keeper's polling.
package struct KeeperDeviceCodeSignIn: Codable, Sendable {
    /// The keeper's operation.
    package static let operation = "sign-in-device-code"
    /// The longest wait the keeper takes (a code lives 15 minutes at Entra ID).
    package static let maximumTimeoutSeconds = 3600

    package var version = AgentProtocol.version
    package var op = KeeperDeviceCodeSignIn.operation
    package var group: String?
    package var clientID: String
    package var authority: String
    package var scopes: [String]
    package var claims: String?
    /// The app's bound on the wait, in seconds (nil: as long as the code lives, at most ``defaultTimeoutSeconds``).
    package var timeoutSeconds: Int?
    /// The authority's kind (`aad`, `b2c`, `adfs`, `oidc`), as the app set or inferred it.
    package var authorityType: String?
    /// The app's client capabilities (`cp1`).
    package var clientCapabilities: [String]?

    /// The keeper's bound on a wait the app did not bound: Entra ID's codes live 15 minutes.
    package static let defaultTimeoutSeconds = 900

    package init(group: String?, clientID: ClientID, authority: Authority, scopes: [String], claims: String?, timeoutSeconds: Int?,
                 clientCapabilities: [String]) {
        (self.group, self.clientID, self.authority, self.scopes) = (group, clientID.value, authority.url.absoluteString, scopes)
        (self.claims, self.timeoutSeconds) = (claims, timeoutSeconds.map { min(max($0, 1), Self.maximumTimeoutSeconds) })
        (authorityType, self.clientCapabilities) = (authority.kind.rawValue, clientCapabilities.isEmpty ? nil : clientCapabilities)
    }

    enum CodingKeys: String, CodingKey {
        case version, op, group, clientID = "client_id", authority, scopes, claims, timeoutSeconds = "timeout_seconds",
             authorityType = "authority_type", clientCapabilities = "client_capabilities"
    }
}

/// A native authentication sign-in (docs/NATIVE-AUTH.md) finished by the token keeper: the app
/// ran the flow's steps (initiate, challenge, the user's code or password) and sends the token
/// grant that ends it; the keeper redeems it at the authority's token endpoint, saves the account
/// as a native sign-in is saved and answers with the access token, ID token and account, never
/// the refresh token. The grant's secrets (the continuation token, a password or code) are in
/// the message only, which the keeper zeroes once decoded.
package struct KeeperNativeRedemption: Codable, Sendable {
    /// The keeper's operation.
    package static let operation = "redeem-native"
    /// The grants that end a native sign-in, and the fields each may carry.
    package static let grants: [String: Set<String>] = [
        "oob": ["grant_type", "continuation_token", "oob"],
        "password": ["grant_type", "continuation_token", "username", "password"],
        "continuation_token": ["grant_type", "continuation_token", "username"],
    ]

    package var version = AgentProtocol.version
    package var op = KeeperNativeRedemption.operation
    package var group: String?
    package var clientID: String
    /// The native authentication authority (`https://TENANT.ciamlogin.com/...`), as the app normalised it.
    package var authority: String
    package var scopes: [String]
    package var grant: [String: String]
    /// The app's client capabilities (`cp1`).
    package var clientCapabilities: [String]?

    package init(group: String?, clientID: ClientID, authority: Authority, scopes: [String], grant: [String: String], clientCapabilities: [String]) {
        (self.group, self.clientID, self.authority, self.scopes, self.grant) = (group, clientID.value, authority.url.absoluteString, scopes, grant)
        self.clientCapabilities = clientCapabilities.isEmpty ? nil : clientCapabilities
    }

    enum CodingKeys: String, CodingKey {
        case version, op, group, clientID = "client_id", authority, scopes, grant, clientCapabilities = "client_capabilities"
    }

    /// Checks that the grant is one that ends a native sign-in, with its fields only.
    /// - Throws: `invalidArgument` naming the field.
    package func check() throws(TokenCacheError) {
        guard let type = grant["grant_type"], let fields = Self.grants[type] else {
            throw TokenCacheError.invalidArgument("grant.grant_type", "is not oob, password or continuation_token",
                                                  hint: "The keeper redeems only the grant that ends a native sign-in")
        }
        if let extra = grant.keys.sorted().first(where: { !fields.contains($0) }) {
            throw TokenCacheError.invalidArgument("grant.\(extra)", "is not a field of a \(type) grant")
        }
        guard let continuation = grant["continuation_token"], !continuation.isEmpty else {
            throw TokenCacheError.invalidArgument("grant.continuation_token", "is missing", hint: "Send the continuation token of the flow's last step")
        }
        guard !scopes.isEmpty else { throw TokenCacheError.invalidArgument("scopes", "is empty", hint: "Name at least one scope") }
    }
}

/// Asked before a sign-in through the token keeper starts: whether the keeper would redeem this
/// app's sign-in for `clientID` (the app's group and client allowed, the group enrolled), so a
/// refused app fails before the user signs in, not after.
package struct KeeperSignInCheck: Codable, Sendable {
    /// The keeper's operation.
    package static let operation = "sign-in-check"

    package var version = AgentProtocol.version
    package var op = KeeperSignInCheck.operation
    package var group: String?
    package var clientID: String
    /// The authority the app signs in at: the keeper redeems only at hosts its group's accounts signed in at.
    package var authority: String
    package var authorityType: String?

    package init(group: String?, clientID: ClientID, authority: Authority) {
        (self.group, self.clientID, self.authority, authorityType) = (group, clientID.value, authority.url.absoluteString, authority.kind.rawValue)
    }

    enum CodingKeys: String, CodingKey { case version, op, group, clientID = "client_id", authority, authorityType = "authority_type" }
}

extension AgentClient {
    /// Runs a device code sign-in in the token keeper: `onCode` gets what to show the user (on the
    /// calling thread), then the call waits for the keeper's token.
    /// - Throws: the keeper's error (`accessDenied`, `timedOut`, the user's `accessDenied`…),
    ///   `cancelled` when `isCancelled` said so, `agentUnavailable`.
    package func deviceCodeSignIn(_ request: KeeperDeviceCodeSignIn, onCode: (AgentProtocol.DeviceCode) -> Void,
                                  isCancelled: @escaping @Sendable () -> Bool) throws(TokenCacheError) -> TokenResult {
        try signedIn(exchange(request, onDeviceCode: onCode, isCancelled: isCancelled))
    }

    /// Sends the grant that ends a native sign-in to the token keeper; returns its token, with the ID token and account.
    /// - Throws: the keeper's error: the provider's refusal keeps its server details (`server`).
    package func redeem(_ redemption: KeeperNativeRedemption) throws(TokenCacheError) -> TokenResult {
        try signedIn(exchange(redemption))
    }

    /// Asks the token keeper whether it would redeem a sign-in of `clientID` for this process.
    /// - Throws: the keeper's refusal (`accessDenied`, `notFound` for a group not enrolled), `agentUnavailable`.
    package func checkSignIn(clientID: ClientID, authority: Authority) throws(TokenCacheError) {
        _ = try exchange(KeeperSignInCheck(group: group, clientID: clientID, authority: authority))
    }

    /// Sends `redemption` to the token keeper and returns the token it answers, with the ID token
    /// and the account (the keeper keeps the refresh token).
    /// - Throws: the keeper's error (`accessDenied` for an app it does not allow, `authorizationFailed`
    ///   for a code the token endpoint refused…), `agentUnavailable` when it cannot be reached.
    package func redeem(_ redemption: KeeperCodeRedemption) throws(TokenCacheError) -> TokenResult {
        try signedIn(exchange(redemption))
    }

    /// A sign-in answer's token, with its account (the keeper always sends both).
    private func signedIn(_ response: AgentProtocol.Response) throws(TokenCacheError) -> TokenResult {
        guard let token = response.token, let account = token.account else {
            throw TokenCacheError(.agentUnavailable, "The token keeper at \(path) answered a sign-in without the token and its account.",
                                  hint: "Use a tokencache of the same release on both sides", reason: .agentProtocol(path: path))
        }
        return token.result(of: account.cachedAccount)
    }
}
