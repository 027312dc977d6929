import Foundation
import Testing
@testable import TokenCacheCore
import TokenCacheTestSupport

/// The hand-written JSON parser against JSONDecoder (the parser it replaced) and RFC 8259.
@Suite("JSON parser", .harness)
struct JSONParserTests {
    /// JSONDecoder's reading of a document, as the library did before: the reference.
    static func reference(_ data: Data) -> JSONValue? {
        try? JSONDecoder().decode(JSONValue.self, from: data)
    }

    static func parsed(_ data: Data) -> JSONValue? {
        try? data.withUnsafeBytes { bytes throws(JSONParser.SyntaxError) in try JSONParser.parse(bytes, maximumDepth: 64) }
    }

    /// Numbers compare by value: JSONDecoder reads 1.0 as an integer, the parser as a double.
    static func same(_ a: JSONValue?, _ b: JSONValue?) -> Bool {
        switch (a, b) {
        case (nil, nil): return true
        case (.integer(let x)?, .double(let y)?), (.double(let y)?, .integer(let x)?): return Double(x) == y
        case (.array(let x)?, .array(let y)?): return x.count == y.count && zip(x, y).allSatisfy { same($0, $1) }
        case (.object(let x)?, .object(let y)?): return x.keys == y.keys && x.allSatisfy { same($0.value, y[$0.key]) }
        default: return a == b
        }
    }

    static var corpus: [URL] {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Fuzz/Corpus").standardizedFileURL
        let folders = (try? FileManager.default.contentsOfDirectory(at: root, includingPropertiesForKeys: nil)) ?? []
        return folders.flatMap { (try? FileManager.default.contentsOfDirectory(at: $0, includingPropertiesForKeys: nil)) ?? [] }
    }

    @Test("Every fuzz seed and a cache exported by the store parse exactly as JSONDecoder reads them")
    func agreesWithJSONDecoder() throws {
        var documents = try Self.corpus.map { try Data(contentsOf: $0) }
        #expect(documents.count >= 10, "the fuzz corpus was found")
        let store = AccountStore(backend: InMemoryBackend(), group: .universalStorage)
        try store.save(Fixtures.tokenResponse(Fixtures.response(for: Fixtures.alice, tag: "json")), clientID: Fixtures.appOne,
                       authority: Fixtures.authority(), scopes: [], now: Fixtures.now)
        documents.append(try store.exportMSALJSON())
        for document in documents {
            #expect(Self.same(Self.parsed(document), Self.reference(document)), "\(String(decoding: document.prefix(200), as: UTF8.self))")
        }
    }

