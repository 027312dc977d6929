// tokencache_sign_in_device_code and tokencache_sign_in_browser: the interactive sign-ins of
// PublicClientApplication behind blocking C calls.
internal import CTokenCache
import FoundationEssentials
import TokenCache

/// The C callback: `void (*)(const char *user_code, const char *verification_uri, const char *message, void *user_data)`.
public typealias DeviceCodeCallback = @convention(c) (UnsafePointer<CChar>?, UnsafePointer<CChar>?, UnsafePointer<CChar>?,
                                                      UnsafeMutableRawPointer?) -> Void

/// The application a sign-in or silent request runs as, on the store behind the handle: the
/// handle's own for this client and authority, so a warm handle reuses its discovered endpoints
/// and keyring connection.
func application(_ store: OpaquePointer?, _ clientID: UnsafePointer<CChar>?,
                 _ authority: UnsafePointer<CChar>?) throws(TokenCacheError) -> PublicClientApplication {
    let handle = try StoreHandle.from(store)
    let clientID = try checkedClientID(clientID)
    return handle.application(clientID: clientID, authority: try Authority(try requiredString(authority, "authority")))
}

/// Signs a user in with a device code (RFC 8628); blocks until done. The C callback gets the code
/// on the calling thread.
@_cdecl("tokencache_sign_in_device_code")
public func tokencache_sign_in_device_code(_ store: OpaquePointer?, _ clientID: UnsafePointer<CChar>?,
                                           _ authority: UnsafePointer<CChar>?, _ scopes: UnsafePointer<CChar>?,
                                           _ onCode: DeviceCodeCallback?, _ userData: UnsafeMutableRawPointer?,
                                           _ timeoutSeconds: UInt32,
                                           _ accessToken: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
                                           _ info: UnsafeMutablePointer<OpaquePointer?>?,
                                           _ error: UnsafeMutableRawPointer?) -> Int32 {
    tokenBoundary(accessToken, info, error) { () throws(TokenCacheError) -> TokenResult in
        guard let onCode else { throw .invalidArgument("on_code", "is NULL") }
        let app = try application(store, clientID, authority)
        var parameters = DeviceCodeParameters(scopes: try scopeList(scopes))
        parameters.timeout = timeoutSeconds == 0 ? nil : TimeInterval(timeoutSeconds)
        // All of it on the calling thread, so the callback runs there, outside Swift's pool, and may call this library.
        return try app.blockingDeviceCodeSignIn(parameters) { message in
            message.userCode.withCString { code in
                message.verificationURI.absoluteString.withCString { uri in
                    message.message.withCString { text in onCode(code, uri, text, userData) }
                }
            }
        }
    }
}

/// Signs a user in with the system browser (authorization code with PKCE, loopback redirect);
/// blocks until done.
@_cdecl("tokencache_sign_in_browser")
public func tokencache_sign_in_browser(_ store: OpaquePointer?, _ clientID: UnsafePointer<CChar>?,
                                       _ authority: UnsafePointer<CChar>?, _ scopes: UnsafePointer<CChar>?,
                                       _ loginHint: UnsafePointer<CChar>?, _ timeoutSeconds: UInt32,
                                       _ accessToken: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
                                       _ info: UnsafeMutablePointer<OpaquePointer?>?,
                                       _ error: UnsafeMutableRawPointer?) -> Int32 {
    tokenBoundary(accessToken, info, error) { () throws(TokenCacheError) -> TokenResult in
        let app = try application(store, clientID, authority)
        var parameters = InteractiveTokenParameters(scopes: try scopeList(scopes))
        parameters.loginHint = try optionalString(loginHint, "login_hint")
        if timeoutSeconds != 0 { parameters.timeout = TimeInterval(timeoutSeconds) }
        return try app.blockingInteractiveSignIn(parameters)
    }
}
