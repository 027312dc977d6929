import ArgumentParser
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// Text for the terminal: literals as written, every interpolated value with its control
/// characters made visible (``Terminal/escape(_:)``). Cache contents and server answers are
/// untrusted: interpolated raw, an ESC or C1 byte in a username could rewrite the screen or
/// the terminal's title. Colour comes only from ``Terminal``'s functions, which escape first.
struct TerminalText: ExpressibleByStringInterpolation, CustomStringConvertible, Sendable {
    /// The text as it goes to the terminal.
    fileprivate(set) var rendered: String
    var description: String { rendered }

    init(stringLiteral literal: String) { rendered = literal }
    init(stringInterpolation: StringInterpolation) { rendered = stringInterpolation.rendered }
    /// Untrusted text, escaped.
    init(_ text: String) { rendered = Terminal.escape(text) }
    fileprivate init(trusted: String) { rendered = trusted }

    struct StringInterpolation: StringInterpolationProtocol {
        fileprivate var rendered = ""
        init(literalCapacity: Int, interpolationCount: Int) { rendered.reserveCapacity(literalCapacity + 16 * interpolationCount) }
        mutating func appendLiteral(_ literal: String) { rendered += literal }
        /// Already terminal text (escaped, perhaps coloured): as it is.
        mutating func appendInterpolation(_ text: TerminalText) { rendered += text.rendered }
        /// Anything else: escaped.
        mutating func appendInterpolation(_ value: some CustomStringConvertible) { rendered += Terminal.escape(value.description) }
    }
}

/// Terminal-aware output: colour only on a terminal and only without NO_COLOR.
enum Terminal {
    static var stdoutIsTerminal: Bool { isatty(STDOUT_FILENO) == 1 }
    static var stdinIsTerminal: Bool { isatty(STDIN_FILENO) == 1 }
    static var stderrIsTerminal: Bool { isatty(STDERR_FILENO) == 1 }

    static var usesColor: Bool {
        stdoutIsTerminal && ProcessInfo.processInfo.environment["NO_COLOR"].map(\.isEmpty) ?? true
            && ProcessInfo.processInfo.environment["TERM"] != "dumb"
    }

    static func bold(_ text: String) -> TerminalText { styled(1, TerminalText(text)) }
    static func dim(_ text: String) -> TerminalText { styled(2, TerminalText(text)) }
    static func red(_ text: String) -> TerminalText { styled(31, TerminalText(text)) }
    static func green(_ text: String) -> TerminalText { styled(32, TerminalText(text)) }
    static func dim(_ text: TerminalText) -> TerminalText { styled(2, text) }

    /// SGR around text already escaped: the only escape sequences the CLI writes itself.
    private static func styled(_ code: Int, _ text: TerminalText) -> TerminalText {
        usesColor ? TerminalText(trusted: "\u{1B}[\(code)m\(text.rendered)\u{1B}[0m") : text
    }

