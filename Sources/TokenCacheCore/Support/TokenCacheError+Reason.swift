extension TokenCacheError {
    /// Why an error happened, finer than its ``TokenCacheError/Code``, with the context a front
    /// end needs to say what to do in its own terms (a command-line option, a C function, a Python
    /// argument) without reading ``TokenCacheError/message`` or ``TokenCacheError/hint``, whose
    /// wording may change. Errors with nothing more to say are ``unspecified``.
    ///
    /// New reasons are added in minor versions, so a reason is a struct, not an enum (as
    /// swift-nio's `FileSystemError.Code`). Each reason has one public member: a reason without
    /// context is a static to compare with (`error.reason == .noAccount`, or `case .noAccount:` in
    /// a `switch` with a `default` case); a reason with context is the property of its name, its
    /// context for that reason and `nil` for any other (`error.reason.severalAccounts` is the
    /// accounts of a `severalAccounts` reason). ``name`` is the reason's stable name, for logs and
    /// other languages. `Codable`: how a reason crosses the agent's socket.
    public struct Reason: Sendable, Hashable, Codable {
        /// Every reason, closed, each declared once here with its context: the library's own front
        /// ends (C, the CLI) switch over it exhaustively, so a reason they do not map fails their
        /// build. A case's name is the reason's ``TokenCacheError/Reason/name``; its public member
        /// and documentation are below; its synthesized `Codable` is the wire format.
        package enum Value: Sendable, Hashable, Codable {
            case unspecified
            // Secret Service
            case collectionMissing(label: String)
            case sessionCollectionUnsupported
            case defaultCollectionMissing
            case defaultCollectionUncreatable
            case createCollectionPromptDismissed(label: String)
            case unlockPromptDismissed
            case unlockPromptTimedOut(seconds: Int)
            case secretServiceSessionLost
            // Libraries loaded at run time
            case libraryMissing(name: String, install: String)
            // Encrypted file
            case fileRolledBack(group: String)
            case tpmUnavailable(tcti: String)
            case tpmLockedOut
            case tpmSealedElsewhere
            // Sign-in
            case noDisplay
            case browserCommandFailed
            case xdgOpenMissing
            case xdgOpenFailed
            case redirectPortUnavailable(port: Int)
            case signInTimedOut
            case deviceCodeTimedOut
            case deviceCodeUnsupported(adfs: Bool)
            case tokenEndpointNotFound(authority: String)
            // Silent sign-in
            case noRefreshToken
            case refreshTokenRejected
            case clientRejected
            case refreshTokenFromOtherHost(aliases: [String], host: String)
            case tokensOfAnotherAccount
            // Token agent
            case agentUnreachable(path: String)
            case agentProtocol(path: String)
            case agentUntrusted(path: String, uid: Int?)
            // Secret portal (sandboxed apps)
            case portalRequestCancelled
            case portalRequestFailed
            case portalUnreachable
            case portalSecretSize(bytes: Int)
            case keyDerivationRoundsOutOfBounds(rounds: Int, limit: Int)
            // The process
            case threadCeilingReached(pool: String, limit: Int)
            // Choosing the account and the token (one rule for every front end)
            case noAccount
            case severalAccounts(accounts: [String])
            case accountInSeveralClouds(hosts: [String])
            case tokensInSeveralTenants(tenants: [String])
            case noUsableToken(refreshable: Bool)
            case clientNotSignedIn(signedOut: Bool, clients: [String])
            // The account photo (Microsoft Graph)
            case noGraph(authority: String)
            case graphUnreachable(host: String)
            case graphRefused(status: Int)
            case photoNotAnImage(contentType: String)
            case photoTooLarge(limit: Int)
            // The identity broker (com.microsoft.identity.broker1)
            case brokerUnavailable(name: String)
            case brokerRefused(status: Int, code: String?)
        }

        /// The reason itself, for the library's modules to switch over.
        package let value: Value

        package init(_ value: Value) { self.value = value }

        public init(from decoder: any Decoder) throws {
            self.init(try Value(from: decoder))
        }

        public func encode(to encoder: any Encoder) throws {
            try value.encode(to: encoder)
        }
    }
}

