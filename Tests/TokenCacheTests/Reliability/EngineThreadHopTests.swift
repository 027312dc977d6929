import Foundation
import Testing
@testable import TokenCache
@_spi(Backend) @testable import TokenCacheCore
@testable import TokenCachePipeline
@testable import TokenCachePlatform
import TokenCacheTestSupport

/// Where a token request's store reads run (#45 item 2): C and the CLI decide on their own thread,
/// a Swift app in one pool job. Counted by a backend that notes, for every call, its thread and
/// the pool job it runs in (``BlockingPool/currentJob``), so tests running beside it do not count.
@Suite("Engine thread hops", .harness)
struct EngineThreadHopTests {
    /// An in-memory backend that notes the thread and pool job of each call.
    final class RecordingBackend: CacheBackend {
        struct Call: Sendable {
            let thread: pthread_t
            let job: Int?
            /// Where the call ran: its pool job, else its thread (two jobs on one pool thread are two places).
            var place: String { job.map { "job \($0)" } ?? "thread \(thread)" }
        }
        private let inner = InMemoryBackend()
        private let calls = Locked<[Call]>([])
        var recorded: [Call] { calls.withLock { $0 } }
        func forget() { calls.withLock { $0 = [] } }
        /// Notes the calling thread and pool job: the store's calls, and the transport's sends of a refresh.
        func note() { calls.withLock { $0.append(Call(thread: pthread_self(), job: BlockingPool.currentJob)) } }

        func location(of group: CacheGroup) -> String { inner.location(of: group) }
        func load(_ group: CacheGroup) throws(TokenCacheError) -> CacheSnapshot { note(); return try inner.load(group) }
        func loadForListing(_ group: CacheGroup) throws(TokenCacheError) -> CacheSnapshot { note(); return try inner.loadForListing(group) }
        func entries(of kind: EntityKind, matching attributes: [CacheAttribute: String], in group: CacheGroup) throws(TokenCacheError) -> [CacheEntry] {
            note(); return try inner.entries(of: kind, matching: attributes, in: group)
        }
        func entries(matchingAny queries: [CacheQuery], in group: CacheGroup) throws(TokenCacheError) -> [CacheEntry] {
            note(); return try inner.entries(matchingAny: queries, in: group)
        }
        func attributes(of kind: EntityKind, matching attributes: [CacheAttribute: String], in group: CacheGroup) throws(TokenCacheError) -> [[CacheAttribute: String]] {
            note(); return try inner.attributes(of: kind, matching: attributes, in: group)
        }
        func apply(_ changes: [CacheChange], to group: CacheGroup, expected: CacheRevision?) throws(TokenCacheError) -> CacheRevision? {
            note(); return try inner.apply(changes, to: group, expected: expected)
        }
        func currentRevision(of group: CacheGroup) throws(TokenCacheError) -> CacheRevision? { note(); return try inner.currentRevision(of: group) }
        func removeAll(in group: CacheGroup) throws(TokenCacheError) { note(); try inner.removeAll(in: group) }
    }

    let backend = RecordingBackend()
    let store: AccountStore
    let request: TokenRequest

    /// Alice signed in to app one with a fresh access token: every request below is a cache hit.
    init() throws {
        store = AccountStore(backend: backend)
        request = TokenRequest(clientID: try ClientID(Fixtures.appOne), scopes: ["User.Read"], account: Fixtures.alice.username,
                               authority: Fixtures.authority())
        try store.save(Fixtures.tokenResponse(Fixtures.response(for: Fixtures.alice)), clientID: Fixtures.appOne,
                       authority: Fixtures.authority(), scopes: ["User.Read", "Mail.Read"])
        backend.forget()
    }

