/// Writes ``JSONValue`` as UTF-8 JSON with sorted keys: the counterpart of ``JSONParser``.
///
/// Why not JSONEncoder: encoding `JSONValue` through `Encodable` boxes every value, and with
/// sorted keys it compares keys with locale-aware string comparison (HISTORY.md has the
/// profile). The output is what
/// JSONEncoder writes with `[.sortedKeys, .withoutEscapingSlashes]` (and `.prettyPrinted`),
/// except that keys are sorted by their UTF-8 bytes (as Python's `sort_keys`), which is stable
/// and differs from JSONEncoder's numeric, case-insensitive order only in keys with digits or
/// capitals. Checked against JSONEncoder by the tests.
package struct JSONWriter {
    /// A double that JSON cannot represent (infinity or NaN).
    package struct InvalidNumber: Error, Sendable {
        package let value: Double
    }

    private(set) var bytes: [UInt8] = []
    private let pretty: Bool
    private var indent = 0
    /// The objects and arrays open while streaming, innermost last.
    private var levels: [Level] = []

    private struct Level {
        package var isArray: Bool
        package var hasElements = false
        #if DEBUG
        /// The object's last key, to check that members come in key order.
        package var lastKey: String?
        #endif
    }

    /// `pretty`: two-space indentation and `"key" : value`, as JSONEncoder's `.prettyPrinted`.
    package static func write(_ value: JSONValue, pretty: Bool = false) throws(InvalidNumber) -> [UInt8] {
        var writer = JSONWriter(pretty: pretty)
        try writer.write(value)
        return writer.bytes
    }

    /// A writer to stream a document into (``beginObject()``, ``key(_:)``, ``string(_:)``, …),
    /// or to use through ``write(_:pretty:)``.
    package init(pretty: Bool) {
        self.pretty = pretty
        bytes.reserveCapacity(256)
    }

    /// A writer for one element of an array `depth` levels deep in another writer's document
    /// (that writer's ``depth``): its bytes, given to ``element(_:)``, are what the other writer
    /// would have written for the element. So elements can be written apart, on other cores.
    package init(pretty: Bool, depth: Int) {
        self.init(pretty: pretty)
        indent = pretty ? depth : 0
    }

    /// How many objects and arrays are open.
    package var depth: Int { levels.count }

    /// The next element of the innermost array, written by a writer made with `init(pretty:depth:)`.
    package mutating func element(_ written: [UInt8]) {
        beginValue()
        bytes.append(contentsOf: written)
    }

    // MARK: Streaming

    // For large documents whose shape the caller knows, such as `list --json` of 1,000 accounts:
    // no JSONValue tree to build, and no keys to sort. The caller gives each object's members in
    // UTF-8 key order; the bytes are those `write(_:pretty:)` writes for the same document.

    package mutating func beginObject() { beginLevel(isArray: false) }
    package mutating func endObject() { endLevel(UInt8(ascii: "}")) }
    package mutating func beginArray() { beginLevel(isArray: true) }
    package mutating func endArray() { endLevel(UInt8(ascii: "]")) }

    /// Starts the next member of the innermost object; its value follows.
    package mutating func key(_ name: String) {
        #if DEBUG
        precondition(levels.last?.isArray == false, "a key outside an object")
        precondition(levels[levels.count - 1].lastKey.map { Self.utf8Order($0, name) } ?? true, "keys out of order: \(name)")
        levels[levels.count - 1].lastKey = name
        #endif
        nextElement()
        writeString(name)
        append(pretty ? " : " : ":")
    }

    package mutating func string(_ text: String) {
        beginValue()
        writeString(text)
    }

    package mutating func bool(_ flag: Bool) {
        beginValue()
        append(flag ? "true" : "false")
    }

    private mutating func beginLevel(isArray: Bool) {
        beginValue()
        bytes.append(isArray ? UInt8(ascii: "[") : UInt8(ascii: "{"))
        levels.append(Level(isArray: isArray))
    }

    private mutating func endLevel(_ bracket: UInt8) {
        let level = levels.removeLast()
        level.hasElements ? closeLevel(bracket) : closeEmpty(bracket)
    }

    /// In an array, a value is the next element; in an object, `key(_:)` began the member.
    /// (`bytes` is the document once every level is closed.)
    private mutating func beginValue() {
        if levels.last?.isArray == true { nextElement() }
    }

    private mutating func nextElement() {
        if levels[levels.count - 1].hasElements {
            separateElements()
        } else {
            levels[levels.count - 1].hasElements = true
            openLevel()
        }
    }

    // MARK: Values

    private mutating func write(_ value: JSONValue) throws(InvalidNumber) {
        switch value {
        case .null: append("null")
        case .bool(let flag): append(flag ? "true" : "false")
        case .integer(let number): append(String(number))
        case .double(let number): try writeDouble(number)
        case .string(let text): writeString(text)
        case .array(let elements):
            guard !elements.isEmpty else { return writeEmpty(UInt8(ascii: "["), UInt8(ascii: "]")) }
            bytes.append(UInt8(ascii: "["))
            openLevel()
            for (position, element) in elements.enumerated() {
                if position > 0 { separateElements() }
                try write(element)
            }
            closeLevel(UInt8(ascii: "]"))
        case .object(let object):
            guard !object.isEmpty else { return writeEmpty(UInt8(ascii: "{"), UInt8(ascii: "}")) }
            bytes.append(UInt8(ascii: "{"))
            openLevel()
            for (position, member) in object.sorted(by: { Self.utf8Order($0.key, $1.key) }).enumerated() {
                if position > 0 { separateElements() }
                writeString(member.key)
                append(pretty ? " : " : ":")
                try write(member.value)
            }
            closeLevel(UInt8(ascii: "}"))
        }
    }

    /// Byte order of the UTF-8 forms, which is Unicode code point order.
    private static func utf8Order(_ left: String, _ right: String) -> Bool {
        left.utf8.lexicographicallyPrecedes(right.utf8)
    }

    /// A newline and the current indentation (two spaces a level), without building a String.
    private mutating func newLine() {
        bytes.append(UInt8(ascii: "\n"))
        bytes.append(contentsOf: repeatElement(UInt8(ascii: " "), count: 2 * indent))
    }

    /// `[]` or `{}`; pretty, JSONEncoder's `[\n\n]` with the closing bracket indented.
    private mutating func writeEmpty(_ open: UInt8, _ close: UInt8) {
        bytes.append(open)
        closeEmpty(close)
    }

    /// Closes a level that got no element, its opening bracket written.
    private mutating func closeEmpty(_ bracket: UInt8) {
        if pretty {
            bytes.append(UInt8(ascii: "\n"))
            newLine()
        }
        bytes.append(bracket)
    }

    private mutating func openLevel() {
        guard pretty else { return }
        indent += 1
        newLine()
    }

    private mutating func separateElements() {
        bytes.append(UInt8(ascii: ","))
        if pretty { newLine() }
    }

    private mutating func closeLevel(_ bracket: UInt8) {
        if pretty {
            indent -= 1
            newLine()
        }
        bytes.append(bracket)
    }

    /// Shortest round-trip form, without a trailing ".0", as JSONEncoder writes doubles.
    private mutating func writeDouble(_ number: Double) throws(InvalidNumber) {
        guard number.isFinite else { throw InvalidNumber(value: number) }
        var text = number.description
        if text.hasSuffix(".0") { text.removeLast(2) }
        append(text)
    }

    private mutating func writeString(_ text: String) {
        bytes.append(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { utf8 in
            var plainStart = 0
            for index in utf8.indices {
                let byte = utf8[index]
                guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[plainStart..<index]))
                plainStart = index + 1
                switch byte {
                case UInt8(ascii: "\""): append("\\\"")
                case UInt8(ascii: "\\"): append("\\\\")
                case 0x08: append("\\b")
                case 0x0C: append("\\f")
                case 0x0A: append("\\n")
                case 0x0D: append("\\r")
                case 0x09: append("\\t")
                default:
                    append("\\u00")
                    bytes.append(ASCII.hexDigits[Int(byte >> 4)])
                    bytes.append(ASCII.hexDigits[Int(byte & 0x0F)])
                }
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[plainStart...]))
        }
        bytes.append(UInt8(ascii: "\""))
    }

    private mutating func append(_ text: String) {
        bytes.append(contentsOf: text.utf8)
    }
}
