import Foundation
import Testing
@testable import TokenCache
@testable import TokenCacheCore
import TokenCacheTestSupport
import TokenCacheTestIdentityProvider

/// Continuous access evaluation (#47 item 3): client capabilities merged into `claims` as MSAL
/// sends them, a resource's `insufficient_claims` challenge answered by a silent refresh that
/// skips the cache, and a refresh refused with claims returning them.
@Suite("Continuous access evaluation: cp1, claims challenges", .harness)
struct ContinuousAccessEvaluationTests {
    /// The claims of the challenge in Microsoft's documentation ("Claims challenges").
    static let challenge = #"{"access_token":{"nbf":{"essential":true,"value":"1604106651"}}}"#
    static let cp1Only = #"{"access_token":{"xms_cc":{"values":["cp1"]}}}"#

    let idp: FakeIdentityProvider
    let store = AccountStore(backend: InMemoryBackend())

    init() throws { idp = try FakeIdentityProvider() }

    /// Alice signed in to app one with a refresh token the provider knows.
    func signIn(refreshToken: String = "rt-initial-cae") async throws {
        var response = Fixtures.response(for: Fixtures.alice, scope: "User.Read", foci: nil, tag: "cae")
        response["refresh_token"] = refreshToken
        try store.save(Fixtures.tokenResponse(response), clientID: Fixtures.appOne, authority: idp.authority(), scopes: [])
        try await idp.seed(refreshToken: refreshToken, user: Fixtures.alice, clientID: Fixtures.appOne, family: nil)
    }

    /// The app from its configuration, declaring `capabilities`.
    func app(capabilities: [String]) throws -> PublicClientApplication {
        var configuration = AppConfiguration(clientID: Fixtures.appOne, authority: idp.authority().url.absoluteString)
        configuration.clientCapabilities = capabilities
        var options = PublicClientApplication.Options()
        options.requestTimeout = 60
        return try PublicClientApplication(configuration: configuration, store: store, options: options)
    }

