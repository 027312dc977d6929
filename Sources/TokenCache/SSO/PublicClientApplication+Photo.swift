import CLinux
import FoundationEssentials
import TokenCacheCore
import TokenCachePlatform
import TokenCachePipeline
#if canImport(Glibc)
import Glibc
#endif

/// Where Microsoft Graph is for an account: its cloud's Graph host, or the endpoint an app,
/// `TOKENCACHE_GRAPH_ENDPOINT` or the CLI's config file (`graph-endpoint`) names for a proxy, a
/// national cloud or a test stand-in.
package enum GraphEndpoint {
    /// The variable every front end reads (the CLI's config file comes after it).
    package static let variable = "TOKENCACHE_GRAPH_ENDPOINT"

    /// The Graph host of each cloud, by the canonical name of its authority hosts.
    private static let hostByCloud = [
        "login.microsoftonline.com": "graph.microsoft.com",
        "login.microsoftonline.us": "graph.microsoft.us",
        "login.partner.microsoftonline.cn": "microsoftgraph.chinacloudapi.cn",
    ]

    /// Graph's host for an authority host, or nil for a host of no known Microsoft cloud.
    package static func host(forEnvironment environment: String) -> String? {
        hostByCloud[Environment.canonical(environment)]
    }

    /// An endpoint as given: https, or http on loopback only (a photo request carries a token).
    /// - Throws: `invalidArgument` (field `graphEndpoint`) for anything else.
    package static func parse(_ text: String, source: String = variable) throws(TokenCacheError) -> URL {
        let trimmed = text.hasSuffix("/") ? String(text.dropLast()) : text
        guard let url = URL(string: trimmed), let scheme = url.scheme?.lowercased(), let host = url.host, !host.isEmpty,
              url.query == nil, url.fragment == nil,
              scheme == "https" || (scheme == "http" && Authority.isLoopback(host)) else {
            throw TokenCacheError(.invalidArgument, "\(source) is '\(ServerText.printable(text, limit: 200))', which is not an https URL (or http on loopback).",
                                  hint: "Set it to https://HOST (a Graph proxy or national cloud) or http://127.0.0.1:PORT (a local stand-in), or unset it",
                                  field: "graphEndpoint")
        }
        return url
    }

    /// The endpoint and the scope a photo of `account` is fetched with, for an app at `authority`.
    /// - Throws: `unsupportedFlow` (reason `TokenCacheError.Reason.noGraph(authority:)`) for a
    ///   B2C or generic OIDC authority, or a host of no Microsoft cloud without an override;
    ///   `invalidArgument` for a bad override.
    package static func resolve(override: URL?, authority: Authority,
                                account: CachedAccount) throws(TokenCacheError) -> (base: URL, scope: String) {
        let host = Self.host(forEnvironment: account.environment)
        // Graph's own resource names the scope when the cloud is known; a stand-in takes the plain name.
        let scope = host.map { "https://\($0)/User.Read" } ?? "User.Read"
        let configured: URL? = if let override { override } else {
            try SecureEnvironment.value(variable)
                .map { text throws(TokenCacheError) in try parse(text) }
        }
        if authority.kind == .b2c || authority.kind == .oidc {
            throw noGraph(authority, host: account.environment)
        }
        if let configured {
            // An app's own URL gets the variable's checks too (scheme, loopback for http, no query).
            return (try parse(configured.absoluteString, source: "Options.graphEndpoint"), scope)
        }
        guard let host, let base = URL(string: "https://\(host)") else { throw noGraph(authority, host: account.environment) }
        return (base, scope)
    }

    /// Named by the account's own host (`host`), whose cloud decides the Graph host, not by the
    /// app's authority (#59 item 11).
    private static func noGraph(_ authority: Authority, host: String) -> TokenCacheError {
        TokenCacheError(.unsupportedFlow, "Accounts of \(host) (\(authority.kind.rawValue)) have no Microsoft Graph photo.",
                        hint: authority.kind == .b2c || authority.kind == .oidc ? "Show a placeholder: B2C and other OpenID providers have no Graph"
                            : "Set TOKENCACHE_GRAPH_ENDPOINT to this cloud's Graph endpoint",
                        reason: .noGraph(authority: host))
    }
}