    @Test("A cache hit through blockingToken (tokencache_acquire_token_silent, the CLI's token) reads the store on the calling thread only: 0 pool jobs, 0 thread hops")
    func blockingCacheHitStaysOnCallerThread() async throws {
        let engine = TokenEngine(store: store)
        let asked = request
        // A thread of its own, as a C app's: neither a pool nor a cooperative thread.
        let (caller, result) = try await offThePool { (pthread_self(), try engine.blockingToken(asked)) }
        #expect(result.isFromCache && result.accessToken == "at-\(Fixtures.alice.uid)-\(Fixtures.tenantA)-1")
        let calls = backend.recorded
        #expect(!calls.isEmpty)
        #expect(calls.allSatisfy { pthread_equal($0.thread, caller) != 0 }, "a store read ran on another thread")
        #expect(calls.allSatisfy { $0.job == nil }, "a store read ran in a pool job: \(calls.compactMap(\.job))")
    }

    @Test("A cache hit through a Swift app's acquireTokenSilent reads the store in exactly one pool job (decided there at once)")
    func asyncCacheHitTakesOnePoolJob() async throws {
        let app = PublicClientApplication(clientID: Fixtures.appOne, authority: Fixtures.authority(), store: store)
        let result = try await app.acquireTokenSilent(scopes: ["User.Read"], accountNamed: Fixtures.alice.username)
        #expect(result.isFromCache)
        let calls = backend.recorded
        #expect(!calls.isEmpty)
        #expect(calls.allSatisfy { $0.job != nil }, "a store read held a cooperative thread")
        #expect(Set(calls.compactMap(\.job)).count == 1, "store reads in jobs \(Set(calls.compactMap(\.job)).sorted())")
    }

    @Test("blockingToken and token give the same typed reason for an unknown account, decided by the same code")
    func sameDecisionBothWays() async throws {
        var unknown = request
        unknown.account = "nobody@contoso.com"
        let engine = TokenEngine(store: store), asked = unknown
        let blocking = await #expect(throws: TokenCacheError.self) { try await offThePool { try engine.blockingToken(asked) } }
        let async = await #expect(throws: TokenCacheError.self) { try await engine.token(asked) }
        #expect(blocking?.reason == .noAccount && async?.reason == .noAccount)
        #expect(blocking?.message == async?.message)
    }

    /// A token endpoint in process that answers every refresh with `tokens`, noting where each send ran.
    struct NotingTransport: HTTPTransport {
        let backend: RecordingBackend
        let tokens: Data

        func send(_ request: HTTPRequest) async throws -> HTTPResponse {
            backend.note()
            return try answer(request)
        }

        /// The answer to a request (noted by the caller).
        func answer(_ request: HTTPRequest) throws -> HTTPResponse {
            let json = ["content-type": "application/json"]
            if request.method == "GET", request.url.path.hasSuffix("/.well-known/openid-configuration") {
                let base = "https://\(request.url.host ?? "")/\(Fixtures.tenantA)"
                return HTTPResponse(status: 200, headers: json, body: Fixtures.json([
                    "issuer": "\(base)/v2.0", "token_endpoint": "\(base)/oauth2/v2.0/token",
                    "authorization_endpoint": "\(base)/oauth2/v2.0/authorize"]))
            }
            guard request.method == "POST", request.url.path.hasSuffix("/oauth2/v2.0/token") else {
                return HTTPResponse(status: 404, headers: [:], body: Data())
            }
            return HTTPResponse(status: 200, headers: json, body: tokens)
        }
    }

    /// Every call the backend saw (the store's, and the sends a transport noted) ran on `caller`,
    /// in no pool job; more than `count` were seen (`seen` says which).
    func expectEverything(on caller: pthread_t, moreThan count: Int, _ seen: Comment, sourceLocation: SourceLocation = #_sourceLocation) {
        let calls = backend.recorded
        #expect(calls.count > count, seen, sourceLocation: sourceLocation)
        #expect(calls.allSatisfy { pthread_equal($0.thread, caller) != 0 && $0.job == nil }, "\(calls.map(\.place))", sourceLocation: sourceLocation)
    }

