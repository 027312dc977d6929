// tokencache_sign_in_device_code and tokencache_sign_in_browser: the interactive sign-ins of
// PublicClientApplication behind blocking C calls.
internal import CTokenCache
import Dispatch
import FoundationEssentials
import Synchronization
import TokenCache

/// The C callback: `void (*)(const char *user_code, const char *verification_uri, const char *message, void *user_data)`.
public typealias DeviceCodeCallback = @convention(c) (UnsafePointer<CChar>?, UnsafePointer<CChar>?, UnsafePointer<CChar>?,
                                                      UnsafeMutableRawPointer?) -> Void

/// What a running sign-in task hands the C thread waiting for it: the device code message (once),
/// then the outcome; each is followed by one signal.
private final class SignInMailbox: Sendable {
    private struct Contents: Sendable {
        var message: DeviceCodeMessage?
        var outcome: Result<TokenResult, TokenCacheError>?
    }

    private let contents = Mutex(Contents())
    private let arrived = DispatchSemaphore(value: 0)

    func post(_ message: DeviceCodeMessage) {
        contents.withLock { $0.message = message }
        arrived.signal()
    }

    func finish(_ outcome: Result<TokenResult, TokenCacheError>) {
        contents.withLock { $0.outcome = outcome }
        arrived.signal()
    }

    /// Waits for the next signal.
    func wait() { arrived.wait() }

    /// What arrived: the message (handed out once) and the outcome, if any.
    func take() -> (DeviceCodeMessage?, Result<TokenResult, TokenCacheError>?) {
        contents.withLock { contents in
            defer { contents.message = nil }
            return (contents.message, contents.outcome)
        }
    }
}

/// Runs a device code sign-in on the Swift concurrency pool while the calling (C) thread waits;
/// the code message is delivered to `show` on the calling thread, so the C callback runs outside
/// the pool and may call this library. The sign-in keeps its own timeout
/// (``DeviceCodeParameters/timeout``): this only waits.
private func waitForSignIn(show: (DeviceCodeMessage) -> Void,
                           _ work: @escaping @Sendable (_ post: @escaping @Sendable (DeviceCodeMessage) -> Void) async throws(TokenCacheError) -> TokenResult)
    throws(TokenCacheError) -> TokenResult {
    let mailbox = SignInMailbox()
    Task.detached {
        do throws(TokenCacheError) {
            mailbox.finish(.success(try await work { mailbox.post($0) }))
        } catch {
            mailbox.finish(.failure(error))
        }
    }
    while true {
        mailbox.wait()
        let (message, outcome) = mailbox.take()
        if let message { show(message) }
        if let outcome { return try outcome.get() }
    }
}

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
        return try waitForSignIn(show: { message in
            message.userCode.withCString { code in
                message.verificationURI.absoluteString.withCString { uri in
                    message.message.withCString { text in onCode(code, uri, text, userData) }
                }
            }
        }, { [parameters] post async throws(TokenCacheError) in
            try await app.acquireTokenWithDeviceCode(parameters, onCode: post)
        })
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
        let request = parameters
        return try waitFor { () async throws(TokenCacheError) in try await app.acquireToken(request) }
    }
}
