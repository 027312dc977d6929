import Foundation
import Testing
@testable import TokenCache
@_spi(Backend) @testable import TokenCacheCore
@testable import EncryptedFileStore
@testable import SecretServiceStore
import TokenCacheTestSupport
import TokenCacheTestIdentityProvider

/// The account photo: Graph's `/me/photo/$value` at the loopback stand-in (fake_idp.py), cached
/// with the account in the encrypted file, bounded, refreshed after a day, and typed errors.
@Suite("Account photo from Microsoft Graph", .harness)
struct AccountPhotoTests {
    let idp: FakeIdentityProvider
    let directory: URL
    let store: AccountStore
    /// A small PNG-shaped image the stand-in serves.
    let image = Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + Array(repeating: 7, count: 300))

    init() throws {
        idp = try FakeIdentityProvider()
        directory = try TestEnvironment.temporaryDirectory()
        store = AccountStore(backend: EncryptedFileBackend(directory: directory),
                             group: try CacheGroup("org.swift-tokencache.photo"))
    }

    /// An app on the store whose Graph is the stand-in, unless `graph` says otherwise.
    func app(graph: URL?? = .none, authority: Authority? = nil) -> PublicClientApplication {
        var options = PublicClientApplication.Options()
        options.graphEndpoint = graph ?? idp.graphEndpoint
        return PublicClientApplication(clientID: Fixtures.appOne, authority: authority ?? idp.authority(), store: store, options: options)
    }

    /// `user` signed in (with Files.Read only, so a User.Read token for Graph comes from the provider).
    @discardableResult
    func signIn(_ user: Fixtures.User = Fixtures.alice) async throws -> CachedAccount {
        var response = Fixtures.response(for: user, scope: "Files.Read", foci: nil, tag: user.uid)
        response["refresh_token"] = "rt-\(user.uid)"
        try store.save(Fixtures.tokenResponse(response), clientID: Fixtures.appOne, authority: idp.authority(), scopes: [])
        try await idp.seed(refreshToken: "rt-\(user.uid)", user: user, clientID: Fixtures.appOne, family: nil)
        return try #require(try store.account(user.username))
    }

    func photoRequests() async throws -> Int {
        try await idp.graphRequests().filter { $0.path == "/v1.0/me/photo/$value" }.count
    }

    @Test("The photo comes from Graph with the account's token, is cached in the group (list says so), and is not fetched again within a day")
    func fetchedAndCached() async throws {
        let alice = try await signIn()
        try await idp.setPhoto(of: Fixtures.alice, contentType: "image/png", data: image)
        let now = Date()
        let photo = try #require(try await app().photo(for: alice, refresh: false, now: now))
        #expect(photo == AccountPhoto(data: image, contentType: "image/png"))
        #expect(try await idp.graphRequests().map(\.user) == [Fixtures.alice.uid])
        // Another app (another process would read the same file) gets it from the group.
        let other = AccountStore(backend: EncryptedFileBackend(directory: directory),
                                 group: store.group)
        #expect(try other.photoRecord(of: alice)?.photo == photo)
        #expect(try other.inventory().accounts.map(\.hasPhoto) == [true])
        // A listing reads the file without the photo's bytes, and still knows one is cached.
        let listed = try #require(try EncryptedFileBackend(directory: directory).loadForListing(store.group).entries.first { $0.kind == .accountPhoto })
        #expect(listed["data"] == nil && AccountPhotoRecord(entry: listed).hasPhoto)
        #expect(try await app().photo(for: alice, refresh: false, now: now + 23 * 3600) == photo)
        #expect(try await photoRequests() == 1)
    }

    @Test("After a day, or on request, Graph is asked again and the new photo replaces the cached one")
    func refreshedAfterADayOrOnRequest() async throws {
        let alice = try await signIn()
        try await idp.setPhoto(of: Fixtures.alice, data: image)
        let now = Date()
        _ = try await app().photo(for: alice, refresh: false, now: now)
        let second = Data(image.reversed())
        try await idp.setPhoto(of: Fixtures.alice, contentType: "image/jpeg", data: second)
        #expect(try await app().photo(for: alice, refresh: false, now: now + 25 * 3600)?.data == second)
        try await idp.setPhoto(of: Fixtures.alice, data: image)
        #expect(try await app().photo(for: alice, refresh: true, now: now + 25 * 3600)?.data == image)
        #expect(try await photoRequests() == 3)
        #expect(try store.entries().filter { $0.kind == .accountPhoto }.count == 1)
    }

    @Test("An account without a photo (Graph's 404 ImageNotFound) gets nil, not an error; the answer is cached for the day too")
    func noPhotoIsNil() async throws {
        let alice = try await signIn()
        let now = Date()
        #expect(try await app().photo(for: alice, refresh: false, now: now) == nil)
        #expect(try await app().photo(for: alice, refresh: false, now: now + 60) == nil)
        #expect(try await photoRequests() == 1)
        #expect(try store.inventory().accounts.map(\.hasPhoto) == [false])
        try await idp.setPhoto(of: Fixtures.alice, data: image)
        #expect(try await app().photo(for: alice, refresh: true, now: now + 60)?.data == image)
    }

    @Test("A photo of exactly 4 MiB is kept; one byte more is refused with photoTooLarge and the cached photo stays")
    func boundedAtFourMiB() async throws {
        let alice = try await signIn()
        try await idp.setPhoto(of: Fixtures.alice, size: AccountPhoto.maximumBytes)
        #expect(try await app().photo(for: alice)?.data.count == AccountPhoto.maximumBytes)
        try await idp.setPhoto(of: Fixtures.alice, size: AccountPhoto.maximumBytes + 1)
        let error = await #expect(throws: TokenCacheError.self) { try await app().photo(for: alice, refresh: true) }
        #expect(error?.reason == .photoTooLarge(limit: AccountPhoto.maximumBytes))
        #expect(try store.photoRecord(of: alice)?.photo?.data.count == AccountPhoto.maximumBytes)
        #expect(throws: TokenCacheError.self) {
            try store.savePhoto(AccountPhoto(data: Data(count: AccountPhoto.maximumBytes + 1), contentType: "image/png"), of: alice, now: Date())
        }
    }

    @Test("An answer that is not image/* is refused with photoNotAnImage; nothing is cached")
    func wrongContentType() async throws {
        let alice = try await signIn()
        try await idp.setPhoto(of: Fixtures.alice, contentType: "text/html", data: Data("<html>".utf8))
        let error = await #expect(throws: TokenCacheError.self) { try await app().photo(for: alice) }
        #expect(error?.code == .serverError && error?.reason == .photoNotAnImage(contentType: "text/html"))
        #expect(try store.photoRecord(of: alice) == nil)
    }

    @Test("A cached photo another app of the group wrote (text/html, image/svg+xml, over 4 MiB) is not served: Graph is asked again and its photo replaces it (#57 item 8)")
    func forgedCachedPhotoIsNotServed() async throws {
        let alice = try await signIn()
        try await idp.setPhoto(of: Fixtures.alice, contentType: "image/png", data: image)
        let now = Date()
        let forgeries = [("text/html", Data("<html><script>document.title='x'</script></html>".utf8)),
                         ("image/svg+xml", Data(#"<svg xmlns="http://www.w3.org/2000/svg" onload="document.title='x'"/>"#.utf8)),
                         ("image/png", Data(count: 5 << 20))]
        for (type, data) in forgeries {
            // Written into the group as another app (or an older release) could, past savePhoto's checks.
            let forged = AccountPhotoRecord.entry(for: alice, photo: AccountPhoto(data: data, contentType: type), now: now)
            try store.mutate { _ in [.upsert(forged)] } result: { _ in () }
            #expect(try store.photoRecord(of: alice)?.hasPhoto == true)
            #expect(try store.photoRecord(of: alice)?.photo == nil, "\(type) served from the cache")
            #expect(try await app().photo(for: alice, refresh: false, now: now) == AccountPhoto(data: image, contentType: "image/png"), "\(type)")
        }
        #expect(try await photoRequests() == forgeries.count)
        // Nor is such a photo fetched: SVG from Graph is refused as text/html is.
        try await idp.setPhoto(of: Fixtures.alice, contentType: "image/svg+xml", data: Data("<svg/>".utf8))
        let error = await #expect(throws: TokenCacheError.self) { try await app().photo(for: alice, refresh: true, now: now) }
        #expect(error?.reason == .photoNotAnImage(contentType: "image/svg+xml"))
        #expect(throws: TokenCacheError.self) {
            try store.savePhoto(AccountPhoto(data: Data("<svg/>".utf8), contentType: "image/svg+xml"), of: alice, now: now)
        }
    }

    /// uid 65534 holding a loopback port first, as another user would where the user's Graph proxy
    /// or stand-in is not running: it prints its port, then a line per connection (whether it
    /// carried a bearer token), answering 404.
    final class PortSquatter: @unchecked Sendable {
        // @unchecked: set in init, only read afterwards.
        let process = Process()
        let output = Pipe()
        let port: Int

        init() throws {
            let source = """
                import socket
                s = socket.socket()
                s.bind(("127.0.0.1", 0))
                s.listen(8)
                print(s.getsockname()[1], flush=True)
                while True:
                    c, _ = s.accept()
                    c.settimeout(5)
                    got = b""
                    try:
                        while b"\\r\\n\\r\\n" not in got:
                            chunk = c.recv(65536)
                            if not chunk:
                                break
                            got += chunk
                    except OSError:
                        pass
                    print("connection bearer=%s" % (b"Bearer" in got), flush=True)
                    try:
                        c.sendall(b"HTTP/1.1 404 Not Found\\r\\nContent-Length: 0\\r\\nConnection: close\\r\\n\\r\\n")
                    except OSError:
                        pass
                    c.close()
                """
            process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            process.arguments = ["--reuid", "65534", "--regid", "65534", "--clear-groups", "/usr/bin/python3", "-c", source]
            process.standardOutput = output
            try process.run()
            var line = Data()
            while let byte = try output.fileHandleForReading.read(upToCount: 1), !byte.isEmpty, byte != Data("\n".utf8) { line += byte }
            port = try #require(Int(String(decoding: line, as: UTF8.self)))
        }

        /// Stops it (SIGKILL: Foundation starts children with every signal blocked) and returns its connection lines.
        func stop() -> [String] {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            return String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self).split(separator: "\n").map(String.init)
        }
    }

    @Test("A loopback Graph endpoint whose port another user (65534) holds gets no token: graphUnreachable naming its uid, no connection made (#57 item 9)")
    func loopbackEndpointOfAnotherUserGetsNoToken() async throws {
        let alice = try await signIn()
        try await idp.setPhoto(of: Fixtures.alice, data: image)
        let squatter = try PortSquatter()
        let error = await #expect(throws: TokenCacheError.self) {
            try await app(graph: URL(string: "http://127.0.0.1:\(squatter.port)")).photo(for: alice, refresh: true)
        }
        #expect(squatter.stop() == [], "the other user's listener was sent a request")
        #expect(error?.code == .network && error?.reason == .graphUnreachable(host: "127.0.0.1"))
        #expect(error?.message.contains("uid 65534") == true, "\(String(describing: error))")
        // The user's own loopback stand-in is still used.
        #expect(try await app().photo(for: alice, refresh: true)?.data == image)
    }

    @Test("No network: graphUnreachable (code network); Graph answering 503: graphRefused; the cached photo is kept either way")
    func networkErrors() async throws {
        let alice = try await signIn()
        try await idp.setPhoto(of: Fixtures.alice, data: image)
        _ = try await app().photo(for: alice)
        // Port 1 (tcpmux) on loopback: nothing listens there, so the connection is refused.
        let closed = 1
        let unreachable = await #expect(throws: TokenCacheError.self) {
            try await app(graph: URL(string: "http://127.0.0.1:\(closed)")).photo(for: alice, refresh: true)
        }
        #expect(unreachable?.code == .network && unreachable?.reason == .graphUnreachable(host: "127.0.0.1"))
        try await idp.control(["graph_offline": true])
        let refused = await #expect(throws: TokenCacheError.self) { try await app().photo(for: alice, refresh: true) }
        #expect(refused?.code == .serverError && refused?.reason == .graphRefused(status: 503))
        #expect(try store.photoRecord(of: alice)?.photo?.data == image)
    }

    @Test("The photo is removed with the account, and is never saved for an account removed meanwhile")
    func removedWithTheAccount() async throws {
        let alice = try await signIn()
        try await signIn(Fixtures.bob)
        try await idp.setPhoto(of: Fixtures.alice, data: image)
        _ = try await app().photo(for: alice)
        try await app().removeFromEveryApp(alice)
        #expect(try store.entries().filter { $0.kind == .accountPhoto }.isEmpty)
        try store.savePhoto(AccountPhoto(data: image, contentType: "image/png"), of: alice, now: Date())
        #expect(try store.entries().filter { $0.kind == .accountPhoto }.isEmpty)
    }

    @Test("On the Secret Service the photo (4 MiB at most) is an item of the group like its tokens, read back by another connection and removed with the account")
    func onTheSecretService() async throws {
        let group = try CacheGroup("org.swift-tokencache.photo-\(UUID().uuidString.prefix(8).lowercased())")
        // The in-memory session collection: on the on-disk default collection gnome-keyring
        // encrypts and rewrites its whole file (every suite's items and this 4 MiB photo) for each
        // change, and on one busy core that took longer than a call's 10 s bound (#56, one-core run).
        var sessionCollection = SecretServiceBackend.Options()
        sessionCollection.defaultMapping = .session
        let backend = { () throws -> SecretServiceBackend in try SecretServiceBackend(options: sessionCollection) }
        let keyring = AccountStore(backend: try backend(), group: group)
        defer { try? keyring.removeAll() }
        var response = Fixtures.response(for: Fixtures.alice, scope: "Files.Read", foci: nil, tag: "ss")
        response["refresh_token"] = "rt-ss"
        try keyring.save(Fixtures.tokenResponse(response), clientID: Fixtures.appOne, authority: idp.authority(), scopes: [])
        try await idp.seed(refreshToken: "rt-ss", user: Fixtures.alice, clientID: Fixtures.appOne, family: nil)
        let alice = try #require(try keyring.account(Fixtures.alice.username))
        try await idp.setPhoto(of: Fixtures.alice, size: AccountPhoto.maximumBytes)
        var options = PublicClientApplication.Options()
        options.graphEndpoint = idp.graphEndpoint
        let app = PublicClientApplication(clientID: Fixtures.appOne, authority: idp.authority(), store: keyring, options: options)
        let photo = try #require(try await app.photo(for: alice))
        let items = try backend().load(group).entries.filter { $0.kind == .accountPhoto }
        #expect(items.count == 1 && AccountPhotoRecord(entry: items[0]).photo == photo)
        try await app.removeFromEveryApp(alice)
        #expect(try backend().load(group).entries.filter { $0.kind == .accountPhoto || $0.kind == .account }.isEmpty)
    }

    @Test("B2C and generic OIDC authorities, and a host of no known cloud without an endpoint, have no Graph: noGraph")
    func noGraphForOtherAuthorities() async throws {
        let alice = try await signIn()
        for kind in [Authority.Kind.b2c, .oidc] {
            let error = await #expect(throws: TokenCacheError.self) { try await app(authority: idp.authority(kind: kind)).photo(for: alice) }
            #expect(error?.code == .unsupportedFlow && error?.reason == .noGraph(authority: idp.authority().environment), "\(kind)")
        }
        let error = await #expect(throws: TokenCacheError.self) { try await app(graph: .some(nil)).photo(for: alice) }
        #expect(error?.reason == .noGraph(authority: idp.authority().environment))
        #expect(try await idp.graphRequests().isEmpty)
    }

    @Test("Each cloud's Graph host and User.Read scope; an endpoint must be https, or http on loopback")
    func cloudsAndEndpoints() throws {
        let cases = [("login.microsoftonline.com", "graph.microsoft.com"), ("login.windows.net", "graph.microsoft.com"),
                     ("login.microsoftonline.us", "graph.microsoft.us"), ("login.chinacloudapi.cn", "microsoftgraph.chinacloudapi.cn")]
        for (environment, graph) in cases {
            let account = CachedAccount(homeAccountID: "u.t", environment: environment, username: "a@b")
            let resolved = try GraphEndpoint.resolve(override: nil, authority: try Authority("https://\(environment)/common"), account: account)
            #expect(resolved.base.absoluteString == "https://\(graph)" && resolved.scope == "https://\(graph)/User.Read")
        }
        #expect(try GraphEndpoint.parse("http://127.0.0.1:8080/").absoluteString == "http://127.0.0.1:8080")
        #expect(try GraphEndpoint.parse("https://graph.proxy.example").host == "graph.proxy.example")
        for bad in ["http://graph.example.com", "ftp://127.0.0.1", "graph.microsoft.com", "https://h/?q=1"] {
            let error = #expect(throws: TokenCacheError.self) { try GraphEndpoint.parse(bad) }
            #expect(error?.field == "graphEndpoint", "\(bad)")
        }
    }
}
