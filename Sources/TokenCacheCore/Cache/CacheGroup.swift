/// A sharing domain, the Linux counterpart of a keychain sharing group: apps that use the same
/// group see each other's accounts and get single sign-on.
///
/// Groups isolate apps by contract only: on Linux any process of the same user can talk to the
/// Secret Service (CVE-2018-19358) and read the user's files.
public struct CacheGroup: Sendable, Hashable, CustomStringConvertible, Codable {
    /// The reverse-DNS name, for example `com.microsoft.identity.universalstorage`.
    public let name: String

    /// The group MSAL for macOS shares accounts in; the default for new apps.
    public static let universalStorage = CacheGroup(validated: "com.microsoft.identity.universalstorage")
    /// The group MSAL for iOS (and ADAL) share accounts in.
    public static let adalCache = CacheGroup(validated: "com.microsoft.adalcache")

    /// Creates a group from a reverse-DNS name such as `com.example.myapp`.
    /// - Throws: ``TokenCacheError`` `invalidArgument` when the name is not reverse-DNS.
    public init(_ name: String) throws(TokenCacheError) {
        let labels = name.split(separator: ".", omittingEmptySubsequences: false)
        let isValid = name.utf8.count <= 255 && labels.count >= 2 && labels.allSatisfy { label in
            !label.isEmpty && label.utf8.count <= 63
                && label.first != "-" && label.last != "-"
                && label.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }
        }
        guard isValid else {
            throw TokenCacheError.invalidArgument("group", "'\(name)' is not a reverse-DNS name",
                hint: "Use letters, digits, '-' and '_' in dot-separated labels, for example com.example.myapp")
        }
        self.name = name
    }

    private init(validated name: String) { self.name = name }

    public var description: String { name }

    public init(from decoder: any Decoder) throws {
        try self.init(try decoder.singleValueContainer().decode(String.self))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(name)
    }
}
