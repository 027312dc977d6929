import Foundation
import Testing
@testable import EncryptedFileStore
@testable import SecretServiceStore
@testable import EncryptedFileStore
@testable import SecretServiceStore
@testable import EncryptedFileStore
@testable import SecretServiceStore
@testable import TokenCache
@testable import TokenCacheCore
@testable import TokenCachePlatform
@testable import TokenCacheCore
@testable import TokenCachePlatform
@testable import TokenCacheCore
@testable import TokenCachePlatform

/// A large cache document parsed in two halves at once (`JSONParser.parseHalves`) against the
/// single parse: whatever boundary the second half starts from, the result is the single parse's
/// or nil (the caller then parses whole), never something else.
@Suite("JSON parser, two halves")
struct JSONParserHalvesTests {
    static func whole(_ data: Data, omitting omission: JSONParser.Omission?) -> JSONValue? {
        try? data.withUnsafeBytes { bytes throws(JSONParser.SyntaxError) in try JSONParser.parse(bytes, maximumDepth: 64, omitting: omission) }
    }

    static func halves(_ data: Data, omitting omission: JSONParser.Omission?, from start: Int) -> JSONObject? {
        data.withUnsafeBytes { JSONParser.parseHalves($0, maximumDepth: 64, omitting: omission, searchingFrom: start) }
    }

    /// Small documents with what a boundary search on bytes can be fooled by: braces, commas and
    /// quotes inside keys and strings, whitespace, repeated keys on both sides of a boundary, a
    /// repeated section, sections without credential types, and secrets that are not strings.
    static let tricky: [String] = [
        #"{"AccessToken":{"a":{"credential_type":"AccessToken","secret":"s1","t":"},\"x\":{"},"b":{"credential_type":"AccessToken","secret":"s2"},"c":{"credential_type":"AccessToken","secret":{"odd":[1,{"y":"},\"z\":{"}]}}},"RefreshToken":{"r":{"credential_type":"RefreshToken","secret":"rt"},"s":{"credential_type":"RefreshToken","secret":"rt2"}},"IdToken":{"i":{"credential_type":"IdToken","secret":"id"},"j":{"credential_type":"IdToken","secret":"id2"}},"Account":{"u":{"username":"},{"},"v":{"username":"w"}},"AppMetadata":{"m":{"client_id":"c"}}}"#,
        """
        {
          "AccessToken" : {
            "a" : { "credential_type" : "AccessToken", "secret" : "one" } ,
            "b" : { "credential_type" : "AccessToken", "secret" : "two" },
            "a" : { "credential_type" : "AccessToken", "secret" : "three" }
          },
          "Account" : { "x" : { "k" : 1 }, "y" : { "k" : 2 }, "x" : { "k" : 3 } },
          "AccessToken" : { "z" : { "credential_type" : "AccessToken", "secret" : "last" }, "q" : {} }
        }
        """,
        #"{"IdToken":{"k},\"a\":{":{"credential_type":"IdToken","secret":"i"},"k2":{"credential_type":"AccessToken","secret":"mislabelled"},"k3":{"secret":"x"}},"RefreshToken":{"r":{"credential_type":"IdToken","secret":"r"},"r2":{"credential_type":"RefreshToken","secret":"r2"}}}"#,
        #"[{"a":{"b":1},"c":{"d":2}},{"e":{}}]"#,
        #"{"A":[{"x":{}},{"y":{}}],"B":{"p":{"q":{}},"r":{"s":{}}}}"#,
    ]

    @Test("From every offset of documents made to fool a byte search, the halves give the single parse or nil, with and without token secrets left out")
    func everyOffsetOfTrickyDocuments() throws {
        var joined = 0
        for text in Self.tricky {
            let data = Data(text.utf8)
            for omission in [nil, JSONParser.Omission.tokenSecrets] {
                let expected = try #require(Self.whole(data, omitting: omission), "\(text)")
                for start in 0...data.count {
                    guard let halves = Self.halves(data, omitting: omission, from: start) else { continue }
                    joined += 1
                    #expect(JSONValue.object(halves) == expected, "\(text) from \(start), omitting: \(omission != nil)")
                }
            }
        }
        #expect(joined > 100, "the halves joined at many boundaries (else this test checks nothing)")
    }

    @Test("Damaged documents: the halves refuse a truncated one wherever they split, and never give what the single parse would not")
    func damagedDocuments() {
        let data = Data(Self.tricky[0].utf8)
        for cut in stride(from: 1, to: data.count, by: 5) {
            let truncated = data.prefix(cut)
            for start in stride(from: 0, to: truncated.count, by: 3) {
                #expect(Self.halves(truncated, omitting: .tokenSecrets, from: start) == nil, "truncated at \(cut), from \(start)")
            }
            let spliced = data.prefix(cut) + Data(#"},,"x":{"#.utf8) + data.suffix(from: cut)
            let whole = Self.whole(spliced, omitting: nil)
            for start in stride(from: 0, to: spliced.count, by: 3) {
                if let halves = Self.halves(spliced, omitting: nil, from: start) {
                    #expect(JSONValue.object(halves) == whole, "spliced at \(cut), from \(start)")
                }
            }
        }
    }

    @Test("A cache of 1,000 accounts decodes in halves to the single parse (decodeObject, from 1 MB), with and without token secrets left out")
    func largeCache() throws {
        var sections: [String: JSONValue] = [:]
        for (section, type) in [("AccessToken", "AccessToken"), ("RefreshToken", "RefreshToken"), ("IdToken", "IdToken"), ("Account", nil)] {
            var entries: JSONObject = [:]
            for account in 0..<1000 {
                var fields: JSONObject = ["home_account_id": .string("uid-\(account).utid"), "n": .integer(Int64(account))]
                if let type {
                    fields["credential_type"] = .string(type)
                    fields["secret"] = .string(String(repeating: "s\(account % 10)", count: 200))
                }
                entries["uid-\(account).utid-\(section.lowercased())-key"] = .object(fields)
            }
            sections[section] = .object(entries)
        }
        let data = try JSON.encode(sections)
        #expect(data.count > 1 << 20)
        for omission in [nil, JSONParser.Omission.tokenSecrets] {
            let expected = try #require(Self.whole(data, omitting: omission))
            #expect(Self.halves(data, omitting: omission, from: data.count / 2).map(JSONValue.object) == expected, "joined at the middle")
            #expect(JSONValue.object(try JSON.decodeObject(data, omitting: omission)) == expected)
        }
    }
}
