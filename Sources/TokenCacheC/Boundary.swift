// The C boundary: every exported function converts its C arguments here, runs Swift code that
// throws typed errors, and turns the outcome into a status code and a filled tokencache_error.
// Nothing Swift (errors, objects, traps on bad input) crosses to the caller.
internal import CTokenCache
import FoundationEssentials
import TokenCache
#if canImport(Glibc)
import Glibc
#endif

/// Status codes of tokencache.h for the library's error codes: the header's numbers are the ABI.
private let statusCodes: [TokenCacheError.Code: Int32] = [
    .invalidArgument: status(TOKENCACHE_E_INVALID_ARGUMENT),
    .notFound: status(TOKENCACHE_E_NOT_FOUND),
    .invalidTokenResponse: status(TOKENCACHE_E_INVALID_TOKEN_RESPONSE),
    .invalidCacheData: status(TOKENCACHE_E_INVALID_CACHE_DATA),
    .ambiguousAccount: status(TOKENCACHE_E_AMBIGUOUS_ACCOUNT),
    .noSessionBus: status(TOKENCACHE_E_NO_SESSION_BUS),
    .noSecretService: status(TOKENCACHE_E_NO_SECRET_SERVICE),
    .libgcryptMissing: status(TOKENCACHE_E_LIBGCRYPT_MISSING),
    .collectionMissing: status(TOKENCACHE_E_COLLECTION_MISSING),
    .keyringLocked: status(TOKENCACHE_E_KEYRING_LOCKED),
    .promptDismissed: status(TOKENCACHE_E_PROMPT_DISMISSED),
    .timedOut: status(TOKENCACHE_E_TIMED_OUT),
    .secretServiceFailure: status(TOKENCACHE_E_SECRET_SERVICE_FAILURE),
    .fileAuthenticationFailed: status(TOKENCACHE_E_FILE_AUTHENTICATION_FAILED),
    .fileRolledBack: status(TOKENCACHE_E_FILE_ROLLED_BACK),
    .fileMismatch: status(TOKENCACHE_E_FILE_MISMATCH),
    .unsafeFile: status(TOKENCACHE_E_UNSAFE_FILE),
    .fileSystem: status(TOKENCACHE_E_FILE_SYSTEM),
    .crypto: status(TOKENCACHE_E_CRYPTO),
    .libcryptoMissing: status(TOKENCACHE_E_LIBCRYPTO_MISSING),
    .migrationNotVerified: status(TOKENCACHE_E_MIGRATION_NOT_VERIFIED),
    .interactionRequired: status(TOKENCACHE_E_INTERACTION_REQUIRED),
    .userMismatch: status(TOKENCACHE_E_USER_MISMATCH),
    .network: status(TOKENCACHE_E_NETWORK),
    .libcurlMissing: status(TOKENCACHE_E_LIBCURL_MISSING),
    .serverError: status(TOKENCACHE_E_SERVER_ERROR),
    .backendUnavailable: status(TOKENCACHE_E_BACKEND_UNAVAILABLE),
    .portalCancelled: status(TOKENCACHE_E_PORTAL_CANCELLED),
    .portalFailed: status(TOKENCACHE_E_PORTAL_FAILED),
    .overloaded: status(TOKENCACHE_E_OVERLOADED),
    // The agent stands in for the backend: unreachable or speaking another protocol.
    .agentUnavailable: status(TOKENCACHE_E_BACKEND_UNAVAILABLE),
    .cancelled: status(TOKENCACHE_E_CANCELLED),
    .accessDenied: status(TOKENCACHE_E_ACCESS_DENIED),
    .authorizationFailed: status(TOKENCACHE_E_AUTHORIZATION_FAILED),
    .stateMismatch: status(TOKENCACHE_E_STATE_MISMATCH),
    .portUnavailable: status(TOKENCACHE_E_PORT_UNAVAILABLE),
    .browserUnavailable: status(TOKENCACHE_E_BROWSER_UNAVAILABLE),
    .unsupportedFlow: status(TOKENCACHE_E_UNSUPPORTED_FLOW),
]

private func status(_ constant: some BinaryInteger) -> Int32 { Int32(constant) }

/// The status code of an error; codes the header does not know yet are `TOKENCACHE_E_INTERNAL`.
func statusCode(of error: TokenCacheError) -> Int32 {
    statusCodes[error.code] ?? status(TOKENCACHE_E_INTERNAL)
}

