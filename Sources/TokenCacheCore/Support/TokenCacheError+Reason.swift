extension TokenCacheError {
    /// Why an error happened, finer than its ``TokenCacheError/Code``, with the context a front
    /// end needs to say what to do in its own terms (a command-line option, a C function, a Python
    /// argument) without reading ``TokenCacheError/message`` or ``TokenCacheError/hint``, whose
    /// wording may change. Errors with nothing more to say are ``unspecified``.
    ///
    /// New reasons are added in minor versions, so a reason is a struct, not an enum (as
    /// swift-nio's `FileSystemError.Code`): compare it (`error.reason == .noAccount`), switch on
    /// its ``kind`` with a `default` case, and read a reason's context through the property of the
    /// same name (`error.reason.severalAccounts` is the accounts of a ``severalAccounts(accounts:)``
    /// reason, `nil` for any other). `Codable`: how a reason crosses the agent's socket.
    public struct Reason: Sendable, Hashable, Codable {
        /// Every reason, closed: the library's own front ends (C, the CLI) switch over it
        /// exhaustively, so a reason they do not map fails their build. Documented at the public
        /// constructors below; its synthesized `Codable` is the wire format.
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

extension TokenCacheError.Reason {
    /// No reason finer than the code was recorded.
    public static let unspecified = Self(.unspecified)

    // Secret Service
    /// The group maps onto the collection labelled `label`, which does not exist, and creating
    /// it was not allowed.
    public static func collectionMissing(label: String) -> Self { Self(.collectionMissing(label: label)) }
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
    public static func createCollectionPromptDismissed(label: String) -> Self { Self(.createCollectionPromptDismissed(label: label)) }
    /// The keyring's unlock prompt was dismissed or could not be shown.
    public static let unlockPromptDismissed = Self(.unlockPromptDismissed)
    /// Nobody answered the keyring's unlock prompt within `seconds`.
    public static func unlockPromptTimedOut(seconds: Int) -> Self { Self(.unlockPromptTimedOut(seconds: seconds)) }
    /// The provider no longer knows the encrypted session (it restarted); a write is retried
    /// once in a fresh session.
    public static let secretServiceSessionLost = Self(.secretServiceSessionLost)

    // Libraries loaded at run time
    /// The library `name` ("libgcrypt") could not be loaded; `install` says how to install it
    /// ("Debian/Ubuntu: apt-get install libgcrypt20").
    public static func libraryMissing(name: String, install: String) -> Self { Self(.libraryMissing(name: name, install: install)) }

    // Encrypted file
    /// The cache file of `group` is older than one this machine has seen; it can be accepted
    /// deliberately.
    public static func fileRolledBack(group: String) -> Self { Self(.fileRolledBack(group: group)) }
    /// No TPM 2.0 answered through the TCTI `tcti` ("device:/dev/tpmrm0"), or its storage
    /// hierarchy cannot be used (``TokenCacheError/Code/backendUnavailable``).
    public static func tpmUnavailable(tcti: String) -> Self { Self(.tpmUnavailable(tcti: tcti)) }
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
    public static func redirectPortUnavailable(port: Int) -> Self { Self(.redirectPortUnavailable(port: port)) }
    /// No sign-in arrived at the loopback redirect within the sign-in's timeout.
    public static let signInTimedOut = Self(.signInTimedOut)
    /// A device code sign-in did not finish within the caller's timeout.
    public static let deviceCodeTimedOut = Self(.deviceCodeTimedOut)
    /// The authority offers no device code flow (`adfs`: it is AD FS before 2019): sign in
    /// with the browser.
    public static func deviceCodeUnsupported(adfs: Bool) -> Self { Self(.deviceCodeUnsupported(adfs: adfs)) }
    /// OpenID discovery of `authority` gave no usable token endpoint.
    public static func tokenEndpointNotFound(authority: String) -> Self { Self(.tokenEndpointNotFound(authority: authority)) }

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
    public static func refreshTokenFromOtherHost(aliases: [String], host: String) -> Self { Self(.refreshTokenFromOtherHost(aliases: aliases, host: host)) }
    /// The token endpoint answered a refresh for one account with another account's tokens.
    public static let tokensOfAnotherAccount = Self(.tokensOfAnotherAccount)

    // Token agent
    /// The token agent's socket at `path` could not be reached.
    public static func agentUnreachable(path: String) -> Self { Self(.agentUnreachable(path: path)) }
    /// The token agent at `path` closed the connection or answered outside the protocol.
    public static func agentProtocol(path: String) -> Self { Self(.agentProtocol(path: path)) }
    /// The socket at `path` may be another user's (its directory is writable by others or
    /// another user's, or the socket or its listener belongs to `uid`): nothing was sent.
    public static func agentUntrusted(path: String, uid: Int?) -> Self { Self(.agentUntrusted(path: path, uid: uid)) }

    // Secret portal (sandboxed apps)
    /// The portal's request for the app's keyring secret was cancelled (Response 1).
    public static let portalRequestCancelled = Self(.portalRequestCancelled)
    /// The portal's Secret backend could not give the secret (Response 2).
    public static let portalRequestFailed = Self(.portalRequestFailed)
    /// The desktop portal or its Secret interface could not be called.
    public static let portalUnreachable = Self(.portalUnreachable)
    /// The portal gave a secret of the wrong size (`bytes` instead of 64).
    public static func portalSecretSize(bytes: Int) -> Self { Self(.portalSecretSize(bytes: bytes)) }
    /// The sandbox's keyring file asks for `rounds` key-derivation rounds, outside 1...`limit`
    /// (a hostile file); no key was derived.
    public static func keyDerivationRoundsOutOfBounds(rounds: Int, limit: Int) -> Self { Self(.keyDerivationRoundsOutOfBounds(rounds: rounds, limit: limit)) }

    // The process
    /// The library's blocking pool `pool` already runs `limit` calls, its ceiling (``TokenCacheError/Code/overloaded``).
    public static func threadCeilingReached(pool: String, limit: Int) -> Self { Self(.threadCeilingReached(pool: pool, limit: limit)) }

    // Choosing the account and the token (one rule for every front end)
    /// No account of the client matches the request (``TokenCacheError/Code/notFound``).
    public static let noAccount = Self(.noAccount)
    /// The client has several accounts, `accounts` ("username (home account ID)"), and the
    /// request named none of them alone (``TokenCacheError/Code/ambiguousAccount``).
    public static func severalAccounts(accounts: [String]) -> Self { Self(.severalAccounts(accounts: accounts)) }
    /// The account named has records at hosts of different clouds, `hosts`; an authority picks one
    /// (``TokenCacheError/Code/ambiguousAccount``).
    public static func accountInSeveralClouds(hosts: [String]) -> Self { Self(.accountInSeveralClouds(hosts: hosts)) }
    /// No authority was given and usable access tokens are cached in several tenants, `tenants`
    /// (``TokenCacheError/Code/ambiguousAccount``).
    public static func tokensInSeveralTenants(tenants: [String]) -> Self { Self(.tokensInSeveralTenants(tenants: tenants)) }
    /// No cached access token is usable and none was redeemed (``TokenCacheError/Code/notFound``):
    /// `refreshable` when a cached refresh token could be redeemed with an authority.
    public static func noUsableToken(refreshable: Bool) -> Self { Self(.noUsableToken(refreshable: refreshable)) }
    /// The account named exists but the client is not signed in to it (``TokenCacheError/Code/notFound``):
    /// `signedOut` when it signed out already; `clients` are those signed in to it.
    public static func clientNotSignedIn(signedOut: Bool, clients: [String]) -> Self { Self(.clientNotSignedIn(signedOut: signedOut, clients: clients)) }

    // The account photo (Microsoft Graph)
    /// Accounts of the authority `authority` (a host) have no Microsoft Graph: B2C, a generic
    /// OpenID provider, or a cloud without a known Graph host (``TokenCacheError/Code/unsupportedFlow``).
    public static func noGraph(authority: String) -> Self { Self(.noGraph(authority: authority)) }
    /// Microsoft Graph at `host` did not answer, or (plain http on loopback) another user holds its port and
    /// nothing was sent (``TokenCacheError/Code/network``).
    public static func graphUnreachable(host: String) -> Self { Self(.graphUnreachable(host: host)) }
    /// Graph answered with HTTP `status`, neither 200 nor a photo's 404 (``TokenCacheError/Code/serverError``).
    public static func graphRefused(status: Int) -> Self { Self(.graphRefused(status: status)) }
    /// Graph's photo answer had the content type `contentType`, not a raster image type (JPEG, PNG, GIF, WebP, BMP); nothing was cached.
    public static func photoNotAnImage(contentType: String) -> Self { Self(.photoNotAnImage(contentType: contentType)) }
    /// The photo was larger than `limit` bytes; nothing was cached.
    public static func photoTooLarge(limit: Int) -> Self { Self(.photoTooLarge(limit: limit)) }

    // The identity broker (com.microsoft.identity.broker1)
    /// No identity broker answers on the session bus name `name` (none installed, or no bus)
    /// (``TokenCacheError/Code/backendUnavailable``, ``TokenCacheError/Code/noSessionBus``).
    public static func brokerUnavailable(name: String) -> Self { Self(.brokerUnavailable(name: name)) }
    /// The identity broker refused the request or answered outside its protocol: its `status`
    /// (MSALRuntime's ResponseStatus; -1 when there was none) and error `code` when it gave one.
    public static func brokerRefused(status: Int, code: String?) -> Self { Self(.brokerRefused(status: status, code: code)) }
}

// The context of each reason that has one: `nil` unless the reason is that one.
extension TokenCacheError.Reason {
    /// The `label` of ``collectionMissing(label:)``.
    public var collectionMissing: String? {
        if case .collectionMissing(let label) = value { label } else { nil }
    }

    /// The `label` of ``createCollectionPromptDismissed(label:)``.
    public var createCollectionPromptDismissed: String? {
        if case .createCollectionPromptDismissed(let label) = value { label } else { nil }
    }

    /// The `seconds` of ``unlockPromptTimedOut(seconds:)``.
    public var unlockPromptTimedOut: Int? {
        if case .unlockPromptTimedOut(let seconds) = value { seconds } else { nil }
    }

    /// `name` and `install` of ``libraryMissing(name:install:)``.
    public var libraryMissing: (name: String, install: String)? {
        if case .libraryMissing(let name, let install) = value { (name: name, install: install) } else { nil }
    }

    /// The `group` of ``fileRolledBack(group:)``.
    public var fileRolledBack: String? {
        if case .fileRolledBack(let group) = value { group } else { nil }
    }

    /// The `tcti` of ``tpmUnavailable(tcti:)``.
    public var tpmUnavailable: String? {
        if case .tpmUnavailable(let tcti) = value { tcti } else { nil }
    }

    /// The `port` of ``redirectPortUnavailable(port:)``.
    public var redirectPortUnavailable: Int? {
        if case .redirectPortUnavailable(let port) = value { port } else { nil }
    }

    /// The `adfs` of ``deviceCodeUnsupported(adfs:)``.
    public var deviceCodeUnsupported: Bool? {
        if case .deviceCodeUnsupported(let adfs) = value { adfs } else { nil }
    }

    /// The `authority` of ``tokenEndpointNotFound(authority:)``.
    public var tokenEndpointNotFound: String? {
        if case .tokenEndpointNotFound(let authority) = value { authority } else { nil }
    }

    /// `aliases` and `host` of ``refreshTokenFromOtherHost(aliases:host:)``.
    public var refreshTokenFromOtherHost: (aliases: [String], host: String)? {
        if case .refreshTokenFromOtherHost(let aliases, let host) = value { (aliases: aliases, host: host) } else { nil }
    }

    /// The `path` of ``agentUnreachable(path:)``.
    public var agentUnreachable: String? {
        if case .agentUnreachable(let path) = value { path } else { nil }
    }

    /// The `path` of ``agentProtocol(path:)``.
    public var agentProtocol: String? {
        if case .agentProtocol(let path) = value { path } else { nil }
    }

    /// `path` and `uid` of ``agentUntrusted(path:uid:)``.
    public var agentUntrusted: (path: String, uid: Int?)? {
        if case .agentUntrusted(let path, let uid) = value { (path: path, uid: uid) } else { nil }
    }

    /// The `bytes` of ``portalSecretSize(bytes:)``.
    public var portalSecretSize: Int? {
        if case .portalSecretSize(let bytes) = value { bytes } else { nil }
    }

    /// `rounds` and `limit` of ``keyDerivationRoundsOutOfBounds(rounds:limit:)``.
    public var keyDerivationRoundsOutOfBounds: (rounds: Int, limit: Int)? {
        if case .keyDerivationRoundsOutOfBounds(let rounds, let limit) = value { (rounds: rounds, limit: limit) } else { nil }
    }

    /// `pool` and `limit` of ``threadCeilingReached(pool:limit:)``.
    public var threadCeilingReached: (pool: String, limit: Int)? {
        if case .threadCeilingReached(let pool, let limit) = value { (pool: pool, limit: limit) } else { nil }
    }

    /// The `accounts` of ``severalAccounts(accounts:)``.
    public var severalAccounts: [String]? {
        if case .severalAccounts(let accounts) = value { accounts } else { nil }
    }

    /// The `hosts` of ``accountInSeveralClouds(hosts:)``.
    public var accountInSeveralClouds: [String]? {
        if case .accountInSeveralClouds(let hosts) = value { hosts } else { nil }
    }

    /// The `tenants` of ``tokensInSeveralTenants(tenants:)``.
    public var tokensInSeveralTenants: [String]? {
        if case .tokensInSeveralTenants(let tenants) = value { tenants } else { nil }
    }

    /// The `refreshable` of ``noUsableToken(refreshable:)``.
    public var noUsableToken: Bool? {
        if case .noUsableToken(let refreshable) = value { refreshable } else { nil }
    }

    /// `signedOut` and `clients` of ``clientNotSignedIn(signedOut:clients:)``.
    public var clientNotSignedIn: (signedOut: Bool, clients: [String])? {
        if case .clientNotSignedIn(let signedOut, let clients) = value { (signedOut: signedOut, clients: clients) } else { nil }
    }

    /// The `authority` of ``noGraph(authority:)``.
    public var noGraph: String? {
        if case .noGraph(let authority) = value { authority } else { nil }
    }

    /// The `host` of ``graphUnreachable(host:)``.
    public var graphUnreachable: String? {
        if case .graphUnreachable(let host) = value { host } else { nil }
    }

    /// The `status` of ``graphRefused(status:)``.
    public var graphRefused: Int? {
        if case .graphRefused(let status) = value { status } else { nil }
    }

    /// The `contentType` of ``photoNotAnImage(contentType:)``.
    public var photoNotAnImage: String? {
        if case .photoNotAnImage(let contentType) = value { contentType } else { nil }
    }

    /// The `limit` of ``photoTooLarge(limit:)``.
    public var photoTooLarge: Int? {
        if case .photoTooLarge(let limit) = value { limit } else { nil }
    }

    /// The `name` of ``brokerUnavailable(name:)``.
    public var brokerUnavailable: String? {
        if case .brokerUnavailable(let name) = value { name } else { nil }
    }

    /// `status` and `code` of ``brokerRefused(status:code:)``.
    public var brokerRefused: (status: Int, code: String?)? {
        if case .brokerRefused(let status, let code) = value { (status: status, code: code) } else { nil }
    }
}

extension TokenCacheError.Reason {
    /// What a reason is, without its context: switch on it with a `default` case, since new
    /// kinds are added in minor versions.
    public struct Kind: Sendable, Hashable {
        /// The reason's stable name, ``TokenCacheError/Reason/name``.
        package let name: String
    }

    /// What this reason is, without its context (``severalAccounts(accounts:)`` whatever the accounts).
    public var kind: Kind { Kind(name: name) }

    /// The reason's stable name (`collectionMissing`), for logs and other languages; its
    /// context is not part of it.
    public var name: String {
        switch value {
        case .unspecified: "unspecified"
        case .collectionMissing: "collectionMissing"
        case .sessionCollectionUnsupported: "sessionCollectionUnsupported"
        case .defaultCollectionMissing: "defaultCollectionMissing"
        case .defaultCollectionUncreatable: "defaultCollectionUncreatable"
        case .createCollectionPromptDismissed: "createCollectionPromptDismissed"
        case .unlockPromptDismissed: "unlockPromptDismissed"
        case .unlockPromptTimedOut: "unlockPromptTimedOut"
        case .secretServiceSessionLost: "secretServiceSessionLost"
        case .libraryMissing: "libraryMissing"
        case .fileRolledBack: "fileRolledBack"
        case .tpmUnavailable: "tpmUnavailable"
        case .tpmLockedOut: "tpmLockedOut"
        case .tpmSealedElsewhere: "tpmSealedElsewhere"
        case .noDisplay: "noDisplay"
        case .browserCommandFailed: "browserCommandFailed"
        case .xdgOpenMissing: "xdgOpenMissing"
        case .xdgOpenFailed: "xdgOpenFailed"
        case .redirectPortUnavailable: "redirectPortUnavailable"
        case .signInTimedOut: "signInTimedOut"
        case .deviceCodeTimedOut: "deviceCodeTimedOut"
        case .deviceCodeUnsupported: "deviceCodeUnsupported"
        case .tokenEndpointNotFound: "tokenEndpointNotFound"
        case .noRefreshToken: "noRefreshToken"
        case .refreshTokenRejected: "refreshTokenRejected"
        case .clientRejected: "clientRejected"
        case .refreshTokenFromOtherHost: "refreshTokenFromOtherHost"
        case .tokensOfAnotherAccount: "tokensOfAnotherAccount"
        case .agentUnreachable: "agentUnreachable"
        case .agentProtocol: "agentProtocol"
        case .agentUntrusted: "agentUntrusted"
        case .portalRequestCancelled: "portalRequestCancelled"
        case .portalRequestFailed: "portalRequestFailed"
        case .portalUnreachable: "portalUnreachable"
        case .portalSecretSize: "portalSecretSize"
        case .keyDerivationRoundsOutOfBounds: "keyDerivationRoundsOutOfBounds"
        case .threadCeilingReached: "threadCeilingReached"
        case .noAccount: "noAccount"
        case .severalAccounts: "severalAccounts"
        case .accountInSeveralClouds: "accountInSeveralClouds"
        case .tokensInSeveralTenants: "tokensInSeveralTenants"
        case .noUsableToken: "noUsableToken"
        case .clientNotSignedIn: "clientNotSignedIn"
        case .noGraph: "noGraph"
        case .graphUnreachable: "graphUnreachable"
        case .graphRefused: "graphRefused"
        case .photoNotAnImage: "photoNotAnImage"
        case .photoTooLarge: "photoTooLarge"
        case .brokerUnavailable: "brokerUnavailable"
        case .brokerRefused: "brokerRefused"
        }
    }
}

extension TokenCacheError.Reason.Kind {
    /// ``TokenCacheError/Reason/unspecified``.
    public static let unspecified = Self(name: "unspecified")
    /// ``TokenCacheError/Reason/collectionMissing(label:)``.
    public static let collectionMissing = Self(name: "collectionMissing")
    /// ``TokenCacheError/Reason/sessionCollectionUnsupported``.
    public static let sessionCollectionUnsupported = Self(name: "sessionCollectionUnsupported")
    /// ``TokenCacheError/Reason/defaultCollectionMissing``.
    public static let defaultCollectionMissing = Self(name: "defaultCollectionMissing")
    /// ``TokenCacheError/Reason/defaultCollectionUncreatable``.
    public static let defaultCollectionUncreatable = Self(name: "defaultCollectionUncreatable")
    /// ``TokenCacheError/Reason/createCollectionPromptDismissed(label:)``.
    public static let createCollectionPromptDismissed = Self(name: "createCollectionPromptDismissed")
    /// ``TokenCacheError/Reason/unlockPromptDismissed``.
    public static let unlockPromptDismissed = Self(name: "unlockPromptDismissed")
    /// ``TokenCacheError/Reason/unlockPromptTimedOut(seconds:)``.
    public static let unlockPromptTimedOut = Self(name: "unlockPromptTimedOut")
    /// ``TokenCacheError/Reason/secretServiceSessionLost``.
    public static let secretServiceSessionLost = Self(name: "secretServiceSessionLost")
    /// ``TokenCacheError/Reason/libraryMissing(name:install:)``.
    public static let libraryMissing = Self(name: "libraryMissing")
    /// ``TokenCacheError/Reason/fileRolledBack(group:)``.
    public static let fileRolledBack = Self(name: "fileRolledBack")
    /// ``TokenCacheError/Reason/tpmUnavailable(tcti:)``.
    public static let tpmUnavailable = Self(name: "tpmUnavailable")
    /// ``TokenCacheError/Reason/tpmLockedOut``.
    public static let tpmLockedOut = Self(name: "tpmLockedOut")
    /// ``TokenCacheError/Reason/tpmSealedElsewhere``.
    public static let tpmSealedElsewhere = Self(name: "tpmSealedElsewhere")
    /// ``TokenCacheError/Reason/noDisplay``.
    public static let noDisplay = Self(name: "noDisplay")
    /// ``TokenCacheError/Reason/browserCommandFailed``.
    public static let browserCommandFailed = Self(name: "browserCommandFailed")
    /// ``TokenCacheError/Reason/xdgOpenMissing``.
    public static let xdgOpenMissing = Self(name: "xdgOpenMissing")
    /// ``TokenCacheError/Reason/xdgOpenFailed``.
    public static let xdgOpenFailed = Self(name: "xdgOpenFailed")
    /// ``TokenCacheError/Reason/redirectPortUnavailable(port:)``.
    public static let redirectPortUnavailable = Self(name: "redirectPortUnavailable")
    /// ``TokenCacheError/Reason/signInTimedOut``.
    public static let signInTimedOut = Self(name: "signInTimedOut")
    /// ``TokenCacheError/Reason/deviceCodeTimedOut``.
    public static let deviceCodeTimedOut = Self(name: "deviceCodeTimedOut")
    /// ``TokenCacheError/Reason/deviceCodeUnsupported(adfs:)``.
    public static let deviceCodeUnsupported = Self(name: "deviceCodeUnsupported")
    /// ``TokenCacheError/Reason/tokenEndpointNotFound(authority:)``.
    public static let tokenEndpointNotFound = Self(name: "tokenEndpointNotFound")
    /// ``TokenCacheError/Reason/noRefreshToken``.
    public static let noRefreshToken = Self(name: "noRefreshToken")
    /// ``TokenCacheError/Reason/refreshTokenRejected``.
    public static let refreshTokenRejected = Self(name: "refreshTokenRejected")
    /// ``TokenCacheError/Reason/clientRejected``.
    public static let clientRejected = Self(name: "clientRejected")
    /// ``TokenCacheError/Reason/refreshTokenFromOtherHost(aliases:host:)``.
    public static let refreshTokenFromOtherHost = Self(name: "refreshTokenFromOtherHost")
    /// ``TokenCacheError/Reason/tokensOfAnotherAccount``.
    public static let tokensOfAnotherAccount = Self(name: "tokensOfAnotherAccount")
    /// ``TokenCacheError/Reason/agentUnreachable(path:)``.
    public static let agentUnreachable = Self(name: "agentUnreachable")
    /// ``TokenCacheError/Reason/agentProtocol(path:)``.
    public static let agentProtocol = Self(name: "agentProtocol")
    /// ``TokenCacheError/Reason/agentUntrusted(path:uid:)``.
    public static let agentUntrusted = Self(name: "agentUntrusted")
    /// ``TokenCacheError/Reason/portalRequestCancelled``.
    public static let portalRequestCancelled = Self(name: "portalRequestCancelled")
    /// ``TokenCacheError/Reason/portalRequestFailed``.
    public static let portalRequestFailed = Self(name: "portalRequestFailed")
    /// ``TokenCacheError/Reason/portalUnreachable``.
    public static let portalUnreachable = Self(name: "portalUnreachable")
    /// ``TokenCacheError/Reason/portalSecretSize(bytes:)``.
    public static let portalSecretSize = Self(name: "portalSecretSize")
    /// ``TokenCacheError/Reason/keyDerivationRoundsOutOfBounds(rounds:limit:)``.
    public static let keyDerivationRoundsOutOfBounds = Self(name: "keyDerivationRoundsOutOfBounds")
    /// ``TokenCacheError/Reason/threadCeilingReached(pool:limit:)``.
    public static let threadCeilingReached = Self(name: "threadCeilingReached")
    /// ``TokenCacheError/Reason/noAccount``.
    public static let noAccount = Self(name: "noAccount")
    /// ``TokenCacheError/Reason/severalAccounts(accounts:)``.
    public static let severalAccounts = Self(name: "severalAccounts")
    /// ``TokenCacheError/Reason/accountInSeveralClouds(hosts:)``.
    public static let accountInSeveralClouds = Self(name: "accountInSeveralClouds")
    /// ``TokenCacheError/Reason/tokensInSeveralTenants(tenants:)``.
    public static let tokensInSeveralTenants = Self(name: "tokensInSeveralTenants")
    /// ``TokenCacheError/Reason/noUsableToken(refreshable:)``.
    public static let noUsableToken = Self(name: "noUsableToken")
    /// ``TokenCacheError/Reason/clientNotSignedIn(signedOut:clients:)``.
    public static let clientNotSignedIn = Self(name: "clientNotSignedIn")
    /// ``TokenCacheError/Reason/noGraph(authority:)``.
    public static let noGraph = Self(name: "noGraph")
    /// ``TokenCacheError/Reason/graphUnreachable(host:)``.
    public static let graphUnreachable = Self(name: "graphUnreachable")
    /// ``TokenCacheError/Reason/graphRefused(status:)``.
    public static let graphRefused = Self(name: "graphRefused")
    /// ``TokenCacheError/Reason/photoNotAnImage(contentType:)``.
    public static let photoNotAnImage = Self(name: "photoNotAnImage")
    /// ``TokenCacheError/Reason/photoTooLarge(limit:)``.
    public static let photoTooLarge = Self(name: "photoTooLarge")
    /// ``TokenCacheError/Reason/brokerUnavailable(name:)``.
    public static let brokerUnavailable = Self(name: "brokerUnavailable")
    /// ``TokenCacheError/Reason/brokerRefused(status:code:)``.
    public static let brokerRefused = Self(name: "brokerRefused")
}