extension PublicClientApplication {
    /// How long a cached photo (or Graph's "no photo") is used before Graph is asked again.
    public static let photoLifetime: TimeInterval = 24 * 3600

    /// The account's photo, as Microsoft Graph's `/me/photo/$value` gives it, or nil when the
    /// account has none (Graph answered 404): MSAL Quick Authentication's `base64Photo`.
    ///
    /// The answer is cached with the account in the group, protected as its tokens are, and
    /// used for a day (``photoLifetime``), or until `refresh` asks Graph again; it goes when the
    /// account is removed. Graph is called with a silent token for `User.Read` at the account's
    /// cloud's Graph host (graph.microsoft.com, graph.microsoft.us,
    /// microsoftgraph.chinacloudapi.cn), or at ``Options/graphEndpoint`` /
    /// `TOKENCACHE_GRAPH_ENDPOINT` when set.
    ///
    /// - Throws: `TokenCacheError` with code `unsupportedFlow` (reason
    ///   `TokenCacheError.Reason.noGraph(authority:)`: a B2C or generic OIDC authority), `network`
    ///   (reason `TokenCacheError.Reason.graphUnreachable(host:)`: no answer, or a plain-http
    ///   loopback endpoint whose port another user holds, sent nothing), `serverError` (reasons
    ///   `TokenCacheError.Reason.photoNotAnImage(contentType:)`,
    ///   `TokenCacheError.Reason.photoTooLarge(limit:)`,
    ///   `TokenCacheError.Reason.graphRefused(status:)`), and what ``acquireTokenSilent(_:)``
    ///   throws for the token. A cached photo is kept on every error.
    public func photo(for account: CachedAccount, refresh: Bool = false) async throws(TokenCacheError) -> AccountPhoto? {
        try await photo(for: account, refresh: refresh, now: Date())
    }

    /// The photo of the account named (a username or home account ID; nil: the app's only
    /// account), chosen by the rule every front end follows (the CLI's `photo --account`, C and
    /// Python): then as ``photo(for:refresh:)``.
    /// - Throws: as ``photo(for:refresh:)``, and `notFound` (reason `TokenCacheError.Reason.noAccount`)
    ///   or `ambiguousAccount` as ``acquireTokenSilent(scopes:accountNamed:forceRefresh:)``.
    public func photo(accountNamed name: String?, refresh: Bool = false) async throws(TokenCacheError) -> AccountPhoto? {
        try await TokenRedeemer.cancellably { (isCancelled) throws(TokenCacheError) in
            try self.blockingPhoto(accountNamed: name, refresh: refresh, isCancelled: isCancelled)
        }
    }

    /// ``photo(accountNamed:refresh:)`` for a caller that blocks by contract (C, the command
    /// line): the account's choice, the cached photo, the token and Graph's answer, on the calling thread.
    package func blockingPhoto(accountNamed name: String?, refresh: Bool,
                               isCancelled: @escaping @Sendable () -> Bool = { false }) throws(TokenCacheError) -> AccountPhoto? {
        let request = TokenRequest(clientID: try checkedClientID.get(), scopes: [], account: name, authority: authority)
        let account = try TokenEngine(store: store, options: options).blockingAccount(for: request)
        return try blockingPhoto(for: account, refresh: refresh, now: Date(), isCancelled: isCancelled)
    }

    /// ``photo(for:refresh:)`` at `now` (tests move the clock instead of waiting a day).
    package func photo(for account: CachedAccount, refresh: Bool, now: Date) async throws(TokenCacheError) -> AccountPhoto? {
        try await TokenRedeemer.cancellably { (isCancelled) throws(TokenCacheError) in
            try self.blockingPhoto(for: account, refresh: refresh, now: now, isCancelled: isCancelled)
        }
    }

