import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Terminal-aware output: colour only on a terminal and only without NO_COLOR.
enum Terminal {
    static var stdoutIsTerminal: Bool { isatty(STDOUT_FILENO) == 1 }
    static var stdinIsTerminal: Bool { isatty(STDIN_FILENO) == 1 }
    static var stderrIsTerminal: Bool { isatty(STDERR_FILENO) == 1 }

    static var usesColor: Bool {
        stdoutIsTerminal && ProcessInfo.processInfo.environment["NO_COLOR"].map(\.isEmpty) ?? true
            && ProcessInfo.processInfo.environment["TERM"] != "dumb"
    }

    static func bold(_ text: String) -> String { usesColor ? "\u{1B}[1m\(text)\u{1B}[0m" : text }
    static func dim(_ text: String) -> String { usesColor ? "\u{1B}[2m\(text)\u{1B}[0m" : text }
    static func red(_ text: String) -> String { usesColor ? "\u{1B}[31m\(text)\u{1B}[0m" : text }
    static func green(_ text: String) -> String { usesColor ? "\u{1B}[32m\(text)\u{1B}[0m" : text }

    static func error(_ message: String, hint: String?) {
        var text = "error: \(message)\n"
        if let hint { text += "hint: \(hint)\n" }
        FileHandle.standardError.write(Data(text.utf8))
    }

    static func warning(_ message: String) {
        FileHandle.standardError.write(Data("warning: \(message)\n".utf8))
    }

    /// Asks a yes/no question on the terminal; false on anything but y/yes.
    static func confirm(_ question: String) -> Bool {
        FileHandle.standardError.write(Data("\(question) [y/N] ".utf8))
        guard let answer = readLine() else { return false }
        return ["y", "yes"].contains(answer.trimmingCharacters(in: .whitespaces).lowercased())
    }

    /// Prints rows as a table with aligned columns.
    static func table(_ header: [String], _ rows: [[String]], indent: String = "  ") -> String {
        let widths = ([header] + rows).reduce(into: [Int](repeating: 0, count: header.count)) { widths, row in
            for (i, cell) in row.enumerated() where i < widths.count { widths[i] = max(widths[i], cell.count) }
        }
        func line(_ row: [String]) -> String {
            indent + row.enumerated().map { i, cell in
                i == row.count - 1 ? cell : cell.padding(toLength: widths[i], withPad: " ", startingAt: 0)
            }.joined(separator: "  ")
        }
        return ([dim(line(header))] + rows.map(line)).joined(separator: "\n")
    }

    /// "in 42 min", "in 3 h", "expired 5 min ago".
    static func relative(_ date: Date, now: Date = Date()) -> String {
        let seconds = Int(date.timeIntervalSince(now))
        func span(_ s: Int) -> String {
            s < 120 ? "\(s) s" : s < 7200 ? "\(s / 60) min" : s < 172_800 ? "\(s / 3600) h" : "\(s / 86400) days"
        }
        return seconds > 0 ? "in \(span(seconds))" : "expired \(span(-seconds)) ago"
    }

    static func localTime(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.dateFormat = "yyyy-MM-dd HH:mm"
        formatter.timeZone = .current
        return formatter.string(from: date)
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

    /// Prints a JSON document and a newline.
    static func print(_ json: Data) {
        FileHandle.standardOutput.write(json + Data("\n".utf8))
    }
}