/// The header's number for a reason: the header's numbers are the ABI.
func reasonCode(of reason: TokenCacheError.Reason) -> Int32 {
    let code = switch reason.value {
    case .unspecified: TOKENCACHE_REASON_NONE
    case .collectionMissing: TOKENCACHE_REASON_COLLECTION_MISSING
    case .sessionCollectionUnsupported: TOKENCACHE_REASON_SESSION_COLLECTION_UNSUPPORTED
    case .defaultCollectionMissing: TOKENCACHE_REASON_DEFAULT_COLLECTION_MISSING
    case .defaultCollectionUncreatable: TOKENCACHE_REASON_DEFAULT_COLLECTION_UNCREATABLE
    case .createCollectionPromptDismissed: TOKENCACHE_REASON_CREATE_COLLECTION_PROMPT_DISMISSED
    case .unlockPromptDismissed: TOKENCACHE_REASON_UNLOCK_PROMPT_DISMISSED
    case .unlockPromptTimedOut: TOKENCACHE_REASON_UNLOCK_PROMPT_TIMED_OUT
    case .secretServiceSessionLost: TOKENCACHE_REASON_SECRET_SERVICE_SESSION_LOST
    case .libraryMissing: TOKENCACHE_REASON_LIBRARY_MISSING
    case .fileRolledBack: TOKENCACHE_REASON_FILE_ROLLED_BACK
    case .tpmUnavailable: TOKENCACHE_REASON_TPM_UNAVAILABLE
    case .tpmLockedOut: TOKENCACHE_REASON_TPM_LOCKED_OUT
    case .tpmSealedElsewhere: TOKENCACHE_REASON_TPM_SEALED_ELSEWHERE
    case .noDisplay: TOKENCACHE_REASON_NO_DISPLAY
    case .browserCommandFailed: TOKENCACHE_REASON_BROWSER_COMMAND_FAILED
    case .xdgOpenMissing: TOKENCACHE_REASON_XDG_OPEN_MISSING
    case .xdgOpenFailed: TOKENCACHE_REASON_XDG_OPEN_FAILED
    case .redirectPortUnavailable: TOKENCACHE_REASON_REDIRECT_PORT_UNAVAILABLE
    case .signInTimedOut: TOKENCACHE_REASON_SIGN_IN_TIMED_OUT
    case .deviceCodeTimedOut: TOKENCACHE_REASON_DEVICE_CODE_TIMED_OUT
    case .deviceCodeUnsupported: TOKENCACHE_REASON_DEVICE_CODE_UNSUPPORTED
    case .tokenEndpointNotFound: TOKENCACHE_REASON_TOKEN_ENDPOINT_NOT_FOUND
    case .noRefreshToken: TOKENCACHE_REASON_NO_REFRESH_TOKEN
    case .refreshTokenRejected: TOKENCACHE_REASON_REFRESH_TOKEN_REJECTED
    case .clientRejected: TOKENCACHE_REASON_CLIENT_REJECTED
    case .refreshTokenFromOtherHost: TOKENCACHE_REASON_REFRESH_TOKEN_FROM_OTHER_HOST
    case .tokensOfAnotherAccount: TOKENCACHE_REASON_TOKENS_OF_ANOTHER_ACCOUNT
    case .agentUnreachable: TOKENCACHE_REASON_AGENT_UNREACHABLE
    case .agentProtocol: TOKENCACHE_REASON_AGENT_PROTOCOL
    case .agentUntrusted: TOKENCACHE_REASON_AGENT_UNTRUSTED
    case .portalRequestCancelled: TOKENCACHE_REASON_PORTAL_REQUEST_CANCELLED
    case .portalRequestFailed: TOKENCACHE_REASON_PORTAL_REQUEST_FAILED
    case .portalUnreachable: TOKENCACHE_REASON_PORTAL_UNREACHABLE
    case .portalSecretSize: TOKENCACHE_REASON_PORTAL_SECRET_SIZE
    case .keyDerivationRoundsOutOfBounds: TOKENCACHE_REASON_KEY_DERIVATION_ROUNDS_OUT_OF_BOUNDS
    case .threadCeilingReached: TOKENCACHE_REASON_THREAD_CEILING_REACHED
    case .noAccount: TOKENCACHE_REASON_NO_ACCOUNT
    case .severalAccounts: TOKENCACHE_REASON_SEVERAL_ACCOUNTS
    case .accountInSeveralClouds: TOKENCACHE_REASON_ACCOUNT_IN_SEVERAL_CLOUDS
    case .tokensInSeveralTenants: TOKENCACHE_REASON_TOKENS_IN_SEVERAL_TENANTS
    case .noUsableToken: TOKENCACHE_REASON_NO_USABLE_TOKEN
    case .clientNotSignedIn: TOKENCACHE_REASON_CLIENT_NOT_SIGNED_IN
    case .noGraph: TOKENCACHE_REASON_NO_GRAPH
    case .graphUnreachable: TOKENCACHE_REASON_GRAPH_UNREACHABLE
    case .graphRefused: TOKENCACHE_REASON_GRAPH_REFUSED
    case .photoNotAnImage: TOKENCACHE_REASON_PHOTO_NOT_AN_IMAGE
    case .photoTooLarge: TOKENCACHE_REASON_PHOTO_TOO_LARGE
    case .brokerUnavailable: TOKENCACHE_REASON_BROKER_UNAVAILABLE
    case .brokerRefused: TOKENCACHE_REASON_BROKER_REFUSED
    }
    return Int32(code.rawValue)
}

