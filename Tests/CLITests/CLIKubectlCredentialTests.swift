import Foundation
import Testing
@testable import TokenCacheCore
import TokenCacheTestSupport
import TokenCacheTestIdentityProvider

/// `tokencache kubectl-credential` (#61 item 2) run by the real kubectl (`kubectl` on PATH, or
/// TOKENCACHE_TEST_KUBECTL): `kubectl get --raw /version` against a TLS API stand-in
/// (Fixtures/kube_server.py, a test CA made with openssl) that takes only an active bearer token
/// the test identity provider issued for AKS's scope.
@Suite("kubectl credential plugin", .harness)
struct CLIKubectlCredentialTests {
    static let scope = "6dae42f8-4368-4678-94ff-3960e28e3630/.default"
    static var kubectl: String { TestEnvironment.environment["TOKENCACHE_TEST_KUBECTL"] ?? "/usr/bin/kubectl" }
    let idp: FakeIdentityProvider
    let cli: CLI
    let server: KubeServer

    init() throws {
        idp = try FakeIdentityProvider()
        cli = try CLI(backend: "file")
        server = try KubeServer(idp: idp)
    }

    var pluginArguments: [String] {
        ["kubectl-credential", "--client", Fixtures.appOne, "--authority", idp.authority().url.absoluteString,
         "--backend", cli.backend, "--group", cli.group]
    }

    /// A log of the plugin's runs: the exec command is a shell that notes each run, then runs the plugin.
    var runLog: URL { cli.dataHome.appendingPathComponent("plugin-runs.log") }

    func pluginRuns() -> Int {
        ((try? String(contentsOf: runLog, encoding: .utf8)) ?? "").split(separator: "\n").count
    }

    /// A kubeconfig for the stand-in whose user runs the plugin with this exec apiVersion.
    func writeKubeconfig(apiVersion: String) throws -> URL {
        let binary = TestEnvironment.binDirectory.appendingPathComponent("tokencache").path
        let script = "echo run >> '\(runLog.path)'; exec '\(binary)' " + pluginArguments.map { "'\($0)'" }.joined(separator: " ")
        let interactive = apiVersion.hasSuffix("/v1") ? "      interactiveMode: Never\n" : ""
        let config = Self.kubeconfig(server: server, user: "alice", credential: """
                exec:
                  apiVersion: \(apiVersion)
                  command: /bin/sh
                  args: ["-c", \(Self.quoted(script))]
            \(interactive)
            """)
        let file = cli.dataHome.appendingPathComponent("kubeconfig")
        try Data(config.utf8).write(to: file)
        return file
    }

    /// A kubeconfig with one cluster (the stand-in), one context and its user, whose `user:`
    /// mapping is `credential` (indented by 4).
    static func kubeconfig(server: KubeServer, user: String, credential: String) -> String {
        """
        apiVersion: v1
        kind: Config
        clusters:
        - name: aks
          cluster:
            server: https://127.0.0.1:\(server.port)
            certificate-authority: \(server.certificateAuthority.path)
        contexts:
        - name: aks
          context:
            cluster: aks
            user: \(user)
        current-context: aks
        users:
        - name: \(user)
          user:
        \(credential)

        """
    }

    static func quoted(_ text: String) -> String {
        String(decoding: try! JSONSerialization.data(withJSONObject: text, options: [.fragmentsAllowed, .withoutEscapingSlashes]), as: UTF8.self)
    }

    func kubectl(_ arguments: [String], kubeconfig: URL, path: String? = nil) throws -> ProcessOutput {
        var environment = cli.environment
        environment["HOME"] = cli.dataHome.path
        environment["KUBECONFIG"] = kubeconfig.path
        if let path { environment["PATH"] = path }
        // setsid: no terminal, as in CI.
        return try runProcess("/usr/bin/setsid", ["-w", Self.kubectl] + arguments, environment: environment)
    }

    /// Alice signed in to app one, her access token expired, her refresh token known at the provider.
    func signInExpired() async throws {
        try await CLITokenRefreshTests.signInExpired(cli: cli, idp: idp)
    }

