/// An error from the token cache: a code to switch on, a typed reason with its context, a message
/// that says what happened and a hint that says what to do. Front ends (the CLI, C, Python) build
/// their own hints from the code and reason; message and hint are for people, never parsed.
/// Messages never contain tokens, keys or passphrases.
public struct TokenCacheError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of failure this is. New codes may be added; switch with a `default` case.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }
        /// The code of this name (as `description` spells it): how a code crosses the agent's socket.
        package init(named name: String) { self.name = name }
        public var description: String { name }

        /// A token endpoint response was malformed; `field` names the offending field.
        public static let invalidTokenResponse = Code("invalidTokenResponse")
        /// An argument passed by the app (scopes, authority, client ID, group) was invalid.
        public static let invalidArgument = Code("invalidArgument")
        /// An MSAL JSON cache could not be read; nothing was imported.
        public static let invalidCacheData = Code("invalidCacheData")
        /// No account or token matched the request.
        public static let notFound = Code("notFound")
        /// An account named without an authority has records at hosts of different clouds (not
        /// aliases of each other): another host may have saved a response claiming the same
        /// home account ID. Nothing is guessed; pass the authority of the account meant.
        public static let ambiguousAccount = Code("ambiguousAccount")

        /// There is no D-Bus session bus (SSH, container, CI): use the encrypted-file backend.
        public static let noSessionBus = Code("noSessionBus")
        /// A session bus exists but no Secret Service provider answers on it.
        public static let noSecretService = Code("noSecretService")
        /// libsecret could not be loaded at run time. No longer raised: the library does not load
        /// libsecret (its Secret Service client makes plain D-Bus calls); kept so code that names it builds.
        @available(*, deprecated, message: "Never raised: the Secret Service client does not load libsecret")
        public static let libsecretMissing = Code("libsecretMissing")
        /// libgcrypt, which encrypts secrets on their way to and from the Secret Service, could
        /// not be loaded at run time.
        public static let libgcryptMissing = Code("libgcryptMissing")
        /// The Secret Service collection a group maps onto does not exist.
        public static let collectionMissing = Code("collectionMissing")
        /// The keyring is locked and was not unlocked; nothing was read as empty.
        public static let keyringLocked = Code("keyringLocked")
        /// A Secret Service prompt (unlock, create collection) was dismissed or could not show.
        public static let promptDismissed = Code("promptDismissed")
        /// A call did not complete within its time bound.
        public static let timedOut = Code("timedOut")
        /// The Secret Service returned an error not covered by a more specific code.
        public static let secretServiceFailure = Code("secretServiceFailure")

        /// A cache file failed authentication: wrong key, tampered or truncated.
        public static let fileAuthenticationFailed = Code("fileAuthenticationFailed")
        /// A cache file is older than one this machine has already seen (an older copy was put
        /// back): refused, and not overwritten. Accept it deliberately with
        /// ``EncryptedFileBackend/acceptRolledBackFile(for:)`` or `tokencache doctor --accept-rollback`.
        public static let fileRolledBack = Code("fileRolledBack")
        /// A cache file belongs to another group, or has an unknown format version.
        public static let fileMismatch = Code("fileMismatch")
        /// A cache file or directory has unsafe ownership, mode or is a link.
        public static let unsafeFile = Code("unsafeFile")
        /// Reading or writing a file failed (disk full, read-only, permissions).
        public static let fileSystem = Code("fileSystem")
        /// An OpenSSL operation failed.
        public static let crypto = Code("crypto")
        /// OpenSSL's libcrypto 3, which the encrypted file loads at run time, is missing.
        public static let libcryptoMissing = Code("libcryptoMissing")

        /// Entries copied during a migration did not read back the same; the source was kept.
        public static let migrationNotVerified = Code("migrationNotVerified")
        /// Silent sign-in is impossible: no usable refresh token, `invalid_grant`, consent or a
        /// claims challenge. Sign the user in interactively; ``TokenCacheError/server`` has details.
        public static let interactionRequired = Code("interactionRequired")
        /// A token response obtained for one account carried another account's identity
        /// (`client_info`, or the ID token's subject, object ID and tenant): MSAL's
        /// `user_mismatch`. Nothing was saved; sign the user in interactively.
        public static let userMismatch = Code("userMismatch")
        /// The token endpoint could not be reached or did not answer in time; retry later.
        public static let network = Code("network")
        /// libcurl, which the default HTTP transport loads at run time, is missing.
        public static let libcurlMissing = Code("libcurlMissing")
        /// The token endpoint answered with an error that retrying may fix (5xx, throttling).
        public static let serverError = Code("serverError")

        /// The Secret portal's request for the app's keyring secret was cancelled (its Response 1).
        public static let portalCancelled = Code("portalCancelled")
        /// The Secret portal could not give the app's keyring secret (Response 2, a wrong-sized
        /// secret, no portal or no Secret portal backend).
        public static let portalFailed = Code("portalFailed")

        /// The requested backend cannot be used here (for example `secret-service` with no bus).
        public static let backendUnavailable = Code("backendUnavailable")

        /// The sign-in was cancelled: by the user (the Cancel button of the sign-in page) or by
        /// cancelling the task that waited for it; or a silent refresh's task was cancelled while
        /// it waited for another process's refresh. Nothing was saved.
        public static let cancelled = Code("cancelled")
        /// The user or the authority declined the sign-in (`access_denied`, `authorization_declined`).
        public static let accessDenied = Code("accessDenied")
        /// The authority refused the sign-in: an error redirect, or a code or device code the
        /// token endpoint would not redeem; ``TokenCacheError/server`` has the server's error.
        public static let authorizationFailed = Code("authorizationFailed")
        /// The redirect carried a `state` other than the one sent: a forged or crossed redirect;
        /// nothing was redeemed.
        public static let stateMismatch = Code("stateMismatch")
        /// The loopback redirect port could not be bound (in use, or not permitted).
        public static let portUnavailable = Code("portUnavailable")
        /// No browser could be opened (no desktop portal, no `xdg-open`, no display).
        public static let browserUnavailable = Code("browserUnavailable")
        /// The authority does not offer this sign-in flow (for example AD FS without a device
        /// authorization endpoint).
        public static let unsupportedFlow = Code("unsupportedFlow")
        /// The token agent (`TOKENCACHE_AGENT_SOCK`) could not be reached, or answered outside its protocol.
        public static let agentUnavailable = Code("agentUnavailable")
        /// The process already runs as many blocking calls (keyring, file, lock, HTTP) as the
        /// library's thread ceiling allows; nothing was started. Retry when fewer are running.
        public static let overloaded = Code("overloaded")
    }

    /// What kind of failure this is.
    public var code: Code
    /// Why, finer than the code and with its context: what a front end switches on to say what to do.
    public var reason: Reason
    /// What happened, for people. Contains no secrets.
    public var message: String
    /// What to do about it, when there is something to do.
    public var hint: String?
    /// The input field at fault, for input errors (for example `expires_in`).
    public var field: String?

    /// What the token endpoint said, for errors that came from it.
    public var server: ServerErrorDetails?

    /// Creates an error.
    public init(_ code: Code, _ message: String, hint: String? = nil, field: String? = nil,
                server: ServerErrorDetails? = nil, reason: Reason = .unspecified) {
        self.code = code
        self.reason = reason
        self.message = message
        self.hint = hint
        self.field = field
        self.server = server
    }

    public var description: String {
        hint.map { "\(message) (\($0))" } ?? message
    }
}

