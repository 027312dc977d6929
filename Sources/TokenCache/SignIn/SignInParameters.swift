import FoundationEssentials
import TokenCacheCore
import TokenCachePipeline

/// What an interactive sign-in (authorization code with PKCE in the system browser) asks for:
/// MSAL's `MSALInteractiveTokenParameters`.
public struct InteractiveTokenParameters: Sendable {
    /// The `prompt` sent to the authority.
    public enum Prompt: String, Sendable {
        /// Let the user pick one of the accounts signed in to the browser.
        case selectAccount = "select_account"
        /// Ask for credentials even when the browser has a session.
        case login
        /// Ask for consent even when it was given before.
        case consent
        /// Offer to create an account (Entra External ID, B2C).
        case create
        /// Never show anything: fails with `interactionRequired` when the user would have to act.
        case none
    }

    /// The scopes of the access token (`openid`, `profile` and `offline_access` are added).
    public var scopes: [String]
    /// The `prompt`; nil lets the authority decide.
    public var prompt: Prompt?
    /// The username to prefill (`login_hint`).
    public var loginHint: String?
    /// The home realm to skip discovery for (`domain_hint`, for example `contoso.com`).
    public var domainHint: String?
    /// A claims challenge (JSON), for example `ServerErrorDetails.claims` of an
    /// `interactionRequired` error; sent as `claims`.
    public var claims: String?
    /// Scopes of other resources to consent to now, so later silent calls for them succeed; the
    /// returned token is for ``scopes`` only.
    public var extraScopesToConsent: [String] = []
    /// More query parameters for the authorization URL. The flow's own parameters (client ID,
    /// redirect URI, scope, state, PKCE) cannot be replaced.
    public var extraQueryParameters: [String: String] = [:]
    /// The authority of this sign-in; nil uses the app's.
    public var authority: Authority?
    /// How long the user has to finish signing in, in seconds; then `timedOut`.
    public var timeout: TimeInterval = 300
    /// How the authorization URL is opened.
    public var browser: BrowserOpener = .system
    /// The loopback port of the redirect URI `http://localhost:<port>`; 0 picks a free one.
    public var redirectPort: Int = 0

    /// Parameters for the scopes, with the defaults above.
    public init(scopes: [String]) {
        self.scopes = scopes
    }
}

/// What a device code sign-in (RFC 8628) asks for.
public struct DeviceCodeParameters: Sendable {
    /// The scopes of the access token (`openid`, `profile` and `offline_access` are added).
    public var scopes: [String]
    /// A claims challenge (JSON), sent as `claims`.
    public var claims: String?
    /// The authority of this sign-in; nil uses the app's.
    public var authority: Authority?
    /// Gives up (`timedOut`, reason `deviceCodeTimedOut`) after this many seconds of waiting for the
    /// user, though the code lives longer; nil waits as long as the authority's code lives.
    public var timeout: TimeInterval?

    /// Parameters for the scopes.
    public init(scopes: [String]) {
        self.scopes = scopes
    }
}

/// What to show the user of a device code sign-in: where to go and which code to enter.
public struct DeviceCodeMessage: Sendable {
    /// The code the user enters at ``verificationURI``.
    public let userCode: String
    /// Where the user signs in, on any device.
    public let verificationURI: URL
    /// The same page with the code filled in, when the authority offers one (for a QR code).
    public let verificationURIComplete: URL?
    /// When the code stops working.
    public let expiresOn: Date
    /// The authority's instructions for the user (control characters removed), or one made
    /// from the fields above.
    public let message: String
}

extension DeviceCodeMessage {
    /// The message of a device code sign-in the token keeper runs (its URLs checked as the flow's own).
    init(_ code: AgentProtocol.DeviceCode) {
        let verification = DeviceCodeFlow.webURL(code.verificationURI) ?? URL(string: "https://invalid.invalid")!
        self.init(userCode: ServerText.printable(code.userCode, limit: 64), verificationURI: verification,
                  verificationURIComplete: DeviceCodeFlow.webURL(code.verificationURIComplete),
                  expiresOn: Date(timeIntervalSince1970: TimeInterval(code.expiresOn)), message: ServerText.printable(code.message))
    }

    /// The message as the token keeper sends it to an app.
    package var wire: AgentProtocol.DeviceCode {
        AgentProtocol.DeviceCode(userCode: userCode, verificationURI: verificationURI.absoluteString,
                                 verificationURIComplete: verificationURIComplete?.absoluteString,
                                 expiresOn: Int64(expiresOn.timeIntervalSince1970), message: message)
    }
}
