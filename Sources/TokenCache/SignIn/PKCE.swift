import FoundationEssentials
import TokenCacheCore
import TokenCacheCrypto

/// Proof Key for Code Exchange (RFC 7636) with the S256 method: the verifier stays in this
/// process; only its SHA-256 goes into the browser's URL.
struct PKCE: Sendable {
    /// 43 base64url characters from 32 random bytes: the secret redeemed with the code.
    let verifier: String
    /// base64url(SHA-256(verifier)), sent in the authorization request.
    let challenge: String
    /// Always S256: `plain` would put the verifier itself in the URL.
    let method = "S256"

    /// A fresh verifier from the system's CSPRNG (getrandom) and its challenge.
    static func make() throws(TokenCacheError) -> PKCE {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        let verifier = Base64URL.encode(Data(bytes))
        return PKCE(verifier: verifier, challenge: try challenge(for: verifier))
    }

    /// The S256 challenge of a verifier.
    static func challenge(for verifier: String) throws(TokenCacheError) -> String {
        Base64URL.encode(Data(try SHA256Digest.hash(Array(verifier.utf8))))
    }

    /// A random `state` (and nothing secret): 16 bytes, base64url.
    static func randomState() -> String {
        var generator = SystemRandomNumberGenerator()
        return Base64URL.encode(Data((0..<16).map { _ in UInt8.random(in: .min ... .max, using: &generator) }))
    }
}
