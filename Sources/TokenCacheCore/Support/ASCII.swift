/// Allocation-free helpers for the hot lookup path: identifiers (client IDs, tenants, hosts,
/// scopes) are compared case-insensitively in ASCII, as Microsoft identity treats them.
package enum ASCII {
    /// Whether two strings are equal ignoring ASCII case, without allocating.
    package static func equalsIgnoringCase(_ a: String, _ b: String) -> Bool {
        if a == b { return true }  // the common case: identifiers are stored as received
        guard a.utf8.count == b.utf8.count else { return false }
        // Native strings are contiguous UTF-8, so this borrows their storage without copying.
        var a = a, b = b
        return a.withUTF8 { a in
            b.withUTF8 { b in
                for index in 0..<a.count where lower(a[index]) != lower(b[index]) { return false }
                return true
            }
        }
    }

    /// Whether `a` is present and `a.lowercased() == b.lowercased()`, without allocating when
    /// both are ASCII (identifiers are; otherwise Unicode lower-casing decides, as before).
    package static func equalLowercased(_ a: String?, _ b: String) -> Bool {
        guard var a else { return false }
        if a == b { return true }  // as stored, before walking both for non-ASCII bytes
        var b = b
        if a.withUTF8({ isASCII($0) }) && b.withUTF8({ isASCII($0) }) { return equalsIgnoringCase(a, b) }
        return a.lowercased() == b.lowercased()
    }

    /// Whether a string is ASCII (one pass over its contiguous UTF-8).
    package static func isASCII(_ string: String) -> Bool {
        var string = string
        return string.withUTF8 { isASCII($0) }
    }

    private static func isASCII(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var high: UInt8 = 0
        for byte in bytes { high |= byte }
        return high < 0x80
    }

    /// The string lower-cased, returning the same string (no allocation) when it has no
    /// upper-case ASCII letter.
    package static func lowercased(_ string: String) -> String {
        var contiguous = string
        let hasUpperCase = contiguous.withUTF8 { $0.contains { $0 >= 65 && $0 <= 90 } }
        return hasUpperCase ? string.lowercased() : string
    }

    /// The value of a string of 1 to 18 decimal digits and nothing else (MSAL's string-typed
    /// timestamps), read without Foundation; nil for anything else.
    package static func digitsValue(_ string: String) -> Int? {
        var contiguous = string
        return contiguous.withUTF8 { bytes -> Int? in
            guard (1...18).contains(bytes.count) else { return nil }
            var value = 0
            for byte in bytes {
                guard byte >= 48 && byte <= 57 else { return nil }
                value = value * 10 + Int(byte - 48)
            }
            return value
        }
    }

    /// The text without leading and trailing spaces and tabs (and, with `newlines`, CR and LF).
    package static func trimmed(_ text: some StringProtocol, newlines: Bool = false) -> String {
        func isBlank(_ byte: UInt8) -> Bool {
            byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t")
                || (newlines && (byte == UInt8(ascii: "\n") || byte == UInt8(ascii: "\r")))
        }
        let utf8 = Array(text.utf8)
        guard let first = utf8.firstIndex(where: { !isBlank($0) }), let last = utf8.lastIndex(where: { !isBlank($0) }) else { return "" }
        return String(decoding: utf8[first...last], as: UTF8.self)
    }

    /// Lower-case hexadecimal, two digits a byte.
    package static func hex(_ bytes: some Sequence<UInt8>) -> String {
        var text = ""
        for byte in bytes {
            text.append(Character(Unicode.Scalar(hexDigits[Int(byte >> 4)])))
            text.append(Character(Unicode.Scalar(hexDigits[Int(byte & 0x0F)])))
        }
        return text
    }

    /// The lower-case hexadecimal digits as UTF-8 bytes (also JSON's `\u00XX` escapes).
    package static let hexDigits = Array("0123456789abcdef".utf8)

    /// `application/x-www-form-urlencoded` escaping (RFC 3986 unreserved characters stay; every
    /// other byte of the UTF-8 form, non-ASCII included, becomes %XX).
    package static func percentEncoded(_ text: String) -> String {
        var encoded = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                encoded.append(Character(Unicode.Scalar(byte)))
            default:
                encoded += "%" + hex([byte]).uppercased()
            }
        }
        return encoded
    }

    @inline(__always)
    private static func lower(_ byte: UInt8) -> UInt8 { byte >= 65 && byte <= 90 ? byte + 32 : byte }
}