// Each reason's public member (a static for a reason without context, the property of its name
// for one with context) and, for one with context, the constructor the library's modules use.
extension TokenCacheError.Reason {
    /// No reason finer than the code was recorded.
    public static let unspecified = Self(.unspecified)

    // Secret Service
    /// The group maps onto the collection labelled `label`, which does not exist, and creating
    /// it was not allowed.
    public var collectionMissing: String? {
        if case .collectionMissing(let label) = value { label } else { nil }
    }
    package static func collectionMissing(label: String) -> Self { Self(.collectionMissing(label: label)) }

    /// The provider has no in-memory `session` collection (KWallet, KeePassXC have none).
    public static let sessionCollectionUnsupported = Self(.sessionCollectionUnsupported)

    /// The provider has no `default` collection: nobody has logged in to the desktop yet.
    public static let defaultCollectionMissing = Self(.defaultCollectionMissing)

    /// The provider has no `default` collection and none can be created here: its password
    /// prompt could not be shown (no display, and the provider's prompter dismissed it at once).
    /// `automatic` backend selection uses the encrypted file instead.
    public static let defaultCollectionUncreatable = Self(.defaultCollectionUncreatable)

    /// Creating the collection labelled `label` needs a password prompt, which was dismissed
    /// or could not be shown.
    public var createCollectionPromptDismissed: String? {
        if case .createCollectionPromptDismissed(let label) = value { label } else { nil }
    }
    package static func createCollectionPromptDismissed(label: String) -> Self { Self(.createCollectionPromptDismissed(label: label)) }

    /// The keyring's unlock prompt was dismissed or could not be shown.
    public static let unlockPromptDismissed = Self(.unlockPromptDismissed)

    /// Nobody answered the keyring's unlock prompt within `seconds`.
    public var unlockPromptTimedOut: Int? {
        if case .unlockPromptTimedOut(let seconds) = value { seconds } else { nil }
    }
    package static func unlockPromptTimedOut(seconds: Int) -> Self { Self(.unlockPromptTimedOut(seconds: seconds)) }

    /// The provider no longer knows the encrypted session (it restarted); a write is retried
    /// once in a fresh session.
    public static let secretServiceSessionLost = Self(.secretServiceSessionLost)

    // Libraries loaded at run time
    /// The library `name` ("libgcrypt") could not be loaded; `install` says how to install it
    /// ("Debian/Ubuntu: apt-get install libgcrypt20").
    public var libraryMissing: (name: String, install: String)? {
        if case .libraryMissing(let name, let install) = value { (name: name, install: install) } else { nil }
    }
    package static func libraryMissing(name: String, install: String) -> Self { Self(.libraryMissing(name: name, install: install)) }

    // Encrypted file
    /// The cache file of `group` is older than one this machine has seen; it can be accepted
    /// deliberately.
    public var fileRolledBack: String? {
        if case .fileRolledBack(let group) = value { group } else { nil }
    }
    package static func fileRolledBack(group: String) -> Self { Self(.fileRolledBack(group: group)) }

    /// No TPM 2.0 answered through the TCTI `tcti` ("device:/dev/tpmrm0"), or its storage
    /// hierarchy cannot be used (``TokenCacheError/Code/backendUnavailable``).
    public var tpmUnavailable: String? {
        if case .tpmUnavailable(let tcti) = value { tcti } else { nil }
    }
    package static func tpmUnavailable(tcti: String) -> Self { Self(.tpmUnavailable(tcti: tcti)) }

    /// The TPM is busy or in dictionary-attack lockout; try again later
    /// (``TokenCacheError/Code/backendUnavailable``).
    public static let tpmLockedOut = Self(.tpmLockedOut)

