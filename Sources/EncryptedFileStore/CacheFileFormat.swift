import FoundationEssentials
import TokenCacheCore
import TokenCacheCrypto
import TokenCachePlatform

/// The encrypted cache file, format version 1 (see docs/EncryptedFile.md):
///
///     magic "TKCACHE\0" (8) | version UInt16 BE | header length UInt32 BE | header JSON
///     | nonce (12) | AES-256-GCM ciphertext | tag (16)
///
/// Everything before the nonce is authenticated as associated data, so the group, key ID, KDF
/// parameters and generation cannot be changed without the tag failing.
struct CacheFileFormat {
    static let magic = Data("TKCACHE\0".utf8)
    static let version: UInt16 = 1

    /// The plaintext header.
    struct Header: Codable, Equatable {
        var group: String
        var keyID: String
        var generation: UInt64
        var cipher = "AES-256-GCM"
        var kdf: KDFParameters?

        enum CodingKeys: String, CodingKey {
            case group, keyID = "key_id", generation, cipher, kdf
        }
    }

    /// scrypt parameters for passphrase keys.
    struct KDFParameters: Codable, Equatable, Hashable {
        var name = "scrypt"
        var salt: String  // base64
        var n: UInt64
        var r: UInt64
        var p: UInt64
    }

    /// A file split into its parts, not yet authenticated.
    struct Parsed {
        var header: Header
        /// A copy: a slice would share the file's storage, and decrypting in place would then copy all of it.
        var associatedData: Data
        var nonce: [UInt8]
        /// Where the ciphertext and its tag are in the file's bytes.
        var sealedRange: Range<Int>
    }

    static func encode(header: Header, nonce: [UInt8], sealed: Data) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let headerJSON = try encoder.encode(header)
        return associatedData(headerJSON) + Data(nonce) + sealed
    }

    static func associatedData(_ headerJSON: Data) -> Data {
        var data = magic
        withUnsafeBytes(of: version.bigEndian) { data.append(contentsOf: $0) }
        withUnsafeBytes(of: UInt32(headerJSON.count).bigEndian) { data.append(contentsOf: $0) }
        return data + headerJSON
    }

    static func associatedData(for header: Header) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return associatedData(try encoder.encode(header))
    }

    /// Splits a file. Throws `fileMismatch` for another format or version and
    /// `fileAuthenticationFailed` for a damaged (truncated, flipped) header.
    static func parse(_ file: Data, path: String) throws(TokenCacheError) -> Parsed {
        // Indexes below are offsets from the start; `sealedRange` is in the file's own indexes.
        let data = file.startIndex == 0 ? file : Data(file)
        let start = try parseStart(data, path: path)
        guard data.count >= start.sealedOffset + OpenSSL.tagByteCount else { throw damaged(path) }
        return Parsed(header: start.header, associatedData: start.associatedData, nonce: start.nonce,
                      sealedRange: (file.startIndex + start.sealedOffset)..<file.endIndex)
    }

    /// The parts before the ciphertext, and where the ciphertext starts.
    struct Start {
        var header: Header
        var associatedData: Data
        var nonce: [UInt8]
        var sealedOffset: Int
    }

    /// Reads the parts before the ciphertext from the first bytes of a file (at least the
    /// header and the nonce: 4,122 bytes at most), for a file decrypted while it is read.
    static func parseStart(_ prefix: Data, path: String) throws(TokenCacheError) -> Start {
        let data = prefix.startIndex == 0 ? prefix : Data(prefix)
        guard data.count >= magic.count, data.prefix(magic.count) == magic else {
            throw TokenCacheError(.fileMismatch, "\(path) is not a swift-tokencache cache file.",
                                  hint: "Move it away; it was not changed")
        }
        guard data.count >= 14 else { throw damaged(path) }
        let version = UInt16(data[8]) << 8 | UInt16(data[9])
        guard version == Self.version else {
            throw TokenCacheError(.fileMismatch, "\(path) has format version \(version); this version of swift-tokencache reads version \(Self.version).",
                                  hint: "Use a newer swift-tokencache; the file was not changed")
        }
        let headerLength = Int(UInt32(data[10]) << 24 | UInt32(data[11]) << 16 | UInt32(data[12]) << 8 | UInt32(data[13]))
        let headerEnd = 14 + headerLength
        guard headerLength <= maximumHeaderLength, data.count >= headerEnd + OpenSSL.nonceByteCount else { throw damaged(path) }
        guard let header = try? JSONDecoder().decode(Header.self, from: data[14..<headerEnd]) else { throw damaged(path) }
        return Start(header: header, associatedData: Data(data[..<headerEnd]),
                     nonce: Array(data[headerEnd..<(headerEnd + OpenSSL.nonceByteCount)]),
                     sealedOffset: headerEnd + OpenSSL.nonceByteCount)
    }

    static let maximumHeaderLength = 4096

    static func damaged(_ path: String) -> TokenCacheError {
        TokenCacheError(.fileAuthenticationFailed, "\(path) is damaged or was tampered with (truncated or altered).",
                        hint: "Restore it from a backup or move it away; it was not changed or replaced")
    }
}
