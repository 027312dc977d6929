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
        let account = try singleSignOnAccount(account, of: app, in: StoreHandle.from(store))
        var parameters = SilentTokenParameters(scopes: scopes, account: account)
        parameters.forceRefresh = flags & UInt32(TOKENCACHE_FORCE_REFRESH) != 0
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
        let wanted = try requiredString(name, "account").lowercased()
        let accounts = try waitFor { () async throws(TokenCacheError) in try await app.accounts() }
        guard let found = accounts.first(where: { $0.username.lowercased() == wanted || $0.homeAccountID.lowercased() == wanted }) else {
            throw TokenCacheError(.notFound, "No account '\(wanted)' in group \(handle.store.group) or the single sign-on stores.",
                                  hint: "List the group's accounts with tokencache_store_accounts")
        }
        return found
    }
}
