import FoundationEssentials
import TokenCacheCore

/// The head of an HTTP/1.1 request (RFC 9112) as the two loopback servers read it: the sign-in's
/// redirect listener and the agent's managed-identity endpoint. Strict and small, for what they
/// serve: a request line `METHOD SP /target SP HTTP/1.x` with single spaces and an origin-form
/// target, `name: value` lines, CRLF line ends, a bound on the size; no folded lines, no control
/// characters, no body (neither server takes one), no percent-decoding of the path.
package struct HTTPRequestHead: Sendable, Equatable {
    /// One header line: its name as sent and its value without the blanks around it.
    package struct Field: Sendable, Equatable {
        package var name: String
        package var value: String

        package init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    /// Why bytes read are not a request head these servers take.
    package enum Failure: Error, Sendable, Equatable {
        /// No end of head within ``HTTPRequestHead/maximumBytes`` (answered 431).
        case tooLarge
        /// The request line is not `METHOD SP /target SP HTTP/1.0 or 1.1`.
        case malformedRequestLine
        /// A header line is not `name: value`, is folded, or holds a control character.
        case malformedHeader
    }

    package var method: String
    /// The origin-form target, path and query as sent.
    package var target: String
    /// `HTTP/1.1` or `HTTP/1.0`.
    package var version: String
    package var fields: [Field]

    /// The largest head taken, its blank line included: a redirect with a code is about 2 KiB.
    package static let maximumBytes = 16 * 1024

    /// The target's path (before `?`), not decoded.
    package var path: Substring { target.prefix { $0 != "?" } }

    /// The target's query parameters, the first value of each name, decoded; nil when the target
    /// is not a URI reference.
    package var query: [String: String]? {
        guard let components = URLComponents(string: target) else { return nil }
        var query: [String: String] = [:]
        for item in components.queryItems ?? [] where query[item.name] == nil { query[item.name] = item.value ?? "" }
        return query
    }

    /// The values of every field named `name` (ASCII case ignored), in order.
    package func values(of name: String) -> [String] {
        fields.filter { ASCII.equalsIgnoringCase($0.name, name) }.map(\.value)
    }

    /// Parses a complete head: the bytes before the blank line that ends it.
    package init(parsing head: some Collection<UInt8>) throws(Failure) {
        var lines = Self.lines(Array(head))
        guard let requestLine = lines.first.flatMap({ $0 }) else { throw .malformedRequestLine }
        let parts = requestLine.split(separator: Self.space, omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, parts[0].allSatisfy(Self.isTokenByte),
              parts[1].first == UInt8(ascii: "/"), parts[1].allSatisfy({ (0x21...0x7E).contains($0) }),
              parts[2].elementsEqual("HTTP/1.1".utf8) || parts[2].elementsEqual("HTTP/1.0".utf8) else { throw .malformedRequestLine }
        method = String(decoding: parts[0], as: UTF8.self)
        target = String(decoding: parts[1], as: UTF8.self)
        version = String(decoding: parts[2], as: UTF8.self)
        lines.removeFirst()
        fields = []
        for line in lines {
            guard let line, let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > line.startIndex,
                  line[..<colon].allSatisfy(Self.isTokenByte) else { throw .malformedHeader }
            let value = line[(colon + 1)...].drop { $0 == Self.space || $0 == Self.tab }
            guard value.allSatisfy({ $0 == Self.tab || $0 >= 0x20 && $0 != 0x7F }) else { throw .malformedHeader }
            let end = value.lastIndex { $0 != Self.space && $0 != Self.tab }.map { $0 + 1 } ?? value.startIndex
            fields.append(Field(name: String(decoding: line[..<colon], as: UTF8.self), value: String(decoding: value[..<end], as: UTF8.self)))
        }
    }

    /// Gathers a request head from the reads of one connection, however they split it.
    package struct Reader: Sendable {
        private var bytes: [UInt8] = []

        package init() {}

        /// How many more bytes are worth reading: one past the bound, so that a head over it is
        /// read whole and refused (a close on unread bytes would reset the connection before
        /// the peer reads why).
        package var wanted: Int { max(0, HTTPRequestHead.maximumBytes + 1 - bytes.count) }

        /// Adds the bytes of one read; returns the head once its blank line has arrived (bytes
        /// after it are ignored), nil while more is needed.
        package mutating func append(_ chunk: some Collection<UInt8>) throws(Failure) -> HTTPRequestHead? {
            let searchFrom = max(0, bytes.count - 3)
            bytes += chunk
            guard let end = bytes[searchFrom...].firstRange(of: [13, 10, 13, 10]) else {
                if bytes.count > HTTPRequestHead.maximumBytes { throw .tooLarge }
                return nil
            }
            guard end.upperBound <= HTTPRequestHead.maximumBytes else { throw .tooLarge }
            return try HTTPRequestHead(parsing: bytes[..<end.lowerBound])
        }
    }

    private static let space = UInt8(ascii: " ")
    private static let tab = UInt8(ascii: "\t")
    private static let tokenPunctuation = Array("!#$%&'*+-.^_`|~".utf8)

    /// The CRLF-separated lines; nil for one holding a lone CR or LF.
    private static func lines(_ bytes: [UInt8]) -> [ArraySlice<UInt8>?] {
        var lines: [ArraySlice<UInt8>?] = []
        var start = bytes.startIndex
        while true {
            let end = bytes[start...].firstRange(of: [13, 10])
            let line = bytes[start..<(end?.lowerBound ?? bytes.endIndex)]
            lines.append(line.contains(13) || line.contains(10) ? nil : line)
            guard let end else { return lines }
            start = end.upperBound
        }
    }

    /// RFC 9110's tchar: the bytes of a method or a field name.
    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"):
            return true
        default:
            return tokenPunctuation.contains(byte)
        }
    }
}
