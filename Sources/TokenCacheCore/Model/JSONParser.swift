import Dispatch
#if canImport(Glibc)
import Glibc
#endif

/// A strict RFC 8259 parser from UTF-8 bytes straight to ``JSONValue``.
///
/// Why not JSONDecoder: decoding `JSONValue` through `Decodable` costs a container and a failed
/// probe per value, and a fixed set-up cost per call that dominates small documents. The cache
/// decodes many small ones (one per Secret Service item, one per ID token) and large ones (an
/// encrypted-file cache of thousands of accounts); figures in Benchmarks/results/HISTORY.md. This parser is fuzzed (Fuzz/: msal-json, token-response, jwt,
/// encrypted-file, json-split) and checked against JSONDecoder on the test fixtures.
///
/// Numbers: an integer literal that fits in Int64 is `.integer`; any other number is `.double`.
/// Refused: invalid UTF-8, unescaped control characters, lone surrogate escapes, leading zeros,
/// trailing content, and nesting deeper than `maximumDepth`. A duplicated key keeps its last value.
///
/// An ``Omission`` leaves chosen members of a cache's entries out of the result; they are still
/// checked, so the same documents are refused with or without one.
package struct JSONParser {
    /// Members a reader does not need, left out of the entries of an MSAL cache document (the
    /// objects two levels below the root: sections, then entries by key). A listing shows no
    /// token and no photo, so their secrets and bytes stay in the decrypted document instead of
    /// being copied out, and of the three token sections (nearly all of a large cache) it reads
    /// a few members only: fewer strings to make and smaller dictionaries to fill.
    package struct Omission: Sendable {
        /// What a section's entries lose.
        package enum Rule: Sendable {
            /// This member.
            case member(String)
            /// Every member but these.
            case allBut([String])

            /// Whether an entry's member of this name is left out.
            @inline(__always)
            package func omits(_ key: String) -> Bool {
                switch self {
                case .member(let name): key == name
                case .allBut(let kept): !kept.contains(key)
                }
            }
        }

        /// The rule of each section (root key); sections not named keep every member.
        package let rules: [String: Rule]

        /// What a listing (``GroupInventory``, ``GroupSummary``) reads of each entry: access and
        /// refresh tokens without their secrets, ID tokens with theirs (the account's name comes
        /// from one), and account photos without their bytes (whether one is cached is enough).
        /// Whatever else a listing reads of an entry must be kept here.
        package static let listing = Omission(rules: [
            "AccessToken": .allBut(["home_account_id", "environment", "client_id", "realm", "target", "expires_on"]),
            "RefreshToken": .allBut(["home_account_id", "environment", "client_id", "family_id", "last_modification_time"]),
            "IdToken": .allBut(["home_account_id", "environment", "client_id", "realm", "secret"]),
            "AccountPhoto": .member("data"),
        ])
    }

    package struct SyntaxError: Error, Sendable {
        /// Byte offset of the problem.
        package let offset: Int
        package let reason: String
    }

    private let bytes: UnsafeRawBufferPointer
    private var position = 0
    private var depth = 0
    /// Where a parser reading the start of a split document stops: the first byte of a member
    /// of the root object (``parseSplit(_:at:maximumDepth:omitting:allowingTrailingCommas:)``).
    private var stop = -1
    /// Whether it stopped there.
    private var stopped = false
    /// Members of the objects being parsed, innermost last.
    private var members: [(String, JSONValue)] = []
    private let maximumDepth: Int
    private let omission: Omission?
    /// While inside a member of the root object (a cache's section): what its entries lose.
    private var sectionRule: Omission.Rule?

    /// Whether `[1,]` and `{"a":1,}` are accepted (MSAL .NET writes and reads them).
    private var allowsTrailingCommas = false

    /// Parses one JSON document.
    /// - Parameter allowingTrailingCommas: accept a comma before a closing bracket or brace, as
    ///   MSAL .NET's serializer does (for importing its caches; everything else stays strict).
    /// Documents of ``splitSize`` or more are read on two cores when the machine has them
    /// (``parseSplit(_:at:maximumDepth:omitting:allowingTrailingCommas:)``).
    package static func parse(_ bytes: UnsafeRawBufferPointer, maximumDepth: Int,
                      omitting omission: Omission? = nil, allowingTrailingCommas: Bool = false) throws(SyntaxError) -> JSONValue {
        try parse(bytes, maximumDepth: maximumDepth, omitting: omission, allowingTrailingCommas: allowingTrailingCommas,
                  splittingFrom: splitSize)
    }

    /// The same, split from `splitSize` bytes on (tests choose it).
    package static func parse(_ bytes: UnsafeRawBufferPointer, maximumDepth: Int,
                      omitting omission: Omission? = nil, allowingTrailingCommas: Bool = false,
                      splittingFrom splitSize: Int) throws(SyntaxError) -> JSONValue {
        if bytes.count >= splitSize, onlineCPUCount() > 1, let split = rootMemberStart(in: bytes) {
            return try parseSplit(bytes, at: split, maximumDepth: maximumDepth, omitting: omission,
                                  allowingTrailingCommas: allowingTrailingCommas)
        }
        var parser = JSONParser(bytes: bytes, maximumDepth: maximumDepth, omission: omission)
        parser.allowsTrailingCommas = allowingTrailingCommas
        parser.skipWhitespace()
        let value = try parser.parseValue()
        try parser.expectEnd()
        return value
    }

    private init(bytes: UnsafeRawBufferPointer, maximumDepth: Int, omission: Omission?) {
        self.bytes = bytes
        self.maximumDepth = maximumDepth
        self.omission = omission
    }

    private func error(_ reason: String) -> SyntaxError { SyntaxError(offset: position, reason: reason) }

    private var current: UInt8? { position < bytes.count ? bytes[position] : nil }

    private mutating func skipWhitespace() {
        while position < bytes.count {
            switch bytes[position] {
            case 0x20, 0x09, 0x0A, 0x0D: position += 1
            default: return
            }
        }
    }

    private mutating func expect(_ literal: StaticString, _ value: JSONValue) throws(SyntaxError) -> JSONValue {
        let expected = UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount)
        guard position + expected.count <= bytes.count,
              expected.indices.allSatisfy({ bytes[position + $0] == expected[$0] }) else { throw error("invalid literal") }
        position += expected.count
        return value
    }

    private mutating func parseValue() throws(SyntaxError) -> JSONValue {
        guard let byte = current else { throw error("unexpected end of input") }
        switch byte {
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "t"): return try expect("true", .bool(true))
        case UInt8(ascii: "f"): return try expect("false", .bool(false))
        case UInt8(ascii: "n"): return try expect("null", .null)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw error("unexpected character")
        }
    }

    private mutating func enter() throws(SyntaxError) {
        depth += 1
        if depth > maximumDepth { throw error("nested deeper than \(maximumDepth) levels") }
    }

    private mutating func parseObject() throws(SyntaxError) -> JSONValue {
        try enter()
        position += 1  // {
        skipWhitespace()
        if current == UInt8(ascii: "}") {
            position += 1
            depth -= 1
            return .object([:])
        }
        return .object(try parseMembers())
    }

    /// An object's members, from the first byte of a member's key to the closing brace.
    private mutating func parseMembers() throws(SyntaxError) -> JSONObject {
        // Members wait on a shared stack and go into a dictionary sized for them: growing one
        // member by member rehashes every key at each doubling (a cache entry has about 12).
        let first = members.count
        while true {
            if position == stop && depth == 1 {
                stopped = true
                return object(from: first)
            }
            let key = try parseKey()
            if depth == 1 { sectionRule = omission?.rules[key] }
            if depth == 3, let sectionRule, sectionRule.omits(key) {
                try checkValue()
            } else {
                members.append((key, try parseValue()))
            }
            skipWhitespace()
            switch current {
            case UInt8(ascii: ",") where !(allowsTrailingCommas && nextIsClosing(UInt8(ascii: "}"))):
                position += 1
                skipWhitespace()
            case UInt8(ascii: ","), UInt8(ascii: "}"):
                if current == UInt8(ascii: ",") { position += 1; skipWhitespace() }
                position += 1
                depth -= 1
                return object(from: first)
            default: throw error("expected ',' or '}'")
            }
        }
    }

    /// The members stacked from `first` on, taken off the stack into an object.
    private mutating func object(from first: Int) -> JSONObject {
        var object = JSONObject(minimumCapacity: members.count - first)
        for (key, value) in members[first...] { object[key] = value }  // a repeated key keeps its last value
        members.removeSubrange(first...)
        return object
    }

    /// A member's key and the colon after it, from the key's opening quote.
    @inline(__always)
    private mutating func parseKey() throws(SyntaxError) -> String {
        guard current == UInt8(ascii: "\"") else { throw error("expected a string key") }
        let key = try parseString()
        skipWhitespace()
        guard current == UInt8(ascii: ":") else { throw error("expected ':'") }
        position += 1
        skipWhitespace()
        return key
    }

    private mutating func parseArray() throws(SyntaxError) -> JSONValue {
        try enter()
        position += 1  // [
        var array: [JSONValue] = []
        skipWhitespace()
        if current == UInt8(ascii: "]") {
            position += 1
            depth -= 1
            return .array(array)
        }
        while true {
            array.append(try parseValue())
            skipWhitespace()
            switch current {
            case UInt8(ascii: ",") where !(allowsTrailingCommas && nextIsClosing(UInt8(ascii: "]"))):
                position += 1; skipWhitespace()
            case UInt8(ascii: ","), UInt8(ascii: "]"):
                if current == UInt8(ascii: ",") { position += 1; skipWhitespace() }
                position += 1; depth -= 1; return .array(array)
            default: throw error("expected ',' or ']'")
            }
        }
    }

    /// A string, from its opening quote. Runs without escapes are validated and copied whole.
    /// Without `building`, a plain ASCII string (a token) is checked but not made: the result is
    /// then empty.
    private mutating func parseString(building: Bool = true) throws(SyntaxError) -> String {
        position += 1  // "
        var runStart = position
        var escaped: [UInt8]? = nil  // only built when the string has escapes
        var highBits: UInt8 = 0  // any byte >= 0x80 sets the top bit: not plain ASCII
        while true {
            skipPlainASCII()
            guard position < bytes.count else { throw error("unterminated string") }
            let byte = bytes[position]
            highBits |= byte
            if byte == UInt8(ascii: "\"") {
                let run = UnsafeRawBufferPointer(rebasing: bytes[runStart..<position])
                position += 1
                if var buffer = escaped {
                    buffer.append(contentsOf: run)
                    return try validated(buffer)
                }
                // ASCII is valid UTF-8: no validation, which goes through unspecialized generic
                // code. Escapes take the validating path.
                if highBits < 0x80 { return building ? String(decoding: run, as: UTF8.self) : "" }
                return try validated(run)
            }
            if byte < 0x20 { throw error("control character in a string") }
            if byte != UInt8(ascii: "\\") {
                position += 1
                continue
            }
            var buffer = escaped ?? []
            buffer.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[runStart..<position]))
            position += 1
            guard let code = current else { throw error("unterminated escape") }
            position += 1
            switch code {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): buffer.append(code)
            case UInt8(ascii: "b"): buffer.append(0x08)
            case UInt8(ascii: "f"): buffer.append(0x0C)
            case UInt8(ascii: "n"): buffer.append(0x0A)
            case UInt8(ascii: "r"): buffer.append(0x0D)
            case UInt8(ascii: "t"): buffer.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try hex4()
                if (0xD800...0xDBFF).contains(scalar) {
                    guard position + 1 < bytes.count, bytes[position] == UInt8(ascii: "\\"), bytes[position + 1] == UInt8(ascii: "u") else {
                        throw error("unpaired surrogate escape")
                    }
                    position += 2
                    let low = try hex4()
                    guard (0xDC00...0xDFFF).contains(low) else { throw error("unpaired surrogate escape") }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else if (0xDC00...0xDFFF).contains(scalar) {
                    throw error("unpaired surrogate escape")
                }
                buffer.append(contentsOf: Unicode.UTF8.encode(Unicode.Scalar(scalar)!)!)
            default: throw error("invalid escape")
            }
            escaped = buffer
            runStart = position
        }
    }

    /// Checks a value as `parseValue` would, building nothing for a plain string (a token).
    private mutating func checkValue() throws(SyntaxError) {
        if current == UInt8(ascii: "\"") { _ = try parseString(building: false) } else { _ = try parseValue() }
    }

    /// Skips the bytes of a run that need no look: plain ASCII other than a quote, a backslash
    /// or a control character. Sixteen at a time (SSE2 compares, as Swift's SIMD types compile
    /// on x86-64), then byte by byte up to the one that stops it. Tokens are long runs of plain
    /// ASCII (a large cache is mostly access and refresh tokens): checked eight bytes at a time,
    /// this loop was still a quarter of reading one. A byte of 0x80 or more stops it too (a
    /// signed compare catches it with the control characters); the caller steps over it.
    @inline(__always)
    private mutating func skipPlainASCII() {
        typealias Block = SIMD16<Int8>
        let quote = Block(repeating: Int8(UInt8(ascii: "\""))), backslash = Block(repeating: Int8(UInt8(ascii: "\\")))
        let space = Block(repeating: 0x20)
        while position + Block.scalarCount <= bytes.count {
            let block = bytes.loadUnaligned(fromByteOffset: position, as: Block.self)
            // As signed bytes, both control characters (0...0x1F) and bytes >= 0x80 (negative) are below 0x20.
            if any((block .== quote) .| (block .== backslash) .| (block .< space)) { break }
            position += Block.scalarCount
        }
        while position < bytes.count {
            let byte = bytes[position]
            if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte < 0x20 || byte >= 0x80 { return }
            position += 1
        }
    }

    private mutating func hex4() throws(SyntaxError) -> UInt32 {
        guard position + 4 <= bytes.count else { throw error("truncated \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[position]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw error("invalid \\u escape")
            }
            value = value << 4 | UInt32(digit)
            position += 1
        }
        return value
    }

    private func validated(_ utf8: some Collection<UInt8>) throws(SyntaxError) -> String {
        guard let string = String(validating: utf8, as: UTF8.self) else { throw error("invalid UTF-8 in a string") }
        return string
    }

    private mutating func parseNumber() throws(SyntaxError) -> JSONValue {
        let start = position
        var isInteger = true
        if current == UInt8(ascii: "-") { position += 1 }
        guard let first = current, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first) else { throw error("invalid number") }
        position += 1
        if first != UInt8(ascii: "0") { skipDigits() }
        if current == UInt8(ascii: ".") {
            isInteger = false
            position += 1
            guard skipDigits() > 0 else { throw error("invalid number") }
        }
        if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
            isInteger = false
            position += 1
            if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { position += 1 }
            guard skipDigits() > 0 else { throw error("invalid number") }
        }
        let text = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<position]), as: UTF8.self)
        if isInteger, let integer = Int64(text) { return .integer(integer) }
        guard let double = Double(text), double.isFinite else { throw error("number out of range") }
        return .double(double)
    }

    /// Whether the first byte after the comma at `position` (and whitespace) is `closing`.
    private func nextIsClosing(_ closing: UInt8) -> Bool {
        var probe = self
        probe.position += 1
        probe.skipWhitespace()
        return probe.current == closing
    }

    @discardableResult
    private mutating func skipDigits() -> Int {
        let start = position
        while let byte = current, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) { position += 1 }
        return position - start
    }
}

