import FoundationEssentials

/// A JSON value, kept exactly as read so that fields written by another MSAL SDK survive a
/// round trip through this library unchanged.
package enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case integer(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)

    /// The string, when this value is a string.
    package var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// The value as a number of seconds, accepting MSAL's string-typed numbers ("1700000000"),
    /// plain JSON numbers and the float timestamps older MSAL Python files contain.
    package var secondsValue: Double? {
        let seconds: Double?
        switch self {
        case .string(let text):
            // Plain digits, the common case, skip Foundation's trimming.
            if let digits = ASCII.digitsValue(text) { seconds = Double(digits) } else { seconds = Double(ASCII.trimmed(text)) }
        case .integer(let value): seconds = Double(value)
        case .double(let value): seconds = value
        default: seconds = nil
        }
        guard let seconds, seconds.isFinite else { return nil }
        // Any number can arrive in an imported cache; past about 300,000 years from 1970 it is
        // held there, so that no date made from it overflows an integer conversion downstream.
        return min(max(seconds, -Self.secondsBound), Self.secondsBound)
    }

    /// ``secondsValue``'s bound: 10^13 s, about year 318,857.
    static let secondsBound = 1e13
}

/// A JSON object: the storage of every cache entity.
package typealias JSONObject = [String: JSONValue]

extension JSONValue: Codable {
    package init(from decoder: any Decoder) throws {
        // Most likely first: every failed probe throws, and caches are mostly strings and objects.
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode(JSONObject.self) {
            self = .object(value)
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .integer(value)
        } else if let value = try? container.decode(Double.self) {
            self = .double(value)
        } else {
            self = .array(try container.decode([JSONValue].self))
        }
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .integer(let value): try container.encode(value)
        case .double(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }
}

extension JSONValue: ExpressibleByStringLiteral {
    package init(stringLiteral value: String) { self = .string(value) }
}

/// Reading JSON with ``JSONParser`` and writing it with ``JSONWriter``.
package enum JSON {
    /// Output for everything this library writes: sorted keys make output stable, so unchanged
    /// entities compare equal byte for byte and writes can be skipped.
    package static func encode(_ value: JSONValue, pretty: Bool = false) throws(JSONWriter.InvalidNumber) -> Data {
        Data(try JSONWriter.write(value, pretty: pretty))
    }

    package static func encode(_ object: JSONObject, pretty: Bool = false) throws(JSONWriter.InvalidNumber) -> Data {
        try encode(.object(object), pretty: pretty)
    }

    /// Nesting deeper than this is refused: no legitimate cache or token response nests
    /// more than a few levels, and deep nesting is a denial-of-service vector.
    package static let maximumDepth = 64

    /// Parses a JSON object (``JSONParser``: strict, depth-limited, fast on small documents),
    /// leaving out the members an `omission` names (they are still checked).
    package static func decodeObject(_ data: Data, omitting omission: JSONParser.Omission? = nil) throws -> JSONObject {
        let value = try data.withUnsafeBytes { bytes throws(JSONParser.SyntaxError) in
            try JSONParser.parse(bytes, maximumDepth: maximumDepth, omitting: omission)
        }
        guard case .object(let object) = value else { throw JSONShapeError.notAnObject }
        return object
    }
}


package enum JSONShapeError: Error {
    case notAnObject
}