    /// Whether a character could act on the terminal rather than print: C0 controls (newline
    /// and tab too, inside one field), DEL, C1 controls (0x9B is CSI on many terminals) and
    /// the bidirectional overrides and isolates (text that displays in another order).
    static func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0..<0x20, 0x7F...0x9F, 0x202A...0x202E, 0x2066...0x2069: true
        default: false
        }
    }

    /// `text` with each character of ``needsEscape(_:)`` written as `\u{1B}`.
    static func escape(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: needsEscape) else { return text }
        var escaped = ""
        escaped.reserveCapacity(text.utf8.count + 16)
        for scalar in text.unicodeScalars {
            if needsEscape(scalar) {
                escaped += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
            } else {
                escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped
    }

    /// Prints a line on standard output.
    static func print(_ line: TerminalText) {
        StandardIO.write(Data((line.rendered + "\n").utf8), to: STDOUT_FILENO)
    }

    /// "error: ..." and "hint: ..." on stderr, each escaped whole: messages quote cache
    /// contents and server answers.
    static func error(_ message: String, hint: String?) {
        var text = "error: \(escape(message))\n"
        if let hint { text += "hint: \(escape(hint))\n" }
        StandardIO.write(Data(text.utf8), to: STDERR_FILENO)
    }

    /// A line for people on stderr (stdout may be JSON).
    static func note(_ message: String) {
        StandardIO.write(Data("\(message)\n".utf8), to: STDERR_FILENO)
    }

    static func warning(_ message: String) {
        StandardIO.write(Data("warning: \(escape(message))\n".utf8), to: STDERR_FILENO)
    }

    /// Asks a yes/no question on the terminal; false on anything but y/yes.
    static func confirm(_ question: TerminalText) -> Bool {
        StandardIO.write(Data("\(question.rendered) [y/N] ".utf8), to: STDERR_FILENO)
        guard let answer = readLine() else { return false }
        return ["y", "yes"].contains(answer.filter { $0 != " " && $0 != "\t" }.lowercased())
    }

    /// Asks before a destructive step (`plan`: "remove …") unless `yes`. Where no question can
    /// be asked (standard input or output is not a terminal) it refuses with exit 64 naming
    /// --yes. A "no" is the user's own answer, not an error: `unchanged` ("Nothing removed") is
    /// said on stdout and the exit is 1 (not done), with no `error:` and no advice to override it.
    static func confirmOrRefuse(_ plan: String, yes: Bool, unchanged: String) throws {
        guard !yes else { return }
        guard stdinIsTerminal && stdoutIsTerminal else {
            throw CLIError.usage("\(unchanged): no question can be asked here (standard input or output is not a terminal).",
                                 hint: "Pass --yes to \(plan)")
        }
        guard confirm(TerminalText("About to \(plan). Continue?")) else {
            print(TerminalText("\(unchanged)."))
            throw ExitCode(1)
        }
    }

    /// Rows as a table with aligned columns (widths counted without colour codes).
    static func table(_ header: [String], _ rows: [[TerminalText]], indent: String = "  ") -> TerminalText {
        let cells = [header.map { TerminalText($0) }] + rows
        let widths = cells.reduce(into: [Int](repeating: 0, count: header.count)) { widths, row in
            for (i, cell) in row.enumerated() where i < widths.count { widths[i] = max(widths[i], visibleWidth(cell)) }
        }
        func line(_ row: [TerminalText]) -> TerminalText {
            TerminalText(trusted: indent + row.enumerated().map { i, cell in
                i == row.count - 1 ? cell.rendered : cell.rendered + String(repeating: " ", count: max(0, widths[i] - visibleWidth(cell)))
            }.joined(separator: "  "))
        }
        return TerminalText(trusted: ([dim(line(cells[0]))] + rows.map(line)).map(\.rendered).joined(separator: "\n"))
    }

    /// Characters shown: escaped text holds no ESC but the CLI's own SGR sequences, left out here.
    private static func visibleWidth(_ text: TerminalText) -> Int {
        var count = 0, inSequence = false
        for character in text.rendered {
            if character == "\u{1B}" { inSequence = true } else if inSequence { if character == "m" { inSequence = false } } else { count += 1 }
        }
        return count
    }

    /// "in 42 min", "in 3 h", "expired 5 min ago".
    static func relative(_ date: Date, now: Date = Date()) -> String {
        // Held within a million years either way: converting a larger interval to Int would trap.
        let seconds = Int(min(max(date.timeIntervalSince(now), -3e13), 3e13))
        func span(_ s: Int) -> String {
            s < 120 ? "\(s) s" : s < 7200 ? "\(s / 60) min" : s < 172_800 ? "\(s / 3600) h" : "\(s / 86400) days"
        }
        return seconds > 0 ? "in \(span(seconds))" : "expired \(span(-seconds)) ago"
    }

    /// "2026-11-24 09:30" in the local time zone (TZ, else /etc/localtime).
    static func localTime(_ date: Date) -> String {
        var seconds = time_t(min(max(date.timeIntervalSince1970.rounded(.down), -3e13), 3e13))
        var parts = tm()
        guard localtime_r(&seconds, &parts) != nil else { return date.formatted(.iso8601) }
        func twoDigits(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(parts.tm_year + 1900)-\(twoDigits(parts.tm_mon + 1))-\(twoDigits(parts.tm_mday)) "
            + "\(twoDigits(parts.tm_hour)):\(twoDigits(parts.tm_min))"
    }
}

enum JSONOutput {
    /// Prints a Codable value as JSON with sorted keys (the stable schema scripts rely on).
    static func print<T: Encodable>(_ value: T) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        encoder.keyEncodingStrategy = .convertToSnakeCase
        print(try encoder.encode(value))
    }

    /// Prints a JSON document and a newline, with DEL, C1 controls and bidirectional overrides
    /// written as `\\u` escapes too (encoders escape only C0): the same JSON, inert on a terminal.
    static func print(_ json: Data) {
        // Two writes rather than a copy of the document with the newline appended (a listing of
        // 1,000 accounts is 1.8 MB).
        guard StandardIO.write(terminalSafe(json), to: STDOUT_FILENO) else { return }
        StandardIO.write(Data("\n".utf8), to: STDOUT_FILENO)
    }

    /// Whether every byte is below 0x7F (ASCII without DEL), looked at sixteen at a time: as
    /// signed bytes, those from 0x80 are negative.
    static func isPlainASCII(_ bytes: UnsafeRawBufferPointer) -> Bool {
        typealias Block = SIMD16<Int8>
        // Vectors, not scalars: a comparison with a scalar compiles to a loop over the lanes.
        let zero = Block(repeating: 0), delete = Block(repeating: 0x7F)
        var index = 0
        while index + Block.scalarCount <= bytes.count {
            let block = bytes.loadUnaligned(fromByteOffset: index, as: Block.self)
            if any((block .< zero) .| (block .== delete)) { return false }
            index += Block.scalarCount
        }
        return bytes[index...].allSatisfy { $0 < 0x7F }
    }

    /// `json` with U+007F-U+009F, U+202A-U+202E and U+2066-U+2069 as `\\uXXXX`. In JSON they can
    /// occur only inside strings, where the escape means the same character.
    static func terminalSafe(_ json: Data) -> Data {
        func risky(_ bytes: UnsafeRawBufferPointer, _ i: Int) -> (scalar: UInt32, length: Int)? {
            let byte = bytes[i]
            if byte == 0x7F { return (0x7F, 1) }
            if byte == 0xC2, i + 1 < bytes.count, (0x80...0x9F).contains(bytes[i + 1]) { return (UInt32(bytes[i + 1]), 2) }
            if byte == 0xE2, i + 2 < bytes.count {
                let scalar = 0x2000 | UInt32(bytes[i + 1] & 0x3F) << 6 | UInt32(bytes[i + 2] & 0x3F)
                if bytes[i + 1] & 0xC0 == 0x80, bytes[i + 2] & 0xC0 == 0x80,
                   (0x202A...0x202E).contains(scalar) || (0x2066...0x2069).contains(scalar) { return (scalar, 3) }
            }
            return nil
        }
        return json.withUnsafeBytes { bytes in
            // Fast path: none of the bytes such a character starts with.
            guard !isPlainASCII(bytes), bytes.contains(where: { $0 == 0x7F || $0 == 0xC2 || $0 == 0xE2 }) else { return json }
            var output = Data(capacity: bytes.count + 64)
            var i = 0
            while i < bytes.count {
                if let (scalar, length) = risky(bytes, i) {
                    let hex = String(scalar, radix: 16)
                    output.append(contentsOf: Array(("\\u" + String(repeating: "0", count: 4 - hex.count) + hex).utf8))
                    i += length
                } else {
                    output.append(bytes[i])
                    i += 1
                }
            }
            return output
        }
    }
}

/// The standard streams and other descriptors, read and written whole (without Foundation's
/// FileHandle: the CLI links FoundationEssentials only).
enum StandardIO {
    /// Writes every byte, retrying short writes and interruptions. Returns false on an error
    /// (for example EPIPE when the reader went away).
    @discardableResult
    static func write(_ data: Data, to descriptor: Int32) -> Bool {
        data.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = Glibc.write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    return false
                }
                offset += written
            }
            return true
        }
    }

    /// Everything readable from `descriptor` until end of file, or nil as soon as it holds more
    /// than `limit` bytes: reading stops there, so an endless or huge input costs at most
    /// `limit` plus one chunk of memory.
    static func readAll(from descriptor: Int32, limit: Int) -> Data? {
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = read(descriptor, &buffer, min(buffer.count, limit + 1 - data.count))
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return data }
            data.append(contentsOf: buffer[0..<count])
            if data.count > limit { return nil }
        }
    }
}