    @Test("kubectl with v1 and v1beta1 exec info: the plugin answers in the same apiVersion with a token refreshed silently for AKS's scope, and the API stand-in lets it through",
          arguments: ["client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"])
    func getVersion(apiVersion: String) async throws {
        defer { cli.cleanUp() }
        try await signInExpired()
        let kubeconfig = try writeKubeconfig(apiVersion: apiVersion)
        let version = try kubectl(["get", "--raw", "/version"], kubeconfig: kubeconfig)
        #expect(version.status == 0, "\(version.stderr)")
        #expect(version.stdout.contains("v1.32.0-tokencache-test"))
        #expect(pluginRuns() == 1)
        #expect(try await idp.stats().grants.count == 1)
        let stats = try server.stats()
        // kubectl may make more than one request (the version skew check): all with the plugin's one token.
        #expect(!stats.accepted.isEmpty && Set(stats.accepted).count == 1 && stats.refused == 0, "\(stats)")
        // What kubectl read, as client-go sends KUBERNETES_EXEC_INFO.
        var direct = cli
        direct.environmentOverrides["KUBERNETES_EXEC_INFO"] = #"{"kind":"ExecCredential","apiVersion":"\#(apiVersion)","spec":{"interactive":false}}"#
        let answer = try direct.run(pluginArguments, withGroup: false)
        #expect(answer.status == 0, "\(answer.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(answer.stdout.utf8)) as? [String: Any])
        #expect(object["apiVersion"] as? String == apiVersion && object["kind"] as? String == "ExecCredential")
        let status = try #require(object["status"] as? [String: Any])
        #expect((status["token"] as? String)?.hasPrefix("at-issued-") == true)
        let expiry = try #require(status["expirationTimestamp"] as? String)
        #expect(try Date(expiry, strategy: .iso8601) > Date(), "RFC 3339, in the future: \(expiry)")
    }

    @Test("An expired cached token: the next kubectl run runs the plugin again, which refreshes silently, and the stand-in takes the new token")
    func expiredTokenRefreshed() async throws {
        defer { cli.cleanUp() }
        try await signInExpired()
        let kubeconfig = try writeKubeconfig(apiVersion: "client.authentication.k8s.io/v1")
        #expect(try kubectl(["get", "--raw", "/version"], kubeconfig: kubeconfig).status == 0)
        let first = try #require(try server.stats().accepted.last)
        // The AKS token in the cache expires (saved again with expires_in 0; the refresh token is kept).
        var response = Fixtures.response(for: Fixtures.alice, scope: Self.scope, foci: nil, tag: "aks-expired", expiresIn: 0)
        response["refresh_token"] = nil
        let saved = try cli.run(["save", "--client", Fixtures.appOne, "--authority", idp.authority().url.absoluteString, "--scopes", Self.scope],
                                input: Fixtures.json(response))
        #expect(saved.status == 0, "\(saved.stderr)")
        let again = try kubectl(["get", "--raw", "/version"], kubeconfig: kubeconfig)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(pluginRuns() == 2)
        let second = try #require(try server.stats().accepted.last)
        #expect(second != first, "a new token")
        #expect(try await idp.stats().grants.count == 2)
    }

    @Test("No account and kubectl not interactive: the plugin fails at once with one line kubectl shows; the API stand-in never saw a token")
    func noAccount() throws {
        defer { cli.cleanUp() }
        let kubeconfig = try writeKubeconfig(apiVersion: "client.authentication.k8s.io/v1")
        let version = try kubectl(["get", "--raw", "/version"], kubeconfig: kubeconfig)
        #expect(version.status != 0)
        #expect(version.stderr.contains("tokencache: No account signed in for kubectl"), "\(version.stderr)")
        #expect(try server.stats().refused == 0)
    }