    @Test("Valid documents give the values RFC 8259 defines", arguments: [
        (#"{"a":"x","b":[1,-2,3.5,1e3,true,false,null],"c":{}}"#,
         JSONValue.object(["a": "x", "b": .array([.integer(1), .integer(-2), .double(3.5), .double(1000), .bool(true), .bool(false), .null]), "c": .object([:])])),
        (#"  {"e":"\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00"}  "#, .object(["e": "\"\\/\u{08}\u{0C}\n\r\t\u{E9}\u{1F600}"])),
        (#"{"big":9223372036854775807,"bigger":9223372036854775808,"neg":-9223372036854775808}"#,
         .object(["big": .integer(.max), "bigger": .double(9223372036854775808), "neg": .integer(.min)])),
        (#"{"k":1,"k":2}"#, .object(["k": .integer(2)])),
        (#"{"é":"日本"}"#, .object(["é": "日本"])),
    ])
    func valid(text: String, expected: JSONValue) throws {
        #expect(Self.parsed(Data(text.utf8)) == expected)
    }

    @Test("Invalid documents are refused, as JSONDecoder refuses them", arguments: [
        "", " ", "{", "}", #"{"a" 1}"#, #"{a:1}"#, "01", "-", "1.", ".5", "1e", "+1", "NaN", "tru",
        #"{"a":1} x"#, "\"\u{01}\"", #""\x""#, #""\u12""#, #""\ud800""#, #""\udc00x""#, #""\ud800\u0041""#, "1e400", "\"abc",
    ])
    func invalid(text: String) throws {
        #expect(Self.parsed(Data(text.utf8)) == nil, "\(text)")
        #expect(Self.reference(Data(text.utf8)) == nil, "JSONDecoder accepts \(text)")
    }

    @Test("Trailing commas are refused, as RFC 8259 and MSAL Python's json module refuse them (JSONDecoder accepts them)",
          arguments: ["[1,]", #"{"a":1,}"#])
    func trailingComma(text: String) throws {
        #expect(Self.parsed(Data(text.utf8)) == nil)
    }

    @Test("Invalid UTF-8 in a string is refused, and nesting deeper than the limit is refused without recursion trouble")
    func invalidBytesAndDepth() throws {
        #expect(Self.parsed(Data([0x22, 0xC3, 0x28, 0x22])) == nil)
        #expect(Self.parsed(Data([0x22, 0xED, 0xA0, 0x80, 0x22])) == nil, "an encoded surrogate is not UTF-8")
        #expect(Self.parsed(Data((String(repeating: "[", count: 64) + String(repeating: "]", count: 64)).utf8)) != nil)
        #expect(Self.parsed(Data((String(repeating: "[", count: 65) + String(repeating: "]", count: 65)).utf8)) == nil)
        #expect(Self.parsed(Data(String(repeating: "[", count: 1_000_000).utf8)) == nil)
    }

    @Test("A quote, escape, control character or non-ASCII byte is seen at every offset of a long string, where the parser scans sixteen bytes at a time")
    func specialBytesAtEveryOffset() throws {
        let cases: [(insert: [UInt8], valid: Bool)] = [
            (Array(#"\""#.utf8), true), (Array(#"\\"#.utf8), true), (Array(#"\u00e9"#.utf8), true), (Array("é".utf8), true),
            (Array("日本".utf8), true), ([0x01], false), ([0x1F], false), ([0x0A], false), ([0xC3, 0x28], false), ([0xFF], false),
        ]
        for length in 0..<40 {
            for offset in 0...length {
                for (insert, valid) in cases {
                    var text = Array(repeating: UInt8(ascii: "a"), count: length)
                    text.insert(contentsOf: insert, at: offset)
                    let document = Data([UInt8(ascii: "["), UInt8(ascii: "\"")] + text + [UInt8(ascii: "\""), UInt8(ascii: "]")])
                    let parsed = Self.parsed(document)
                    #expect((parsed != nil) == valid, "\(insert) at \(offset) of \(length)")
                    if valid { #expect(parsed == Self.reference(document), "\(insert) at \(offset) of \(length)") }
                }
            }
        }
        // A string that never ends is refused wherever the input stops.
        for length in 0..<20 { #expect(Self.parsed(Data("[\"".utf8) + Data(repeating: UInt8(ascii: "a"), count: length)) == nil) }
    }

    @Test("The same in long strings, token-sized and longer: a special byte anywhere, with or without the member left out")
    func specialBytesInLongStrings() throws {
        let cases: [(insert: [UInt8], valid: Bool)] = [
            (Array(#"\""#.utf8), true), (Array(#"\\"#.utf8), true), (Array(#"\u00e9"#.utf8), true), (Array("é".utf8), true),
            ([0x01], false), ([0x1F], false), ([0xC3, 0x28], false), ([0xFF], false),
        ]
        for length in [64, 70, 511, 512, 513, 1_100] {
            let offsets = Set([0, 1, 7, 8, 9, 56, 63, 64, 65, 255, 504, 505, 510, 511, 512, 513, 520, 1_024, length - 1, length]).filter { $0 <= length }
            for offset in offsets.sorted() {
                for (insert, valid) in cases {
                    var text = Array(repeating: UInt8(ascii: "t"), count: length)
                    text.insert(contentsOf: insert, at: offset)
                    // A second, long string after it, so the first is never near the end of the input.
                    let document = Data(#"{"AccessToken":{"k":{"secret":""#.utf8) + Data(text) + Data(#"","target":""#.utf8)
                        + Data(repeating: UInt8(ascii: "x"), count: 600) + Data(#""}}}"#.utf8)
                    let parsed = Self.parsed(document)
                    #expect((parsed != nil) == valid, "\(insert) at \(offset) of \(length)")
                    if valid { #expect(parsed == Self.reference(document), "\(insert) at \(offset) of \(length)") }
                    #expect((Self.parsedOmittingTokenSecrets(document) != nil) == valid, "omitted: \(insert) at \(offset) of \(length)")
                }
            }
        }
        // Many escapes in one long string (each ends a run of plain bytes).
        let escaped = String(repeating: #"a\"b\\c\u00e9"#, count: 400)
        let document = Data(("[\"" + escaped + "\"]").utf8)
        #expect(Self.parsed(document) == Self.reference(document) && Self.parsed(document) != nil)
    }

    /// A parse's value, or its error's offset and reason.
    struct Outcome: Equatable {
        var value: JSONValue?
        var error: String?
    }

    static func outcome(_ parse: () throws(JSONParser.SyntaxError) -> JSONValue) -> Outcome {
        do throws(JSONParser.SyntaxError) { return Outcome(value: try parse()) } catch { return Outcome(error: "at \(error.offset): \(error.reason)") }
    }

    @Test("A document split between two parsers at any offset, a member of the root object or not, parses as one parser reads it: the same value or the same error at the same offset")
    func splitAtEveryOffset() throws {
        let documents = [
            #"{"AccessToken":{"a":{"secret":"s1","target":"User.Read"},"b":{"secret":"s2"}},"Account":{"x":{"username":"u"}},"IdToken":{"i":{"secret":"j.w.t"}}}"#,
            // A member of an entry that ends like a section ("}}," then a key) is not one.
            #"{"AccessToken":{"a":{"x":{"y":{}},"z":"w"}},"Account":{"x":{"n":{"m":1}},"y":{}},"AppMetadata":{}}"#,
            // A key twice at the root: the later value wins, wherever the split falls.
            #"{"Account":{"x":{"u":"1"}},"IdToken":{"i":{"s":"2"}},"Account":{"y":{"u":"3"}}}"#,
            // Whitespace between the tokens, as other writers indent.
            "{ \"A\" : { \"k\" : { \"v\" : 1 } } ,\n  \"B\" : { \"k\" : { \"v\" : [1, 2] } } }  ",
            // Refused after a section boundary, before one, and after the root object.
            #"{"Account":{"x":{"u":"1"}},"IdToken":{"i":{"s":"2",}}}"#,
            #"{"Account":{"x":{"u":01}},"IdToken":{"i":{"s":"2"}}}"#,
            #"{"Account":{"x":{"u":"1"}},"IdToken":{"i":{"s":"2"}}} x"#,
            #"{"Account":{"x":{"u":"1"}},"IdToken":{"i":{"s":"2"}}"#,
            #"[{"Account":{"x":{"u":"1"}}},{"IdToken":{"i":{"s":"2"}}}]"#,
        ]
        for text in documents {
            for omission in [nil, JSONParser.Omission.listing] {
                try Data(text.utf8).withUnsafeBytes { bytes in
                    let whole = Self.outcome { () throws(JSONParser.SyntaxError) in
                        try JSONParser.parse(bytes, maximumDepth: 64, omitting: omission, splittingFrom: .max)
                    }
                    for split in 0...bytes.count {
                        let parts = Self.outcome { () throws(JSONParser.SyntaxError) in
                            try JSONParser.parseSplit(bytes, at: split, maximumDepth: 64, omitting: omission, allowingTrailingCommas: false)
                        }
                        #expect(parts == whole, "\(text) split at \(split)")
                    }
                }
            }
        }
    }

    @Test("A large cache is split where a section starts nearest its middle, and reads as one parser reads it; a document without such a place is not split")
    func largeDocumentSplit() throws {
        var sections: [String] = []
        for (name, count) in [("AccessToken", 300), ("Account", 100), ("IdToken", 300), ("RefreshToken", 300)] {
            let entries = (0..<count).map { #""\#(name)-\#($0)":{"secret":"\#(String(repeating: "t", count: 500))","n":\#($0)}"# }
            sections.append(#""\#(name)":{"# + entries.joined(separator: ",") + "}")
        }
        let document = Data(("{" + sections.joined(separator: ",") + "}").utf8)
        try document.withUnsafeBytes { bytes in
            let split = try #require(JSONParser.rootMemberStart(in: bytes))
            let text = String(decoding: bytes[split...].prefix(12), as: UTF8.self)
            #expect(text == #""IdToken":{""#, "the section start nearest the middle: \(text)")
            let one = try JSONParser.parse(bytes, maximumDepth: 64, splittingFrom: .max)
            let two = try JSONParser.parse(bytes, maximumDepth: 64, splittingFrom: 1)
            #expect(one == two)
            guard case .object(let root) = two, case .object(let tokens)? = root["RefreshToken"] else { Issue.record("no sections"); return }
            #expect(root.count == 4 && tokens.count == 300)
        }
        Data(#"[{"a":{"b":1}},{"c":2}]"#.utf8).withUnsafeBytes { #expect(JSONParser.rootMemberStart(in: $0) == nil) }
    }

    static func parsedOmittingTokenSecrets(_ data: Data) -> JSONValue? {
        try? data.withUnsafeBytes { bytes throws(JSONParser.SyntaxError) in
            try JSONParser.parse(bytes, maximumDepth: 64, omitting: .listing)
        }
    }

    /// `value` with the member `name` removed from the objects at `path` (keys from the root).
    static func removing(_ name: String, at paths: [[String]], from value: JSONValue) -> JSONValue {
        func remove(_ value: JSONValue, _ path: ArraySlice<String>) -> JSONValue {
            guard case .object(var object) = value else { return value }
            guard let first = path.first else { object[name] = nil; return .object(object) }
            if let child = object[first] { object[first] = remove(child, path.dropFirst()) }
            return .object(object)
        }
        return paths.reduce(value) { remove($0, $1[...]) }
    }

    @Test("A listing's omission leaves out token secrets and the token members a listing does not read; the rest parses as without it")
    func omittingTokenSecrets() throws {
        let document = Data(#"""
        {"AccessToken": {"a": {"secret": "at", "target": "User.Read", "cached_at": "1"}, "b": {"secret": {"odd": ["shape"]}, "n": 1, "realm": "t"}},
         "RefreshToken": {"r": {"secret": "r\u00e9fresh", "client_id": "c", "credential_type": "RefreshToken"}},
         "IdToken": {"i": {"secret": "id.token.jwt", "realm": "t", "credential_type": "IdToken"}},
         "AccountPhoto": {"p": {"data": "AAAA", "content_type": "image/png"}},
         "Account": {"x": {"secret": "not a token", "username": "u", "extra": true}},
         "secret": "at the root", "Other": [{"secret": "kept"}]}
        """#.utf8)
        let full = try #require(Self.parsed(document))
        let omitted = try #require(Self.parsedOmittingTokenSecrets(document))
        let expected = [("secret", ["AccessToken", "a"]), ("cached_at", ["AccessToken", "a"]), ("secret", ["AccessToken", "b"]),
                        ("n", ["AccessToken", "b"]), ("secret", ["RefreshToken", "r"]), ("credential_type", ["RefreshToken", "r"]),
                        ("credential_type", ["IdToken", "i"]), ("data", ["AccountPhoto", "p"])]
            .reduce(full) { Self.removing($1.0, at: [$1.1], from: $0) }
        #expect(omitted == expected)
        guard case .object(let root) = omitted, case .object(let ids)? = root["IdToken"], case .object(let fields)? = ids["i"] else {
            Issue.record("the ID token is missing")
            return
        }
        #expect(fields["secret"] == "id.token.jwt", "ID tokens keep their secrets")
    }

    @Test("An omitted secret is still checked: a document is refused with the omission exactly when it is refused without")
    func omittedSecretsAreChecked() throws {
        let inserts: [[UInt8]] = [Array(#"\""#.utf8), Array(#"\u00e9"#.utf8), Array("é".utf8), [0x01], [0x0A], [0xC3, 0x28], [0xFF],
                                  Array(#"\x"#.utf8), Array(#"\ud800"#.utf8)]
        for length in 0..<24 {
            for offset in 0...length {
                for insert in inserts {
                    var secret = Array(repeating: UInt8(ascii: "t"), count: length)
                    secret.insert(contentsOf: insert, at: offset)
                    let document = Data(#"{"AccessToken":{"k":{"secret":""#.utf8) + Data(secret) + Data(#"","n":1}}}"#.utf8)
                    #expect((Self.parsedOmittingTokenSecrets(document) == nil) == (Self.parsed(document) == nil),
                            "\(insert) at \(offset) of \(length)")
                }
            }
        }
        for text in [#"{"AccessToken":{"k":{"secret":"#, #"{"AccessToken":{"k":{"secret":"abc"#, #"{"AccessToken":{"k":{"secret":tru}}}"#,
                     #"{"AccessToken":{"k":{"secret":[1,]}}}"#] {
            #expect(Self.parsedOmittingTokenSecrets(Data(text.utf8)) == nil, "\(text)")
        }
    }

    @Test("An ID token's claims come from the second of 3 or 5 dot-separated parts; other shapes are refused")
    func idTokenClaims() throws {
        let payload = Data(#"{"name":"Ada","tid":"t1"}"#.utf8).base64EncodedString()
            .replacingOccurrences(of: "=", with: "").replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        #expect(try IDTokenClaims(jwt: "h.\(payload).s").name == "Ada")
        #expect(try IDTokenClaims(jwt: "h.\(payload).s.x.y").tenantID == "t1")
        #expect(try IDTokenClaims(jwt: ".\(payload).").name == "Ada", "empty header and signature parts still count")
        for bad in ["", "abc", "h.\(payload)", "h.\(payload).s.x", "h.\(payload).s.x.y.z", "h.!!.s", "h.\(Data("[1]".utf8).base64EncodedString()).s"] {
            #expect(throws: TokenCacheError.self, "\(bad)") { try IDTokenClaims(jwt: bad) }
        }
    }

    @Test("The tenant of a home account ID is its second part when there are exactly two (empty parts skipped, as before)",
          arguments: [("uid.utid", "utid" as String?), ("uid", nil), ("a.b.c", nil), ("a..b", "b"), (".a.b", "b"), ("é.tenant", "tenant"),
                      ("a.\u{301}b", nil)])
    func homeTenant(home: String, tenant: String?) {
        #expect(AccountStore.tenant(ofHomeAccountID: home) == tenant)
    }

    @Test("base64url decodes unpadded and padded input and the standard alphabet, and refuses anything else")
    func base64URL() throws {
        let bytes = Data([0xFB, 0xFF, 0xBF, 0x00, 0x61])
        #expect(Base64URL.encode(bytes) == "-_-_AGE")
        #expect(Base64URL.decode("-_-_AGE") == bytes)
        #expect(Base64URL.decode("-_-_AGE=") == bytes)
        #expect(Base64URL.decode("+/+/AGE") == bytes)
        #expect(Base64URL.decode("") == Data())
        for bad in ["-_-_A", "-_=-_AGE", "-_ -_AGE", "-_-_AGé", "-_-_AG!"] { #expect(Base64URL.decode(bad) == nil, "\(bad)") }
    }

    @Test("Timestamps read as seconds from digit strings (the fast path), padded or fractional strings, and numbers; past 10^13 s held there",
          arguments: [
              (JSONValue.string("1700000000"), 1_700_000_000.0 as Double?), (.string("0"), 0), (.string(" 1700000000 "), 1_700_000_000),
              (.string("1700000000.5"), 1_700_000_000.5), (.string("123456789012345678901"), 1e13), (.string("-9223372036854775809"), -1e13), (.string("1e400"), nil),
              (.integer(42), 42), (.double(1.5), 1.5), (.string(""), nil), (.string("soon"), nil), (.string("-"), nil), (.null, nil),
          ])
    func secondsValue(value: JSONValue, expected: Double?) {
        #expect(value.secondsValue == expected)
    }
}
