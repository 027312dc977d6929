import FoundationEssentials

/// A successful OAuth 2.0 token endpoint response (RFC 6749 section 5.1, plus Microsoft's
/// `client_info`, `ext_expires_in`, `refresh_in` and `foci`).
public struct TokenResponse: Sendable, Hashable {
    /// `access_token`. A secret.
    public var accessToken: String
    /// `refresh_token`. A secret.
    public var refreshToken: String?
    /// `id_token` (a JWT). A secret.
    public var idToken: String?
    /// `client_info`: base64url JSON with `uid` and `utid`.
    public var clientInfo: String?
    /// `scope`: the granted scopes, space-separated, when the server returned them.
    public var scope: String?
    /// `token_type`, for example `Bearer`.
    public var tokenType: String?
    /// `expires_in` seconds.
    public var expiresIn: Int?
    /// `expires_on` (seconds since 1970), which some endpoints send instead of expires_in.
    public var expiresOn: Int?
    /// `ext_expires_in` seconds.
    public var extendedExpiresIn: Int?
    /// `refresh_in` seconds.
    public var refreshIn: Int?
    /// `foci`: the family ID when the app is in a family of client IDs.
    public var familyID: String?

    /// Largest response accepted, and largest lifetime in seconds (ten years).
    package static let maximumSize = 1 << 20
    package static let maximumLifetime = 10 * 365 * 24 * 3600

    /// Creates a response from its parts.
    public init(accessToken: String, refreshToken: String? = nil, idToken: String? = nil,
                clientInfo: String? = nil, scope: String? = nil, tokenType: String? = nil,
                expiresIn: Int? = nil, expiresOn: Int? = nil, extendedExpiresIn: Int? = nil,
                refreshIn: Int? = nil, familyID: String? = nil) {
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.idToken = idToken
        self.clientInfo = clientInfo
        self.scope = scope
        self.tokenType = tokenType
        self.expiresIn = expiresIn
        self.expiresOn = expiresOn
        self.extendedExpiresIn = extendedExpiresIn
        self.refreshIn = refreshIn
        self.familyID = familyID
    }

    /// Parses the JSON body of a token endpoint response.
    /// - Throws: ``TokenCacheError`` `invalidTokenResponse` naming the field at fault.
    public init(json data: Data) throws(TokenCacheError) {
        guard data.count <= Self.maximumSize else {
            throw TokenCacheError.invalidResponse("(body)", "is larger than \(Self.maximumSize) bytes")
        }
        let object: JSONObject
        do {
            object = try JSON.decodeObject(data)
        } catch {
            throw TokenCacheError.invalidResponse("(body)", "is not a JSON object")
        }
        try self.init(object: object)
    }

    package init(object: JSONObject) throws(TokenCacheError) {
        if let error = object["error"]?.stringValue {
            throw TokenCacheError.invalidResponse("error", "is present ('\(error)'): this is an error response, not tokens")
        }
        guard let accessToken = try Self.string(object, "access_token"), !accessToken.isEmpty else {
            throw TokenCacheError.invalidResponse("access_token", "is missing or empty")
        }
        self.init(
            accessToken: accessToken,
            refreshToken: try Self.string(object, "refresh_token"),
            idToken: try Self.string(object, "id_token"),
            clientInfo: try Self.string(object, "client_info"),
            scope: try Self.string(object, "scope"),
            tokenType: try Self.string(object, "token_type"),
            expiresIn: try Self.seconds(object, "expires_in"),
            expiresOn: try Self.seconds(object, "expires_on", limit: Int(Int32.max) * 2),
            extendedExpiresIn: try Self.seconds(object, "ext_expires_in"),
            refreshIn: try Self.seconds(object, "refresh_in"),
            familyID: try Self.string(object, "foci"))
    }

    private static func string(_ object: JSONObject, _ field: String) throws(TokenCacheError) -> String? {
        switch object[field] {
        case nil, .null?: return nil
        case .string(let value)?:
            guard value.utf8.count <= maximumSize / 4 else {
                throw TokenCacheError.invalidResponse(field, "is too long (\(value.utf8.count) bytes)")
            }
            return value
        default: throw TokenCacheError.invalidResponse(field, "must be a string")
        }
    }

    /// A number of seconds: an integer, or a string holding one (AAD v1 sends strings).
    private static func seconds(_ object: JSONObject, _ field: String, limit: Int = maximumLifetime) throws(TokenCacheError) -> Int? {
        let value: Int
        switch object[field] {
        case nil, .null?: return nil
        case .integer(let number)?:
            guard let exact = Int(exactly: number) else { throw TokenCacheError.invalidResponse(field, "is out of range") }
            value = exact
        case .double(let number)?:
            guard number.isFinite, number.rounded() == number, let exact = Int(exactly: number) else {
                throw TokenCacheError.invalidResponse(field, "must be a whole number of seconds")
            }
            value = exact
        case .string(let text)?:
            guard let number = Int(ASCII.trimmed(text)) else {
                throw TokenCacheError.invalidResponse(field, "must be a number of seconds, got a non-numeric string")
            }
            value = number
        default:
            throw TokenCacheError.invalidResponse(field, "must be a number of seconds")
        }
        guard value >= 0, value <= limit else {
            throw TokenCacheError.invalidResponse(field, "is out of range (0...\(limit))")
        }
        return value
    }
}
