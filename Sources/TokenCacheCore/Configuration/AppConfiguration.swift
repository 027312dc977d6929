import FoundationEssentials

/// An app's token-cache settings: the Linux counterpart of declaring MSAL settings and keychain
/// sharing groups in an iOS app. Usually generated at build time from a `tokencache.json` by the
/// `TokenCacheConfigPlugin` build-tool plugin, which validates it.
public struct AppConfiguration: Sendable, Hashable, Codable {
    /// The application (client) ID.
    public var clientID: String
    /// The authority URL, for example `https://login.microsoftonline.com/common`.
    public var authority: String
    /// The redirect URI registered for the app, if any.
    public var redirectURI: String?
    /// The scopes the app asks for by default.
    public var scopes: [String]
    /// The sharing group; `com.microsoft.identity.universalstorage` when absent.
    public var group: String
    /// The backend policy; `auto` when absent.
    public var backend: BackendPolicy
    /// Other tools' caches this app may use for single sign-on, by the names `tokencache stores`
    /// shows (such as `azure-cli`); none when absent. See `PublicClientApplication.Options.singleSignOnStores`.
    public var singleSignOnStores: [String]
    /// The client capabilities the app declares (`clientCapabilities`), as MSAL's: `["cp1"]` says
    /// it handles claims challenges, so resources may apply continuous access evaluation to its
    /// tokens. Sent merged into `claims` on every token request; none when absent.
    public var clientCapabilities: [String] = []

    package enum CodingKeys: String, CodingKey {
        case clientID = "clientId", authority, redirectURI = "redirectUri", scopes, group, backend, singleSignOnStores, clientCapabilities
    }

    /// Creates a configuration; see ``validate()``.
    public init(clientID: String, authority: String, redirectURI: String? = nil, scopes: [String] = [],
                group: String = CacheGroup.universalStorage.name, backend: BackendPolicy = .automatic,
                singleSignOnStores: [String] = []) {
        self.clientID = clientID
        self.authority = authority
        self.redirectURI = redirectURI
        self.scopes = scopes
        self.group = group
        self.backend = backend
        self.singleSignOnStores = singleSignOnStores
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        clientID = try container.decode(String.self, forKey: .clientID)
        authority = try container.decode(String.self, forKey: .authority)
        redirectURI = try container.decodeIfPresent(String.self, forKey: .redirectURI)
        scopes = try container.decodeIfPresent([String].self, forKey: .scopes) ?? []
        group = try container.decodeIfPresent(String.self, forKey: .group) ?? CacheGroup.universalStorage.name
        backend = try container.decodeIfPresent(BackendPolicy.self, forKey: .backend) ?? .automatic
        singleSignOnStores = try container.decodeIfPresent([String].self, forKey: .singleSignOnStores) ?? []
        clientCapabilities = try container.decodeIfPresent([String].self, forKey: .clientCapabilities) ?? []
    }

    /// Reads and validates a `tokencache.json`.
    /// - Throws: ``TokenCacheError`` `invalidArgument` whose `field` names the JSON field at fault.
    public static func load(json data: Data) throws(TokenCacheError) -> AppConfiguration {
        let configuration: AppConfiguration
        do {
            configuration = try JSONDecoder().decode(AppConfiguration.self, from: data)
        } catch let DecodingError.keyNotFound(key, _) {
            throw .invalidArgument(key.stringValue, "is required")
        } catch let DecodingError.typeMismatch(_, context), let DecodingError.valueNotFound(_, context) {
            let field = context.codingPath.map(\.stringValue).joined(separator: ".")
            throw .invalidArgument(field, "has the wrong type")
        } catch let DecodingError.dataCorrupted(context) {
            let field = context.codingPath.map(\.stringValue).joined(separator: ".")
            throw .invalidArgument(field.isEmpty ? "(file)" : field,
                                   field.isEmpty ? "is not valid JSON" : "has an invalid value (backend: auto, secret-service or file)")
        } catch {
            throw .invalidArgument("(file)", "could not be read")
        }
        try configuration.validate()
        return configuration
    }

    /// An absolute URI: a scheme, and a host for http(s) (loopback or custom-scheme URIs).
    private static func isRedirectURI(_ string: String) -> Bool {
        guard let components = URLComponents(string: string), let scheme = components.scheme?.lowercased(),
              scheme.first?.isLetter == true, string.count > scheme.count + 1 else { return false }
        if scheme == "http" || scheme == "https" { return !(components.host ?? "").isEmpty }
        return true
    }

    /// Whether a client capability is well formed: a word of up to 64 ASCII letters, digits, `-`, `_` or `.` (`cp1`).
    package static func isCapability(_ capability: String) -> Bool {
        !capability.isEmpty && capability.utf8.count <= 64
            && capability.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "-_.".contains($0)) }
    }

    /// Checks every field.
    /// - Throws: ``TokenCacheError`` `invalidArgument` naming the field at fault.
    public func validate() throws(TokenCacheError) {
        try validated()
    }

    /// ``validate()``, returning the client ID it checked: where an app made from a configuration
    /// gets the ``ClientID`` it carries.
    @discardableResult
    package func validated() throws(TokenCacheError) -> ClientID {
        let checked: ClientID
        do { checked = try ClientID(clientID) } catch { throw .invalidArgument("clientId", "must be the application (client) ID, without spaces") }
        do { _ = try Authority(authority) } catch { throw TokenCacheError(.invalidArgument, error.message, hint: error.hint, field: "authority") }
        do { _ = try CacheGroup(group) } catch { throw .invalidArgument("group", "'\(group)' is not a reverse-DNS name") }
        if let redirectURI, !Self.isRedirectURI(redirectURI) {
            throw TokenCacheError(.invalidArgument, "redirectUri '\(redirectURI)' is not an absolute URI.",
                                  hint: "Use the redirect URI registered for the app, for example http://localhost",
                                  field: "redirectUri")
        }
        if scopes.contains(where: { $0.isEmpty || $0.contains(" ") }) {
            throw .invalidArgument("scopes", "each scope must be one non-empty word")
        }
        if singleSignOnStores.contains(where: { $0.isEmpty || !$0.allSatisfy { $0.isLetter || $0.isNumber || "-_.".contains($0) } }) {
            throw .invalidArgument("singleSignOnStores", "each entry must be a store name such as azure-cli (see `tokencache stores`)")
        }
        if let bad = clientCapabilities.first(where: { !Self.isCapability($0) }) {
            throw .invalidArgument("clientCapabilities", "'\(bad)' is not a capability name such as cp1")
        }
        return checked
    }

    /// The parsed authority. Valid after ``validate()``.
    package var parsedAuthority: Authority { get throws(TokenCacheError) { try Authority(authority) } }
    /// The parsed group. Valid after ``validate()``.
    package var cacheGroup: CacheGroup { get throws(TokenCacheError) { try CacheGroup(group) } }
}