/// What a C caller is told to do: the library's hint, except where it names Swift API, which
/// is said with the C functions and arguments instead (chosen by the reason, never by the text).
func cHint(for failure: TokenCacheError) -> String {
    let deviceCode = "sign in with the device code flow (tokencache_sign_in_device_code)"
    switch failure.reason.value {
    case .noDisplay:
        return "Use the device code flow (tokencache_sign_in_device_code) in SSH sessions and on headless machines, or set BROWSER to a command that opens a URL"
    case .browserCommandFailed:
        return "Fix or unset BROWSER, or \(deviceCode)"
    case .xdgOpenMissing:
        return "Install xdg-utils, set BROWSER, or \(deviceCode)"
    case .xdgOpenFailed:
        return "Set a default browser (xdg-settings set default-web-browser), or \(deviceCode)"
    case .redirectPortUnavailable:
        return "Check the loopback interface, then retry"
    case .signInTimedOut:
        return "Finish signing in in the browser sooner, or raise timeout_seconds"
    case .deviceCodeTimedOut:
        return "Give the user more time (timeout_seconds, 0 waits until the code expires)"
    case .deviceCodeUnsupported(let adfs):
        return (adfs ? "AD FS before 2019 has no device code flow: " : "") + "sign in with tokencache_sign_in_browser instead"
    case .noRefreshToken, .refreshTokenRejected:
        return "Sign the user in with tokencache_sign_in_browser (tokencache_sign_in_device_code without a browser)"
    case .fileRolledBack(let group):
        return "If it was restored on purpose, accept it with `tokencache doctor --backend file --group \(group) --accept-rollback`; otherwise put the newer file back. It was not changed"
    default:
        return failure.hint ?? ""
    }
}

/// Where in `message` the reason is kept: the caller allocates the struct of 0.1, which has no
/// field for it, so messages end by byte 507 and the reason (a tag and two bytes) follows.
private let reasonOffset = 508
private let reasonTag: (UInt8, UInt8) = (0x52, 0x43)  // "RC"

/// Writes an error into the caller's `tokencache_error` (any of its pointers may be NULL).
func fill(_ error: UnsafeMutableRawPointer?, with failure: TokenCacheError) {
    fill(error, code: statusCode(of: failure), message: failure.message, hint: cHint(for: failure),
         reason: reasonCode(of: failure.reason))
}

/// Writes a status code, message, hint and reason into the caller's `tokencache_error`.
func fill(_ error: UnsafeMutableRawPointer?, code: Int32, message: String, hint: String, reason: Int32 = 0) {
    guard let error else { return }
    let target = error.assumingMemoryBound(to: tokencache_error.self)
    target.pointee.code = code
    withUnsafeMutableBytes(of: &target.pointee.message) { buffer in
        copyTruncating(message, into: UnsafeMutableRawBufferPointer(rebasing: buffer[..<reasonOffset]))
        buffer[reasonOffset] = reasonTag.0
        buffer[reasonOffset + 1] = reasonTag.1
        buffer[reasonOffset + 2] = UInt8(truncatingIfNeeded: reason)
        buffer[reasonOffset + 3] = UInt8(truncatingIfNeeded: reason >> 8)
    }
    withUnsafeMutableBytes(of: &target.pointee.hint) { copyTruncating(hint, into: $0) }
}

/// The reason a failed call kept in the caller's `tokencache_error`, or `TOKENCACHE_REASON_NONE`.
@_cdecl("tokencache_error_reason")
public func tokencache_error_reason(_ error: UnsafeRawPointer?) -> Int32 {
    guard let error else { return Int32(TOKENCACHE_REASON_NONE.rawValue) }
    let target = error.assumingMemoryBound(to: tokencache_error.self)
    guard target.pointee.code != 0 else { return Int32(TOKENCACHE_REASON_NONE.rawValue) }
    return withUnsafeBytes(of: target.pointee.message) { buffer in
        guard buffer[reasonOffset] == reasonTag.0, buffer[reasonOffset + 1] == reasonTag.1 else {
            return Int32(TOKENCACHE_REASON_NONE.rawValue)
        }
        return Int32(buffer[reasonOffset + 2]) | Int32(buffer[reasonOffset + 3]) << 8
    }
}

