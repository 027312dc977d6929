// tokencache_acquire_token_silent: the library's one token request (TokenEngine), decided on the calling thread.
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
        var request = TokenRequest(clientID: try checkedClientID(clientID), scopes: try scopeList(scopes),
                                   account: try optionalString(account, "account"),
                                   authority: try optionalString(authority, "authority").map { text throws(TokenCacheError) in try Authority(text) })
        request.forceRefresh = flags & UInt32(TOKENCACHE_FORCE_REFRESH) != 0
        request.clientCapabilities = handle.clientCapabilities.withLock { $0 }
        return try handle.engine.blockingToken(request)
    }
}

/// A token that answers a claims challenge: as tokencache_acquire_token_silent with a forced
/// refresh carrying the claims; the claims of a refusal that asks for them go to `requiredClaims`.
@_cdecl("tokencache_acquire_token_with_claims")
public func tokencache_acquire_token_with_claims(_ store: OpaquePointer?, _ clientID: UnsafePointer<CChar>?,
                                                 _ authority: UnsafePointer<CChar>?, _ account: UnsafePointer<CChar>?,
                                                 _ scopes: UnsafePointer<CChar>?, _ claims: UnsafePointer<CChar>?,
                                                 _ accessToken: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
                                                 _ info: UnsafeMutablePointer<OpaquePointer?>?,
                                                 _ requiredClaims: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
                                                 _ error: UnsafeMutableRawPointer?) -> Int32 {
    requiredClaims?.pointee = nil
    var refusal: String?
    let status = tokenBoundary(accessToken, info, error) { () throws(TokenCacheError) -> TokenResult in
        let handle = try StoreHandle.from(store)
        var request = TokenRequest(clientID: try checkedClientID(clientID), scopes: try scopeList(scopes),
                                   account: try optionalString(account, "account"),
                                   authority: try optionalString(authority, "authority").map { text throws(TokenCacheError) in try Authority(text) })
        request.forceRefresh = true
        request.claims = try optionalString(claims, "claims").flatMap { $0.isEmpty ? nil : $0 }
        request.clientCapabilities = handle.clientCapabilities.withLock { $0 }
        _ = try request.claimsParameter  // malformed claims: INVALID_ARGUMENT before any request
        do throws(TokenCacheError) {
            return try handle.engine.blockingToken(request)
        } catch {
            refusal = error.server?.claims
            throw error
        }
    }
    if let refusal, let requiredClaims { requiredClaims.pointee = try? mallocCopy(refusal) }
    return status
}

/// The decoded claims of a resource's `WWW-Authenticate` insufficient_claims challenge.
@_cdecl("tokencache_claims_from_www_authenticate")
public func tokencache_claims_from_www_authenticate(_ header: UnsafePointer<CChar>?,
                                                    _ claims: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
                                                    _ error: UnsafeMutableRawPointer?) -> Int32 {
    claims?.pointee = nil
    return boundary(error) { () throws(TokenCacheError) in
        let out = try requiredOut(claims, "claims")
        guard let challenge = ClaimsChallenge(wwwAuthenticate: try requiredString(header, "header")) else {
            throw TokenCacheError(.notFound, "The header has no claims challenge (Bearer error=\"insufficient_claims\" with claims).",
                                  hint: "Pass the resource's whole WWW-Authenticate value; without a challenge, retry as before")
        }
        out.pointee = try mallocCopy(challenge.claims)
    }
}
