import FoundationEssentials

/// Where tokens come from: an authority URL such as
/// `https://login.microsoftonline.com/contoso.onmicrosoft.com`.
public struct Authority: Sendable, Hashable, CustomStringConvertible {
    /// The kinds of authority MSAL knows.
    public enum Kind: String, Sendable, Hashable {
        /// Microsoft Entra ID (AAD) and Microsoft accounts: `authority_type` MSSTS.
        case aad
        /// Azure AD B2C, with a policy in the path.
        case b2c
        /// AD FS: `authority_type` ADFS, realm `adfs`.
        case adfs
        /// Any other OpenID Connect provider.
        case oidc
    }

    /// The URL as given, without a trailing slash.
    public let url: URL
    /// The host, lower-cased: MSAL's `environment`.
    public let environment: String
    /// The tenant: the first path segment (`adfs` for AD FS), MSAL's `realm`.
    public let realm: String
    /// What kind of authority this is.
    public let kind: Kind

    /// Parses an authority URL, taken exactly as given: it becomes part of every cache key
    /// other MSAL apps read, so nothing in it is encoded or dropped on the way.
    /// - Throws: ``TokenCacheError`` `invalidArgument` (field `authority`) when the text is not
    ///   a URL (a space or other character a URL cannot hold, a query, a fragment, a user), is not
    ///   https (http on loopback) or has no tenant.
    public init(_ string: String, kind: Kind? = nil) throws(TokenCacheError) {
        let trimmed = string.hasSuffix("/") ? String(string.dropLast()) : string
        // Printable ASCII only: URLComponents would percent-encode a space into the key.
        guard trimmed.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }), let components = URLComponents(string: trimmed),
              let url = components.url, let host = components.host, !host.isEmpty else {
            throw TokenCacheError.invalidArgument("authority", "'\(string)' is not a URL",
                hint: "Use the form https://login.microsoftonline.com/<tenant>")
        }
        guard components.query == nil, components.fragment == nil, components.user == nil, components.password == nil else {
            throw TokenCacheError.invalidArgument("authority", "'\(string)' is not an authority URL: it has a query, a fragment or a user",
                hint: "Use the form https://login.microsoftonline.com/<tenant>, with nothing after the tenant")
        }
        // http only on loopback, and no other scheme anywhere (file://localhost would reach a browser).
        let scheme = components.scheme?.lowercased()
        guard scheme == "https" || (scheme == "http" && Authority.isLoopback(host)) else {
            throw TokenCacheError.invalidArgument("authority", "'\(string)' is not https",
                hint: "Authorities must use https (plain http is allowed only on loopback for tests)")
        }
        let segments = components.path.split(separator: "/").map(String.init)
        guard let first = segments.first else {
            throw TokenCacheError.invalidArgument("authority", "'\(string)' has no tenant in its path",
                hint: "Use the form https://login.microsoftonline.com/<tenant>, for example /common or /organizations")
        }
        self.url = url
        self.environment = host.lowercased()
        self.realm = first
        if let kind {
            self.kind = kind
        } else if first.lowercased() == "adfs" {
            self.kind = .adfs
        } else if host.lowercased().hasSuffix(".b2clogin.com") || segments.first?.lowercased() == "tfp" {
            self.kind = .b2c
        } else {
            self.kind = .aad
        }
    }

    /// The same Microsoft Entra authority for another tenant (MSAL's per-request tenant):
    /// `https://login.microsoftonline.com/common` with `contoso.onmicrosoft.com` gives
    /// `https://login.microsoftonline.com/contoso.onmicrosoft.com`.
    /// - Throws: ``TokenCacheError`` `invalidArgument` for B2C, AD FS and OIDC authorities, whose
    ///   path is not a tenant, or a tenant that is not one path segment.
    public func withTenant(_ tenant: String) throws(TokenCacheError) -> Authority {
        guard kind == .aad else {
            throw .invalidArgument("tenant", "applies only to Microsoft Entra authorities, not to \(url.absoluteString)",
                                   hint: "Pass a whole authority for this request instead")
        }
        guard !tenant.isEmpty, !tenant.contains("/"), !tenant.contains("?"), !tenant.contains("#"),
              var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else {
            throw .invalidArgument("tenant", "'\(tenant)' is not a tenant ID or domain",
                                   hint: "Use a tenant ID (a GUID), a domain such as contoso.onmicrosoft.com, or organizations")
        }
        var segments = components.path.split(separator: "/").map(String.init)
        segments[0] = tenant
        components.path = "/" + segments.joined(separator: "/")
        return try Authority(components.string ?? "", kind: .aad)
    }

    /// The scheme, host and port, when they are not https on its default port (a loopback test
    /// provider such as `http://127.0.0.1:8400`): what ``environment`` (the host alone, as every
    /// MSAL keys the cache) leaves out. Kept with the account record (``originField``), so that an
    /// authority rebuilt from the account reaches the same server (#59 item 11); nil otherwise.
    package var origin: String? {
        let scheme = url.scheme?.lowercased() ?? "https"
        guard scheme != "https" || (url.port != nil && url.port != 443) else { return nil }
        let host = environment.contains(":") && !environment.hasPrefix("[") ? "[\(environment)]" : environment
        return "\(scheme)://\(host)\(url.port.map { ":\($0)" } ?? "")"
    }

    /// The account record's extra field (other MSAL SDKs keep and ignore it) holding ``origin``.
    package static let originField = "tokencache_origin"

    /// MSAL's `authority_type` for accounts from this authority.
    package var authorityType: String { kind == .adfs ? "ADFS" : "MSSTS" }

    public var description: String { url.absoluteString }

    /// Loopback hosts, where plain http is allowed for local test providers: `localhost`,
    /// 127.0.0.0/8 and ::1.
    package static func isLoopback(_ host: String) -> Bool {
        if host == "localhost" || host == "::1" || host == "[::1]" { return true }
        let octets = host.split(separator: ".", omittingEmptySubsequences: false)
        return octets.count == 4 && octets[0] == "127" && octets.allSatisfy { UInt8($0) != nil }
    }
}