/// Copies UTF-8 into a fixed buffer with a NUL, cut before a character that does not fit.
private func copyTruncating(_ text: String, into buffer: UnsafeMutableRawBufferPointer) {
    var bytes = Array(text.utf8.prefix(buffer.count - 1))
    if bytes.count < text.utf8.count {
        // Drop continuation bytes, then the lead byte of the character they belong to.
        while let last = bytes.last, last & 0xC0 == 0x80 { bytes.removeLast() }
        if let last = bytes.last, last & 0x80 != 0 { bytes.removeLast() }
    }
    buffer.copyBytes(from: bytes)
    buffer[bytes.count] = 0
}

/// Runs one exported function's body: OK, or the error's status with `error` filled.
func boundary(_ error: UnsafeMutableRawPointer?, _ body: () throws(TokenCacheError) -> Void) -> Int32 {
    do throws(TokenCacheError) {
        try body()
        return status(TOKENCACHE_OK)
    } catch let failure {
        fill(error, with: failure)
        return statusCode(of: failure)
    }
}

/// A required string argument, refused when NULL or not UTF-8.
func requiredString(_ pointer: UnsafePointer<CChar>?, _ name: String) throws(TokenCacheError) -> String {
    guard let pointer else { throw .invalidArgument(name, "is NULL") }
    guard let value = String(validatingCString: pointer) else { throw .invalidArgument(name, "is not valid UTF-8") }
    return value
}

/// An optional string argument: nil for NULL, refused when not UTF-8.
func optionalString(_ pointer: UnsafePointer<CChar>?, _ name: String) throws(TokenCacheError) -> String? {
    guard let pointer else { return nil }
    return try requiredString(pointer, name)
}

/// A required out parameter.
func requiredOut<T>(_ pointer: UnsafeMutablePointer<T>?, _ name: String) throws(TokenCacheError) -> UnsafeMutablePointer<T> {
    guard let pointer else { throw .invalidArgument(name, "is NULL") }
    return pointer
}

/// Space-separated scopes.
func scopeList(_ pointer: UnsafePointer<CChar>?) throws(TokenCacheError) -> [String] {
    try requiredString(pointer, "scopes").split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" }).map(String.init)
}

/// A malloc'd NUL-terminated copy, for the caller to free with the header's function
/// (`tokencache_secret_free` for secrets, `tokencache_string_free` otherwise).
func mallocCopy(_ text: String) throws(TokenCacheError) -> UnsafeMutablePointer<CChar> {
    var text = text
    let count = text.utf8.count
    guard let buffer = malloc(count + 1)?.assumingMemoryBound(to: CChar.self) else {
        throw TokenCacheError(.fileSystem, "Out of memory.")
    }
    // Straight from the string's own storage into the C buffer: no intermediate copy of a secret.
    text.withUTF8 { bytes in
        if let base = bytes.baseAddress { memcpy(buffer, base, count) }
    }
    buffer[count] = 0
    return buffer
}

/// C strings owned by a handle and freed with it; accessors hand out borrowed pointers.
final class CStrings {
    private var pointers: [UnsafeMutablePointer<CChar>] = []

    /// Keeps a copy of the text and returns it, valid until the owner is freed.
    func keep(_ text: String) -> UnsafePointer<CChar> {
        let copy = strdup(text) ?? strdup("")!
        pointers.append(copy)
        return UnsafePointer(copy)
    }

    deinit { pointers.forEach { free($0) } }
}

/// Opaque handles: a retained Swift object behind a pointer the caller holds.
enum Handle {
    static func make(_ object: AnyObject) -> OpaquePointer {
        OpaquePointer(Unmanaged.passRetained(object).toOpaque())
    }

    static func get<T: AnyObject>(_ pointer: OpaquePointer?, as type: T.Type) -> T? {
        // A handle of another kind is refused rather than misused (`as?` checks the dynamic type).
        pointer.flatMap { Unmanaged<AnyObject>.fromOpaque(UnsafeRawPointer($0)).takeUnretainedValue() as? T }
    }

    static func release(_ pointer: OpaquePointer?) {
        pointer.map { Unmanaged<AnyObject>.fromOpaque(UnsafeRawPointer($0)).release() }
    }
}
