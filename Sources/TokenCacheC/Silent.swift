// tokencache_acquire_token_silent: the library's one token request (TokenEngine) behind a blocking C call.
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
        let handle = try StoreHandle.from(store)
        guard flags & ~UInt32(TOKENCACHE_FORCE_REFRESH) == 0 else { throw .invalidArgument("flags", "has unknown bits set") }
        var request = TokenRequest(clientID: try clientIDString(clientID), scopes: try scopeList(scopes),
                                   account: try optionalString(account, "account"),
                                   authority: try optionalString(authority, "authority").map { text throws(TokenCacheError) in try Authority(text) })
        request.forceRefresh = flags & UInt32(TOKENCACHE_FORCE_REFRESH) != 0
        let engine = handle.engine, asked = request
        return try waitFor { () async throws(TokenCacheError) in try await engine.token(asked) }
    }
}
