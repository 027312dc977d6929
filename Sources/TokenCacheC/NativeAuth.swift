// tokencache_native_sign_in, _sign_up and _reset_password: the native-auth flows of
// NativeAuthPublicClientApplication behind blocking C calls. Every step (its requests, its
// waits, the save) and the C prompt between steps run on the calling thread, so the prompt may
// block on the user and call this library.
internal import CTokenCache
import FoundationEssentials
import TokenCache
import TokenCacheCore
#if canImport(Glibc)
import Glibc
#endif

/// `int (*)(tokencache_native_prompt what, const char *detail, char *answer, size_t answer_size, void *user_data)`.
public typealias NativePromptCallback = @convention(c) (UInt32, UnsafePointer<CChar>?, UnsafeMutablePointer<CChar>?, Int,
                                                        UnsafeMutableRawPointer?) -> Int32

/// Why a native flow stopped: a native-auth answer, or a cache, network or argument error.
private enum NativeFailure: Error {
    case native(NativeAuthError)
    case cache(TokenCacheError)
}

/// The status code of a native-auth error (tokencache.h's numbers).
private func statusCode(of error: NativeAuthError) -> Int32 {
    switch error.reason {
    case .browserRequired: Int32(TOKENCACHE_E_BROWSER_REQUIRED)
    case .userNotFound: Int32(TOKENCACHE_E_USER_NOT_FOUND)
    case .invalidCredentials: Int32(TOKENCACHE_E_INVALID_CREDENTIALS)
    case .invalidCode: Int32(TOKENCACHE_E_INVALID_CODE)
    case .userAlreadyExists: Int32(TOKENCACHE_E_USER_ALREADY_EXISTS)
    case .passwordPolicy: Int32(TOKENCACHE_E_PASSWORD_POLICY)
    case .attributeValidation: Int32(TOKENCACHE_E_ATTRIBUTE_VALIDATION)
    case .expired: Int32(TOKENCACHE_E_EXPIRED)
    case .tokenCache(let underlying): statusCode(of: underlying)
    default: Int32(TOKENCACHE_E_NATIVE_AUTH_FAILED)
    }
}

/// The reason of a native-auth error (tokencache.h's numbers): what its status code leaves open.
private func reasonCode(of error: NativeAuthError) -> Int32 {
    if case .tokenCache(let underlying) = error.reason { return reasonCode(of: underlying.reason) }
    let reason = switch error.reason {
    case .invalidUsername: TOKENCACHE_REASON_INVALID_USERNAME
    case .passwordResetRequired: TOKENCACHE_REASON_PASSWORD_RESET_REQUIRED
    case .userHasNoPassword: TOKENCACHE_REASON_USER_HAS_NO_PASSWORD
    case .notEnabled: TOKENCACHE_REASON_NATIVE_AUTH_NOT_ENABLED
    case .resetFailed: TOKENCACHE_REASON_PASSWORD_RESET_FAILED
    case .passwordPolicy(.tooWeak): TOKENCACHE_REASON_PASSWORD_TOO_WEAK
    case .passwordPolicy(.tooShort): TOKENCACHE_REASON_PASSWORD_TOO_SHORT
    case .passwordPolicy(.tooLong): TOKENCACHE_REASON_PASSWORD_TOO_LONG
    case .passwordPolicy(.recentlyUsed): TOKENCACHE_REASON_PASSWORD_RECENTLY_USED
    case .passwordPolicy(.banned): TOKENCACHE_REASON_PASSWORD_BANNED
    case .passwordPolicy(.invalid): TOKENCACHE_REASON_PASSWORD_INVALID
    // The status code says it all.
    case .browserRequired, .userNotFound, .invalidCredentials, .invalidCode, .userAlreadyExists, .attributeValidation,
         .expired, .server, .tokenCache: TOKENCACHE_REASON_NONE
    }
    return Int32(reason.rawValue)
}

/// Runs a native flow: the token and its info on success, else the status with `error` filled.
private func nativeBoundary(_ accessToken: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?, _ info: UnsafeMutablePointer<OpaquePointer?>?,
                            _ error: UnsafeMutableRawPointer?, _ body: () throws(NativeFailure) -> TokenResult) -> Int32 {
    accessToken?.pointee = nil
    info?.pointee = nil
    do throws(NativeFailure) {
        guard let out = accessToken else { throw .cache(.invalidArgument("access_token", "is NULL")) }
        let result = try body()
        do throws(TokenCacheError) { out.pointee = try mallocCopy(result.accessToken) } catch { throw .cache(error) }
        info?.pointee = Handle.make(TokenInfoHandle(result))
        return Int32(TOKENCACHE_OK)
    } catch let stopped {
        switch stopped {
        case .cache(let failure):
            fill(error, with: failure)
            return statusCode(of: failure)
        case .native(let failure):
            let code = statusCode(of: failure)
            // The library's hint for browserRequired names the Swift method; C has its own.
            let hint = failure.reason == .browserRequired ? "Sign in with tokencache_sign_in_browser instead" : failure.hint
            fill(error, code: code, message: failure.message, hint: hint, reason: reasonCode(of: failure))
            return code
        }
    }
}