    /// The user of the refreshing case, no other suite's: the refresh lock (a file per account and
    /// client) is never another test's.
    static let frank = Fixtures.User(uid: "f0f00000-0058-0000-0000-000000000004", tenant: Fixtures.tenantA,
                                     username: "frank@contoso.com", name: "Frank Example")

    /// How many times a C silent call that refreshes moves between places (its own thread, a pool
    /// job, a cooperative thread), counted from the caller's thread back to it: #58's measure of
    /// the sync → async → sync bridge (only the store's calls and the transport's sends are seen,
    /// so a job that touches neither, the refresh lock's, is not counted). Measured at faef143:
    /// 7 hops over 5 pool jobs (decide here; the redeemer's read, lock name, re-read, candidates
    /// and save in a job each; discovery and the token request on the cooperative pool, one place).
    /// Since the refresh runs on the caller's thread (#58 step A): 0 with a transport that sends
    /// blocking (libcurl's), 2 over 0 jobs with an app's own async transport (its two sends, one
    /// place, bridged).
    static let refreshHopsThroughAnAsyncTransport = 2

    @Test("A refresh through blockingToken (tokencache_acquire_token_silent) with an app's own async transport leaves the caller's thread only for the sends: 2 hops, 0 pool jobs")
    func blockingRefreshHops() async throws {
        var stale = Fixtures.response(for: Self.frank, scope: "User.Read", foci: nil, tag: "stale", expiresIn: 60)
        stale["refresh_token"] = "rt-stale"
        try store.save(Fixtures.tokenResponse(stale), clientID: Fixtures.appOne, authority: Fixtures.authority(), scopes: [])
        var issued = Fixtures.response(for: Self.frank, scope: "User.Read", foci: nil, tag: "issued")
        issued["refresh_token"] = "rt-issued"
        var options = PublicClientApplication.Options()
        options.transport = NotingTransport(backend: backend, tokens: Fixtures.json(issued))
        options.clock = ManualClock()
        let engine = TokenEngine(store: store, options: options)
        var asked = request
        asked.account = Self.frank.username
        backend.forget()
        let (caller, result) = try await offThePool { [asked] in
            (pthread_self(), try engine.blockingToken(asked))
        }
        #expect(!result.isFromCache && result.accessToken == "at-\(Self.frank.uid)-\(Fixtures.tenantA)-issued")
        let start = "thread \(caller)"
        // Every cooperative thread is one place: which of them runs discovery and which the token
        // request is the scheduler's choice (on two cores, two threads: 7 or 8 by chance).
        let places = [start] + backend.recorded.map { $0.job == nil && $0.place != start ? "cooperative" : $0.place } + [start]
        let hops = zip(places, places.dropFirst()).filter { $0 != $1 }.count
        print("C silent refresh: \(hops) thread hops over \(Set(backend.recorded.compactMap(\.job)).count) pool jobs: \(places)")
        #expect(hops == Self.refreshHopsThroughAnAsyncTransport, "\(hops) hops: \(places)")
        #expect(backend.recorded.allSatisfy { $0.job == nil }, "a pool job: \(places)")
    }

    @Test("A refresh through blockingToken with a transport that sends blocking (libcurl's) runs wholly on the caller's thread: the store, the lock and both sends; 0 hops, 0 pool jobs")
    func blockingRefreshWithBlockingTransportStays() async throws {
        let user = Fixtures.User(uid: "f0f00000-0058-0000-0000-000000000005", tenant: Fixtures.tenantA,
                                 username: "grace@contoso.com", name: "Grace Example")
        var stale = Fixtures.response(for: user, scope: "User.Read", foci: nil, tag: "stale", expiresIn: 60)
        stale["refresh_token"] = "rt-stale"
        try store.save(Fixtures.tokenResponse(stale), clientID: Fixtures.appOne, authority: Fixtures.authority(), scopes: [])
        var issued = Fixtures.response(for: user, scope: "User.Read", foci: nil, tag: "issued")
        issued["refresh_token"] = "rt-issued"
        var options = PublicClientApplication.Options()
        let noting = NotingTransport(backend: backend, tokens: Fixtures.json(issued))
        let transport = SendingOnTheCallersThread { request in noting.backend.note(); return try noting.answer(request) }
        options.transport = transport
        let engine = TokenEngine(store: store, options: options)
        var asked = request
        asked.account = user.username
        backend.forget()
        let (caller, result) = try await offThePool { [asked] in (pthread_self(), try engine.blockingToken(asked)) }
        #expect(!result.isFromCache && result.accessToken == "at-\(user.uid)-\(Fixtures.tenantA)-issued")
        let calls = backend.recorded
        #expect(transport.sentBlocking == 2, "discovery and the token request, each sent blocking")
        #expect(calls.count > 2, "the store's calls and the two sends were seen")
        #expect(calls.allSatisfy { pthread_equal($0.thread, caller) != 0 && $0.job == nil }, "\(calls.map(\.place))")
    }

