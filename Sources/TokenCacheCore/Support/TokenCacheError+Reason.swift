extension TokenCacheError {
    /// Why an error happened, finer than its ``TokenCacheError/Code``, with the context a front
    /// end needs to say what to do in its own terms (a command-line option, a C function, a Python
    /// argument) without reading ``TokenCacheError/message`` or ``TokenCacheError/hint``, whose
    /// wording may change. Errors with nothing more to say are ``unspecified``. New reasons may be
    /// added; switch with a `default` case. `Codable`: how a reason crosses the agent's socket.
    public enum Reason: Sendable, Hashable, Codable {
        /// No reason finer than the code was recorded.
        case unspecified

        // Secret Service
        /// The group maps onto the collection labelled `label`, which does not exist, and creating
        /// it was not allowed.
        case collectionMissing(label: String)
        /// The provider has no in-memory `session` collection (KWallet, KeePassXC have none).
        case sessionCollectionUnsupported
        /// The provider has no `default` collection: nobody has logged in to the desktop yet.
        case defaultCollectionMissing
        /// Creating the collection labelled `label` needs a password prompt, which was dismissed
        /// or could not be shown.
        case createCollectionPromptDismissed(label: String)
        /// The keyring's unlock prompt was dismissed or could not be shown.
        case unlockPromptDismissed
        /// Nobody answered the keyring's unlock prompt within `seconds`.
        case unlockPromptTimedOut(seconds: Int)
        /// The provider no longer knows the encrypted session (it restarted); a write is retried
        /// once in a fresh session.
        case secretServiceSessionLost

        // Libraries loaded at run time
        /// The library `name` ("libgcrypt") could not be loaded; `install` says how to install it
        /// ("Debian/Ubuntu: apt-get install libgcrypt20").
        case libraryMissing(name: String, install: String)

        // Encrypted file
        /// The cache file of `group` is older than one this machine has seen; it can be accepted
        /// deliberately.
        case fileRolledBack(group: String)
        /// No TPM 2.0 answered through the TCTI `tcti` ("device:/dev/tpmrm0"), or its storage
        /// hierarchy cannot be used (``TokenCacheError/Code/backendUnavailable``).
        case tpmUnavailable(tcti: String)
        /// The TPM is busy or in dictionary-attack lockout; try again later
        /// (``TokenCacheError/Code/backendUnavailable``).
        case tpmLockedOut
        /// The cache key was sealed by another TPM: the cache was copied from another machine
        /// (``TokenCacheError/Code/fileAuthenticationFailed``).
        case tpmSealedElsewhere

        // Sign-in
        /// No browser can be opened: `BROWSER` is not set, the desktop portal did not open the
        /// page and there is no display.
        case noDisplay
        /// No command in the `BROWSER` environment variable could open the sign-in page.
        case browserCommandFailed
        /// `xdg-open` could not be started (not installed).
        case xdgOpenMissing
        /// `xdg-open` ran but opened no browser (no default browser).
        case xdgOpenFailed
        /// The fixed loopback redirect `port` could not be bound (another program uses it, or it is not permitted).
        case redirectPortUnavailable(port: Int)
        /// No sign-in arrived at the loopback redirect within the sign-in's timeout.
        case signInTimedOut
        /// A device code sign-in did not finish within the caller's timeout.
        case deviceCodeTimedOut
        /// The authority offers no device code flow (`adfs`: it is AD FS before 2019): sign in
        /// with the browser.
        case deviceCodeUnsupported(adfs: Bool)
        /// OpenID discovery of `authority` gave no usable token endpoint.
        case tokenEndpointNotFound(authority: String)

        // Silent sign-in
        /// No refresh token is cached for this account and app: sign the user in.
        case noRefreshToken
        /// The token endpoint refused every refresh token with an error that needs the user
        /// (`invalid_grant`, `interaction_required`, consent); ``TokenCacheError/server`` has it.
        case refreshTokenRejected
        /// The token endpoint refused the refresh for a reason of the app registration (client ID,
        /// authority); ``TokenCacheError/server`` has it.
        case clientRejected
        /// The account's refresh tokens were issued by other hosts than the authority's `host`;
        /// `aliases` are the hosts where they can be redeemed. Nothing was sent.
        case refreshTokenFromOtherHost(aliases: [String], host: String)
        /// The token endpoint answered a refresh for one account with another account's tokens.
        case tokensOfAnotherAccount

        // Token agent
        /// The token agent's socket at `path` could not be reached.
        case agentUnreachable(path: String)
        /// The token agent at `path` closed the connection or answered outside the protocol.
        case agentProtocol(path: String)
        /// The socket at `path` may be another user's (its directory is writable by others or
        /// another user's, or the socket or its listener belongs to `uid`): nothing was sent.
        case agentUntrusted(path: String, uid: Int?)

        // Secret portal (sandboxed apps)
        /// The portal's request for the app's keyring secret was cancelled (Response 1).
        case portalRequestCancelled
        /// The portal's Secret backend could not give the secret (Response 2).
        case portalRequestFailed
        /// The desktop portal or its Secret interface could not be called.
        case portalUnreachable
        /// The portal gave a secret of the wrong size (`bytes` instead of 64).
        case portalSecretSize(bytes: Int)
        /// The sandbox's keyring file asks for `rounds` key-derivation rounds, outside 1...`limit`
        /// (a hostile file); no key was derived.
        case keyDerivationRoundsOutOfBounds(rounds: Int, limit: Int)

        // The process
        /// The library's blocking pool `pool` already runs `limit` calls, its ceiling (``TokenCacheError/Code/overloaded``).
        case threadCeilingReached(pool: String, limit: Int)

        // Choosing the account and the token (one rule for every front end)
        /// No account of the client matches the request (``TokenCacheError/Code/notFound``).
        case noAccount
        /// The client has several accounts, `accounts` ("username (home account ID)"), and the
        /// request named none of them alone (``TokenCacheError/Code/ambiguousAccount``).
        case severalAccounts(accounts: [String])
        /// The account named has records at hosts of different clouds, `hosts`; an authority picks one
        /// (``TokenCacheError/Code/ambiguousAccount``).
        case accountInSeveralClouds(hosts: [String])
        /// No authority was given and usable access tokens are cached in several tenants, `tenants`
        /// (``TokenCacheError/Code/ambiguousAccount``).
        case tokensInSeveralTenants(tenants: [String])
        /// No cached access token is usable and none was redeemed (``TokenCacheError/Code/notFound``):
        /// `refreshable` when a cached refresh token could be redeemed with an authority.
        case noUsableToken(refreshable: Bool)
        /// The account named exists but the client is not signed in to it (``TokenCacheError/Code/notFound``):
        /// `signedOut` when it signed out already; `clients` are those signed in to it.
        case clientNotSignedIn(signedOut: Bool, clients: [String])

        // The account photo (Microsoft Graph)
        /// Accounts of the authority `authority` (a host) have no Microsoft Graph: B2C, a generic
        /// OpenID provider, or a cloud without a known Graph host (``TokenCacheError/Code/unsupportedFlow``).
        case noGraph(authority: String)
        /// Microsoft Graph at `host` did not answer (``TokenCacheError/Code/network``).
        case graphUnreachable(host: String)
        /// Graph answered with HTTP `status`, neither 200 nor a photo's 404 (``TokenCacheError/Code/serverError``).
        case graphRefused(status: Int)
        /// Graph's photo answer had the content type `contentType`, not `image/*`; nothing was cached.
        case photoNotAnImage(contentType: String)
        /// The photo was larger than `limit` bytes; nothing was cached.
        case photoTooLarge(limit: Int)

        // The identity broker (com.microsoft.identity.broker1)
        /// No identity broker answers on the session bus name `name` (none installed, or no bus)
        /// (``TokenCacheError/Code/backendUnavailable``, ``TokenCacheError/Code/noSessionBus``).
        case brokerUnavailable(name: String)
        /// The identity broker refused the request or answered outside its protocol: its `status`
        /// (MSALRuntime's ResponseStatus; -1 when there was none) and error `code` when it gave one.
        case brokerRefused(status: Int, code: String?)

        /// The reason's stable name (`collectionMissing`), for logs and other languages; its
        /// context is not part of it.
        public var name: String {
            switch self {
            case .unspecified: "unspecified"
            case .collectionMissing: "collectionMissing"
            case .sessionCollectionUnsupported: "sessionCollectionUnsupported"
            case .defaultCollectionMissing: "defaultCollectionMissing"
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
}
