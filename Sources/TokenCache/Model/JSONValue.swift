import Foundation

/// A JSON value, kept exactly as read so that fields written by another MSAL SDK survive a
/// round trip through this library unchanged.
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case integer(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)

    /// The string, when this value is a string.
    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// The value as a number of seconds, accepting MSAL's string-typed numbers ("1700000000"),
    /// plain JSON numbers and the float timestamps older MSAL Python files contain.
    public var secondsValue: Double? {
        switch self {
        case .string(let text): return Double(text.trimmingCharacters(in: .whitespaces))
        case .integer(let value): return Double(value)
        case .double(let value): return value.isFinite ? value : nil
        default: return nil
        }
    }
}

/// A JSON object: the storage of every cache entity.
public typealias JSONObject = [String: JSONValue]

extension JSONValue: Codable {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .integer(value)
        } else if let value = try? container.decode(Double.self) {
            self = .double(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode(JSONObject.self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
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
    public init(stringLiteral value: String) { self = .string(value) }
}

/// Reading JSON through Foundation's JSONSerialization, which is several times faster on Linux
/// than decoding `JSONValue` with JSONDecoder (whose type probing throws); writing through
/// JSONEncoder, which is several times faster than JSONSerialization's writer (measured: 0.59 s
/// against 3.7 s for a 13 MB cache with sorted keys).
enum JSON {
    /// Output for everything this library writes: sorted keys make output stable, so unchanged
    /// entities compare equal byte for byte and writes can be skipped.
    static func encode(_ value: JSONValue, pretty: Bool = false) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = pretty ? [.sortedKeys, .withoutEscapingSlashes, .prettyPrinted]
                                          : [.sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(value)
    }

    static func encode(_ object: JSONObject, pretty: Bool = false) throws -> Data {
        try encode(.object(object), pretty: pretty)
    }

    /// Nesting deeper than this is refused: no legitimate cache or token response nests
    /// more than a few levels, and deep nesting is a denial-of-service vector.
    static let maximumDepth = 64

    static func decodeObject(_ data: Data) throws -> JSONObject {
        guard depthIsReasonable(data) else { throw JSONShapeError.tooDeep }
        let parsed = try JSONSerialization.jsonObject(with: data, options: [])
        guard case .object(let object) = try JSONValue(foundationObject: parsed) else { throw JSONShapeError.notAnObject }
        return object
    }

    /// A byte scan for bracket depth, outside strings, before handing data to the parser.
    private static func depthIsReasonable(_ data: Data) -> Bool {
        var depth = 0
        var inString = false
        var escaped = false
        for byte in data {
            if inString {
                if escaped { escaped = false } else if byte == UInt8(ascii: "\\") { escaped = true } else if byte == UInt8(ascii: "\"") { inString = false }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""): inString = true
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                depth += 1
                if depth > maximumDepth { return false }
            case UInt8(ascii: "}"), UInt8(ascii: "]"): depth -= 1
            default: break
            }
        }
        return true
    }
}

extension JSONValue {
    /// Converts JSONSerialization's output.
    init(foundationObject value: Any) throws {
        switch value {
        case let string as String: self = .string(string)
        case let number as NSNumber:
            switch String(cString: number.objCType) {
            case "c", "B": self = .bool(number.boolValue)
            case "f", "d": self = .double(number.doubleValue)
            default: self = .integer(number.int64Value)
            }
        case is NSNull: self = .null
        case let array as [Any]: self = .array(try array.map(JSONValue.init(foundationObject:)))
        case let object as [String: Any]: self = .object(try object.mapValues(JSONValue.init(foundationObject:)))
        default: throw JSONShapeError.notAnObject
        }
    }
}

enum JSONShapeError: Error {
    case tooDeep
    case notAnObject
}
