import Foundation
import Synchronization
import Testing
@testable import TokenCache
@_spi(Backend) @testable import TokenCacheCore
@testable import TokenCachePipeline
import TokenCacheTestSupport

/// The parity cases of `FrontEndParityTests` (which runs them through the CLI, C, Python and a
/// Swift app, each a process of its own) as a table run against the pipeline itself, in process:
/// `TokenEngine` over an in-memory backend, a stub transport that answers discovery and token
/// requests and a manual clock, through both of its entries (the blocking one C and the CLI call,
/// the async one Swift apps call). A case that fails here fails in the pipeline, not in a front
/// end's translation. The cases that need a process of their own (another tool's store on disk,
/// the token agent's socket) stay in `FrontEndParityTests` alone.
/// Serialized: the two entries of a refreshing case would otherwise wait for each other's refresh
/// lock, whose pauses run on the manual clock, which nothing advances.
@Suite("The parity table, against the token pipeline in process", .harness, .serialized)
struct EngineParityTests {
    static let domain = "contoso.onmicrosoft.com"
    /// The user of the refreshing case, no other suite's: the refresh lock (a file per account and
    /// client) is never another test's.
    static let erin = Fixtures.User(uid: "e0e00000-0058-0000-0000-000000000058", tenant: Fixtures.tenantA,
                                    username: "erin@contoso.com", name: "Erin Example")
    static func user(_ name: String) -> Fixtures.User {
        switch name {
        case "bob": Fixtures.bob
        case "erin": erin
        default: Fixtures.alice
        }
    }

    /// What the pipeline answered: a token, or an error's code and reason.
    enum Outcome: Equatable, Sendable, CustomStringConvertible {
        case token(String)
        case error(TokenCacheError.Code, reason: String)

        var description: String {
            switch self {
            case .token(let token): "token \(token)"
            case .error(let code, let reason): "\(code)/\(reason)"
            }
        }
    }

    /// Tokens saved before the request, as a sign-in saves them.
    struct Saved: Sendable {
        /// "alice", "bob" or "erin".
        var user: String
        /// The tenant the tokens were issued in (the user's home tenant when nil).
        var realm: String?
        /// The authority they were issued at (the realm's at login.microsoftonline.com when nil).
        var authority: String?
        var tag: String
        /// Lifetime of the access token, in seconds: under 300 needs a refresh (the 5-minute margin).
        var expiresIn = 3600
    }

    /// One row: what is cached, the request as every front end states it, and what it gets.
    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var saved: [Saved]
        var account: String?
        var authority: String?
        var expected: Outcome
        /// What reaches the identity provider: "discovery" and "token" requests, in order.
        var sends: [String] = []
        /// The realms of the Account records afterwards, when the case is about where they are filed.
        var accountRealms: [String]?