    /// The cache key was sealed by another TPM: the cache was copied from another machine
    /// (``TokenCacheError/Code/fileAuthenticationFailed``).
    public static let tpmSealedElsewhere = Self(.tpmSealedElsewhere)

    // Sign-in
    /// No browser can be opened: `BROWSER` is not set, the desktop portal did not open the
    /// page and there is no display.
    public static let noDisplay = Self(.noDisplay)

    /// No command in the `BROWSER` environment variable could open the sign-in page.
    public static let browserCommandFailed = Self(.browserCommandFailed)

    /// `xdg-open` could not be started (not installed).
    public static let xdgOpenMissing = Self(.xdgOpenMissing)

    /// `xdg-open` ran but opened no browser (no default browser).
    public static let xdgOpenFailed = Self(.xdgOpenFailed)

    /// The fixed loopback redirect `port` could not be bound (another program uses it, or it is not permitted).
    public var redirectPortUnavailable: Int? {
        if case .redirectPortUnavailable(let port) = value { port } else { nil }
    }
    package static func redirectPortUnavailable(port: Int) -> Self { Self(.redirectPortUnavailable(port: port)) }

    /// No sign-in arrived at the loopback redirect within the sign-in's timeout.
    public static let signInTimedOut = Self(.signInTimedOut)

    /// A device code sign-in did not finish within the caller's timeout.
    public static let deviceCodeTimedOut = Self(.deviceCodeTimedOut)

    /// The authority offers no device code flow (`adfs`: it is AD FS before 2019): sign in
    /// with the browser.
    public var deviceCodeUnsupported: Bool? {
        if case .deviceCodeUnsupported(let adfs) = value { adfs } else { nil }
    }
    package static func deviceCodeUnsupported(adfs: Bool) -> Self { Self(.deviceCodeUnsupported(adfs: adfs)) }

    /// OpenID discovery of `authority` gave no usable token endpoint.
    public var tokenEndpointNotFound: String? {
        if case .tokenEndpointNotFound(let authority) = value { authority } else { nil }
    }
    package static func tokenEndpointNotFound(authority: String) -> Self { Self(.tokenEndpointNotFound(authority: authority)) }

    // Silent sign-in
    /// No refresh token is cached for this account and app: sign the user in.
    public static let noRefreshToken = Self(.noRefreshToken)

    /// The token endpoint refused every refresh token with an error that needs the user
    /// (`invalid_grant`, `interaction_required`, consent); ``TokenCacheError/server`` has it.
    public static let refreshTokenRejected = Self(.refreshTokenRejected)

    /// The token endpoint refused the refresh for a reason of the app registration (client ID,
    /// authority); ``TokenCacheError/server`` has it.
    public static let clientRejected = Self(.clientRejected)

    /// The account's refresh tokens were issued by other hosts than the authority's `host`;
    /// `aliases` are the hosts where they can be redeemed. Nothing was sent.
    public var refreshTokenFromOtherHost: (aliases: [String], host: String)? {
        if case .refreshTokenFromOtherHost(let aliases, let host) = value { (aliases: aliases, host: host) } else { nil }
    }
    package static func refreshTokenFromOtherHost(aliases: [String], host: String) -> Self { Self(.refreshTokenFromOtherHost(aliases: aliases, host: host)) }

    /// The token endpoint answered a refresh for one account with another account's tokens.
    public static let tokensOfAnotherAccount = Self(.tokensOfAnotherAccount)

    // Token agent
    /// The token agent's socket at `path` could not be reached.
    public var agentUnreachable: String? {
        if case .agentUnreachable(let path) = value { path } else { nil }
    }
    package static func agentUnreachable(path: String) -> Self { Self(.agentUnreachable(path: path)) }

    /// The token agent at `path` closed the connection or answered outside the protocol.
    public var agentProtocol: String? {
        if case .agentProtocol(let path) = value { path } else { nil }
    }
    package static func agentProtocol(path: String) -> Self { Self(.agentProtocol(path: path)) }

