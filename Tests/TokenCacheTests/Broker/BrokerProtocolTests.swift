import Foundation
import Synchronization
import Testing
@testable import TokenCache
@testable import TokenCacheCore
import TokenCacheAgent
import TokenCacheBroker
import TokenCacheTestSupport

/// The broker's request parser (the fuzz target `broker-request` runs the same code on random
/// input): requests as msalruntime and sso-mib send them are read; malformed, oversized and
/// wrong-typed ones get a typed error naming the field, never a trap.
@Suite("Broker request parser", .harness)
struct BrokerProtocolTests {
    /// The seed corpus of the fuzz target (Fuzz/Corpus/broker-request).
    static var corpus: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../../Fuzz/Corpus/broker-request").standardized
    }

    @Test("A silent request as msalruntime sends it: client, scopes, authority, the account by home account ID, empty decodedClaims as none")
    func runtimeSilentRequest() throws {
        let json = try String(contentsOf: Self.corpus.appendingPathComponent("seed-1.json"), encoding: .utf8)
        let request = try BrokerProtocol.parse(json, method: .acquireTokenSilently)
        #expect(request.clientID == "c" && request.scopes == ["User.Read"])
        #expect(request.authority == "https://login.microsoftonline.com/t")
        #expect(request.accountName == "u.t" && request.claims == nil)
    }

    @Test("getAccounts and removeAccount requests as sso-mib sends them; an account at the top (browsers) counts")
    func otherRequests() throws {
        #expect(try BrokerProtocol.parse(#"{"clientId": "c", "redirectUri": "c"}"#, method: .getAccounts).clientID == "c")
        let removal = try BrokerProtocol.parse(#"{"clientId": "c", "account": {"username": "a@b.c"}}"#, method: .removeAccount)
        #expect(removal.clientID == "c" && removal.accountName == "a@b.c")
        let top = try BrokerProtocol.parse(#"{"account": {"username": "x@y.z"}, "authParameters": {"clientId": "c", "requestedScopes": ["s"]}}"#, method: .acquireTokenSilently)
        #expect(top.accountName == "x@y.z")
        _ = try BrokerProtocol.parse("{}", method: .getLinuxBrokerVersion)
    }

    static let refused: [(BrokerWire.Method, String, String?, String)] = [
        (.getAccounts, "{", nil, "is not a JSON object"),
        (.getAccounts, "[1]", nil, "is not a JSON object"),
        (.getAccounts, "\u{FF}", nil, "is not a JSON object"),
        (.getAccounts, String(repeating: "[", count: 5000), nil, "is not a JSON object"),
        (.getAccounts, #"{"clientId": 42}"#, "clientId", "must be a string"),
        (.getAccounts, "{}", "clientId", "is missing"),
        (.getAccounts, #"{"clientId": ""}"#, "clientId", "is empty"),
        (.getAccounts, #"{"clientId": "a\u0007b"}"#, "clientId", "contains control characters"),
        (.getAccounts, #"{"clientId": ""# + String(repeating: "a", count: 70_000) + #""}"#, nil, "over the broker's limit"),
        (.getAccounts, #"{"clientId": ""# + String(repeating: "a", count: 9000) + #""}"#, "clientId", "is longer than"),
        (.acquireTokenSilently, "{}", "authParameters", "is missing"),
        (.acquireTokenSilently, #"{"authParameters": []}"#, "authParameters", "must be an object"),
        (.acquireTokenSilently, #"{"authParameters": {"clientId": "c"}}"#, "authParameters.requestedScopes", "must name at least one scope"),
        (.acquireTokenSilently, #"{"authParameters": {"clientId": "c", "requestedScopes": "s"}}"#, "authParameters.requestedScopes", "must be an array of strings"),
        (.acquireTokenSilently, #"{"authParameters": {"clientId": "c", "requestedScopes": [1]}}"#, "authParameters.requestedScopes", "must be an array of strings"),
        (.acquireTokenSilently, #"{"authParameters": {"clientId": "c", "requestedScopes": ["a b"]}}"#, "authParameters.requestedScopes", "holds an empty scope"),
        (.acquireTokenSilently, #"{"authParameters": {"clientId": "c", "requestedScopes": ["# + Array(repeating: #""s""#, count: 65).joined(separator: ",") + "]}}",
         "authParameters.requestedScopes", "names more than 64 scopes"),
        (.acquireTokenSilently, #"{"authParameters": {"clientId": "c", "requestedScopes": ["s"], "account": 1}}"#, "authParameters.account", "must be an object"),
        (.acquireTokenSilently, #"{"authParameters": {"clientId": "c", "requestedScopes": ["s"], "account": {"username": 1}}}"#, "authParameters.account.username", "must be a string"),
        (.acquireTokenSilently, #"{"authParameters": {"clientId": "c", "requestedScopes": ["s"], "authority": true}}"#, "authParameters.authority", "must be a string"),
        (.removeAccount, #"{"clientId": "c"}"#, "account", "must name the account"),
        (.removeAccount, #"{"clientId": "c", "account": {}}"#, "account", "must name the account"),
    ]

    @Test("Malformed, oversized and wrong-typed requests: a typed error naming the field, and an error reply with status 6 (ApiContractViolation)")
    func refusedRequests() throws {
        for (method, json, field, problem) in Self.refused {
            #expect(throws: BrokerProtocol.RequestError.self, "\(json.prefix(60))") { try BrokerProtocol.parse(json, method: method) }
            do throws(BrokerProtocol.RequestError) {
                _ = try BrokerProtocol.parse(json, method: method)
            } catch {
                #expect(error.field == field && error.problem.contains(problem), "\(json.prefix(60)): \(error)")
                let reply = try #require(try JSONSerialization.jsonObject(with: Data(BrokerProtocol.errorReply(error).utf8)) as? [String: Any])
                #expect((reply["error"] as? [String: Any])?["status"] as? Int == 6)
            }
        }
    }

    @Test("Every seed of the fuzz corpus parses as some method's request or gets a typed error")
    func corpusSeeds() throws {
        let seeds = try FileManager.default.contentsOfDirectory(at: Self.corpus, includingPropertiesForKeys: nil)
        #expect(seeds.count >= 5)
        for seed in seeds {
            let text = try String(contentsOf: seed, encoding: .utf8)
            for method in BrokerWire.Method.allCases {
                _ = try? BrokerProtocol.parse(text, method: method)
            }
        }
    }

    @Test("A caller of another uid is refused before its request is read (status 9), and logged")
    func otherUIDRefused() async throws {
        let store = AccountStore(backend: InMemoryBackend())
        let service = BrokerService(store: store, policy: AgentPolicy(), version: "test", ownUID: 4242)
        let reply = await service.handle(.getAccounts, protocolVersion: "0.0", correlationID: "x", json: #"{"clientId": "c"}"#,
                                         caller: BrokerCaller(sender: ":1.9", pid: 77, uid: 1000))
        let error = try #require((try JSONSerialization.jsonObject(with: Data(reply.utf8)) as? [String: Any])?["error"] as? [String: Any], "\(reply)")
        #expect(error["status"] as? Int == 9 && error["tokencacheCode"] as? String == "accessDenied")
        #expect(service.requests.count == 1 && service.requests[0].outcome.hasPrefix("refused: uid 1000") && service.requests[0].pid == 77)
        let own = await service.handle(.getAccounts, protocolVersion: "0.0", correlationID: "x", json: #"{"clientId": "c"}"#,
                                       caller: BrokerCaller(sender: ":1.9", pid: 77, uid: 4242, identity: .host(executable: "/usr/bin/test-app")))
        #expect(own == #"{"accounts":[]}"#)
    }

    @Test("--confirm asks once per client, account and authority: the same three again are not asked, another authority is; a refusal is status 9 and serves nothing")
    func confirmKeyedByClientAccountAuthority() async throws {
        let store = AccountStore(backend: InMemoryBackend())
        _ = try store.save(responseJSON: Fixtures.json(Fixtures.response(for: Fixtures.alice, scope: "User.Read", foci: nil)),
                           clientID: Fixtures.appOne, authority: Fixtures.authority(), scopes: ["User.Read"])
        let questions = Mutex<[String]>([]), answer = Atomic<Bool>(true)
        let service = BrokerService(store: store, policy: AgentPolicy(), version: "test", confirmation: { question in
            questions.withLock { $0.append(question) }
            return answer.load(ordering: .sequentiallyConsistent)
        })
        func ask(authority: String?) async -> [String: Any] {
            var parameters: [String: Any] = ["clientId": Fixtures.appOne, "requestedScopes": ["User.Read"], "account": ["username": Fixtures.alice.username]]
            if let authority { parameters["authority"] = authority }
            let json = String(decoding: try! JSONSerialization.data(withJSONObject: ["authParameters": parameters]), as: UTF8.self)
            let reply = await service.handle(.acquireTokenSilently, protocolVersion: "0.0", correlationID: "x", json: json,
                                             caller: BrokerCaller(sender: ":1.5", pid: 1, uid: getuid(), identity: .host(executable: "/usr/bin/test-app")))
            return (try? JSONSerialization.jsonObject(with: Data(reply.utf8)) as? [String: Any]) ?? [:]
        }
        let named = Fixtures.authority().url.absoluteString
        #expect(await ask(authority: named)["brokerTokenResponse"] != nil)
        #expect(await ask(authority: named)["brokerTokenResponse"] != nil)
        #expect(questions.withLock { $0.count } == 1, "the same client, account and authority are asked once")
        #expect(questions.withLock { $0[0].contains(Fixtures.appOne) && $0[0].contains(Fixtures.alice.username) && $0[0].contains(named) })
        answer.store(false, ordering: .sequentiallyConsistent)
        let refused = await ask(authority: nil)
        #expect(questions.withLock { $0.count } == 2, "another authority is asked again")
        #expect((refused["error"] as? [String: Any])?["status"] as? Int == 9 && refused["brokerTokenResponse"] == nil, "\(refused)")
    }

    @Test("A token reply holds the access token, its type and expiry in milliseconds, never a refresh token")
    func tokenReplyShape() throws {
        let account = CachedAccount(homeAccountID: "uid.tid", environment: "login.microsoftonline.com", username: "a@b.c")
        let result = TokenResult(accessToken: "at-x", authenticationScheme: "Bearer", expiresOn: Date(timeIntervalSince1970: 1_700_000_000),
                                 refreshOn: nil, tenantID: "tid", scopes: ["User.Read", "Mail.Read"], account: account, cachedAt: nil, isFromCache: true)
        let reply = try #require(try JSONSerialization.jsonObject(with: Data(BrokerWire.tokenReply(result, account: account).utf8)) as? [String: Any])
        let token = try #require(reply["brokerTokenResponse"] as? [String: Any])
        #expect(token["accessToken"] as? String == "at-x" && token["accessTokenType"] as? Int == 0)
        #expect(token["expiresOn"] as? Int == 1_700_000_000_000 && token["grantedScopes"] as? String == "User.Read Mail.Read")
        let info = try #require(token["clientInfo"] as? String)
        #expect(String(decoding: Base64URL.decode(info) ?? Data(), as: UTF8.self) == #"{"uid":"uid","utid":"tid"}"#)
        #expect(!reply.keys.contains { $0.lowercased().contains("refresh") } && !token.keys.contains { $0.lowercased().contains("refresh") })
    }
}
