import FoundationEssentials

package enum Base64URL {
    /// Decodes unpadded (or padded) base64url, as used by JWTs and `client_info`.
    /// Works on the UTF-8 bytes (String and CharacterSet operations were a large part of a
    /// listing). Accepts the standard alphabet too; `=` only as trailing padding.
    package static func decode(_ text: String) -> Data? {
        decode(text.utf8)
    }

    /// Decodes base64url text given as its UTF-8 bytes (a part of a JWT, without copying it out).
    package static func decode(_ text: some Collection<UInt8>) -> Data? {
        var utf8 = Array(text)
        while utf8.last == UInt8(ascii: "=") { utf8.removeLast() }
        for index in utf8.indices {
            switch utf8[index] {
            case UInt8(ascii: "-"): utf8[index] = UInt8(ascii: "+")
            case UInt8(ascii: "_"): utf8[index] = UInt8(ascii: "/")
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "+"), UInt8(ascii: "/"):
                break
            default: return nil
            }
        }
        let remainder = utf8.count % 4
        if remainder == 1 { return nil }
        if remainder > 0 { utf8 += repeatElement(UInt8(ascii: "="), count: 4 - remainder) }
        return Data(base64Encoded: Data(utf8))
    }

    /// Encodes without padding.
    package static func encode(_ data: Data) -> String {
        data.base64EncodedString()
            .replacing("+", with: "-")
            .replacing("/", with: "_")
            .replacing("=", with: "")
    }
}
