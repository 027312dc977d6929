/// Allocation-free helpers for the hot lookup path: identifiers (client IDs, tenants, hosts,
/// scopes) are compared case-insensitively in ASCII, as Microsoft identity treats them.
enum ASCII {
    /// Whether two strings are equal ignoring ASCII case, without allocating.
    static func equalsIgnoringCase(_ a: String, _ b: String) -> Bool {
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

    /// The string lower-cased, returning the same string (no allocation) when it has no
    /// upper-case ASCII letter.
    static func lowercased(_ string: String) -> String {
        var contiguous = string
        let hasUpperCase = contiguous.withUTF8 { $0.contains { $0 >= 65 && $0 <= 90 } }
        return hasUpperCase ? string.lowercased() : string
    }

    /// The value of a string of 1 to 18 decimal digits and nothing else (MSAL's string-typed
    /// timestamps), read without Foundation; nil for anything else.
    static func digitsValue(_ string: String) -> Int? {
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

    @inline(__always)
    private static func lower(_ byte: UInt8) -> UInt8 { byte >= 65 && byte <= 90 ? byte + 32 : byte }
}
