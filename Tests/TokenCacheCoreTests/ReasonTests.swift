import Foundation
import Testing
import TokenCacheTestSupport
import TokenCacheCore

// `TokenCacheError.Reason` is a struct over a package enum (#45 item 5): apps compare it, switch
// over the reasons without context and read the context of the others; the agent's socket still
// carries the enum's JSON. Each reason is declared once, as a case of the enum (#58 item 5).
@Suite("Error reasons: compared, switched, context read, named by their case, JSON unchanged", .harness)
struct ReasonTests {
    typealias Reason = TokenCacheError.Reason

    /// Reasons and their JSON as the enum of 0.6 encoded them (captured on main at 83a5bee, keys sorted).
    static let wire: [(Reason, String)] = [
        (.unspecified, #"{"unspecified":{}}"#),
        (.noAccount, #"{"noAccount":{}}"#),
        (.severalAccounts(accounts: ["ada@contoso.com (uid.utid)", "bob"]),
         #"{"severalAccounts":{"accounts":["ada@contoso.com (uid.utid)","bob"]}}"#),
        (.agentUntrusted(path: "/run/a.sock", uid: nil), #"{"agentUntrusted":{"path":"\/run\/a.sock"}}"#),
        (.agentUntrusted(path: "/run/a.sock", uid: 1001), #"{"agentUntrusted":{"path":"\/run\/a.sock","uid":1001}}"#),
        (.brokerRefused(status: 3, code: nil), #"{"brokerRefused":{"status":3}}"#),
        (.libraryMissing(name: "libgcrypt", install: "apt-get install libgcrypt20"),
         #"{"libraryMissing":{"install":"apt-get install libgcrypt20","name":"libgcrypt"}}"#),
        (.noUsableToken(refreshable: true), #"{"noUsableToken":{"refreshable":true}}"#),
        (.unlockPromptTimedOut(seconds: 30), #"{"unlockPromptTimedOut":{"seconds":30}}"#),
        (.refreshTokenFromOtherHost(aliases: ["login.windows.net"], host: "login.microsoftonline.com"),
         #"{"refreshTokenFromOtherHost":{"aliases":["login.windows.net"],"host":"login.microsoftonline.com"}}"#),
    ]

    @Test("a reason encodes to the JSON the enum of 0.6 sent, and that JSON decodes to the same reason")
    func wireFormatUnchanged() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        for (reason, json) in Self.wire {
            #expect(String(decoding: try encoder.encode(reason), as: UTF8.self) == json)
            #expect(try JSONDecoder().decode(Reason.self, from: Data(json.utf8)) == reason)
        }
        // A reason this version does not know is refused, as before, not read as another.
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(Reason.self, from: Data(#"{"newReason":{}}"#.utf8)) }
    }

    @Test("reasons compare by context; an app switches over those without context with a default case")
    func comparedAndSwitched() {
        let several = Reason.severalAccounts(accounts: ["a", "b"])
        #expect(several == .severalAccounts(accounts: ["a", "b"]))
        #expect(several != .severalAccounts(accounts: ["a"]))
        #expect(several != .noAccount)
        func chosen(_ reason: Reason) -> String {
            if let accounts = reason.severalAccounts { return "several: \(accounts.count)" }
            return switch reason {
            case .noAccount, .noRefreshToken: "sign in"
            default: "other"
            }
        }
        #expect(chosen(several) == "several: 2")
        #expect(chosen(.noRefreshToken) == "sign in")
        #expect(chosen(.tpmLockedOut) == "other")
    }

    @Test("each reason's context is read through its property; any other reason gives nil")
    func contextAccessors() throws {
        #expect(Reason.severalAccounts(accounts: ["a", "b"]).severalAccounts == ["a", "b"])
        #expect(Reason.noAccount.severalAccounts == nil)
        #expect(Reason.accountInSeveralClouds(hosts: ["h"]).severalAccounts == nil)
        let untrusted = try #require(Reason.agentUntrusted(path: "/s", uid: 7).agentUntrusted)
        #expect(untrusted.path == "/s" && untrusted.uid == 7)
        let refused = try #require(Reason.brokerRefused(status: -1, code: nil).brokerRefused)
        #expect(refused.status == -1 && refused.code == nil)
        #expect(Reason.noUsableToken(refreshable: false).noUsableToken == false)
        #expect(Reason.libraryMissing(name: "libcurl", install: "apt-get install libcurl4").libraryMissing?.install == "apt-get install libcurl4")
    }

    @Test("a reason's name is the name of the case it wraps, with or without context")
    func nameIsTheCase() {
        let reasons: [Reason] = [.unspecified, .tpmLockedOut, .collectionMissing(label: "x"), .graphRefused(status: 500),
                                 .brokerUnavailable(name: "com.microsoft.identity.broker1"), .clientNotSignedIn(signedOut: true, clients: []),
                                 .brokerRefused(status: 1, code: nil)]
        #expect(reasons.map(\.name) == ["unspecified", "tpmLockedOut", "collectionMissing", "graphRefused", "brokerUnavailable",
                                        "clientNotSignedIn", "brokerRefused"])
    }

    @Test("a reason's name is the key the agent's JSON carries it under")
    func nameIsTheWireKey() throws {
        for (reason, json) in Self.wire {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
            #expect(Array(object.keys) == [reason.name], "\(json)")
        }
    }
}