    @Test("A photo through blockingPhoto (tokencache_account_photo, the CLI's photo) reads the store, takes its token and asks Graph on the caller's thread: 0 pool jobs, 0 hops")
    func blockingPhotoStaysOnCallerThread() async throws {
        let user = Fixtures.User(uid: "f0f00000-0058-0000-0000-000000000006", tenant: Fixtures.tenantA,
                                 username: "heidi@contoso.com", name: "Heidi Example")
        // Graph's own scope cached: the photo's token is a cache hit.
        try store.save(Fixtures.tokenResponse(Fixtures.response(for: user, scope: "https://graph.microsoft.com/User.Read")),
                       clientID: Fixtures.appOne, authority: Fixtures.authority(), scopes: [])
        let png = Data([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])
        let transport = SendingOnTheCallersThread { [backend] request in
            backend.note()
            guard request.method == "GET", request.url.path == "/v1.0/me/photo/$value" else { return HTTPResponse(status: 404, headers: [:], body: Data()) }
            return HTTPResponse(status: 200, headers: ["content-type": "image/png"], body: png)
        }
        var options = PublicClientApplication.Options()
        options.transport = transport
        let app = PublicClientApplication(clientID: Fixtures.appOne, authority: Fixtures.authority(), store: store, options: options)
        backend.forget()
        let (caller, photo) = try await offThePool { (pthread_self(), try app.blockingPhoto(accountNamed: user.username, refresh: false)) }
        #expect(photo?.data == png && photo?.contentType == "image/png")
        #expect(transport.sentBlocking == 1, "Graph asked once, blocking")
        expectEverything(on: caller, moreThan: 2, "the store's reads, Graph's request and the photo's save were seen")
    }

    @Test("A device code sign-in through blockingDeviceCodeSignIn (tokencache_sign_in_device_code, login --device-code) runs on the caller's thread: discovery, the code, the poll's wait and request, the callback and the save")
    func blockingDeviceCodeSignInStaysOnCallerThread() async throws {
        let user = Fixtures.User(uid: "f0f00000-0058-0000-0000-000000000007", tenant: Fixtures.tenantA,
                                 username: "ivan@contoso.com", name: "Ivan Example")
        let tokens = Fixtures.json(Fixtures.response(for: user, scope: "User.Read"))
        let discovery = NotingTransport(backend: backend, tokens: tokens)
        let transport = SendingOnTheCallersThread { [backend] request in
            backend.note()
            guard request.method == "POST", request.url.path.hasSuffix("/oauth2/v2.0/devicecode") else { return try discovery.answer(request) }
            return HTTPResponse(status: 200, headers: ["content-type": "application/json"], body: Fixtures.json([
                "device_code": "device-code", "user_code": "UC-1", "verification_uri": "https://microsoft.com/devicelogin",
                "expires_in": 900, "interval": 1]))
        }
        var options = PublicClientApplication.Options()
        options.transport = transport
        // The poll's wait passes at once, on the thread (the clock moves to its end).
        let clock = ManualClock(immediate: true)
        options.clock = clock
        let app = PublicClientApplication(clientID: Fixtures.appOne, authority: Fixtures.authority(), store: store, options: options)
        backend.forget()
        let shownOn = Locked<pthread_t?>(nil)
        let (caller, result) = try await offThePool {
            (pthread_self(), try app.blockingDeviceCodeSignIn(DeviceCodeParameters(scopes: ["User.Read"])) { _ in shownOn.withLock { $0 = pthread_self() } })
        }
        #expect(result.accessToken == "at-\(user.uid)-\(Fixtures.tenantA)-1")
        #expect(transport.sentBlocking == 3, "discovery, the device code and one poll, each sent blocking")
        #expect(clock.sleeps == [.seconds(1)] && clock.threadSleeps == 1, "one wait of the advertised interval before the poll, sleeping the thread")
        #expect(shownOn.withLock { $0 }.map { pthread_equal($0, caller) != 0 } == true, "the code was shown on the caller's thread")
        expectEverything(on: caller, moreThan: 3, "the three requests and the save were seen")
    }