// MARK: Large documents on two cores

extension JSONParser {
    /// Documents from this size on are split (an encrypted cache of 1,000 accounts is 14 MiB;
    /// below about a megabyte, a second thread costs more than it saves).
    package static let splitSize = 1 << 20

    /// Parses an object on two cores: this thread from the start up to `split`, another from
    /// `split` (taken to be where a member of the root object starts) to the end. The guess is
    /// checked, not trusted: the result is the second part's only when the first part's parse
    /// reaches a member of the root object exactly at `split`, and the second part then parsed
    /// exactly what one parser would have from there (same depth, same section, same bytes).
    /// Otherwise the first parser goes on to the end alone, and the other's work is dropped.
    /// Either way the value, or the first error, is the one `parse` without a split returns.
    package static func parseSplit(_ bytes: UnsafeRawBufferPointer, at split: Int, maximumDepth: Int,
                                   omitting omission: Omission?, allowingTrailingCommas: Bool) throws(SyntaxError) -> JSONValue {
        // Dispatch takes a Sendable closure; the buffer outlives the call and is only read.
        nonisolated(unsafe) let bytes = bytes
        let parts = Locked<[(Result<JSONValue, SyntaxError>, stopped: Bool)?]>([nil, nil])
        DispatchQueue.concurrentPerform(iterations: 2) { part in
            var parser = JSONParser(bytes: bytes, maximumDepth: maximumDepth, omission: omission)
            parser.allowsTrailingCommas = allowingTrailingCommas
            let result = Result { () throws(SyntaxError) -> JSONValue in
                if part == 1 {
                    // Inside the root object, at a member's key: where the first parser would be.
                    parser.position = split
                    parser.depth = 1
                    let rest = try parser.parseMembers()
                    try parser.expectEnd()
                    return .object(rest)
                }
                parser.stop = split
                parser.skipWhitespace()
                let value = try parser.parseValue()
                if !parser.stopped { try parser.expectEnd() }
                return value
            }
            parts.withLock { $0[part] = (result, parser.stopped) }
        }
        let (head, tail) = parts.withLock { ($0[0]!, $0[1]!) }
        let first = try head.0.get()
        guard head.stopped else { return first }
        guard case .object(var object) = first, case .object(let rest) = try tail.0.get() else {
            preconditionFailure("a split parse stops only inside the root object")
        }
        object.merge(rest) { _, later in later }  // a repeated key keeps its last value
        return .object(object)
    }

