import FoundationEssentials
import TokenCacheCore

/// SHA-256 for the rest of the package (PKCE's S256 challenge), from the libcrypto the encrypted
/// file already loads: libcurl, which every sign-in uses, depends on the same libssl3, so it is
/// always there when a sign-in can run.
package enum SHA256Digest {
    /// The 32-byte digest of `bytes`.
    /// - Throws: ``TokenCacheError`` `libcryptoMissing` or `crypto`.
    package static func hash(_ bytes: [UInt8]) throws(TokenCacheError) -> [UInt8] {
        try OpenSSL.sha256(bytes)
    }
}
