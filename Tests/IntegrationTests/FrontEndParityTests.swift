import Foundation
import Testing
@testable import TokenCache
@testable import TokenCacheAgent
@testable import TokenCacheCore
import TokenCacheTestSupport
import TokenCacheTestHelper
import TokenCacheTestIdentityProvider

/// One rule decides which account, cloud, tenant, single sign-on store and agent a token request gets (`TokenEngine`):
/// the same cases through the CLI, C, Python and a Swift app (each a process of its own, on one
/// encrypted file) give the same token or the same code and typed reason. The same table runs in
/// process against the pipeline (`EngineParityTests`), where a failure points at the engine rather
/// than at a front end's translation.
@Suite("Every front end chooses alike", .harness)
struct FrontEndParityTests {
    /// What a front end answered: a token, or an error's code and reason, normalised across
    /// languages (`notFound`, `NOT_FOUND` and `not_found` are one).
    enum Outcome: Equatable, CustomStringConvertible {
        case token(String)
        case error(code: String, reason: String)

        static func failure(_ code: String, _ reason: String) -> Outcome {
            .error(code: normalised(code, prefix: "tokencache_e_"), reason: normalised(reason, prefix: "tokencache_reason_"))
        }

        private static func normalised(_ name: String, prefix: String) -> String {
            var name = name.lowercased()
            if name.hasPrefix(prefix) { name.removeFirst(prefix.count) }
            return name.replacingOccurrences(of: "_", with: "")
        }

        var description: String {
            switch self {
            case .token(let token): "token \(token)"
            case .error(let code, let reason): "\(code)/\(reason)"
            }
        }
    }

    /// A request as each front end is given it; `backend` "auto" chooses no local cache (the agent may answer).
    struct Request {
        var account: String?
        var authority: String?
        var backend = "file"
        var scopes = "User.Read"
        /// Other tools' stores opted into for single sign-on, as `tokencache stores` names them
        /// (each front end's own way: --sso-store, tokencache_store_set_sso_stores, set_sso_stores, AppConfiguration).
        var singleSignOnStores: [String] = []
    }

    let dataHome: URL
    let cli: CLI
    let library = TestEnvironment.binDirectory.appendingPathComponent("libTokenCacheC.so").path

    init() throws {
        cli = try CLI(backend: "file")
        dataHome = cli.dataHome
    }

    /// Saves `user`'s tokens for app one in the default group of the encrypted file, as issued at `authority`.
    func save(_ user: Fixtures.User, realm: String? = nil, authority: String? = nil, tag: String) throws {
        let response = Fixtures.response(for: user, realm: realm, scope: "User.Read", foci: nil, tag: tag)
        let output = try cli.run(["save", "--backend", "file", "--client", Fixtures.appOne,
                                  "--authority", authority ?? Fixtures.authority(realm ?? user.tenant).url.absoluteString,
                                  "--scopes", "User.Read"], input: Fixtures.json(response), withGroup: false)
        try #require(output.status == 0, "\(output.stderr)")
    }

    var environment: [String: String] { cli.environment }

    // MARK: The front ends

