/// Text from a server, made safe to print: control and format characters (escape sequences,
/// bidirectional overrides) become U+FFFD.
package enum ServerText {
    package static func printable(_ text: String, limit: Int = 1024) -> String {
        var result = String.UnicodeScalarView()
        for scalar in text.unicodeScalars.prefix(limit) {
            switch scalar.properties.generalCategory {
            case .control, .format, .lineSeparator, .paragraphSeparator: result.append("\u{FFFD}")
            default: result.append(scalar)
            }
        }
        return String(result)
    }

    /// An OAuth error code (`access_denied`) for messages: its own characters only.
    package static func errorCode(_ text: String) -> String {
        let kept = text.unicodeScalars.prefix(64).filter { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "_-.".unicodeScalars.contains($0)) }
        return kept.isEmpty ? "unknown" : String(String.UnicodeScalarView(kept))
    }
}