    /// The socket at `path` may be another user's (its directory is writable by others or
    /// another user's, or the socket or its listener belongs to `uid`): nothing was sent.
    public var agentUntrusted: (path: String, uid: Int?)? {
        if case .agentUntrusted(let path, let uid) = value { (path: path, uid: uid) } else { nil }
    }
    package static func agentUntrusted(path: String, uid: Int?) -> Self { Self(.agentUntrusted(path: path, uid: uid)) }

    // Secret portal (sandboxed apps)
    /// The portal's request for the app's keyring secret was cancelled (Response 1).
    public static let portalRequestCancelled = Self(.portalRequestCancelled)

    /// The portal's Secret backend could not give the secret (Response 2).
    public static let portalRequestFailed = Self(.portalRequestFailed)

    /// The desktop portal or its Secret interface could not be called.
    public static let portalUnreachable = Self(.portalUnreachable)

    /// The portal gave a secret of the wrong size (`bytes` instead of 64).
    public var portalSecretSize: Int? {
        if case .portalSecretSize(let bytes) = value { bytes } else { nil }
    }
    package static func portalSecretSize(bytes: Int) -> Self { Self(.portalSecretSize(bytes: bytes)) }

    /// The sandbox's keyring file asks for `rounds` key-derivation rounds, outside 1...`limit`
    /// (a hostile file); no key was derived.
    public var keyDerivationRoundsOutOfBounds: (rounds: Int, limit: Int)? {
        if case .keyDerivationRoundsOutOfBounds(let rounds, let limit) = value { (rounds: rounds, limit: limit) } else { nil }
    }
    package static func keyDerivationRoundsOutOfBounds(rounds: Int, limit: Int) -> Self { Self(.keyDerivationRoundsOutOfBounds(rounds: rounds, limit: limit)) }

    // The process
    /// The library's blocking pool `pool` already runs `limit` calls, its ceiling (``TokenCacheError/Code/overloaded``).
    public var threadCeilingReached: (pool: String, limit: Int)? {
        if case .threadCeilingReached(let pool, let limit) = value { (pool: pool, limit: limit) } else { nil }
    }
    package static func threadCeilingReached(pool: String, limit: Int) -> Self { Self(.threadCeilingReached(pool: pool, limit: limit)) }

    // Choosing the account and the token (one rule for every front end)
    /// No account of the client matches the request (``TokenCacheError/Code/notFound``).
    public static let noAccount = Self(.noAccount)

    /// The client has several accounts, `accounts` ("username (home account ID)"), and the
    /// request named none of them alone (``TokenCacheError/Code/ambiguousAccount``).
    public var severalAccounts: [String]? {
        if case .severalAccounts(let accounts) = value { accounts } else { nil }
    }
    package static func severalAccounts(accounts: [String]) -> Self { Self(.severalAccounts(accounts: accounts)) }

    /// The account named has records at hosts of different clouds, `hosts`; an authority picks one
    /// (``TokenCacheError/Code/ambiguousAccount``).
    public var accountInSeveralClouds: [String]? {
        if case .accountInSeveralClouds(let hosts) = value { hosts } else { nil }
    }
    package static func accountInSeveralClouds(hosts: [String]) -> Self { Self(.accountInSeveralClouds(hosts: hosts)) }

    /// No authority was given and usable access tokens are cached in several tenants, `tenants`
    /// (``TokenCacheError/Code/ambiguousAccount``).
    public var tokensInSeveralTenants: [String]? {
        if case .tokensInSeveralTenants(let tenants) = value { tenants } else { nil }
    }
    package static func tokensInSeveralTenants(tenants: [String]) -> Self { Self(.tokensInSeveralTenants(tenants: tenants)) }

