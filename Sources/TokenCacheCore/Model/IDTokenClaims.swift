import FoundationEssentials

/// The claims of an ID token that apps commonly show. MSAL does not validate ID tokens it
/// receives directly from the token endpoint, and neither does this library: it only decodes.
public struct IDTokenClaims: Sendable, Hashable {
    /// Every claim, as decoded.
    package let all: JSONObject

    /// A claim whose value is a string (`name`, `nonce`, `acr`…), or nil.
    public subscript(claim: String) -> String? { all[claim]?.stringValue }

    /// A claim whose value is an array of strings (`roles`, `groups`, `amr`…), or nil.
    public func strings(_ claim: String) -> [String]? {
        guard case .array(let values)? = all[claim] else { return nil }
        let strings = values.compactMap(\.stringValue)
        return strings.count == values.count ? strings : nil
    }

    /// The names of every claim the token carries, sorted.
    public var claimNames: [String] { all.keys.sorted() }

    public var name: String? { all["name"]?.stringValue }
    public var givenName: String? { all["given_name"]?.stringValue }
    public var familyName: String? { all["family_name"]?.stringValue }
    public var email: String? { all["email"]?.stringValue }
    public var preferredUsername: String? { all["preferred_username"]?.stringValue }
    public var upn: String? { all["upn"]?.stringValue }
    /// Object ID of the user in the tenant.
    public var objectID: String? { all["oid"]?.stringValue }
    /// Tenant ID.
    public var tenantID: String? { all["tid"]?.stringValue }
    /// Subject.
    public var subject: String? { all["sub"]?.stringValue }

    /// The username MSAL records: `preferred_username` (AAD), else `upn` (ADFS).
    public var username: String? { preferredUsername ?? upn }

    /// Claims as given (an account described by the token keeper: its name and given name).
    package init(_ all: JSONObject) { self.all = all }

    /// Decodes the payload of a JWT without validating it.
    /// - Throws: ``TokenCacheError`` with code `invalidTokenResponse` and field `id_token`.
    public init(jwt: String) throws(TokenCacheError) {
        // The dots, found in the UTF-8 bytes: splitting the String walks grapheme clusters, and a
        // generic split of the bytes is unspecialized.
        var utf8 = jwt
        let decoded = utf8.withUTF8 { bytes -> (parts: Int, payload: Data?) in
            var dots: [Int] = []
            for index in bytes.indices where bytes[index] == UInt8(ascii: ".") { dots.append(index) }
            guard dots.count == 2 || dots.count == 4 else { return (dots.count + 1, nil) }
            return (dots.count + 1, Base64URL.decode(UnsafeBufferPointer(rebasing: bytes[(dots[0] + 1)..<dots[1]])))
        }
        guard decoded.parts == 3 || decoded.parts == 5 else {
            throw TokenCacheError.invalidResponse("id_token", "is not a JWT (expected 3 dot-separated parts)")
        }
        guard let payload = decoded.payload else {
            throw TokenCacheError.invalidResponse("id_token", "has a payload that is not base64url")
        }
        guard let claims = try? JSON.decodeObject(payload) else {
            throw TokenCacheError.invalidResponse("id_token", "has a payload that is not a JSON object")
        }
        self.all = claims
    }

    package init(claims: JSONObject) { self.all = claims }
}

/// The `client_info` of a Microsoft identity response: base64url JSON with `uid` and `utid`.
package struct ClientInfo: Sendable, Hashable {
    package let uid: String
    package let utid: String

    /// Parses client_info; returns nil when it decodes but lacks uid/utid (MSAL then falls back
    /// to the ID token's `sub`), and throws when it is not base64url JSON at all.
    package static func parse(_ encoded: String) throws(TokenCacheError) -> ClientInfo? {
        guard let data = Base64URL.decode(encoded) else {
            throw TokenCacheError.invalidResponse("client_info", "is not base64url")
        }
        guard let object = try? JSON.decodeObject(data) else {
            throw TokenCacheError.invalidResponse("client_info", "does not decode to a JSON object")
        }
        guard let uid = object["uid"]?.stringValue, let utid = object["utid"]?.stringValue else { return nil }
        return ClientInfo(uid: uid, utid: utid)
    }
}
