/// Allocation-free helpers for the hot lookup path: identifiers (client IDs, tenants, hosts,
/// scopes) are compared case-insensitively in ASCII, as Microsoft identity treats them.
enum ASCII {
    /// Whether two strings are equal ignoring ASCII case, without allocating.
    static func equalsIgnoringCase(_ a: String, _ b: String) -> Bool {
        var a = a, b = b
        return a.withUTF8 { left in
            b.withUTF8 { right in
                guard left.count == right.count else { return false }
                for i in 0..<left.count where lower(left[i]) != lower(right[i]) { return false }
                return true
            }
        }
    }

    /// The string lower-cased, returning the same string (no allocation) when it has no
    /// upper-case ASCII letter.
    static func lowercased(_ string: String) -> String {
        string.utf8.contains(where: { $0 >= 65 && $0 <= 90 }) ? string.lowercased() : string
    }

    @inline(__always)
    private static func lower(_ byte: UInt8) -> UInt8 { byte >= 65 && byte <= 90 ? byte + 32 : byte }
}