    /// No cached access token is usable and none was redeemed (``TokenCacheError/Code/notFound``):
    /// `refreshable` when a cached refresh token could be redeemed with an authority.
    public var noUsableToken: Bool? {
        if case .noUsableToken(let refreshable) = value { refreshable } else { nil }
    }
    package static func noUsableToken(refreshable: Bool) -> Self { Self(.noUsableToken(refreshable: refreshable)) }

    /// The account named exists but the client is not signed in to it (``TokenCacheError/Code/notFound``):
    /// `signedOut` when it signed out already; `clients` are those signed in to it.
    public var clientNotSignedIn: (signedOut: Bool, clients: [String])? {
        if case .clientNotSignedIn(let signedOut, let clients) = value { (signedOut: signedOut, clients: clients) } else { nil }
    }
    package static func clientNotSignedIn(signedOut: Bool, clients: [String]) -> Self { Self(.clientNotSignedIn(signedOut: signedOut, clients: clients)) }

    // The account photo (Microsoft Graph)
    /// Accounts of the authority `authority` (a host) have no Microsoft Graph: B2C, a generic
    /// OpenID provider, or a cloud without a known Graph host (``TokenCacheError/Code/unsupportedFlow``).
    public var noGraph: String? {
        if case .noGraph(let authority) = value { authority } else { nil }
    }
    package static func noGraph(authority: String) -> Self { Self(.noGraph(authority: authority)) }

    /// Microsoft Graph at `host` did not answer, or (plain http on loopback) another user holds its port and
    /// nothing was sent (``TokenCacheError/Code/network``).
    public var graphUnreachable: String? {
        if case .graphUnreachable(let host) = value { host } else { nil }
    }
    package static func graphUnreachable(host: String) -> Self { Self(.graphUnreachable(host: host)) }

    /// Graph answered with HTTP `status`, neither 200 nor a photo's 404 (``TokenCacheError/Code/serverError``).
    public var graphRefused: Int? {
        if case .graphRefused(let status) = value { status } else { nil }
    }
    package static func graphRefused(status: Int) -> Self { Self(.graphRefused(status: status)) }

    /// Graph's photo answer had the content type `contentType`, not a raster image type (JPEG, PNG, GIF, WebP, BMP); nothing was cached.
    public var photoNotAnImage: String? {
        if case .photoNotAnImage(let contentType) = value { contentType } else { nil }
    }
    package static func photoNotAnImage(contentType: String) -> Self { Self(.photoNotAnImage(contentType: contentType)) }

    /// The photo was larger than `limit` bytes; nothing was cached.
    public var photoTooLarge: Int? {
        if case .photoTooLarge(let limit) = value { limit } else { nil }
    }
    package static func photoTooLarge(limit: Int) -> Self { Self(.photoTooLarge(limit: limit)) }

    // The identity broker (com.microsoft.identity.broker1)
    /// No identity broker answers on the session bus name `name` (none installed, or no bus)
    /// (``TokenCacheError/Code/backendUnavailable``, ``TokenCacheError/Code/noSessionBus``).
    public var brokerUnavailable: String? {
        if case .brokerUnavailable(let name) = value { name } else { nil }
    }
    package static func brokerUnavailable(name: String) -> Self { Self(.brokerUnavailable(name: name)) }

    /// The identity broker refused the request or answered outside its protocol: its `status`
    /// (MSALRuntime's ResponseStatus; -1 when there was none) and error `code` when it gave one.
    public var brokerRefused: (status: Int, code: String?)? {
        if case .brokerRefused(let status, let code) = value { (status: status, code: code) } else { nil }
    }
    package static func brokerRefused(status: Int, code: String?) -> Self { Self(.brokerRefused(status: status, code: code)) }
}

extension TokenCacheError.Reason {
    /// The reason's stable name (`collectionMissing`), for logs and other languages; its
    /// context is not part of it.
    public var name: String {
        // The case's own name, so that it cannot drift from the declaration: a case with context
        // reflects as one child labelled with it, a case without as its name.
        Mirror(reflecting: value).children.first?.label ?? String(describing: value)
    }
}