    static func object(_ json: String?) throws -> NSDictionary {
        let text = try #require(json)
        return try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? NSDictionary)
    }

    // MARK: The claims parameter

    @Test("cp1 merge: capabilities only, claims only, both, and caller claims that already have access_token (xms_cc replaced, others kept)")
    func mergeCases() throws {
        #expect(try ClaimsRequest.merged(capabilities: [], claims: nil) == nil)
        #expect(try ClaimsRequest.merged(capabilities: ["cp1"], claims: nil) == Self.cp1Only)
        // Without capabilities the caller's text goes as given, as MSAL sends it.
        #expect(try ClaimsRequest.merged(capabilities: [], claims: Self.challenge) == Self.challenge)
        #expect(try ClaimsRequest.merged(capabilities: ["cp1"], claims: Self.challenge)
                == #"{"access_token":{"nbf":{"essential":true,"value":"1604106651"},"xms_cc":{"values":["cp1"]}}}"#)
        let withOwn = #"{"id_token":{"auth_time":{"essential":true}},"access_token":{"xms_cc":{"values":["old"]},"acrs":{"essential":true,"value":"c1"}}}"#
        #expect(try Self.object(try ClaimsRequest.merged(capabilities: ["cp1", "cp2"], claims: withOwn)) == Self.object(
            #"{"id_token":{"auth_time":{"essential":true}},"access_token":{"acrs":{"essential":true,"value":"c1"},"xms_cc":{"values":["cp1","cp2"]}}}"#))
        #expect(throws: TokenCacheError.self) { try ClaimsRequest.merged(capabilities: ["cp1"], claims: "not json") }
        #expect(throws: TokenCacheError.self) { try ClaimsRequest.merged(capabilities: ["cp1"], claims: #"{"access_token":[1]}"#) }
        #expect(throws: TokenCacheError.self) { try ClaimsRequest.merged(capabilities: ["c p1"], claims: nil) }
    }

    @Test("AppConfiguration reads clientCapabilities from tokencache.json and refuses a malformed one, naming the field")
    func configurationField() throws {
        let json = #"{"clientId":"\#(Fixtures.appOne)","authority":"https://login.microsoftonline.com/common","clientCapabilities":["cp1"]}"#
        #expect(try AppConfiguration.load(json: Data(json.utf8)).clientCapabilities == ["cp1"])
        let bad = json.replacingOccurrences(of: #"["cp1"]"#, with: #"["cp 1"]"#)
        let error = #expect(throws: TokenCacheError.self) { try AppConfiguration.load(json: Data(bad.utf8)) }
        #expect(error?.field == "clientCapabilities")
    }

    @Test("ClaimsChallenge reads the documented insufficient_claims header (base64 and base64url) and nothing else")
    func challengeHeader() throws {
        let encoded = Data(Self.challenge.utf8).base64EncodedString()
        let header = #"Bearer realm="", authorization_uri="https://login.microsoftonline.com/common/oauth2/authorize", error="insufficient_claims", claims="\#(encoded)""#
        #expect(ClaimsChallenge(wwwAuthenticate: header)?.claims == Self.challenge)
        #expect(ClaimsChallenge(wwwAuthenticate: #"Basic realm="x", Bearer error="insufficient_claims", claims=\#(Base64URL.encode(Data(Self.challenge.utf8)))"#)?.claims == Self.challenge)
        #expect(ClaimsChallenge(wwwAuthenticate: #"Bearer realm="", error="invalid_token""#) == nil)
        #expect(ClaimsChallenge(wwwAuthenticate: #"Bearer error="insufficient_claims", claims="bm90IGpzb24=""#) == nil)  // "not json"
        #expect(ClaimsChallenge(wwwAuthenticate: "") == nil)
    }

    // MARK: Through the token endpoint and a resource

    @Test("An app with cp1 sends it on every refresh; the resource's insufficient_claims challenge becomes a refresh with the claims and cp1, and the resource accepts the new token")
    func challengeRetried() async throws {
        try await signIn()
        let app = try app(capabilities: ["cp1"])
        let first = try await app.acquireTokenSilent(scopes: ["User.Read"], accountNamed: nil, forceRefresh: true)
        #expect(try await idp.resource(accessToken: first.accessToken).status == 200)

        try await idp.challengeAtResource(Self.challenge)
        let refused = try await idp.resource(accessToken: first.accessToken)
        #expect(refused.status == 401)
        let header = try #require(refused.wwwAuthenticate)
        let challenge = try #require(ClaimsChallenge(wwwAuthenticate: header))
        #expect(challenge.claims == Self.challenge)
        // Without the challenge the cached token comes back (and would be refused again).
        #expect(try await app.acquireTokenSilent(scopes: ["User.Read"], accountNamed: nil).accessToken == first.accessToken)

        let second = try await app.acquireTokenSilent(scopes: ["User.Read"], accountNamed: nil, answering: challenge)
        #expect(second.accessToken != first.accessToken && !second.isFromCache)
        #expect(try await idp.resource(accessToken: second.accessToken).status == 200)
        let grants = try await idp.stats().grants
        #expect(grants.map(\.outcome) == ["ok", "ok"])
        #expect(try Self.object(grants[0].claims) == Self.object(Self.cp1Only))
        #expect(try Self.object(grants[1].claims) == Self.object(
            #"{"access_token":{"nbf":{"essential":true,"value":"1604106651"},"xms_cc":{"values":["cp1"]}}}"#))
        // The new token is the cached one now.
        #expect(try await app.acquireTokenSilent(scopes: ["User.Read"], accountNamed: nil).accessToken == second.accessToken)
    }

    @Test("Without cp1 nothing is added to the request, and the resource cannot challenge (plain invalid_token)")
    func withoutCapabilities() async throws {
        try await signIn()
        let app = try app(capabilities: [])
        let token = try await app.acquireTokenSilent(scopes: ["User.Read"], accountNamed: nil, forceRefresh: true)
        #expect(try await idp.stats().grants.map(\.claims) == [nil])
        try await idp.challengeAtResource(Self.challenge)
        let refused = try await idp.resource(accessToken: token.accessToken)
        #expect(refused.status == 401)
        #expect(refused.wwwAuthenticate.flatMap(ClaimsChallenge.init(wwwAuthenticate:)) == nil)
    }

    @Test("A refresh refused with a claims challenge (AADSTS50076 interaction_required) returns the claims in the error, and keeps the tokens")
    func refusalReturnsClaims() async throws {
        try await signIn()
        let mfa = #"{"access_token":{"capolids":{"essential":true,"values":["c0ffee00-0000-0000-0000-000000000000"]}}}"#
        try await idp.control(["refresh_interaction_claims": mfa])
        let before = try store.exportMSALJSON()
        let challenge = try #require(ClaimsChallenge(wwwAuthenticate:
            #"Bearer error="insufficient_claims", claims="\#(Data(Self.challenge.utf8).base64EncodedString())""#))
        let app = try app(capabilities: ["cp1"])
        let error = await #expect(throws: TokenCacheError.self) {
            _ = try await app.acquireTokenSilent(scopes: ["User.Read"], accountNamed: nil, answering: challenge)
        }
        #expect(error?.code == .interactionRequired)
        #expect(error?.server?.claims == mfa)
        #expect(error?.server?.errorCodes == [50076])
        #expect(error?.hint?.contains("claims challenge") == true)
        #expect(try store.exportMSALJSON() == before)
    }

    // MARK: MSAL Python as the judge

    @Test("MSAL Python with client_capabilities=[cp1] sends the same claims as we do: capabilities only, claims only, both",
          .enabled(if: TestEnvironment.runsInteropTests))
    func sameClaimsAsMSALPython() async throws {
        let idp = try FakeIdentityProvider(https: true)
        let store = AccountStore(backend: InMemoryBackend())
        let cases: [(capabilities: [String], challenge: String?)] = [(["cp1"], nil), ([], Self.challenge), (["cp1"], Self.challenge)]
        for (index, (capabilities, challenge)) in cases.enumerated() {
            var response = Fixtures.response(for: Fixtures.alice, scope: "User.Read", foci: nil, tag: "interop")
            response["refresh_token"] = "rt-interop-\(index)"
            try store.save(Fixtures.tokenResponse(response), clientID: Fixtures.appOne, authority: idp.authority(), scopes: [])
            try await idp.seed(refreshToken: "rt-interop-\(index)", user: Fixtures.alice, clientID: Fixtures.appOne, family: nil)
            var options = PublicClientApplication.Options()
            options.clientCapabilities = capabilities
            options.requestTimeout = 60
            let app = PublicClientApplication(clientID: Fixtures.appOne, authority: idp.authority(), store: store, options: options)
            let account = try #require(try store.account(Fixtures.alice.username))
            var parameters = SilentTokenParameters(scopes: ["User.Read"], account: account)
            parameters.forceRefresh = true
            parameters.claims = challenge
            _ = try await app.acquireTokenSilent(parameters)
            let ours = try #require(try await idp.stats().grants.last)
            #expect(ours.outcome == "ok" && ours.sdk == "-")

            // MSAL Python redeems the (rotated) refresh token our store now holds, for the same request.
            let cache = try #require(try JSONSerialization.jsonObject(with: try store.exportMSALJSON()) as? [String: Any])
            var request: [String: Any] = [
                "op": "silent", "cache": cache, "authority": idp.httpsAuthority(), "ca_bundle": try #require(idp.certificate).path,
                "client_id": Fixtures.appOne, "username": Fixtures.alice.username, "scopes": ["User.Read"],
                "client_capabilities": capabilities]
            if let challenge { request["claims_challenge"] = challenge }
            let answer = try await MSALPython.run(request)
            let result = try #require(answer["result"] as? [String: Any])
            #expect(result["access_token"] != nil, "\(result["error_description"] ?? "")")
            let theirs = try #require(try await idp.stats().grants.last)
            #expect(theirs.sdk == "MSAL.Python")
            #expect(try Self.object(ours.claims) == Self.object(theirs.claims), "case \(index): ours \(ours.claims ?? "nil"), MSAL Python's \(theirs.claims ?? "nil")")
        }
    }
}
