/// An application (client) ID, checked once where it enters: Entra ID's are GUIDs, but B2C,
/// AD FS and other OpenID providers name clients freely, so any non-empty ASCII text without
/// whitespace of at most 256 bytes is accepted (as MSAL does not check the form either), and
/// nothing else reaches a cache key, a form field or a keyring attribute.
public struct ClientID: Sendable, Hashable, CustomStringConvertible {
    /// The ID as the app registration gives it.
    public let value: String

    /// - Throws: ``TokenCacheError`` `invalidArgument` (field `client ID`) for an empty ID, one
    ///   with whitespace or non-ASCII characters, or one over 256 bytes.
    public init(_ value: String) throws(TokenCacheError) {
        guard !value.isEmpty, value.utf8.count <= 256, value.allSatisfy({ $0.isASCII && !$0.isWhitespace && !$0.isNewline }) else {
            throw TokenCacheError.invalidArgument("client ID", "must be a non-empty ASCII string without spaces",
                                                  hint: "Pass the application (client) ID of the app registration")
        }
        self.value = value
    }

    /// The client ID a request from another process must carry (an agent's, broker's or keeper's
    /// `client_id`): a missing one is `invalidArgument` naming `field`, before any policy or audit
    /// sees the request; a missing ID is not an empty one to match against an allow list.
    package init(required value: String?, field: String) throws(TokenCacheError) {
        guard let value else {
            throw TokenCacheError.invalidArgument(field, "is missing", hint: "Name the app's application (client) ID")
        }
        try self.init(value)
    }

    /// Whether `other` names the same client, as every policy compares them: ASCII letters in any case.
    package func matches(_ other: ClientID) -> Bool { ASCII.equalsIgnoringCase(value, other.value) }

    /// Whether a client ID already stored (a cache entry's `client_id`, read back, never a request's) names this client.
    package func matches(stored: String) -> Bool { ASCII.equalsIgnoringCase(value, stored) }

    /// The form a policy keys remembered answers by: lowercased, so any spelling finds them.
    package var policyKey: String { ASCII.lowercased(value) }

    public var description: String { value }
}
