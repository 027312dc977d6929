/// Scope handling shared by saving and lookup.
package enum Scopes {
    /// Scopes every OpenID request carries; MSAL leaves them out of cache targets.
    package static let reserved: Set<String> = ["openid", "profile", "offline_access"]

    /// Splits a space-separated scope string, dropping empty parts. Splits the UTF-8 bytes:
    /// splitting the String walks grapheme clusters, and this runs for every cached token.
    package static func split(_ target: String) -> [String] {
        target.utf8.split(whereSeparator: {
            $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") || $0 == UInt8(ascii: "\n") || $0 == UInt8(ascii: "\r")
        })
            .map { String(Substring($0)) }
    }

    /// The set used to compare scopes: scopes are case-insensitive in Microsoft identity.
    package static func comparableSet(_ scopes: some Sequence<String>) -> Set<String> {
        Set(scopes.map(ASCII.lowercased))
    }

    /// The comparable set of a space-separated target.
    package static func comparableSet(target: String) -> Set<String> {
        comparableSet(split(target))
    }

    /// A target in canonical form: sorted, de-duplicated, lower-cased.
    package static func normalizedTarget(_ target: String) -> String {
        comparableSet(target: target).sorted().joined(separator: " ")
    }
}

/// Authority hosts that are the same cloud under different names.
package enum Environment {
    private static let aliasGroups: [[String]] = [
        ["login.microsoftonline.com", "login.windows.net", "login.microsoft.com", "sts.windows.net"],
        ["login.partner.microsoftonline.cn", "login.chinacloudapi.cn"],
        ["login.microsoftonline.de"],
        ["login.microsoftonline.us", "login.usgovcloudapi.net"],
        ["login-us.microsoftonline.com"],
    ]
    private static let canonicalByAlias: [String: String] = {
        var map: [String: String] = [:]
        for group in aliasGroups { for alias in group { map[alias] = group[0] } }
        return map
    }()

    /// The first name of the host's alias group, or the host itself, lower-cased.
    package static func canonical(_ environment: String) -> String {
        let lowered = ASCII.lowercased(environment)
        // A group's first name is its own canonical name: compared, not hashed (a listing of
        // 1,000 accounts asks for the cloud of every entry, nearly always the first one's).
        if lowered == aliasGroups[0][0] { return lowered }
        return canonicalByAlias[lowered] ?? lowered
    }

    /// Whether a refresh token issued at `environment` may be redeemed at `authority` (and its
    /// tokens served for it): the same host, or for a Microsoft Entra authority a host of the
    /// same cloud (MSAL's alias sets). B2C, AD FS and generic OIDC authorities accept only their
    /// own host: an authority is configuration, not proof that a host may see a token.
    package static func authority(_ authority: Authority, accepts environment: String) -> Bool {
        authority.kind == .aad
            ? canonical(authority.environment) == canonical(environment)
            : ASCII.equalsIgnoringCase(authority.environment, environment)
    }

    /// The hosts a token issued at `environment` may be sent to, for messages.
    package static func aliases(of environment: String) -> [String] {
        let lowered = ASCII.lowercased(environment)
        return aliasGroups.first { $0.contains(lowered) } ?? [lowered]
    }
}