    func viaCLI(_ request: Request, environment: [String: String]) throws -> Outcome {
        var arguments = ["token", "--json", "--client", Fixtures.appOne, "--scopes", request.scopes]
        if request.backend == "file" { arguments += ["--backend", "file"] }
        if let account = request.account { arguments += ["--account", account] }
        if let authority = request.authority { arguments += ["--authority", authority] }
        arguments += request.singleSignOnStores.flatMap { ["--sso-store", $0] }
        let output = try runProcess(TestEnvironment.binDirectory.appendingPathComponent("tokencache").path, arguments, environment: environment)
        if output.status == 0 {
            let object = try JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [String: Any]
            return .token(object?["access_token"] as? String ?? "")
        }
        let line = output.stderr.split(separator: "\n").first { $0.hasPrefix("{") }
        let error = line.flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }?["error"] as? [String: Any]
        return .failure(error?["code"] as? String ?? "exit \(output.status): \(output.stderr)", error?["reason"] as? String ?? "")
    }

    func viaC(_ request: Request, environment: [String: String], program: String) throws -> Outcome {
        let stores = request.singleSignOnStores.isEmpty ? [] : [request.singleSignOnStores.joined(separator: " ")]
        let output = try runProcess(program, ["silent", request.backend, Fixtures.appOne, request.authority ?? "-", request.account ?? "-", request.scopes] + stores,
                                    environment: environment)
        if output.status == 0 { return .token(String(output.stdout.split(separator: " ").first ?? "")) }
        // "silent: STATUS REASON: message (hint)"
        let words = output.stderr.split(separator: " ")
        guard words.count > 2 else { return .failure("unparsed: \(output.stderr)", "") }
        return .failure(String(words[1]), String(words[2].dropLast()))
    }

    func viaPython(_ request: Request, environment: [String: String]) throws -> Outcome {
        let source = """
            import sys, tokencache
            backend, client, authority, account, scopes, sso_stores = sys.argv[1:]
            store = tokencache.Store.open(backend=tokencache.Backend.FILE if backend == "file" else tokencache.Backend.AUTO)
            if sso_stores:
                store.set_sso_stores(sso_stores.split())
            try:
                print(store.acquire_token_silent(client, authority if authority != "-" else None,
                                                 account if account != "-" else None, scopes).access_token)
            except tokencache.TokenCacheError as error:
                print(error.name, error.reason, file=sys.stderr)
                sys.exit(1)
            """
        var environment = environment
        environment["PYTHONPATH"] = Self.repositoryRoot.appendingPathComponent("python").path
        environment["TOKENCACHE_LIBRARY"] = library
        let output = try runProcess("/usr/bin/python3", ["-c", source, request.backend, Fixtures.appOne, request.authority ?? "-",
                                                         request.account ?? "-", request.scopes, request.singleSignOnStores.joined(separator: " ")],
                                    environment: environment)
        if output.status == 0 { return .token(output.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) }
        let words = output.stderr.split(whereSeparator: \.isWhitespace)
        guard words.count >= 2 else { return .failure("unparsed: \(output.stderr)", "") }
        return .failure(String(words[words.count - 2]), String(words[words.count - 1]))
    }

    /// A Swift app opened from its configuration; it always has an authority, as MSAL's apps do.
    func viaSwift(_ request: Request, environment: [String: String]) throws -> Outcome? {
        guard let authority = request.authority else { return nil }
        let output = try runProcess(TestEnvironment.binDirectory.appendingPathComponent("TokenCacheTestHelper").path,
                                    ["app-token", request.backend, authority, Fixtures.appOne, request.account ?? "-", request.scopes]
                                        + (request.singleSignOnStores.isEmpty ? [] : [request.singleSignOnStores.joined(separator: " ")]),
                                    environment: environment)
        if output.status == 0 { return .token(output.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) }
        let words = output.stderr.split(whereSeparator: \.isWhitespace)
        guard words.count >= 2 else { return .failure("unparsed: \(output.stderr)", "") }
        return .failure(String(words[words.count - 2]), String(words[words.count - 1]))
    }

    /// The front ends by name: each runs `request` in a process of its own (the Swift app's nil
    /// when the request has no authority).
    func frontEnds() throws -> [(name: String, run: @Sendable (Request, [String: String]) throws -> Outcome?)] {
        let program = try CTestPrograms.testCAPI()
        return [("cli", { try viaCLI($0, environment: $1) }), ("c", { try viaC($0, environment: $1, program: program) }),
                ("python", { try viaPython($0, environment: $1) }), ("swift", { try viaSwift($0, environment: $1) })]
    }

    /// Every front end's outcome for `request` (the Swift app's where the request has an authority).
    func outcomes(_ request: Request, environment: [String: String]? = nil) throws -> [String: Outcome] {
        let environment = environment ?? self.environment
        var outcomes: [String: Outcome] = [:]
        for frontEnd in try frontEnds() { outcomes[frontEnd.name] = try frontEnd.run(request, environment) }
        return outcomes
    }

    /// Checks every answer; `except` gives a front end's own spelling of the same outcome.
    func expectAll(_ outcomes: [String: Outcome], _ expected: Outcome, _ comment: Comment, except: [String: Outcome] = [:]) {
        for (frontEnd, outcome) in outcomes.sorted(by: { $0.key < $1.key }) {
            #expect(outcome == except[frontEnd] ?? expected, "\(comment): \(frontEnd) answered \(outcome)")
        }
    }

    static let carol = Fixtures.User(uid: "ca201000-0000-0000-0000-000000000000", tenant: Fixtures.tenantA,
                                     username: "carol@contoso.com", name: "Carol")
    static let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let agentSwiftAuthority = Fixtures.authority().url.absoluteString

    @Test("A named account: its token, from every front end")
    func namedAccount() throws {
        defer { cli.cleanUp() }
        try save(Fixtures.alice, tag: "a")
        try save(Fixtures.bob, tag: "b")
        let token = "at-\(Fixtures.bob.uid)-\(Fixtures.tenantA)-b"
        expectAll(try outcomes(Request(account: Fixtures.bob.username, authority: Fixtures.authority().url.absoluteString)), .token(token), "named")
        expectAll(try outcomes(Request(account: Fixtures.bob.homeAccountID, authority: Fixtures.authority().url.absoluteString)), .token(token), "home ID")
    }

    @Test("Two accounts and none named: ambiguousAccount, reason severalAccounts; an unknown name: notFound, reason noAccount")
    func severalOrNone() throws {
        defer { cli.cleanUp() }
        try save(Fixtures.alice, tag: "a")
        try save(Fixtures.bob, tag: "b")
        let authority = Fixtures.authority().url.absoluteString
        expectAll(try outcomes(Request(authority: authority)), .failure("ambiguousAccount", "severalAccounts"), "none named")
        expectAll(try outcomes(Request(account: "nobody@contoso.com", authority: authority)), .failure("notFound", "noAccount"), "unknown")
    }

    @Test("One account at hosts of two clouds, asked at a third: ambiguousAccount, reason accountInSeveralClouds, never either token")
    func ambiguousClouds() throws {
        defer { cli.cleanUp() }
        try save(Fixtures.alice, tag: "com")
        try save(Fixtures.alice, authority: "https://login.microsoftonline.us/\(Fixtures.tenantA)", tag: "us")
        let request = Request(account: Fixtures.alice.username, authority: "https://login.chinacloudapi.cn/\(Fixtures.tenantA)")
        expectAll(try outcomes(request), .failure("ambiguousAccount", "accountInSeveralClouds"), "two clouds")
    }

    @Test("No authority: the only tenant with a token gives it; two tenants give ambiguousAccount, reason tokensInSeveralTenants (CLI, C, Python)")
    func onlyTenant() throws {
        defer { cli.cleanUp() }
        try save(Fixtures.alice, realm: Fixtures.tenantB, tag: "b")
        expectAll(try outcomes(Request(account: Fixtures.alice.username)), .token("at-\(Fixtures.alice.uid)-\(Fixtures.tenantB)-b"), "one tenant")
        try save(Fixtures.alice, realm: "33333333-3333-3333-3333-333333333333", tag: "c")
        expectAll(try outcomes(Request(account: Fixtures.alice.username)), .failure("ambiguousAccount", "tokensInSeveralTenants"), "two tenants")
    }

    @Test("A single sign-on store opted in (Azure CLI's cache, its family refresh token): the token it gets, from every front end, saved in the group; not opted in: notFound, reason noAccount")
    func singleSignOnStore() async throws {
        defer { cli.cleanUp() }
        let idp = try FakeIdentityProvider()
        let authority = idp.authority()
        var environment = self.environment
        // Azure CLI's configuration directory, as Azure CLI and every front end's catalogue read it.
        let azure = dataHome.appendingPathComponent("azure")
        try FileManager.default.createDirectory(at: azure, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        environment["AZURE_CONFIG_DIR"] = azure.path
        let environmentNow = environment
        let request = Request(account: Fixtures.alice.username, authority: authority.url.absoluteString, singleSignOnStores: ["azure-cli"])
        let off = Request(account: request.account, authority: request.authority)
        for frontEnd in try frontEnds() {
            // Azure CLI signed Alice in: its plain cache holds her family refresh token, which the provider knows.
            let refreshToken = "rt-az-\(frontEnd.name)"
            var response = Fixtures.response(for: Fixtures.alice, scope: Self.armScope, foci: "1", tag: "az")
            response["refresh_token"] = refreshToken
            let azureCLI = AccountStore(backend: InMemoryBackend())
            try azureCLI.save(Fixtures.tokenResponse(response), clientID: Self.azureCLIClient, authority: authority, scopes: [Self.armScope])
            let file = azure.appendingPathComponent("msal_token_cache.json")
            try azureCLI.exportMSALJSON().write(to: file)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file.path)
            try await idp.seed(refreshToken: refreshToken, user: Fixtures.alice, clientID: Self.azureCLIClient, family: "1")

            let without = try await offThePool { try frontEnd.run(off, environmentNow) }
            #expect(without == .failure("notFound", "noAccount"), "not opted in: \(frontEnd.name) answered \(String(describing: without))")
            let with = try await offThePool { try frontEnd.run(request, environmentNow) }
            let grants = try await idp.stats().grants
            // The provider's counter names the access token it issued for this grant.
            let issued = grants.filter { $0.outcome == "ok" }.count
            #expect(grants.last?.redeemed == refreshToken && grants.last?.client_id == Fixtures.appOne, "\(frontEnd.name): \(grants)")
            #expect(with == .token("at-issued-\(issued)"), "opted in: \(frontEnd.name) answered \(String(describing: with))")
            // Saved in the group: the same token again without the store, then the group is emptied for the next front end.
            let again = try await offThePool { try frontEnd.run(off, environmentNow) }
            #expect(again == with, "\(frontEnd.name) from the group: \(String(describing: again))")
            let removed = try cli.run(["remove", "--backend", "file", "--all", "--yes"], withGroup: false)
            try #require(removed.status == 0, "\(removed.stderr)")
        }
    }

    // MARK: A tenant named by domain

    static let domain = "contoso.onmicrosoft.com"

    /// Saves `response` for app one as a sign-in at `authority` saves it.
    func save(_ response: [String: Any], authority: Authority) throws {
        let output = try cli.run(["save", "--backend", "file", "--client", Fixtures.appOne, "--authority", authority.url.absoluteString,
                                  "--scopes", "User.Read"], input: Fixtures.json(response), withGroup: false)
        try #require(output.status == 0, "\(output.stderr)")
    }

    /// The default group of the encrypted file as MSAL JSON (what MSAL Python reads).
    func exported() throws -> [String: Any] {
        let file = dataHome.appendingPathComponent("export-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: file) }
        let output = try cli.run(["export", "--backend", "file", "--format", "msal-json", "--output", file.path], withGroup: false)
        try #require(output.status == 0, "\(output.stderr)")
        return try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: file)) as? [String: Any])
    }

    /// The realms of a section's entries, sorted (one per entry).
    static func realms(_ cache: [String: Any], _ section: String) -> [String] {
        ((cache[section] as? [String: Any]) ?? [:]).values.compactMap { ($0 as? [String: Any])?["realm"] as? String }.sorted()
    }

    @Test("A tenant named by its domain finds the tokens saved at its tenant ID (discovery resolves it, as Entra's and MSAL's), from every front end, sending no token request")
    func tenantNamedByDomainFindsTenantID() async throws {
        defer { cli.cleanUp() }
        let idp = try FakeIdentityProvider()
        try await idp.control(["tenant_domains": [Self.domain: Fixtures.tenantA]])
        // Signed in at the tenant ID (as native authentication and MSAL save it); the provider knows the refresh token.
        var response = Fixtures.response(for: Fixtures.alice, scope: "User.Read", foci: nil, tag: "signin")
        response["refresh_token"] = "rt-signin"
        try save(response, authority: idp.authority())
        try await idp.seed(refreshToken: "rt-signin", user: Fixtures.alice, clientID: Fixtures.appOne, family: nil)
        let request = Request(account: Fixtures.alice.username, authority: idp.authority(Self.domain).url.absoluteString)
        let answers = try await offThePool { try outcomes(request) }
        expectAll(answers, .token("at-\(Fixtures.alice.uid)-\(Fixtures.tenantA)-signin"), "domain")
        #expect(try await idp.stats().token_requests == 0)
        let cache = try exported()
        #expect(Self.realms(cache, "Account") == [Fixtures.tenantA])
        #expect(Self.realms(cache, "AccessToken") == [Fixtures.tenantA])
    }

    @Test("A tenant named by its domain refreshes and saves at its tenant ID, from every front end: one account record, and MSAL Python reads one account")
    func tenantNamedByDomainSavesAtTenantID() async throws {
        defer { cli.cleanUp() }
        let idp = try FakeIdentityProvider(https: true)
        // Every token the provider issues needs a refresh (within the 5-minute margin): each front end refreshes.
        try await idp.control(["tenant_domains": [Self.domain: Fixtures.tenantA], "expires_in": 60])
        var response = Fixtures.response(for: Fixtures.alice, scope: "User.Read", foci: nil, tag: "signin", expiresIn: 60)
        response["refresh_token"] = "rt-signin"
        try save(response, authority: idp.authority())
        try await idp.seed(refreshToken: "rt-signin", user: Fixtures.alice, clientID: Fixtures.appOne, family: nil)
        let request = Request(account: Fixtures.alice.username, authority: idp.authority(Self.domain).url.absoluteString)
        let environment = self.environment
        for frontEnd in try frontEnds() {
            let answer = try await offThePool { try frontEnd.run(request, environment) }
            let issued = try await idp.stats().grants.filter { $0.outcome == "ok" }.count
            #expect(answer == .token("at-issued-\(issued)"), "\(frontEnd.name) answered \(String(describing: answer))")
            let cache = try exported()
            #expect(Self.realms(cache, "Account") == [Fixtures.tenantA], "after \(frontEnd.name)")
            #expect(Self.realms(cache, "IdToken") == [Fixtures.tenantA], "after \(frontEnd.name)")
            #expect(Self.realms(cache, "AccessToken") == [Fixtures.tenantA], "after \(frontEnd.name)")
        }
        #expect(try await idp.stats().grants.filter { $0.outcome == "ok" }.count == 4)

        guard TestEnvironment.runsInteropTests else { return }
        // MSAL Python, at the same tenant named by domain over TLS, reads the group as saved: one account, at the tenant ID.
        let python = try await MSALPython.run([
            "op": "silent", "cache": try exported(), "authority": idp.httpsAuthority(Self.domain),
            "ca_bundle": try #require(idp.certificate).path, "client_id": Fixtures.appOne,
            "username": Fixtures.alice.username, "scopes": ["User.Read"], "force_refresh": false])
        #expect(python["accounts"] as? [String] == [Fixtures.alice.username])
        let records = try #require(python["account_records"] as? [[String: Any]])
        #expect(records.map { $0["realm"] as? String } == [Fixtures.tenantA], "\(records)")
        let result = try #require(python["result"] as? [String: Any])
        #expect(result["access_token"] != nil, "\(result)")
        // MSAL Python saved its own refresh at the tenant ID too: still one account record.
        #expect(Self.realms(try #require(python["cache"] as? [String: Any]), "Account") == [Fixtures.tenantA])
    }

    static let azureCLIClient = "04b07795-8ddb-461a-bbee-02f9e1bf7b46"
    static let armScope = "https://management.core.windows.net//user_impersonation"

    @Test("TOKENCACHE_AGENT_SOCK set and no local cache chosen: the agent's token, from every front end (a Swift app too); an agent that is not there: agentUnavailable, reason agentUnreachable")
    func agent() async throws {
        defer { cli.cleanUp() }
        // The agent's own group, elsewhere; the local one holds nothing.
        let agentHome = try TestEnvironment.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: agentHome) }
        let agentStore = AccountStore(backend: EncryptedFileBackend(directory: agentHome), group: .universalStorage)
        try agentStore.save(Fixtures.tokenResponse(Fixtures.response(for: Self.carol, scope: "User.Read", foci: nil, tag: "agent")),
                            clientID: Fixtures.appOne, authority: Fixtures.authority(), scopes: [])
        let sockets = agentHome.appendingPathComponent("run")
        try FileManager.default.createDirectory(at: sockets, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let server = try AgentServer(path: sockets.appendingPathComponent("agent.sock").path,
                                     agent: TokenAgent(store: agentStore, policy: AgentPolicy()))
        try server.start()
        defer { server.stop() }
        var environment = self.environment
        environment["TOKENCACHE_AGENT_SOCK"] = server.path
        let request = Request(account: Self.carol.username, authority: Self.agentSwiftAuthority, backend: "auto")
        let reachable = environment
        let answers = try await offThePool { try outcomes(request, environment: reachable) }
        expectAll(answers, .token("at-\(Self.carol.uid)-\(Fixtures.tenantA)-agent"), "agent")

        environment["TOKENCACHE_AGENT_SOCK"] = sockets.appendingPathComponent("gone.sock").path
        let unreachable = environment
        let missing = try await offThePool { try outcomes(request, environment: unreachable) }
        // C has no status of its own for the agent: it is TOKENCACHE_E_BACKEND_UNAVAILABLE there (tokencache.h), with the same reason.
        let inC = Outcome.failure("backendUnavailable", "agentUnreachable")
        expectAll(missing, .failure("agentUnavailable", "agentUnreachable"), "no agent", except: ["c": inC, "python": inC])
    }

    @Test("TOKENCACHE_AGENT_SOCK set and no local cache chosen: C, Python and `tokencache list` list the agent's accounts, not the local cache's; a local cache chosen lists its own")
    func agentAccounts() async throws {
        defer { cli.cleanUp() }
        try save(Fixtures.alice, tag: "local")  // the local group: Alice
        let agentHome = try TestEnvironment.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: agentHome) }
        let agentStore = AccountStore(backend: EncryptedFileBackend(directory: agentHome), group: .universalStorage)
        try agentStore.save(Fixtures.tokenResponse(Fixtures.response(for: Self.carol, scope: "User.Read", foci: nil, tag: "agent")),
                            clientID: Fixtures.appOne, authority: Fixtures.authority(), scopes: [])
        let sockets = agentHome.appendingPathComponent("run")
        try FileManager.default.createDirectory(at: sockets, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let server = try AgentServer(path: sockets.appendingPathComponent("agent.sock").path,
                                     agent: TokenAgent(store: agentStore, policy: AgentPolicy()))
        try server.start()
        defer { server.stop() }
        var environment = self.environment
        environment["TOKENCACHE_AGENT_SOCK"] = server.path
        environment["PYTHONPATH"] = Self.repositoryRoot.appendingPathComponent("python").path
        environment["TOKENCACHE_LIBRARY"] = library
        let program = try CTestPrograms.testCAPI()
        let listing = """
            import sys, tokencache
            backend, client = sys.argv[1:]
            store = tokencache.Store.open(backend=tokencache.Backend.FILE if backend == "file" else tokencache.Backend.AUTO)
            for account in store.accounts(client if client != "-" else None):
                print(account.username, account.home_account_id)
            """
        let env = environment
        func usernames(_ output: ProcessOutput) -> [String] {
            #expect(output.status == 0, "\(output.stderr)")
            return output.stdout.split(separator: "\n").compactMap { $0.split(separator: " ").first.map(String.init) }.sorted()
        }
        for (backend, expected) in [("auto", [Self.carol.username]), ("file", [Fixtures.alice.username])] {
            for client in [Fixtures.appOne, "-"] {
                let inC = try await offThePool { try runProcess(program, ["accounts", backend, client], environment: env) }
                #expect(usernames(inC) == expected, "C, \(backend), client \(client)")
                let inPython = try await offThePool { try runProcess("/usr/bin/python3", ["-c", listing, backend, client], environment: env) }
                #expect(usernames(inPython) == expected, "Python, \(backend), client \(client)")
                let arguments = ["list", "--json"] + (backend == "file" ? ["--backend", "file"] : []) + (client == "-" ? [] : ["--client", client])
                let inCLI = try await offThePool { try runProcess(TestEnvironment.binDirectory.appendingPathComponent("tokencache").path, arguments, environment: env) }
                #expect(inCLI.status == 0, "\(inCLI.stderr)")
                let listed = (try? JSONSerialization.jsonObject(with: Data(inCLI.stdout.utf8)) as? [String: Any])?["accounts"] as? [[String: Any]]
                #expect(listed?.compactMap { $0["username"] as? String }.sorted() == expected, "CLI, \(backend), client \(client): \(inCLI.stdout)")
            }
        }
    }
}