/// Runs one network step on the calling thread (the library's blocking steps).
private func step<T>(_ work: () throws(NativeAuthError) -> T) throws(NativeFailure) -> T {
    do throws(NativeAuthError) { return try work() } catch { throw .native(error) }
}

/// Asks the C prompt on the calling thread.
private struct Prompter {
    let callback: NativePromptCallback
    let userData: UnsafeMutableRawPointer?

    func ask(_ what: tokencache_native_prompt, _ detail: String) throws(NativeFailure) -> String {
        var buffer = [CChar](repeating: 0, count: 4096)
        defer { buffer.withUnsafeMutableBytes { explicit_bzero($0.baseAddress!, $0.count) } }
        let status = detail.withCString { text in
            buffer.withUnsafeMutableBufferPointer { callback(what.rawValue, text, $0.baseAddress, $0.count, userData) }
        }
        guard status == 0 else {
            throw .cache(TokenCacheError(.cancelled, "The prompt cancelled the flow; nothing was saved.",
                                         hint: "Call the function again when the user is ready"))
        }
        buffer[buffer.count - 1] = 0
        guard let answer = buffer.withUnsafeBufferPointer({ String(validatingCString: $0.baseAddress!) }), !answer.isEmpty else {
            throw .cache(.invalidArgument("answer", "the prompt gave an empty or non-UTF-8 answer"))
        }
        return answer
    }

    /// Asks for the emailed code and submits it; after a wrong code asks again, three times in all.
    func codes<T>(sentTo: String, _ submit: (String) throws(NativeAuthError) -> T) throws(NativeFailure) -> T {
        var attempt = 1
        while true {
            let code = try ask(TOKENCACHE_NATIVE_CODE, sentTo)
            do throws(NativeFailure) {
                return try step { () throws(NativeAuthError) in try submit(code) }
            } catch .native(let failure) where failure.reason == .invalidCode && attempt < 3 {
                attempt += 1
            }
        }
    }
}

/// The native-auth app for the C arguments, on the store behind the handle.
private func nativeApplication(_ store: OpaquePointer?, _ clientID: UnsafePointer<CChar>?, _ authority: UnsafePointer<CChar>?,
                               _ types: Set<NativeAuthPublicClientApplication.ChallengeType>) throws(NativeFailure) -> NativeAuthPublicClientApplication {
    let converted: (AccountStore, ClientID, String)
    do throws(TokenCacheError) {
        converted = (try StoreHandle.from(store).store, try checkedClientID(clientID), try requiredString(authority, "authority"))
    } catch {
        throw .cache(error)
    }
    do throws(NativeAuthError) {
        return try NativeAuthPublicClientApplication(clientID: converted.1, authority: converted.2, challengeTypes: types, store: converted.0)
    } catch {
        throw .native(error)
    }
}

/// The C arguments every flow shares, converted.
private func arguments(_ scopes: UnsafePointer<CChar>?, _ username: UnsafePointer<CChar>?,
                       _ prompt: NativePromptCallback?, _ userData: UnsafeMutableRawPointer?) throws(NativeFailure) -> ([String], String, Prompter) {
    do throws(TokenCacheError) {
        guard let prompt else { throw .invalidArgument("prompt", "is NULL") }
        return (try scopeList(scopes), try requiredString(username, "username"), Prompter(callback: prompt, userData: userData))
    } catch {
        throw .cache(error)
    }
}

/// The signed-in account's token for the result (from the cache, just saved).
private func token(_ account: NativeAuthAccount, _ scopes: [String]) throws(NativeFailure) -> TokenResult {
    try step { () throws(NativeAuthError) in
        do throws(TokenCacheError) { return try account.blockingAccessToken(scopes: scopes) } catch { throw NativeAuthError(error) }
    }
}

private func string(_ pointer: UnsafePointer<CChar>?, _ name: String) throws(NativeFailure) -> String? {
    do throws(TokenCacheError) { return try optionalString(pointer, name) } catch { throw .cache(error) }
}

@_cdecl("tokencache_native_sign_in")
public func tokencache_native_sign_in(_ store: OpaquePointer?, _ clientID: UnsafePointer<CChar>?, _ authority: UnsafePointer<CChar>?,
                                      _ scopes: UnsafePointer<CChar>?, _ username: UnsafePointer<CChar>?, _ password: UnsafePointer<CChar>?,
                                      _ prompt: NativePromptCallback?, _ userData: UnsafeMutableRawPointer?,
                                      _ accessToken: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
                                      _ info: UnsafeMutablePointer<OpaquePointer?>?, _ error: UnsafeMutableRawPointer?) -> Int32 {
    nativeBoundary(accessToken, info, error) { () throws(NativeFailure) -> TokenResult in
        let (scopes, username, prompter) = try arguments(scopes, username, prompt, userData)
        let password = try string(password, "password")
        let app = try nativeApplication(store, clientID, authority, [.oob, .password])
        let account: NativeAuthAccount
        switch try step({ () throws(NativeAuthError) in try app.blockingSignIn(username: username, password: password, scopes: scopes) }) {
        case .completed(let signedIn): account = signedIn
        case .codeRequired(let state): account = try prompter.codes(sentTo: state.sentTo) { (code) throws(NativeAuthError) in try state.blockingSubmitCode(code) }
        case .passwordRequired(let state):
            let typed = try prompter.ask(TOKENCACHE_NATIVE_PASSWORD, username)
            account = try step { () throws(NativeAuthError) in try state.blockingSubmitPassword(typed) }
        }
        return try token(account, scopes)
    }
}

