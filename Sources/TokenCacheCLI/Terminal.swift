import FoundationEssentials
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
        StandardIO.write(Data(text.utf8), to: STDERR_FILENO)
    }

    /// A line for people on stderr (stdout may be JSON).
    static func note(_ message: String) {
        StandardIO.write(Data("\(message)\n".utf8), to: STDERR_FILENO)
    }

    static func warning(_ message: String) {
        StandardIO.write(Data("warning: \(message)\n".utf8), to: STDERR_FILENO)
    }

    /// Asks a yes/no question on the terminal; false on anything but y/yes.
    static func confirm(_ question: String) -> Bool {
        StandardIO.write(Data("\(question) [y/N] ".utf8), to: STDERR_FILENO)
        guard let answer = readLine() else { return false }
        return ["y", "yes"].contains(answer.filter { $0 != " " && $0 != "\t" }.lowercased())
    }

    /// Prints rows as a table with aligned columns.
    static func table(_ header: [String], _ rows: [[String]], indent: String = "  ") -> String {
        let widths = ([header] + rows).reduce(into: [Int](repeating: 0, count: header.count)) { widths, row in
            for (i, cell) in row.enumerated() where i < widths.count { widths[i] = max(widths[i], cell.count) }
        }
        func line(_ row: [String]) -> String {
            indent + row.enumerated().map { i, cell in
                i == row.count - 1 ? cell : cell + String(repeating: " ", count: max(0, widths[i] - cell.count))
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

    /// "2026-11-24 09:30" in the local time zone (TZ, else /etc/localtime).
    static func localTime(_ date: Date) -> String {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
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

    /// Prints a JSON document and a newline.
    static func print(_ json: Data) {
        StandardIO.write(json + Data("\n".utf8), to: STDOUT_FILENO)
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

    /// Everything readable from `descriptor` until end of file.
    static func readAll(from descriptor: Int32) -> Data {
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = read(descriptor, &buffer, buffer.count)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return data }
            data.append(contentsOf: buffer[0..<count])
        }
    }
}
