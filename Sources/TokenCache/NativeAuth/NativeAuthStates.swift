import FoundationEssentials
import TokenCacheCore

// The states of the native-auth flows. Each holds the flow's continuation token, which the
// server accepts again within the same step: after a wrong code or password, or a policy error,
// the same state takes the next attempt. Each async step runs in one job of the blocking pool:
// besides the errors each names, it throws `tokenCache` with code `cancelled` (its task was
// cancelled before its answer began) or `overloaded` (the pool is at its ceiling).

/// Sign-in: a code was emailed to the user.
public struct SignInCodeRequiredState: Sendable {
    let application: NativeAuthPublicClientApplication
    let username: String
    let scopes: [String]
    let continuationToken: String
    /// Where the code went, masked (for example `j****@contoso.com`).
    public let sentTo: String
    /// How it went (`email`).
    public let channel: String
    /// How many characters the code has.
    public let codeLength: Int

    init(application: NativeAuthPublicClientApplication, username: String, scopes: [String], continuationToken: String, challenge: JSONObject) {
        self.application = application
        self.username = username
        self.scopes = scopes
        self.continuationToken = continuationToken
        (sentTo, channel, codeLength) = CodeChallenge.describe(challenge)
    }

    /// Submits the code the user entered and signs in.
    /// - Throws: ``NativeAuthError`` `invalidCode` (this state stays usable), `expired`, `tokenCache`.
    public func submitCode(_ code: String) async throws(NativeAuthError) -> NativeAuthAccount {
        try await NativeAuthJob.run { (isCancelled) throws(NativeAuthError) in try self.blockingSubmitCode(code, isCancelled: isCancelled) }
    }

    /// ``submitCode(_:)`` on the calling thread.
    package func blockingSubmitCode(_ code: String, isCancelled: @escaping @Sendable () -> Bool = { false }) throws(NativeAuthError) -> NativeAuthAccount {
        try application.finish(CodeChallenge.submission(code, continuationToken), scopes: scopes, isCancelled: isCancelled)
    }

    /// Emails a new code; the previous code no longer works.
    public func resendCode() async throws(NativeAuthError) -> SignInCodeRequiredState {
        try await NativeAuthJob.run { (isCancelled) throws(NativeAuthError) in
            switch try self.application.signInChallenge(self.continuationToken, username: self.username, password: nil, scopes: self.scopes,
                                                        isCancelled: isCancelled) {
            case .codeRequired(let state): return state
            default: throw NativeAuthError(TokenCacheError.invalidResponse("challenge_type", "changed from oob on resend"))
            }
        }
    }
}

/// Sign-in: this user signs in with a password.
public struct SignInPasswordRequiredState: Sendable {
    let application: NativeAuthPublicClientApplication
    let username: String
    let scopes: [String]
    let continuationToken: String

    /// Submits the password and signs in.
    /// - Throws: ``NativeAuthError`` `invalidCredentials` (this state stays usable),
    ///   `passwordResetRequired`, `expired`, `tokenCache`.
    public func submitPassword(_ password: String) async throws(NativeAuthError) -> NativeAuthAccount {
        try await NativeAuthJob.run { (isCancelled) throws(NativeAuthError) in try self.blockingSubmitPassword(password, isCancelled: isCancelled) }
    }

    /// ``submitPassword(_:)`` on the calling thread.
    package func blockingSubmitPassword(_ password: String, isCancelled: @escaping @Sendable () -> Bool = { false }) throws(NativeAuthError) -> NativeAuthAccount {
        try application.finish(["grant_type": "password", "continuation_token": continuationToken, "username": username, "password": password],
                               scopes: scopes, isCancelled: isCancelled)
    }
}

/// After a sign-up or a password reset: sign the user in without asking again.
public struct SignInAfterFlowState: Sendable {
    let application: NativeAuthPublicClientApplication
    let username: String
    let continuationToken: String

    /// Signs the user in with the flow's continuation token.
    /// - Throws: ``NativeAuthError`` `expired`, `tokenCache`.
    public func signIn(scopes: [String]) async throws(NativeAuthError) -> NativeAuthAccount {
        try await NativeAuthJob.run { (isCancelled) throws(NativeAuthError) in try self.blockingSignIn(scopes: scopes, isCancelled: isCancelled) }
    }

    /// ``signIn(scopes:)`` on the calling thread.
    package func blockingSignIn(scopes: [String], isCancelled: @escaping @Sendable () -> Bool = { false }) throws(NativeAuthError) -> NativeAuthAccount {
        try application.finish(["grant_type": "continuation_token", "continuation_token": continuationToken, "username": username],
                               scopes: scopes, isCancelled: isCancelled)
    }
}

