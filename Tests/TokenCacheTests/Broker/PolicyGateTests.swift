import Foundation
import Synchronization
import Testing
@testable import TokenCache
@testable import TokenCacheCore
@testable import TokenCacheAgent
@testable import TokenCacheBroker
import TokenCacheTestSupport

/// Issue #57 item 5: one policy gate for the agent and the broker, keyed by caller identity,
/// client, account, authority and scopes; the broker asks for getAccounts and removeAccount too,
/// and one app's removeAccount does not sign another app out.
@Suite("PolicyGate")
struct PolicyGateTests {
    /// Answers every question with what `answer` holds, and keeps the questions.
    final class Questions: Sendable {
        let asked = Mutex<[String]>([])
        let answer = Mutex(true)
        var count: Int { asked.withLock { $0.count } }
        var confirmation: PolicyGate.Confirmation {
            { [self] question in
                asked.withLock { $0.append(question) }
                return answer.withLock { $0 }
            }
        }
    }

    static func caller(_ executable: String) -> BrokerCaller {
        BrokerCaller(sender: ":1.\(executable.count)", pid: 1, uid: getuid(), identity: .host(executable: executable))
    }

    static func silent(_ client: String, scopes: [String]) -> String {
        let parameters: [String: Any] = ["clientId": client, "requestedScopes": scopes, "account": ["username": Fixtures.alice.username],
                                         "authority": Fixtures.authority().url.absoluteString]
        return String(decoding: try! JSONSerialization.data(withJSONObject: ["authParameters": parameters]), as: UTF8.self)
    }