    /// The one body of every photo call, on the calling thread (one that may block).
    private func blockingPhoto(for account: CachedAccount, refresh: Bool, now: Date,
                               isCancelled: @escaping @Sendable () -> Bool) throws(TokenCacheError) -> AccountPhoto? {
        let (base, scope) = try GraphEndpoint.resolve(override: options.graphEndpoint, authority: authority, account: account)
        if !refresh, let cached = try store.photoRecord(of: account),
           let fetched = cached.fetchedAt, now.timeIntervalSince(fetched) < Self.photoLifetime, now >= fetched {
            if !cached.hasPhoto || cached.photo != nil { return cached.photo }
        }
        let token = try blockingGraphToken(scope: scope, account: account, isCancelled: isCancelled)
        let photo = try GraphPhotoClient(transport: options.transport, timeout: options.requestTimeout)
            .photo(at: base, token: token.accessToken, isCancelled: isCancelled)
        try store.savePhoto(photo, of: account, now: now)
        return photo
    }

    /// The silent token Graph is called with, as ``acquireTokenSilent(scopes:account:forceRefresh:)`` gets it.
    private func blockingGraphToken(scope: String, account: CachedAccount,
                                    isCancelled: @escaping @Sendable () -> Bool) throws(TokenCacheError) -> TokenResult {
        var request = TokenRequest(clientID: try checkedClientID.get(), scopes: [scope], account: account.homeAccountID, authority: authority)
        request.clientCapabilities = options.clientCapabilities
        request.chosenAccount = account
        return try TokenEngine(application: self).blockingToken(request, isCancelled: isCancelled)
    }

    /// The signed-in user's Graph profile (`/me`): a JSON object's UTF-8 text, fetched with a
    /// silent `User.Read` token as ``photo(for:refresh:)`` is. What a sample app's "Call Graph" shows.
    /// - Throws: as ``photo(for:refresh:)``.
    public func graphProfile(for account: CachedAccount) async throws(TokenCacheError) -> Data {
        try await TokenRedeemer.cancellably { (isCancelled) throws(TokenCacheError) in
            let (base, scope) = try GraphEndpoint.resolve(override: self.options.graphEndpoint, authority: self.authority, account: account)
            let token = try self.blockingGraphToken(scope: scope, account: account, isCancelled: isCancelled)
            return try GraphPhotoClient(transport: self.options.transport, timeout: self.options.requestTimeout)
                .profile(at: base, token: token.accessToken, isCancelled: isCancelled)
        }
    }
}

/// Graph's `/me` and `/me/photo/$value`, as Graph documents them, sent on the calling thread (one
/// that may block): directly with a ``BlockingHTTPTransport`` (libcurl's), else through the app's
/// own async transport, bridged.
struct GraphPhotoClient {
    let transport: any HTTPTransport
    let timeout: TimeInterval

    /// The photo, or nil for Graph's 404 (`ImageNotFound`: the user has none).
    func photo(at base: URL, token: String, isCancelled: @escaping @Sendable () -> Bool) throws(TokenCacheError) -> AccountPhoto? {
        let response = try get(base, "/v1.0/me/photo/$value", token: token, isCancelled: isCancelled)
        if response.status == 404 { return nil }
        let type = ASCII.trimmed(response.headers["content-type"]?.split(separator: ";").first.map(String.init) ?? "")
        // Raster types only, as a cached photo is checked on read: not image/svg+xml, which can carry script.
        guard AccountPhoto.isRaster(ASCII.lowercased(type)) else {
            throw TokenCacheError(.serverError, "Graph answered the photo request with '\(ServerText.printable(type, limit: 80))', not an image (JPEG, PNG, GIF, WebP or BMP; no SVG); nothing was cached.",
                                  hint: "Check TOKENCACHE_GRAPH_ENDPOINT: it must be Microsoft Graph or a proxy of it",
                                  reason: .photoNotAnImage(contentType: ServerText.printable(type, limit: 80)))
        }
        guard response.body.count <= AccountPhoto.maximumBytes else { throw Self.tooLarge }
        return AccountPhoto(data: response.body, contentType: ASCII.lowercased(type))
    }