@_cdecl("tokencache_native_sign_up")
public func tokencache_native_sign_up(_ store: OpaquePointer?, _ clientID: UnsafePointer<CChar>?, _ authority: UnsafePointer<CChar>?,
                                      _ scopes: UnsafePointer<CChar>?, _ username: UnsafePointer<CChar>?, _ password: UnsafePointer<CChar>?,
                                      _ attributesJSON: UnsafePointer<CChar>?, _ prompt: NativePromptCallback?, _ userData: UnsafeMutableRawPointer?,
                                      _ accessToken: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
                                      _ info: UnsafeMutablePointer<OpaquePointer?>?, _ error: UnsafeMutableRawPointer?) -> Int32 {
    nativeBoundary(accessToken, info, error) { () throws(NativeFailure) -> TokenResult in
        let (scopes, username, prompter) = try arguments(scopes, username, prompt, userData)
        let password = try string(password, "password")
        let attributes = try attributeMap(try string(attributesJSON, "attributes_json"))
        let app = try nativeApplication(store, clientID, authority, password == nil ? [.oob] : [.oob, .password])
        var result = try step { () throws(NativeAuthError) in try app.blockingSignUp(username: username, password: password, attributes: attributes) }
        while true {
            switch result {
            case .codeRequired(let state):
                result = try prompter.codes(sentTo: state.sentTo) { (code) throws(NativeAuthError) in try state.blockingSubmitCode(code) }
            case .passwordRequired(let state):
                let typed = try prompter.ask(TOKENCACHE_NATIVE_NEW_PASSWORD, username)
                result = try step { () throws(NativeAuthError) in try state.blockingSubmitPassword(typed) }
            case .attributesRequired(let state):
                var answers: [String: String] = [:]
                for attribute in state.requiredAttributes { answers[attribute.name] = try prompter.ask(TOKENCACHE_NATIVE_ATTRIBUTE, attribute.name) }
                let given = answers
                result = try step { () throws(NativeAuthError) in try state.blockingSubmitAttributes(given) }
            case .completed(let state):
                let account = try step { () throws(NativeAuthError) in try state.blockingSignIn(scopes: scopes) }
                return try token(account, scopes)
            }
        }
    }
}

@_cdecl("tokencache_native_reset_password")
public func tokencache_native_reset_password(_ store: OpaquePointer?, _ clientID: UnsafePointer<CChar>?, _ authority: UnsafePointer<CChar>?,
                                             _ scopes: UnsafePointer<CChar>?, _ username: UnsafePointer<CChar>?,
                                             _ newPassword: UnsafePointer<CChar>?, _ prompt: NativePromptCallback?,
                                             _ userData: UnsafeMutableRawPointer?,
                                             _ accessToken: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
                                             _ info: UnsafeMutablePointer<OpaquePointer?>?, _ error: UnsafeMutableRawPointer?) -> Int32 {
    nativeBoundary(accessToken, info, error) { () throws(NativeFailure) -> TokenResult in
        let (scopes, username, prompter) = try arguments(scopes, username, prompt, userData)
        guard let password = try string(newPassword, "new_password") else { throw .cache(.invalidArgument("new_password", "is NULL")) }
        let app = try nativeApplication(store, clientID, authority, [.oob, .password])
        let code = try step { () throws(NativeAuthError) in try app.blockingResetPassword(username: username) }
        let required = try prompter.codes(sentTo: code.sentTo) { (typed) throws(NativeAuthError) in try code.blockingSubmitCode(typed) }
        let after = try step { () throws(NativeAuthError) in try required.blockingSubmitNewPassword(password) }
        let account = try step { () throws(NativeAuthError) in try after.blockingSignIn(scopes: scopes) }
        return try token(account, scopes)
    }
}

/// `attributes_json`: a JSON object of strings, or nothing.
private func attributeMap(_ json: String?) throws(NativeFailure) -> [String: String] {
    guard let json else { return [:] }
    guard let object = try? JSON.decodeObject(Data(json.utf8)), object.values.allSatisfy({ $0.stringValue != nil }) else {
        throw .cache(.invalidArgument("attributes_json", "is not a JSON object of strings", hint: "Pass {\"displayName\": \"Ada\"} or NULL"))
    }
    return object.compactMapValues(\.stringValue)
}
