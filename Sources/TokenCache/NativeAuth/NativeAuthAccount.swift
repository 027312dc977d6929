import FoundationEssentials
import TokenCacheCore

/// The account a native sign-in gave (MSAL's `MSALNativeAuthUserAccountResult`): who signed in,
/// their ID-token claims, silent access tokens, and sign-out.
public struct NativeAuthAccount: Sendable {
    let application: PublicClientApplication
    /// The account as the shared cache holds it.
    public let account: CachedAccount
    /// The ID token of the sign-in, when this value came from one. A secret: never log it.
    public let idToken: String?

    /// The username (the email address).
    public var username: String { account.username }
    /// The ID token's claims (name, email, object and tenant IDs, the user flow's attributes),
    /// decoded without validation as MSAL does.
    public var claims: IDTokenClaims? { idToken.flatMap { try? IDTokenClaims(jwt: $0) } ?? account.claims }

    /// An access token for the scopes without user interaction: a cached one, or one redeemed
    /// with the account's refresh token at the host that issued it.
    /// - Throws: `TokenCacheError` `interactionRequired` (sign in again), `network`, `serverError`.
    public func getAccessToken(scopes: [String], forceRefresh: Bool = false) async throws(TokenCacheError) -> TokenResult {
        try await application.acquireTokenSilent(try silentParameters(scopes: scopes, forceRefresh: forceRefresh))
    }

    /// ``getAccessToken(scopes:forceRefresh:)`` for a caller that blocks by contract (the command line).
    package func blockingAccessToken(scopes: [String], forceRefresh: Bool = false) throws(TokenCacheError) -> TokenResult {
        try application.blockingTokenSilent(try silentParameters(scopes: scopes, forceRefresh: forceRefresh))
    }

    private func silentParameters(scopes: [String], forceRefresh: Bool) throws(TokenCacheError) -> SilentTokenParameters {
        var parameters = SilentTokenParameters(scopes: scopes, account: account)
        parameters.forceRefresh = forceRefresh
        if let tenant = account.homeTenantID {
            parameters.authority = try application.authority.withTenant(tenant)  // the realm the tokens were saved under
        }
        return parameters
    }

    /// Signs the app out of the account, locally as MSAL does: its tokens go from the cache and
    /// no request is sent.
    public func signOut() async throws(TokenCacheError) {
        try await application.remove(account)
    }
}
