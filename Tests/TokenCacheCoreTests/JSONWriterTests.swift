import Foundation
import Testing
@testable import TokenCacheCore
import TokenCacheTestSupport

/// The hand-written JSON writer against JSONEncoder (the writer it replaced) and the parser.
@Suite("JSON writer", .harness)
struct JSONWriterTests {
    /// JSONEncoder's output, as the library wrote before: the reference.
    static func reference(_ value: JSONValue, pretty: Bool) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = pretty ? [.sortedKeys, .withoutEscapingSlashes, .prettyPrinted] : [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    static func written(_ value: JSONValue, pretty: Bool) throws -> String {
        String(decoding: try JSONWriter.write(value, pretty: pretty), as: UTF8.self)
    }

    /// Keys whose UTF-8 order is JSONEncoder's order too (lower case, no digits), so the
    /// outputs must be identical byte for byte.
    static let samples: [JSONValue] = [
        .null, .bool(true), .bool(false), .integer(0), .integer(-42), .integer(.max), .integer(.min),
        .double(3.5), .double(-0.25), .double(1e300), .double(2.5e-8), .double(1700000000.5), .double(1e21),
        .string(""), .string("plain"), .string("quote \" backslash \\ slash / tab \t newline \n cr \r"),
        .string("controls \u{0} \u{1} \u{8} \u{C} \u{1F} del \u{7F}"), .string("é ü 😀 \u{2028}"),
        .array([]), .object([:]), .array([.array([]), .object([:])]),
        .object(["secret": "x.y.z", "expires_on": "1700000000", "target": "user.read openid", "nested": .object(["inner": .array([.integer(1), .null])]),
                 "empty_array": .array([]), "empty_object": .object([:]), "flag": .bool(false)]),
    ]

    @Test("Output is JSONEncoder's (sorted keys, unescaped slashes), compact and pretty")
    func matchesJSONEncoder() throws {
        for sample in Self.samples {
            for pretty in [false, true] {
                #expect(try Self.written(sample, pretty: pretty) == Self.reference(sample, pretty: pretty), "\(sample) pretty: \(pretty)")
            }
        }
    }

    @Test("Every fuzz seed and an exported cache read back to the same value, and writing is stable")
    func roundTrips() throws {
        var documents = try JSONParserTests.corpus.map { try Data(contentsOf: $0) }
        let store = AccountStore(backend: InMemoryBackend(), group: .universalStorage)
        try store.save(Fixtures.tokenResponse(Fixtures.response(for: Fixtures.alice, tag: "json")), clientID: Fixtures.appOne,
                       authority: Fixtures.authority(), scopes: [], now: Fixtures.now)
        documents.append(try store.exportMSALJSON())
        var checked = 0
        for document in documents {
            guard let value = JSONParserTests.parsed(document) else { continue }
            for pretty in [false, true] {
                let bytes = try JSONWriter.write(value, pretty: pretty)
                let reread = try #require(JSONParserTests.parsed(Data(bytes)))
                #expect(reread == value, "\(String(decoding: document.prefix(200), as: UTF8.self))")
                #expect(try JSONWriter.write(reread, pretty: pretty) == bytes, "stable")
                // JSONEncoder agrees on the value (its key order may differ, see JSONWriter).
                #expect(JSONParserTests.same(JSONParserTests.parsed(Data(try Self.reference(value, pretty: pretty).utf8)), reread))
            }
            checked += 1
        }
        #expect(checked >= 10, "the fuzz corpus was found and parsed")
    }

    @Test("Keys are sorted by UTF-8 bytes, so capitals and digits sort as Python's sort_keys sorts them")
    func keyOrder() throws {
        let object = JSONValue.object(["b": .integer(1), "B": .integer(2), "a10": .integer(3), "a9": .integer(4), "_": .integer(5),
                                       "é": .integer(6), "z": .integer(7)])
        #expect(try Self.written(object, pretty: false) == #"{"B":2,"_":5,"a10":3,"a9":4,"b":1,"z":7,"é":6}"#)
    }

    /// Streams a document of strings, booleans, arrays and objects (members in key order).
    static func stream(_ value: JSONValue, into writer: inout JSONWriter) {
        switch value {
        case .string(let text): writer.string(text)
        case .bool(let flag): writer.bool(flag)
        case .array(let elements):
            writer.beginArray()
            for element in elements { stream(element, into: &writer) }
            writer.endArray()
        case .object(let object):
            writer.beginObject()
            for (key, member) in object.sorted(by: { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }) {
                writer.key(key)
                stream(member, into: &writer)
            }
            writer.endObject()
        default: Issue.record("not streamed: \(value)")
        }
    }

    @Test("A document streamed member by member is written byte for byte as the same JSONValue, empty arrays and objects included")
    func streamingMatchesValues() throws {
        let documents: [JSONValue] = [
            .object([:]), .array([]), .array([.array([]), .object([:]), .string("x")]),
            .object(["accounts": .array([.object(["clients": .array([]), "name": "Ada \"A\" \\ é", "tenants": .array(["t1", "t2"])]),
                                         .object(["clients": .array([.object(["access_tokens": .array([]), "has_id_token": .bool(true)])])])]),
                     "group": "com.example", "location": .object([:]), "flag": .bool(false)]),
        ]
        for document in documents {
            for pretty in [false, true] {
                var writer = JSONWriter(pretty: pretty)
                Self.stream(document, into: &writer)
                #expect(String(decoding: writer.bytes, as: UTF8.self) == (try Self.written(document, pretty: pretty)), "\(document) pretty: \(pretty)")
            }
        }
    }

    @Test("Infinity and NaN are refused with InvalidNumber, as JSONEncoder refuses them")
    func nonFiniteNumbers() {
        for number in [Double.infinity, -Double.infinity, Double.nan] {
            #expect(throws: JSONWriter.InvalidNumber.self) { try JSONWriter.write(.array([.double(number)])) }
        }
    }
}
