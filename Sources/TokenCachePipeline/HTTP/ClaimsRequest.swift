import FoundationEssentials
import TokenCacheCore

/// The `claims` request parameter as MSAL builds it: the client capabilities (`cp1`: the app
/// handles claims challenges, so continuous access evaluation may apply to its tokens) as
/// `{"access_token":{"xms_cc":{"values":[...]}}}`, merged into the caller's claims (a challenge).
package enum ClaimsRequest {
    /// The `claims` to send: `claims` unchanged without capabilities (MSAL sends the caller's
    /// text as given); otherwise its `access_token` object gains (or has replaced) `xms_cc`,
    /// every other claim kept, as MSAL Python's `_merge_claims_challenge_and_capabilities`.
    /// Nil when there is nothing to send.
    /// - Throws: `invalidArgument` (field `claims`) when capabilities must be merged into claims
    ///   that are not a JSON object (or whose `access_token` is not one).
    package static func merged(capabilities: [String], claims: String?) throws(TokenCacheError) -> String? {
        guard !capabilities.isEmpty else { return claims }
        if let bad = capabilities.first(where: { !AppConfiguration.isCapability($0) }) {
            throw TokenCacheError.invalidArgument("clientCapabilities", "'\(bad)' is not a capability name such as cp1")
        }
        var object: JSONObject = [:]
        if let claims, !claims.isEmpty {
            guard let parsed = try? JSON.decodeObject(Data(claims.utf8)) else {
                throw TokenCacheError.invalidArgument("claims", "is not a JSON object", hint: "Pass the claims challenge as the resource or the token endpoint sent it (decoded JSON)")
            }
            object = parsed
        }
        var accessToken: JSONObject = [:]
        switch object["access_token"] {
        case nil, .null?: break
        case .object(let existing)?: accessToken = existing
        default: throw TokenCacheError.invalidArgument("claims", "has an access_token member that is not a JSON object")
        }
        accessToken["xms_cc"] = .object(["values": .array(capabilities.map(JSONValue.string))])
        object["access_token"] = .object(accessToken)
        guard let data = try? JSON.encode(object) else { throw TokenCacheError.invalidArgument("claims", "has a number that cannot be written back") }
        return String(decoding: data, as: UTF8.self)
    }

}