        var testDescription: String { name }
    }

    static let tenantAuthority = "https://login.microsoftonline.com/\(Fixtures.tenantA)"
    static let domainAuthority = "https://login.microsoftonline.com/\(domain)"
    static func token(_ user: Fixtures.User, _ realm: String, _ tag: String) -> String { "at-\(user.uid)-\(realm)-\(tag)" }

    static let cases: [Case] = [
        Case(name: "a named account (username): its token", saved: [Saved(user: "alice", tag: "a"), Saved(user: "bob", tag: "b")],
             account: Fixtures.bob.username, authority: tenantAuthority, expected: .token(token(Fixtures.bob, Fixtures.tenantA, "b"))),
        Case(name: "a named account (home account ID): its token", saved: [Saved(user: "alice", tag: "a"), Saved(user: "bob", tag: "b")],
             account: Fixtures.bob.homeAccountID, authority: tenantAuthority, expected: .token(token(Fixtures.bob, Fixtures.tenantA, "b"))),
        Case(name: "two accounts and none named: ambiguousAccount, reason severalAccounts",
             saved: [Saved(user: "alice", tag: "a"), Saved(user: "bob", tag: "b")],
             authority: tenantAuthority, expected: .error(.ambiguousAccount, reason: "severalAccounts")),
        Case(name: "an unknown account: notFound, reason noAccount", saved: [Saved(user: "alice", tag: "a"), Saved(user: "bob", tag: "b")],
             account: "nobody@contoso.com", authority: tenantAuthority, expected: .error(.notFound, reason: "noAccount")),
        Case(name: "one account at hosts of two clouds, asked at a third: ambiguousAccount, reason accountInSeveralClouds",
             saved: [Saved(user: "alice", tag: "com"), Saved(user: "alice", authority: "https://login.microsoftonline.us/\(Fixtures.tenantA)", tag: "us")],
             account: Fixtures.alice.username, authority: "https://login.chinacloudapi.cn/\(Fixtures.tenantA)",
             expected: .error(.ambiguousAccount, reason: "accountInSeveralClouds")),
        Case(name: "no authority, one tenant with a token: that token", saved: [Saved(user: "alice", realm: Fixtures.tenantB, tag: "b")],
             account: Fixtures.alice.username, expected: .token(token(Fixtures.alice, Fixtures.tenantB, "b"))),
        Case(name: "no authority, two tenants with tokens: ambiguousAccount, reason tokensInSeveralTenants",
             saved: [Saved(user: "alice", realm: Fixtures.tenantB, tag: "b"), Saved(user: "alice", realm: "33333333-3333-3333-3333-333333333333", tag: "c")],
             account: Fixtures.alice.username, expected: .error(.ambiguousAccount, reason: "tokensInSeveralTenants")),
        Case(name: "a tenant named by its domain finds the token saved at its tenant ID: discovery only, no token request",
             saved: [Saved(user: "alice", tag: "signin")], account: Fixtures.alice.username, authority: domainAuthority,
             expected: .token(token(Fixtures.alice, Fixtures.tenantA, "signin")), sends: ["discovery"], accountRealms: [Fixtures.tenantA]),
        Case(name: "a tenant named by its domain refreshes and saves at its tenant ID: one account record",
             saved: [Saved(user: "erin", tag: "signin", expiresIn: 60)], account: erin.username, authority: domainAuthority,
             expected: .token(token(erin, Fixtures.tenantA, StubTransport.issuedTag)), sends: ["discovery", "token"],
             accountRealms: [Fixtures.tenantA]),
    ]

    /// The pipeline's entries: C's and the CLI's blocking call (with an app's async transport, and
    /// with one that sends on the caller's thread, as libcurl does), a Swift app's async one, and
    /// the store's own (`AccountStore.acquireTokenSilent`, on the pipeline's seams for a store
    /// alone: the encrypted-file-only product's apps, which have no façade).
    enum Entry: String, CaseIterable, Sendable { case blocking, blockingTransport, async, storeAlone }

    @Test("Each case gets the same token or the same code and reason through the pipeline's blocking (either transport), async and store-alone entries",
          arguments: cases, Entry.allCases)
    func parity(_ row: Case, entry: Entry) async throws {
        let store = AccountStore(backend: InMemoryBackend())
        for saved in row.saved {
            let user = Self.user(saved.user)
            let realm = saved.realm ?? user.tenant
            var response = Fixtures.response(for: user, realm: realm, scope: "User.Read", foci: nil, tag: saved.tag, expiresIn: saved.expiresIn)
            response["refresh_token"] = "rt-\(saved.tag)"
            let authority = try Authority(saved.authority ?? "https://login.microsoftonline.com/\(realm)")
            try store.save(Fixtures.tokenResponse(response), clientID: Fixtures.appOne, authority: authority, scopes: [])
        }
        // The provider answers a refresh with new tokens of the last user saved, in tenant A (the domain's).
        var issued = Fixtures.response(for: Self.user(row.saved.last?.user ?? "alice"), realm: Fixtures.tenantA, scope: "User.Read",
                                       foci: nil, tag: StubTransport.issuedTag)
        issued["refresh_token"] = "rt-\(StubTransport.issuedTag)"
        let transport = StubTransport(tenantDomains: [Self.domain: Fixtures.tenantA], tokens: Fixtures.json(issued))
        var options = PublicClientApplication.Options()
        let onTheCallersThread = SendingOnTheCallersThread { [transport] in transport.answer($0) }
        options.transport = entry == .blockingTransport ? onTheCallersThread : transport
        options.clock = ManualClock()
        let engine = TokenEngine(store: store, options: options)
        let request = TokenRequest(clientID: try ClientID(Fixtures.appOne), scopes: ["User.Read"], account: row.account,
                                   authority: try row.authority.map { try Authority($0) })

        let outcome: Outcome
        do {
            let token = switch entry {
            case .blocking, .blockingTransport: try await offThePool { try engine.blockingToken(request) }
            case .async: try await engine.token(request)
            // A discovery cache of its own: the process's would carry one row's discovery into the next.
            case .storeAlone: try await store.acquireTokenSilent(request, services: StoreServices(transport: transport,
                                                                                                 discovered: .init([:])))
            }
            outcome = .token(token.accessToken)
        } catch let error as TokenCacheError {
            outcome = .error(error.code, reason: error.reason.name)
        }
        #expect(outcome == row.expected)
        #expect(transport.sent == row.sends, "sent to the identity provider")
        if entry == .blockingTransport {
            // Discovery and the token request are sent on the deciding thread itself, never through the async bridge.
            #expect(onTheCallersThread.sentBlocking == row.sends.count, "sent on the caller's thread")
        }
        if let realms = row.accountRealms {
            let saved = try store.entries().filter { $0.kind == .account }.compactMap { $0["realm"] }.sorted()
            #expect(saved == realms, "Account records")
        }
    }
}

