import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
import TokenCacheCore
import TokenCacheTestSupport

/// The local OpenID provider of Fixtures/fake_idp.py, on a loopback port, for one test.
///
/// With `https: true` it also serves the same state over TLS on a second port, with a
/// throw-away self-signed certificate for 127.0.0.1 made for this instance (for MSAL Python,
/// which accepts only https authorities).
package final class FakeIdentityProvider: @unchecked Sendable {
    // @unchecked: the process and pipe are set once in init and only read afterwards.
    package let port: Int
    /// The TLS port, when started with `https: true`.
    package let httpsPort: Int?
    /// The PEM certificate the TLS port presents (its own CA), when started with `https: true`.
    package let certificate: URL?
    private let process: Process
    private let input: Pipe
    private let directory: URL?

    /// The loopback address it listens on: 127.0.0.1, or another one (127.0.0.2) to play a
    /// host other than the one that issued the cached tokens.
    package let host: String

    package init(https: Bool = false, host: String = "127.0.0.1") throws {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("Fixtures/fake_idp.py").standardizedFileURL.path
        self.host = host
        var arguments = [script, "--bind", host]
        if https {
            let directory = try TestEnvironment.temporaryDirectory()
            let certificate = directory.appendingPathComponent("idp.pem"), key = directory.appendingPathComponent("idp.key")
            let openssl = try runProcess("/usr/bin/openssl", [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost", "-days", "1",
                "-keyout", key.path, "-out", certificate.path])
            guard openssl.status == 0 else {
                try? FileManager.default.removeItem(at: directory)
                throw TokenCacheError(.network, "openssl could not make a certificate: \(openssl.stderr)")
            }
            arguments += ["--https", certificate.path, key.path]
            self.directory = directory
            self.certificate = certificate
        } else {
            self.directory = nil
            self.certificate = nil
        }
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = arguments
        input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        func readPort() throws -> Int? {
            var line = Data()
            while let byte = try output.fileHandleForReading.read(upToCount: 1), !byte.isEmpty, byte != Data("\n".utf8) {
                line.append(byte)
            }
            return Int(String(decoding: line, as: UTF8.self))
        }
        let port = try readPort()
        let httpsPort = https ? try readPort() : nil
        guard let port, !https || httpsPort != nil else {
            process.terminate()
            if let directory { try? FileManager.default.removeItem(at: directory) }
            throw TokenCacheError(.network, "fake_idp.py did not start")
        }
        self.port = port
        self.httpsPort = httpsPort
    }

    deinit {
        try? input.fileHandleForWriting.close()
        process.terminate()
        process.waitUntilExit()
        if let directory { try? FileManager.default.removeItem(at: directory) }
    }

    /// The authority on the plain-http port (allowed on loopback only).
    package func authority(_ tenant: String = Fixtures.tenantA, kind: Authority.Kind? = nil) -> Authority {
        try! Authority("http://\(host):\(port)/\(tenant)", kind: kind)
    }

    /// The same authority on the TLS port: same environment (host) and realm, same state.
    package func httpsAuthority(_ tenant: String = Fixtures.tenantA) -> String {
        "https://\(host):\(httpsPort!)/\(tenant)"
    }

    package func control(_ command: [String: Any]) async throws {
        var request = URLRequest(url: URL(string: "http://\(host):\(port)/control")!)
        request.httpMethod = "POST"
        request.httpBody = try JSONSerialization.data(withJSONObject: command)
        _ = try await URLSession.shared.data(for: request)
    }

    /// Makes the provider accept a refresh token.
    /// Makes the provider accept a refresh token; with `respondingAs`, it answers with that
    /// user's identity (a server that swaps accounts).
    package func seed(refreshToken: String, user: Fixtures.User, clientID: String, family: String?,
              respondingAs impostor: Fixtures.User? = nil) async throws {
        var seed: [String: Any] = ["refresh_token": refreshToken, "uid": user.uid, "utid": user.tenant,
                                   "client_id": clientID, "username": user.username]
        if let family { seed["family"] = family }
        if let impostor { seed["respond_as"] = ["uid": impostor.uid, "utid": impostor.tenant, "username": impostor.username] }
        try await control(["seed": seed])
    }

    /// Its Microsoft Graph stand-in (`/v1.0/me`, `/v1.0/me/photo/$value`), for `graphEndpoint`.
    package var graphEndpoint: URL { URL(string: "http://\(host):\(port)")! }

    /// The photo Graph gives `user` (nil: none, Graph's 404), or `size` bytes of a PNG when `data` is nil.
    package func setPhoto(of user: Fixtures.User, contentType: String = "image/png", data: Data? = nil, size: Int? = nil) async throws {
        var photo: [String: Any] = ["content_type": contentType]
        if let data { photo["base64"] = data.base64EncodedString() }
        if let size { photo["size"] = size }
        try await control(["graph_photos": [user.uid: data == nil && size == nil ? NSNull() as Any : photo as Any]])
    }

    /// The Graph requests received so far, by path, with the user whose token they carried.
    package func graphRequests() async throws -> [(path: String, user: String?)] {
        struct Requests: Decodable { struct Request: Decodable { var path: String; var user: String? }; var requests: [Request] }
        let (data, _) = try await URLSession.shared.data(from: URL(string: "http://\(host):\(port)/graph/stats")!)
        return try JSONDecoder().decode(Requests.self, from: data).requests.map { ($0.path, $0.user) }
    }

    /// Calls its protected resource (`GET /resource`, continuous access evaluation) with a bearer
    /// token: the status and the `WWW-Authenticate` header of the answer.
    package func resource(accessToken: String) async throws -> (status: Int, wwwAuthenticate: String?) {
        var request = URLRequest(url: URL(string: "http://\(host):\(port)/resource")!)
        request.setValue("Bearer \(accessToken)", forHTTPHeaderField: "Authorization")
        let (_, response) = try await URLSession.shared.data(for: request)
        let http = try #require(response as? HTTPURLResponse)
        return (http.statusCode, http.value(forHTTPHeaderField: "WWW-Authenticate"))
    }

    /// Makes the resource challenge tokens whose request did not carry these claims (nil: none).
    package func challengeAtResource(_ claims: String?) async throws {
        try await control(["cae_challenge": claims as Any? ?? NSNull()])
    }

    package struct Stats: Decodable {
        package struct Grant: Decodable {
            package var client_id: String
            package var outcome: String
            package var redeemed: String?
            package var issued: String?
            /// For a refresh grant that rotated: the account (its uid) and the access token issued with `issued`.
            package var account: String?
            package var access_token: String?
            /// The `claims` parameter the request carried.
            package var claims: String?
            /// The caller's x-client-sku header ("MSAL.Python" for MSAL Python), "-" when absent.
            package var sdk: String
            /// When the request arrived and was answered (seconds since 1970).
            package var arrived: Double
            package var answered: Double
        }
        package var token_requests: Int
        /// OpenID discovery requests (GET .../.well-known/openid-configuration).
        package var discovery_requests: Int
        package var grants: [Grant]
        /// Every refresh token it issued, by any grant.
        package var issued_refresh_tokens: [String]?
    }

    package func stats() async throws -> Stats {
        let (data, _) = try await URLSession.shared.data(from: URL(string: "http://\(host):\(port)/stats")!)
        return try JSONDecoder().decode(Stats.self, from: data)
    }
}