    static func object(_ reply: String) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(reply.utf8)) as? [String: Any]) ?? [:]
    }

    static func code(_ reply: [String: Any]) -> String? { (reply["error"] as? [String: Any])?["tokencacheCode"] as? String }

    /// A store where alice signed in with app one for User.Read (family 1, so app two could redeem).
    static func store(alsoAppTwo: Bool = false) throws -> AccountStore {
        let store = AccountStore(backend: InMemoryBackend())
        for client in [Fixtures.appOne] + (alsoAppTwo ? [Fixtures.appTwo] : []) {
            _ = try store.save(responseJSON: Fixtures.json(Fixtures.response(for: Fixtures.alice, scope: "User.Read", foci: "1")),
                               clientID: client, authority: Fixtures.authority(), scopes: ["User.Read"])
        }
        return store
    }

    @Test("the key: a yes is remembered for exactly what was asked; another caller, operation, client, account, authority or scope set is asked again; scope order and case do not matter")
    func keyIsTheWholeQuestion() async throws {
        let questions = Questions()
        let gate = PolicyGate(confirmation: questions.confirmation)
        let key = PolicyGate.Key(caller: "/usr/bin/a", operation: "token", client: try ClientID("C"), account: "alice", authority: "https://x/t", scopes: ["Mail.Read", "User.Read"])
        #expect(gate.decision(for: key) == .ask)
        #expect(await gate.admits(key, question: "q"))
        #expect(gate.decision(for: PolicyGate.Key(caller: "/usr/bin/a", operation: "token", client: try ClientID("c"), account: "alice", authority: "https://x/t",
                                                  scopes: ["user.read", "MAIL.READ"])) == .allow)
        for other in [PolicyGate.Key(caller: "/usr/bin/b", operation: "token", client: try ClientID("c"), account: "alice", authority: "https://x/t", scopes: ["Mail.Read", "User.Read"]),
                      PolicyGate.Key(caller: "/usr/bin/a", operation: "removeAccount", client: try ClientID("c"), account: "alice", authority: "https://x/t", scopes: ["Mail.Read", "User.Read"]),
                      PolicyGate.Key(caller: "/usr/bin/a", operation: "token", client: try ClientID("d"), account: "alice", authority: "https://x/t", scopes: ["Mail.Read", "User.Read"]),
                      PolicyGate.Key(caller: "/usr/bin/a", operation: "token", client: try ClientID("c"), account: "bob", authority: "https://x/t", scopes: ["Mail.Read", "User.Read"]),
                      PolicyGate.Key(caller: "/usr/bin/a", operation: "token", client: try ClientID("c"), account: "alice", authority: "https://y/t", scopes: ["Mail.Read", "User.Read"]),
                      PolicyGate.Key(caller: "/usr/bin/a", operation: "token", client: try ClientID("c"), account: "alice", authority: "https://x/t", scopes: ["User.Read"])] {
            #expect(gate.decision(for: other) == .ask, "\(other)")
        }
        // No one to ask: what needs consent is denied, the rest is the static policy's to decide.
        let unattended = PolicyGate(confirmation: nil)
        #expect(unattended.decision(for: key) == .allow && unattended.decision(for: key, needsConsent: true) == .deny)
        #expect(await unattended.admits(key, needsConsent: true, question: "q") == false)
    }

    @Test("broker: a remembered yes for scopes A does not cover scopes B; no to B refuses B and serves A still")
    func brokerScopesAreInTheKey() async throws {
        let questions = Questions()
        let service = BrokerService(store: try Self.store(), policy: AgentPolicy(), version: "test", confirmation: questions.confirmation)
        let app = Self.caller("/usr/bin/app-a")
        for _ in 0..<2 {
            let reply = Self.object(await service.handle(.acquireTokenSilently, protocolVersion: "0.0", correlationID: "x",
                                                         json: Self.silent(Fixtures.appOne, scopes: ["User.Read"]), caller: app))
            #expect(reply["brokerTokenResponse"] != nil, "\(reply)")
        }
        #expect(questions.count == 1)
        questions.answer.withLock { $0 = false }
        let other = Self.object(await service.handle(.acquireTokenSilently, protocolVersion: "0.0", correlationID: "x",
                                                     json: Self.silent(Fixtures.appOne, scopes: ["Mail.Read"]), caller: app))
        #expect(questions.count == 2 && questions.asked.withLock { $0[1].contains("Mail.Read") }, "\(questions.asked.withLock { $0 })")
        #expect(Self.code(other) == "accessDenied" && other["brokerTokenResponse"] == nil, "\(other)")
        let again = Self.object(await service.handle(.acquireTokenSilently, protocolVersion: "0.0", correlationID: "x",
                                                     json: Self.silent(Fixtures.appOne, scopes: ["User.Read"]), caller: app))
        #expect(again["brokerTokenResponse"] != nil && questions.count == 2, "\(again)")
    }

    @Test("agent: the same gate; a yes for scopes A does not cover scopes B, nor one program's yes another program")
    func agentScopesAndCallerAreInTheKey() async throws {
        let questions = Questions()
        let agent = TokenAgent(store: try Self.store(), policy: AgentPolicy(), confirmation: questions.confirmation)
        func token(_ scopes: [String], caller: String) async -> TokenCacheError.Code? {
            do {
                // Blocking, as on the agent's connection threads: off the cooperative pool.
                _ = try await offThePool {
                    try agent.token(clientID: try ClientID(Fixtures.appOne), scopes: scopes, account: Fixtures.alice.username, authority: nil,
                                    caller: ServerPolicy.Caller(identity: caller, pid: 1))
                }
                return nil
            } catch {
                return (error as! TokenCacheError).code
            }
        }
        #expect(await token(["User.Read"], caller: "/usr/bin/app-a") == nil)
        #expect(await token(["User.Read"], caller: "/usr/bin/app-a") == nil)
        #expect(questions.count == 1)
        questions.answer.withLock { $0 = false }
        #expect(await token(["Mail.Read"], caller: "/usr/bin/app-a") == .accessDenied)
        #expect(await token(["User.Read"], caller: "/usr/bin/app-b") == .accessDenied)
        #expect(questions.count == 3)
    }

    @Test("a forged client ID from a second caller is refused: app A's yes for a client new here does not let app B use it, with or without --confirm; the broker asks for getAccounts too")
    func forgedClientFromSecondCaller() async throws {
        let questions = Questions()
        let service = BrokerService(store: try Self.store(), policy: AgentPolicy(), version: "test", confirmation: questions.confirmation)
        func accounts(_ caller: BrokerCaller, _ service: BrokerService) async -> [String] {
            let reply = Self.object(await service.handle(.getAccounts, protocolVersion: "0.0", correlationID: "x",
                                                         json: #"{"clientId": "\#(Fixtures.appTwo)"}"#, caller: caller))
            return ((reply["accounts"] as? [[String: Any]]) ?? []).compactMap { $0["username"] as? String }
        }
        let (office, forger) = (Self.caller("/usr/bin/office"), Self.caller("/usr/bin/forger"))
        #expect(await accounts(office, service) == [Fixtures.alice.username])
        #expect(questions.count == 1, "one question lets office use the client and list its accounts")
        questions.answer.withLock { $0 = false }
        #expect(await accounts(forger, service).isEmpty)
        let token = Self.object(await service.handle(.acquireTokenSilently, protocolVersion: "0.0", correlationID: "x",
                                                     json: Self.silent(Fixtures.appTwo, scopes: ["User.Read"]), caller: forger))
        #expect(Self.code(token) == "accessDenied" && token["brokerTokenResponse"] == nil, "\(token)")
        #expect(questions.asked.withLock { $0.dropFirst().allSatisfy { $0.contains("/usr/bin/forger") } })
        // Without --confirm the forger is refused without a question.
        let unattended = BrokerService(store: try Self.store(), policy: AgentPolicy(), version: "test")
        #expect(await accounts(forger, unattended).isEmpty)
        let refused = Self.object(await unattended.handle(.acquireTokenSilently, protocolVersion: "0.0", correlationID: "x",
                                                          json: Self.silent(Fixtures.appTwo, scopes: ["User.Read"]), caller: forger))
        #expect(Self.code(refused) == "accessDenied", "\(refused)")

        // A client that has signed in here: with --confirm, listing its accounts is asked, once per caller.
        questions.answer.withLock { $0 = true }
        let before = questions.count
        for _ in 0..<2 {
            let reply = Self.object(await service.handle(.getAccounts, protocolVersion: "0.0", correlationID: "x",
                                                         json: #"{"clientId": "\#(Fixtures.appOne)"}"#, caller: office))
            #expect((reply["accounts"] as? [[String: Any]])?.count == 1, "\(reply)")
        }
        #expect(questions.count == before + 1 && questions.asked.withLock { $0.last?.contains("accounts of client") == true })
    }

    @Test("removeAccount from app B does not sign app A out: B may sign its own client out; A's client, which A used first, needs the user's yes")
    func removeAccountFromAnotherApp() async throws {
        let store = try Self.store(alsoAppTwo: true)
        let service = BrokerService(store: store, policy: AgentPolicy(), version: "test")
        let (appA, appB) = (Self.caller("/usr/bin/app-a"), Self.caller("/usr/bin/app-b"))
        let removal = { (client: String) in
            #"{"clientId": "\#(client)", "account": {"homeAccountId": "\#(Fixtures.alice.homeAccountID)", "username": "\#(Fixtures.alice.username)"}}"#
        }
        let token = Self.object(await service.handle(.acquireTokenSilently, protocolVersion: "0.0", correlationID: "x",
                                                     json: Self.silent(Fixtures.appOne, scopes: ["User.Read"]), caller: appA))
        #expect(token["brokerTokenResponse"] != nil, "\(token)")
        let ownApp = Self.object(await service.handle(.removeAccount, protocolVersion: "0.0", correlationID: "x", json: removal(Fixtures.appTwo), caller: appB))
        #expect(ownApp["error"] == nil, "\(ownApp)")
        let othersApp = Self.object(await service.handle(.removeAccount, protocolVersion: "0.0", correlationID: "x", json: removal(Fixtures.appOne), caller: appB))
        #expect(Self.code(othersApp) == "accessDenied", "\(othersApp)")
        // App A is still signed in and served; app B's client is signed out.
        #expect(try store.accounts(clientID: Fixtures.appOne).map(\.username) == [Fixtures.alice.username])
        #expect(try store.accounts(clientID: Fixtures.appTwo).isEmpty)
        let still = Self.object(await service.handle(.acquireTokenSilently, protocolVersion: "0.0", correlationID: "x",
                                                     json: Self.silent(Fixtures.appOne, scopes: ["User.Read"]), caller: appA))
        #expect(still["brokerTokenResponse"] != nil, "\(still)")

        // With --confirm, the user's yes lets B sign A's client out.
        let questions = Questions()
        let confirming = BrokerService(store: store, policy: AgentPolicy(), version: "test", confirmation: questions.confirmation)
        _ = await confirming.handle(.acquireTokenSilently, protocolVersion: "0.0", correlationID: "x", json: Self.silent(Fixtures.appOne, scopes: ["User.Read"]), caller: appA)
        let allowed = Self.object(await confirming.handle(.removeAccount, protocolVersion: "0.0", correlationID: "x", json: removal(Fixtures.appOne), caller: appB))
        #expect(allowed["error"] == nil && questions.asked.withLock { $0.last?.contains("/usr/bin/app-a") == true }, "\(allowed) \(questions.asked.withLock { $0 })")
        #expect(try store.accounts(clientID: Fixtures.appOne).isEmpty)
    }

    @Test("one server policy: the agent and the broker refuse a scope and an authority outside the allow lists with the same check and wording, before any question")
    func oneServerPolicy() async throws {
        var lists = AgentPolicy()
        lists.scopes = ["User.Read"]
        lists.authorities = [Fixtures.authority()]
        let questions = Questions()
        let agent = TokenAgent(store: try Self.store(), policy: lists, confirmation: questions.confirmation)
        let service = BrokerService(store: try Self.store(), policy: lists, version: "test", confirmation: questions.confirmation)
        let elsewhere = "https://login.example.org/common"
        for (scopes, authority, what) in [(["Mail.Read"], nil, "scope Mail.Read"), (["User.Read"], elsewhere, "authority \(elsewhere)")] {
            var agentError: TokenCacheError?
            do {
                _ = try await offThePool {
                    try agent.token(clientID: try ClientID(Fixtures.appOne), scopes: scopes, account: Fixtures.alice.username, authority: authority,
                                    caller: ServerPolicy.Caller(identity: "/usr/bin/app-a", pid: 1))
                }
            } catch {
                agentError = (error as! TokenCacheError)
            }
            #expect(agentError?.code == .accessDenied && agentError?.message.contains("\(what) is not one the agent serves") == true, "\(String(describing: agentError))")
            var parameters: [String: Any] = ["clientId": Fixtures.appOne, "requestedScopes": scopes, "account": ["username": Fixtures.alice.username]]
            parameters["authority"] = authority
            let json = String(decoding: try JSONSerialization.data(withJSONObject: ["authParameters": parameters]), as: UTF8.self)
            let reply = Self.object(await service.handle(.acquireTokenSilently, protocolVersion: "0.0", correlationID: "x", json: json,
                                                         caller: Self.caller("/usr/bin/app-a")))
            let context = (reply["error"] as? [String: Any])?["context"] as? String ?? ""
            #expect(Self.code(reply) == "accessDenied" && context.contains("\(what) is not one the broker serves"), "\(reply)")
        }
        #expect(questions.count == 0, "the allow lists refuse before --confirm asks")
    }

    @Test("a malformed client ID is the caller's mistake, checked where it enters (invalidArgument), not a refusal by the broker's --client list; a listed client is still served")
    func malformedClientIDCheckedBeforePolicy() async throws {
        var lists = AgentPolicy()
        lists.clients = [try ClientID(Fixtures.appOne)]
        let service = BrokerService(store: try Self.store(), policy: lists, version: "test", confirmation: Questions().confirmation)
        for (client, code) in [("not a client", "invalidArgument"), (Fixtures.appOne, nil)] {
            let reply = Self.object(await service.handle(.acquireTokenSilently, protocolVersion: "0.0", correlationID: "x",
                                                         json: Self.silent(client, scopes: ["User.Read"]), caller: Self.caller("/usr/bin/app-a")))
            #expect(Self.code(reply) == code, "\(client): \(reply)")
            if code != nil {
                let context = (reply["error"] as? [String: Any])?["context"] as? String ?? ""
                #expect(context.contains("client ID") && !context.contains("not one the broker serves"), "\(reply)")
            }
        }
    }

    @Test("the first caller served a client owns it, whatever case the ID is written in: another caller's removeAccount for it, spelled otherwise, is refused without --confirm; the owner's own is not")
    func clientOwnerAcrossCase() async throws {
        let service = BrokerService(store: try Self.store(), policy: AgentPolicy(), version: "test")
        let served = Self.object(await service.handle(.acquireTokenSilently, protocolVersion: "0.0", correlationID: "x",
                                                      json: Self.silent(Fixtures.appOne, scopes: ["User.Read"]), caller: Self.caller("/usr/bin/app-a")))
        #expect(Self.code(served) == nil, "\(served)")
        let removal = #"{"clientId": "\#(Fixtures.appOne.uppercased())", "account": {"username": "\#(Fixtures.alice.username)"}}"#
        let foreign = Self.object(await service.handle(.removeAccount, protocolVersion: "0.0", correlationID: "y", json: removal,
                                                       caller: Self.caller("/usr/bin/app-bb")))
        let context = (foreign["error"] as? [String: Any])?["context"] as? String ?? ""
        #expect(Self.code(foreign) == "accessDenied" && context.contains("is used here by"), "\(foreign)")
        let own = Self.object(await service.handle(.removeAccount, protocolVersion: "0.0", correlationID: "z", json: removal,
                                                   caller: Self.caller("/usr/bin/app-a")))
        #expect(Self.code(own) == nil, "\(own)")
    }
}