    /// `/me`: a JSON object's text.
    func profile(at base: URL, token: String, isCancelled: @escaping @Sendable () -> Bool) throws(TokenCacheError) -> Data {
        let response = try get(base, "/v1.0/me", token: token, isCancelled: isCancelled)
        guard (try? JSON.decodeObject(response.body)) != nil else {
            throw TokenCacheError(.serverError, "Graph's /me answer is not a JSON object.", hint: "Check TOKENCACHE_GRAPH_ENDPOINT",
                                  reason: .graphRefused(status: response.status))
        }
        return response.body
    }

    /// A GET with the token; 200 and (for the photo) 404 are answers, anything else an error.
    private func get(_ base: URL, _ path: String, token: String, isCancelled: @escaping @Sendable () -> Bool) throws(TokenCacheError) -> HTTPResponse {
        guard let url = URL(string: base.absoluteString + path) else { throw TokenCacheError.invalidArgument("graphEndpoint", "gives no URL") }
        let host = url.host ?? "?"
        try Self.checkLoopbackListener(url)
        let request = HTTPRequest(url: url, headers: ["Authorization": "Bearer \(token)", "Accept": "*/*"], timeout: timeout)
        let response: HTTPResponse
        do {
            if let blocking = transport as? any BlockingHTTPTransport {
                response = try blocking.sendBlocking(request, cancelled: isCancelled)
            } else {
                response = try waitFor(cancellingWhen: isCancelled) { [transport, timeout] () async throws in
                    try await TokenEndpointClient.withDeadline(seconds: timeout + TokenEndpointClient.backstopMargin) { try await transport.send(request) }
                }
            }
        } catch let error as HTTPTransportError where error.kind == .responseTooLarge {
            throw Self.tooLarge
        } catch let error as TokenCacheError {
            throw error  // the transport's own typed error (libcurl missing)
        } catch {
            throw TokenCacheError(.network, "Microsoft Graph at \(host) did not answer: \((error as? HTTPTransportError)?.description ?? "network error").",
                                  hint: "Check the network connection and retry; a cached photo is kept", reason: .graphUnreachable(host: host))
        }
        guard response.status == 200 || (response.status == 404 && path.hasSuffix("$value")) else {
            throw TokenCacheError(.serverError, "Microsoft Graph answered \(response.status) to \(path).",
                                  hint: response.status == 401 || response.status == 403 ? "The token lacks User.Read: consent to it, or sign in again"
                                      : "Retry later; a cached photo is kept",
                                  reason: .graphRefused(status: response.status))
        }
        return response
    }

    /// Before a token goes to a plain-http loopback endpoint: every socket listening on its port
    /// must be this user's, as the sign-in listener checks its peers. Another user who bound the
    /// port first (the user's proxy not running) would otherwise receive the token.
    /// - Throws: `network` (reason `graphUnreachable(host:)`) naming the listener's uid; nothing was sent.
    static func checkLoopbackListener(_ url: URL) throws(TokenCacheError) {
        guard url.scheme?.lowercased() == "http", let host = url.host, Authority.isLoopback(host) else { return }
        let port = UInt16(url.port ?? 80)
        guard let stranger = PeerCredentials.loopbackListenerUIDs(port: port).first(where: { $0 != geteuid() }) else { return }
        throw TokenCacheError(.network, "Another user (uid \(stranger)) listens at \(host):\(port), the Graph endpoint named; no token was sent to it.",
                              hint: "Start your own Graph stand-in or proxy there, or name another endpoint (TOKENCACHE_GRAPH_ENDPOINT, the config file's graph_endpoint); a cached photo is kept",
                              reason: .graphUnreachable(host: host))
    }

    static let tooLarge = TokenCacheError(.serverError, "Graph's photo is larger than \(AccountPhoto.maximumBytes) bytes; nothing was cached.",
                                          hint: "Ask for a smaller size (/me/photos/240x240/$value) through your own Graph call",
                                          reason: .photoTooLarge(limit: AccountPhoto.maximumBytes))
}
