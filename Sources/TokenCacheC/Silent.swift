// tokencache_acquire_token_silent: the async Swift API behind a blocking C call.
internal import CTokenCache
import FoundationEssentials
import TokenCache

/// A token without user interaction: cached, or refreshed and saved; blocks until done.
@_cdecl("tokencache_acquire_token_silent")
public func tokencache_acquire_token_silent(_ store: OpaquePointer?, _ clientID: UnsafePointer<CChar>?,
                                            _ authority: UnsafePointer<CChar>?, _ account: UnsafePointer<CChar>?,
                                            _ scopes: UnsafePointer<CChar>?, _ flags: UInt32,
                                            _ accessToken: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
                                            _ info: UnsafeMutablePointer<OpaquePointer?>?,
                                            _ error: UnsafeMutableRawPointer?) -> Int32 {
    tokenBoundary(accessToken, info, error) { () throws(TokenCacheError) -> TokenResult in
        let app = try application(store, clientID, authority)
        let scopes = try scopeList(scopes)
        guard flags & ~UInt32(TOKENCACHE_FORCE_REFRESH) == 0 else { throw .invalidArgument("flags", "has unknown bits set") }
        let forceRefresh = flags & UInt32(TOKENCACHE_FORCE_REFRESH) != 0
        let handle = try StoreHandle.from(store)
        if let agent = handle.agent {
            return try agentToken(agent, app: app, account: try requiredString(account, "account"), scopes: scopes, forceRefresh: forceRefresh)
        }
        let account = try singleSignOnAccount(account, of: app, in: handle)
        var parameters = SilentTokenParameters(scopes: scopes, account: account)
        parameters.forceRefresh = forceRefresh
        let request = parameters
        return try waitFor { () async throws(TokenCacheError) in try await app.acquireTokenSilent(request) }
    }
}

/// The named account of the group or, with single sign-on stores set, of those stores.
private func singleSignOnAccount(_ name: UnsafePointer<CChar>?, of app: PublicClientApplication,
                                 in handle: StoreHandle) throws(TokenCacheError) -> CachedAccount {
    do {
        return try handle.account(name, authority: app.authority)
    } catch where error.code == .notFound && !handle.singleSignOnStores.withLock({ $0.isEmpty }) {
        let wanted = try requiredString(name, "account")
        let accounts = try waitFor { () async throws(TokenCacheError) in try await app.accounts() }
        guard let found = accounts.first(where: { AccountName.matches(wanted, $0) }) else {
            throw TokenCacheError(.notFound, "No account '\(wanted)' in group \(handle.store.group) or the single sign-on stores.",
                                  hint: "List the group's accounts with tokencache_store_accounts")
        }
        return found
    }
}

/// A token from the agent, which looks it up or refreshes it on its side: nothing of this
/// process's cache is read or written, and only the access token crosses the socket.
private func agentToken(_ agent: AgentClient, app: PublicClientApplication, account: String, scopes: [String],
                        forceRefresh: Bool) throws(TokenCacheError) -> TokenResult {
    let token = try agent.token(clientID: app.clientID, scopes: scopes, account: account,
                                authority: app.authority.url.absoluteString, forceRefresh: forceRefresh)
    let described = token.homeAccountID.map {
        CachedAccount(homeAccountID: $0, environment: app.authority.environment, username: token.username ?? "")
    }
    return TokenResult(accessToken: token.accessToken, authenticationScheme: token.tokenType,
                       expiresOn: Date(timeIntervalSince1970: TimeInterval(token.expiresOn)),
                       refreshOn: token.refreshOn.map { Date(timeIntervalSince1970: TimeInterval($0)) },
                       tenantID: token.tenantID, scopes: token.scopes, account: described, cachedAt: nil, isFromCache: false)
}