/// Sign-up: a code was emailed to verify the address.
public struct SignUpCodeRequiredState: Sendable {
    let application: NativeAuthPublicClientApplication
    let username: String
    let continuationToken: String
    /// Where the code went, masked.
    public let sentTo: String
    /// How it went (`email`).
    public let channel: String
    /// How many characters the code has.
    public let codeLength: Int

    init(application: NativeAuthPublicClientApplication, username: String, continuationToken: String, challenge: JSONObject) {
        self.application = application
        self.username = username
        self.continuationToken = continuationToken
        (sentTo, channel, codeLength) = CodeChallenge.describe(challenge)
    }

    /// Submits the code; the answer says what the user flow needs next.
    /// - Throws: ``NativeAuthError`` `invalidCode` (this state stays usable), `userAlreadyExists`, `expired`, `tokenCache`.
    public func submitCode(_ code: String) async throws(NativeAuthError) -> NativeAuthPublicClientApplication.SignUpResult {
        try await NativeAuthJob.run { (isCancelled) throws(NativeAuthError) in try self.blockingSubmitCode(code, isCancelled: isCancelled) }
    }

    /// ``submitCode(_:)`` on the calling thread.
    package func blockingSubmitCode(_ code: String, isCancelled: @escaping @Sendable () -> Bool = { false }) throws(NativeAuthError) -> NativeAuthPublicClientApplication.SignUpResult {
        try application.signUpContinue(CodeChallenge.submission(code, continuationToken), username: username, isCancelled: isCancelled)
    }

    /// Emails a new code; the previous code no longer works.
    public func resendCode() async throws(NativeAuthError) -> SignUpCodeRequiredState {
        try await NativeAuthJob.run { (isCancelled) throws(NativeAuthError) in
            switch try self.application.signUpChallenge(self.continuationToken, username: self.username, isCancelled: isCancelled) {
            case .codeRequired(let state): return state
            default: throw NativeAuthError(TokenCacheError.invalidResponse("challenge_type", "changed from oob on resend"))
            }
        }
    }
}

/// Sign-up: the user flow needs a password.
public struct SignUpPasswordRequiredState: Sendable {
    let application: NativeAuthPublicClientApplication
    let username: String
    let continuationToken: String

    /// Submits the new account's password.
    /// - Throws: ``NativeAuthError`` `passwordPolicy` (this state stays usable), `expired`, `tokenCache`.
    public func submitPassword(_ password: String) async throws(NativeAuthError) -> NativeAuthPublicClientApplication.SignUpResult {
        try await NativeAuthJob.run { (isCancelled) throws(NativeAuthError) in try self.blockingSubmitPassword(password, isCancelled: isCancelled) }
    }

    /// ``submitPassword(_:)`` on the calling thread.
    package func blockingSubmitPassword(_ password: String, isCancelled: @escaping @Sendable () -> Bool = { false }) throws(NativeAuthError) -> NativeAuthPublicClientApplication.SignUpResult {
        try application.signUpContinue(["grant_type": "password", "continuation_token": continuationToken, "password": password],
                                       username: username, isCancelled: isCancelled)
    }
}

/// Sign-up: the user flow needs attributes.
public struct SignUpAttributesRequiredState: Sendable {
    let application: NativeAuthPublicClientApplication
    let username: String
    let continuationToken: String
    /// What the user flow asks for: name, type and the pattern values must match.
    public let requiredAttributes: [NativeAuthRequiredAttribute]

    /// Submits the attributes.
    /// - Throws: ``NativeAuthError`` `attributeValidation` naming those at fault (this state
    ///   stays usable), `expired`, `tokenCache`.
    public func submitAttributes(_ attributes: [String: String]) async throws(NativeAuthError) -> NativeAuthPublicClientApplication.SignUpResult {
        try await NativeAuthJob.run { (isCancelled) throws(NativeAuthError) in try self.blockingSubmitAttributes(attributes, isCancelled: isCancelled) }
    }

    /// ``submitAttributes(_:)`` on the calling thread.
    package func blockingSubmitAttributes(_ attributes: [String: String],
                                          isCancelled: @escaping @Sendable () -> Bool = { false }) throws(NativeAuthError) -> NativeAuthPublicClientApplication.SignUpResult {
        try application.signUpContinue(["grant_type": "attributes", "continuation_token": continuationToken,
                                        "attributes": NativeAuthPublicClientApplication.json(attributes)], username: username, isCancelled: isCancelled)
    }
}

/// Password reset: a code was emailed to the user.
public struct ResetPasswordCodeRequiredState: Sendable {
    let application: NativeAuthPublicClientApplication
    let username: String
    let continuationToken: String
    /// Where the code went, masked.
    public let sentTo: String
    /// How it went (`email`).
    public let channel: String
    /// How many characters the code has.
    public let codeLength: Int

