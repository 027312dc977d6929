import FoundationEssentials
import TokenCacheCore

/// A protected resource's claims challenge: its `401` answer's `WWW-Authenticate` header with
/// `error="insufficient_claims"` and `claims="<base64 JSON>"` (continuous access evaluation:
/// the token was revoked, or conditional access asks for more). Retry silently with
/// ``claims`` (``SilentTokenParameters/claims`` or
/// ``PublicClientApplication/acquireTokenSilent(scopes:accountNamed:forceRefresh:)``'s
/// `claims` overload): the cached token is skipped and the refresh carries the claims.
public struct ClaimsChallenge: Sendable, Hashable {
    /// The decoded claims (JSON), as the token endpoint expects them in `claims`.
    public let claims: String

    /// The challenge in a `WWW-Authenticate` header value; nil when it has none (no `Bearer`
    /// challenge with `error="insufficient_claims"` and a `claims` parameter that decodes to a JSON object).
    public init?(wwwAuthenticate header: String) {
        for challenge in Self.challenges(header) where challenge.scheme.lowercased() == "bearer" {
            guard challenge.parameters["error"] == "insufficient_claims", let encoded = challenge.parameters["claims"],
                  let data = Base64URL.decode(encoded), (try? JSON.decodeObject(data)) != nil else { continue }
            claims = String(decoding: data, as: UTF8.self)
            return
        }
        return nil
    }

    /// The challenges of a header value (RFC 9110 11.6.1: `scheme param="value", param=token, ...`,
    /// several challenges separated by commas), parameter names lowercased.
    static func challenges(_ header: String) -> [(scheme: String, parameters: [String: String])] {
        var result: [(scheme: String, parameters: [String: String])] = []
        var rest = Substring(header)
        func skipSpace() { rest = rest.drop { $0 == " " || $0 == "\t" || $0 == "," } }
        func token() -> Substring {
            let word = rest.prefix { !" \t,=\"".contains($0) }
            rest = rest.dropFirst(word.count)
            return word
        }
        while true {
            skipSpace()
            let word = token()
            if word.isEmpty { break }
            let afterWord = rest
            rest = rest.drop { $0 == " " || $0 == "\t" }
            if rest.first == "=" {
                // A parameter of the current challenge (or a token68 value when none is open).
                rest = rest.dropFirst().drop { $0 == " " || $0 == "\t" }
                var value = ""
                if rest.first == "\"" {
                    rest = rest.dropFirst()
                    while let character = rest.first, character != "\"" {
                        rest = rest.dropFirst()
                        if character == "\\", let escaped = rest.first { value.append(escaped); rest = rest.dropFirst() } else { value.append(character) }
                    }
                    rest = rest.dropFirst()
                } else {
                    value = String(token())
                    while rest.first == "=" { value.append("="); rest = rest.dropFirst() }  // token68 padding
                }
                if !result.isEmpty { result[result.count - 1].parameters[word.lowercased()] = value }
            } else {
                rest = afterWord
                result.append((String(word), [:]))
            }
        }
        return result
    }
}