/// An identity provider in process: answers OpenID discovery of a tenant (a domain in
/// `tenantDomains` names its tenant ID's endpoints, as Entra's discovery does) and a refresh
/// token grant with `tokens`; counts what it was sent.
private final class StubTransport: HTTPTransport {
    static let issuedTag = "issued"
    let tenantDomains: [String: String]
    let tokens: Data
    private let requests = Mutex<[String]>([])

    init(tenantDomains: [String: String], tokens: Data) {
        self.tenantDomains = tenantDomains
        self.tokens = tokens
    }

    /// What was sent, in order: "discovery" or "token" (anything else: its method and URL).
    var sent: [String] { requests.withLock { $0 } }

    func send(_ request: HTTPRequest) async throws -> HTTPResponse { answer(request) }

    /// The answer to a request, noted in ``sent``.
    func answer(_ request: HTTPRequest) -> HTTPResponse {
        let path = request.url.path.split(separator: "/").map(String.init)
        let host = request.url.host ?? ""
        if request.method == "GET", request.url.path.hasSuffix("/.well-known/openid-configuration"), let named = path.first {
            requests.withLock { $0.append("discovery") }
            let tenant = tenantDomains[named] ?? named
            let base = "https://\(host)/\(tenant)"
            return Self.json(["issuer": "\(base)/v2.0", "token_endpoint": "\(base)/oauth2/v2.0/token",
                              "authorization_endpoint": "\(base)/oauth2/v2.0/authorize",
                              "device_authorization_endpoint": "\(base)/oauth2/v2.0/devicecode"])
        }
        if request.method == "POST", request.url.path.hasSuffix("/oauth2/v2.0/token") {
            requests.withLock { $0.append("token") }
            return HTTPResponse(status: 200, headers: ["content-type": "application/json"], body: tokens)
        }
        requests.withLock { $0.append("\(request.method) \(request.url.absoluteString)") }
        return HTTPResponse(status: 404, headers: [:], body: Data())
    }

    static func json(_ object: [String: Any]) -> HTTPResponse {
        HTTPResponse(status: 200, headers: ["content-type": "application/json"], body: Fixtures.json(object))
    }
}