    init(application: NativeAuthPublicClientApplication, username: String, continuationToken: String, challenge: JSONObject) {
        self.application = application
        self.username = username
        self.continuationToken = continuationToken
        (sentTo, channel, codeLength) = CodeChallenge.describe(challenge)
    }

    /// Submits the code; a new password is then due.
    /// - Throws: ``NativeAuthError`` `invalidCode` (this state stays usable), `expired`, `tokenCache`.
    public func submitCode(_ code: String) async throws(NativeAuthError) -> ResetPasswordRequiredState {
        try await NativeAuthJob.run { (isCancelled) throws(NativeAuthError) in try self.blockingSubmitCode(code, isCancelled: isCancelled) }
    }

    /// ``submitCode(_:)`` on the calling thread.
    package func blockingSubmitCode(_ code: String, isCancelled: @escaping @Sendable () -> Bool = { false }) throws(NativeAuthError) -> ResetPasswordRequiredState {
        let answer = try application.api.step("/resetpassword/v1.0/continue", CodeChallenge.submission(code, continuationToken),
                                              isCancelled: isCancelled)
        return ResetPasswordRequiredState(application: application, username: username,
                                          continuationToken: try answer.continuationToken("reset continue"))
    }

    /// Emails a new code; the previous code no longer works.
    public func resendCode() async throws(NativeAuthError) -> ResetPasswordCodeRequiredState {
        try await NativeAuthJob.run { (isCancelled) throws(NativeAuthError) in
            try self.application.resetChallenge(self.continuationToken, username: self.username, isCancelled: isCancelled)
        }
    }
}

/// Password reset: the code was right; a new password is due.
public struct ResetPasswordRequiredState: Sendable {
    let application: NativeAuthPublicClientApplication
    let username: String
    let continuationToken: String

    /// MSAL's bound on completion polls.
    static let maximumPolls = 6

    /// Submits the new password and waits (polling the server, at most 6 times) until the reset completes.
    /// - Throws: ``NativeAuthError`` `passwordPolicy` (this state stays usable), `resetFailed`, `expired`, `tokenCache`.
    public func submitNewPassword(_ password: String) async throws(NativeAuthError) -> SignInAfterFlowState {
        try await NativeAuthJob.run { (isCancelled) throws(NativeAuthError) in try self.blockingSubmitNewPassword(password, isCancelled: isCancelled) }
    }

    /// ``submitNewPassword(_:)`` on the calling thread: the completion polls' waits sleep it.
    package func blockingSubmitNewPassword(_ password: String, isCancelled: @escaping @Sendable () -> Bool = { false }) throws(NativeAuthError) -> SignInAfterFlowState {
        let submitted = try application.api.step("/resetpassword/v1.0/submit", [
            "continuation_token": continuationToken, "new_password": password], isCancelled: isCancelled)
        let pollToken = try submitted.continuationToken("reset submit")
        let interval = min(max(submitted["poll_interval"]?.secondsValue ?? 2, 0.1), 10)
        for _ in 0..<Self.maximumPolls {
            // The new password may be set already: a cancelled wait says so, not "nothing was saved".
            guard application.api.clock.sleepBlocking(for: .milliseconds(Int(interval * 1000)), isCancelled: isCancelled) else {
                throw NativeAuthError(.resetFailed, "The wait for the password reset to complete was cancelled; the new password may be set already.",
                                      hint: "Try signing in with the new password, or start the reset again")
            }
            let poll = try application.api.step("/resetpassword/v1.0/poll_completion", ["continuation_token": pollToken], isCancelled: isCancelled)
            switch poll["status"]?.stringValue {
            case "succeeded"?:
                return SignInAfterFlowState(application: application, username: username,
                                            continuationToken: try poll.continuationToken("reset poll"))
            case "failed"?:
                throw NativeAuthError(.resetFailed, "The server could not reset the password.", hint: "Start the reset again")
            default:
                continue
            }
        }
        throw NativeAuthError(.resetFailed, "The password reset did not complete after \(Self.maximumPolls) checks.",
                              hint: "Try signing in with the new password in a moment, or start the reset again")
    }
}

enum CodeChallenge {
    /// Where a code went, by which channel, and its length, from a challenge answer.
    static func describe(_ challenge: JSONObject) -> (sentTo: String, channel: String, codeLength: Int) {
        (challenge["challenge_target_label"]?.stringValue ?? "",
         challenge["challenge_channel"]?.stringValue ?? "email",
         challenge["code_length"]?.secondsValue.map { Int($0) } ?? 8)
    }

    /// The body that submits a code the user typed (trimmed) in the step `continuationToken` names.
    static func submission(_ code: String, _ continuationToken: String) -> [String: String] {
        ["grant_type": "oob", "continuation_token": continuationToken, "oob": ASCII.trimmed(code)]
    }
}