    /// A guess at where a member of the root object starts, near the middle of a document with
    /// objects two levels down (a cache: sections of entries): the key after `}}` and a comma
    /// (the end of an entry and of its section; whitespace allowed between them), nearest the
    /// middle within its middle half. Nil when none is found there.
    package static func rootMemberStart(in bytes: UnsafeRawBufferPointer) -> Int? {
        guard let base = bytes.baseAddress, bytes.count >= 8 else { return nil }
        let middle = bytes.count / 2, lower = bytes.count / 4, upper = bytes.count - bytes.count / 4
        func isWhitespace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 }
        /// The key's opening quote when the brace at `brace` is the second of such a `}}`.
        func keyAfter(brace: Int) -> Int? {
            var before = brace - 1
            while before > 0 && isWhitespace(bytes[before]) { before -= 1 }
            guard before > 0, bytes[before] == UInt8(ascii: "}") else { return nil }
            var after = brace + 1
            while after < bytes.count && isWhitespace(bytes[after]) { after += 1 }
            guard after < bytes.count, bytes[after] == UInt8(ascii: ",") else { return nil }
            after += 1
            while after < bytes.count && isWhitespace(bytes[after]) { after += 1 }
            return after < bytes.count && bytes[after] == UInt8(ascii: "\"") ? after : nil
        }
        var backward: Int?
        var brace = middle
        while let found = lastBrace(in: bytes, before: brace, notBelow: lower) {
            if let key = keyAfter(brace: found) { backward = key; break }
            brace = found
        }
        var start = middle  // memchr looks from this
        let limit = backward.map { min(upper, middle + (middle - $0)) } ?? upper
        while start < limit, let found = memchr(base + start, Int32(UInt8(ascii: "}")), limit - start) {
            let brace = base.distance(to: UnsafeRawPointer(found))
            if let key = keyAfter(brace: brace) { return key }
            start = brace + 1
        }
        return backward
    }

    /// The last `}` below `end` and not below `lower`, sixteen bytes at a time (glibc's memrchr
    /// is not in Swift's Glibc module).
    private static func lastBrace(in bytes: UnsafeRawBufferPointer, before end: Int, notBelow lower: Int) -> Int? {
        typealias Block = SIMD16<UInt8>
        let brace = Block(repeating: UInt8(ascii: "}"))
        var index = end
        while index - Block.scalarCount >= lower {
            if any(bytes.loadUnaligned(fromByteOffset: index - Block.scalarCount, as: Block.self) .== brace) { break }
            index -= Block.scalarCount
        }
        while index > lower {
            index -= 1
            if bytes[index] == UInt8(ascii: "}") { return index }
        }
        return nil
    }

    /// Whitespace, then the end of the document.
    private mutating func expectEnd() throws(SyntaxError) {
        skipWhitespace()
        guard position == bytes.count else { throw error("unexpected content after the document") }
    }
}