    @Test("A native sign-in with a password through blockingSignIn (tokencache_native_sign_in, login --native) runs on the caller's thread: initiate, challenge, the token request and the save")
    func blockingNativeSignInStaysOnCallerThread() async throws {
        let user = Fixtures.User(uid: "f0f00000-0058-0000-0000-000000000008", tenant: Fixtures.tenantA,
                                 username: "judy@contoso.com", name: "Judy Example")
        let tokens = Fixtures.json(Fixtures.response(for: user, scope: "User.Read"))
        let transport = SendingOnTheCallersThread { [backend] request in
            backend.note()
            let path = request.url.path, json = ["content-type": "application/json"]
            if path.hasSuffix("/oauth2/v2.0/token") { return HTTPResponse(status: 200, headers: json, body: tokens) }
            guard path.hasSuffix("/oauth2/v2.0/initiate") || path.hasSuffix("/oauth2/v2.0/challenge") else {
                return HTTPResponse(status: 404, headers: [:], body: Data())
            }
            return HTTPResponse(status: 200, headers: json, body: Fixtures.json(["continuation_token": "ct-\(path.count)", "challenge_type": "password"]))
        }
        var options = PublicClientApplication.Options()
        options.transport = transport
        let app = try NativeAuthPublicClientApplication(clientID: try ClientID(Fixtures.appOne), authority: "https://contoso.ciamlogin.com/\(Fixtures.tenantA)",
                                                        challengeTypes: [.password], store: store, options: options)
        backend.forget()
        let (caller, result) = try await offThePool {
            (pthread_self(), try app.blockingSignIn(username: user.username, password: "secret", scopes: ["User.Read"]))
        }
        guard case .completed(let account) = result else { Issue.record("not signed in: \(result)"); return }
        #expect(account.username == user.username)
        #expect(transport.sentBlocking == 3, "initiate, challenge and the token request, each sent blocking")
        expectEverything(on: caller, moreThan: 3, "the three requests and the save were seen")
    }

