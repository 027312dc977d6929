import TokenCacheCore

/// Why a native-auth step failed, with what to do about it: a reason to switch on, a message and
/// a hint. Messages never hold codes, passwords or tokens.
public struct NativeAuthError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong.
    public enum Reason: Sendable, Hashable {
        /// The server answered `redirect`: this user or flow needs the browser. Sign in with
        /// ``NativeAuthPublicClientApplication/signInWithBrowser(_:)``.
        case browserRequired
        /// No account has this username (sign-in, password reset).
        case userNotFound
        /// The username is not an email address the server accepts.
        case invalidUsername
        /// The password is wrong. The state that was used stays usable: ask again.
        case invalidCredentials
        /// The code is wrong or was replaced by a resent one. The state stays usable: ask again.
        case invalidCode
        /// Sign-up: an account with this username exists; sign in instead.
        case userAlreadyExists
        /// The (new) password breaks the tenant's policy; the suberror says how.
        case passwordPolicy(PasswordProblem)
        /// Sign-up: these attributes fail the user flow's validation.
        case attributeValidation([String])
        /// The user must reset the password first (sign-in answered error 50142).
        case passwordResetRequired
        /// Password reset: the user signs in with email codes and has no password.
        case userHasNoPassword
        /// The flow took too long: its continuation token expired. Start the flow again.
        case expired
        /// The app registration does not allow native authentication for this client
        /// (`invalid_client`, `unauthorized_client`, `nativeauthapi_disabled`).
        case notEnabled
        /// Password reset: the server reported that the reset failed, or did not finish in time.
        case resetFailed
        /// Any other answer of the server; ``NativeAuthError/server`` has it.
        case server
        /// Not a native-auth answer: the network, the cache or a malformed response;
        /// the `TokenCacheError` says which.
        case tokenCache(TokenCacheError)
    }

    /// How a password breaks the policy (the server's `suberror`).
    public enum PasswordProblem: String, Sendable, Hashable {
        case tooWeak = "password_too_weak"
        case tooShort = "password_too_short"
        case tooLong = "password_too_long"
        case recentlyUsed = "password_recently_used"
        case banned = "password_banned"
        case invalid = "password_is_invalid"
    }

    /// What went wrong.
    public var reason: Reason
    /// What happened, for people.
    public var message: String
    /// What to do about it.
    public var hint: String
    /// The server's error, when it came from the server.
    public var server: ServerErrorDetails?

    /// Creates an error.
    public init(_ reason: Reason, _ message: String, hint: String, server: ServerErrorDetails? = nil) {
        self.reason = reason
        self.message = message
        self.hint = hint
        self.server = server
    }

    /// A cache, network or response error met during a native-auth flow.
    public init(_ error: TokenCacheError) {
        self.init(.tokenCache(error), error.message, hint: error.hint ?? "Retry the step", server: error.server)
    }

    public var description: String { "\(message) (\(hint))" }
}

extension NativeAuthError {
    static let browserRequired = NativeAuthError(
        .browserRequired, "The server needs the browser for this sign-in (it answered redirect).",
        hint: "Call signInWithBrowser(_:) on the same application")

    /// The error an API error envelope stands for, acting on the first of `error_codes` as MSAL does.
    static func from(_ details: ServerErrorDetails, invalidAttributes: [String] = []) -> NativeAuthError {
        let first = details.errorCodes.first
        func make(_ reason: Reason, _ message: String, _ hint: String) -> NativeAuthError {
            NativeAuthError(reason, message, hint: hint, server: details)
        }
        if let suberror = details.suberror, let problem = PasswordProblem(rawValue: suberror) {
            return make(.passwordPolicy(problem), "The password does not meet the tenant's policy (\(suberror)).",
                        "Choose another password: at least 8 characters with letters and digits, not one used before")
        }
        switch (details.error, details.suberror, first) {
        case (_, "attribute_validation_failed", _), ("attribute_validation_failed", _, _):
            return make(.attributeValidation(invalidAttributes),
                        "These attributes are not valid: \(invalidAttributes.joined(separator: ", ")).",
                        "Correct them and submit again")
        case ("expired_token", _, _), (_, _, 552003):
            return make(.expired, "The flow expired before this step (expired_token).", "Start again from the beginning")
        case ("user_not_found", _, _), (_, _, 50034):
            return make(.userNotFound, "No account has this username.", "Check the email address, or sign up")
        case ("user_already_exists", _, _), (_, _, 1003037):
            return make(.userAlreadyExists, "An account with this username already exists.", "Sign in instead, or reset the password")
        case (_, "invalid_oob_value", _), (_, _, 50181):
            return make(.invalidCode, "The code is wrong, or a newer code replaced it.", "Enter the latest code from the email again")
        case (_, _, 50126):
            return make(.invalidCredentials, "The username or password is wrong.", "Enter the password again")
        case (_, _, 50142):
            return make(.passwordResetRequired, "The password must be reset before signing in.", "Reset the password, then sign in")
        case (_, _, 500222):
            return make(.userHasNoPassword, "This account signs in with email codes and has no password to reset.",
                        "Sign in with an email code instead")
        case (_, "invalid_username", _):
            return make(.invalidUsername, "The username is not a valid email address.", "Enter an email address")
        case ("invalid_client", _, _), ("unauthorized_client", _, _), (_, "nativeauthapi_disabled", _):
            return make(.notEnabled, "The app registration does not allow native authentication (\(details.error)).",
                        "Enable public client and native authentication flows for the app, or sign in with the browser")
        case ("unsupported_challenge_type", _, _):
            return browserRequired
        default:
            return make(.server, "The server refused the step (\(details.error)\(details.suberror.map { ", \($0)" } ?? "")).",
                        "Start again; if it repeats, check the app registration and user flow")
        }
    }
}