extension TokenCacheError {
    package static func invalidResponse(_ field: String, _ problem: String) -> TokenCacheError {
        TokenCacheError(
            .invalidTokenResponse, "Token response field '\(field)' \(problem).",
            hint: "The response was not stored; the cache is unchanged. Check what the token endpoint returned.",
            field: field)
    }

    package static func invalidArgument(_ field: String, _ problem: String, hint: String? = nil) -> TokenCacheError {
        TokenCacheError(.invalidArgument, "Invalid \(field): \(problem).", hint: hint, field: field)
    }
}

/// An OAuth 2.0 error response from a token endpoint (RFC 6749 section 5.2, plus Microsoft's
/// `suberror`, `error_codes` and `claims`).
public struct ServerErrorDetails: Sendable, Hashable {
    /// `error`, for example `invalid_grant`.
    public var error: String
    /// `suberror`, for example `client_mismatch` or `consent_required`.
    public var suberror: String?
    /// `error_description`. May contain the server's trace IDs; never tokens.
    public var errorDescription: String?
    /// `error_codes`, for example `[70000]`.
    public var errorCodes: [Int]
    /// `claims`: a claims challenge to pass to the interactive sign-in.
    public var claims: String?
    /// The HTTP status.
    public var httpStatus: Int
    /// `Retry-After`, in seconds, when the server sent it.
    public var retryAfter: Int?

    public init(error: String, suberror: String? = nil, errorDescription: String? = nil, errorCodes: [Int] = [],
                claims: String? = nil, httpStatus: Int, retryAfter: Int? = nil) {
        self.error = error
        self.suberror = suberror
        self.errorDescription = errorDescription
        self.errorCodes = errorCodes
        self.claims = claims
        self.httpStatus = httpStatus
        self.retryAfter = retryAfter
    }
}