    @Test("A browser sign-in through blockingInteractiveSignIn (tokencache_sign_in_browser, login) runs on the caller's thread: discovery, the opener, the code's redemption and the save (and the listener's wait between them)")
    func blockingBrowserSignInStaysOnCallerThread() async throws {
        let user = Fixtures.User(uid: "f0f00000-0058-0000-0000-000000000009", tenant: Fixtures.tenantA,
                                 username: "kate@contoso.com", name: "Kate Example")
        let nonce = Locked<String?>(nil)
        let discovery = NotingTransport(backend: backend, tokens: Data())
        let transport = SendingOnTheCallersThread { [backend] request in
            backend.note()
            guard request.method == "POST", request.url.path.hasSuffix("/oauth2/v2.0/token") else { return try discovery.answer(request) }
            var response = Fixtures.response(for: user, scope: "User.Read")
            response["id_token"] = Fixtures.idToken(["aud": Fixtures.appOne, "iss": "https://login.microsoftonline.com/\(user.tenant)/v2.0",
                                                     "sub": "sub-\(user.uid)", "oid": user.uid, "tid": user.tenant,
                                                     "preferred_username": user.username, "name": user.name,
                                                     "nonce": nonce.withLock { $0 } ?? ""])
            return HTTPResponse(status: 200, headers: ["content-type": "application/json"], body: Fixtures.json(response))
        }
        var options = PublicClientApplication.Options()
        options.transport = transport
        let app = PublicClientApplication(clientID: Fixtures.appOne, authority: Fixtures.authority(), store: store, options: options)
        // A browser stand-in (another process in life): its own thread loads the start page, reads the
        // state and nonce from the authorization URL it is sent to, and comes back with a code.
        let openedOn = Locked<pthread_t?>(nil)
        var parameters = InteractiveTokenParameters(scopes: ["User.Read"])
        parameters.timeout = 120  // ends the wait should the stand-in fail, as a failure rather than a hang
        parameters.browser = BrowserOpener(here: { url throws(TokenCacheError) in
            openedOn.withLock { $0 = pthread_self() }
            let port = url.port ?? 0, path = url.path
            Thread {
                guard let start = try? rawRequest(port: port, "GET \(path) HTTP/1.1\r\nHost: localhost:\(port)\r\n\r\n"),
                      let location = start.split(separator: "\r\n").first(where: { $0.lowercased().hasPrefix("location:") }),
                      let items = URLComponents(string: String(location.dropFirst("location:".count)).trimmingCharacters(in: .whitespaces))?.queryItems,
                      let state = items.first(where: { $0.name == "state" })?.value else { return }
                nonce.withLock { $0 = items.first { $0.name == "nonce" }?.value }
                _ = try? rawRequest(port: port, "GET /?code=c1&state=\(state) HTTP/1.1\r\nHost: localhost:\(port)\r\n\r\n")
            }.start()
        })
        backend.forget()
        let request = parameters
        let (caller, result) = try await offThePool { (pthread_self(), try app.blockingInteractiveSignIn(request)) }
        #expect(result.accessToken == "at-\(user.uid)-\(Fixtures.tenantA)-1")
        #expect(result.account?.username == user.username)
        #expect(transport.sentBlocking == 2, "discovery and the code's redemption, each sent blocking")
        #expect(openedOn.withLock { $0 }.map { pthread_equal($0, caller) != 0 } == true, "the browser was opened on the caller's thread")
        expectEverything(on: caller, moreThan: 2, "the two requests and the save were seen")
    }

    @Test("A refresh's lock wait on a blocking thread ends with cancelled once its job's task is cancelled, though the lock is still held elsewhere and its timeout is an hour away")
    func cancelledRefreshWaitEnds() async throws {
        let directory = try TestEnvironment.temporaryDirectory().appendingPathComponent("locks")
        defer { try? FileManager.default.removeItem(at: directory.deletingLastPathComponent()) }
        let held = try RefreshLock.acquireBlocking(name: "held", timeout: 1, directory: directory, isCancelled: { false })
        defer { withExtendedLifetime(held) {} }
        let (waiting, started) = AsyncStream<Void>.makeStream()
        let waiter = Task { () async -> TokenCacheError? in
            do throws(TokenCacheError) {
                _ = try await TokenRedeemer.cancellably { (isCancelled) throws(TokenCacheError) in
                    started.yield()
                    return try RefreshLock.acquireBlocking(name: "held", timeout: 3600, directory: directory, isCancelled: isCancelled)
                }
                return nil
            } catch {
                return error
            }
        }
        for await _ in waiting { break }  // the job runs: the wait has begun, or is about to
        waiter.cancel()
        let error = await waiter.value
        #expect(error?.code == .cancelled, "\(String(describing: error))")
        #expect(error?.message.contains("another process was refreshing") == true, "the lock wait's own cancellation: \(String(describing: error))")
    }
}