    @Test("--convert-kubeconfig rewrites the context's user to run the plugin (a backup kept), and the same kubectl then gets the version")
    func convertKubeconfig() async throws {
        defer { cli.cleanUp() }
        try await signInExpired()
        // A kubeconfig as `az aks get-credentials` leaves one: a static token for the user.
        let file = cli.dataHome.appendingPathComponent("converted")
        let original = Self.kubeconfig(server: server, user: "clusterUser_rg_aks", credential: "    token: not-a-valid-token")
        try Data(original.utf8).write(to: file)
        let path = [TestEnvironment.binDirectory.path, URL(fileURLWithPath: Self.kubectl).resolvingSymlinksInPath().deletingLastPathComponent().path,
                    "/usr/bin", "/bin"].joined(separator: ":")
        var converting = cli
        converting.environmentOverrides["PATH"] = path
        let converted = try converting.run(["kubectl-credential", "--convert-kubeconfig", "--kubeconfig", file.path,
                                            "--client", Fixtures.appOne, "--authority", idp.authority().url.absoluteString], withGroup: false)
        #expect(converted.status == 0, "\(converted.stderr)")
        #expect(converted.stdout.contains("clusterUser_rg_aks"), "\(converted.stdout)")
        let backup = try String(contentsOf: URL(fileURLWithPath: file.path + ".tokencache-backup"), encoding: .utf8)
        #expect(backup == original)
        let rewritten = try String(contentsOf: file, encoding: .utf8)
        #expect(rewritten.contains("kubectl-credential") && !rewritten.contains("not-a-valid-token"), "\(rewritten)")
        // (Google Cloud SDK's kubectl dispatcher asks the server's version with the old token
        // while converting: counted here, before the converted file is used.)
        let refusedBefore = try server.stats().refused
        // The plugin runs with the store named through the environment, as a user's shell would have it.
        var environment = cli.environment
        environment["TOKENCACHE_BACKEND"] = cli.backend
        environment["TOKENCACHE_GROUP"] = cli.group
        environment["HOME"] = cli.dataHome.path
        environment["KUBECONFIG"] = file.path
        environment["PATH"] = path
        let version = try runProcess("/usr/bin/setsid", ["-w", Self.kubectl, "get", "--raw", "/version"], environment: environment)
        #expect(version.status == 0, "\(version.stderr)")
        #expect(version.stdout.contains("v1.32.0-tokencache-test"))
        let stats = try server.stats()
        #expect(!stats.accepted.isEmpty && Set(stats.accepted).count == 1 && stats.refused == refusedBefore, "\(stats)")
    }
}

/// Fixtures/kube_server.py on a loopback TLS port, with a certificate from a test CA made here.
final class KubeServer: @unchecked Sendable {
    // @unchecked: set once in init and only read afterwards.
    let directory: URL
    private let server: StandInServer
    var port: Int { server.port }
    var certificateAuthority: URL { directory.appendingPathComponent("ca.pem") }

    init(idp: FakeIdentityProvider) throws {
        let directory = try TestEnvironment.temporaryDirectory()
        self.directory = directory
        func openssl(_ arguments: [String]) throws {
            let output = try runProcess("/usr/bin/openssl", arguments)
            guard output.status == 0 else { throw TokenCacheError(.crypto, "openssl \(arguments.first ?? ""): \(output.stderr)") }
        }
        let file = { (name: String) in directory.appendingPathComponent(name).path }
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        try openssl(["req", "-x509"] + ec + ["-subj", "/CN=tokencache test CA", "-days", "1", "-keyout", file("ca.key"), "-out", file("ca.pem")])
        try openssl(["req"] + ec + ["-subj", "/CN=127.0.0.1", "-keyout", file("server.key"), "-out", file("server.csr")])
        try Data("subjectAltName=IP:127.0.0.1\n".utf8).write(to: URL(fileURLWithPath: file("server.ext")))
        try openssl(["x509", "-req", "-in", file("server.csr"), "-CA", file("ca.pem"), "-CAkey", file("ca.key"), "-CAcreateserial",
                     "-days", "1", "-extfile", file("server.ext"), "-out", file("server.pem")])
        server = try StandInServer(script: "kube_server.py", arguments: [
            "--cert", file("server.pem"), "--key", file("server.key"),
            "--idp", "http://\(idp.host):\(idp.port)", "--scope", CLIKubectlCredentialTests.scope])
    }

    deinit {
        try? FileManager.default.removeItem(at: directory)
    }

    func stats() throws -> StandInServer.Stats {
        try server.stats(at: "https://127.0.0.1:\(port)/_stats", curlOptions: ["--cacert", certificateAuthority.path])
    }
}
