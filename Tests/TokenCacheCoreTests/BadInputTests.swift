import Foundation
import Logging
import Synchronization
import Testing
@testable import TokenCacheCore
import TokenCacheTestSupport

@Suite("Bad input gets a typed error and leaves the cache as it was", .harness)
struct BadInputTests {
    static var good: [String: Any] { Fixtures.response(for: Fixtures.alice) }

    static func with(_ field: String, _ value: Any?) -> Data {
        var response = good
        response[field] = value
        return Fixtures.json(response)
    }

    static let malformedResponses: [(name: String, body: Data, field: String)] = [
        ("missing access_token", with("access_token", nil), "access_token"),
        ("empty access_token", with("access_token", ""), "access_token"),
        ("numeric access_token", with("access_token", 42), "access_token"),
        ("non-numeric expires_in", with("expires_in", "soon"), "expires_in"),
        ("negative expires_in", with("expires_in", -5), "expires_in"),
        ("huge expires_in", with("expires_in", 99_999_999_999), "expires_in"),
        ("fractional expires_in", with("expires_in", 1.5), "expires_in"),
        ("boolean ext_expires_in", with("ext_expires_in", true), "ext_expires_in"),
        ("broken JWT", with("id_token", "not-a-jwt"), "id_token"),
        ("JWT with a non-JSON payload", with("id_token", "e30.bm90IGpzb24.c2ln"), "id_token"),
        ("bad base64 client_info", with("client_info", "%%%not base64%%%"), "client_info"),
        ("client_info that is not JSON", with("client_info", Base64URL.encode(Data("hello".utf8))), "client_info"),
        ("scope of the wrong type", with("scope", ["User.Read"]), "scope"),
        ("foci of the wrong type", with("foci", 1), "foci"),
        ("empty scopes", with("scope", ""), "scope"),
        ("an error response", with("error", "invalid_grant"), "error"),
        ("not JSON", Data("<html>".utf8), "(body)"),
        ("a JSON array", Data("[1,2]".utf8), "(body)"),
        ("invalid UTF-8", Data([0x7B, 0x22, 0xFF, 0xFE, 0x22, 0x3A, 0x31, 0x7D]), "(body)"),
        ("deep nesting", Data((String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)).utf8), "(body)"),
        ("huge token", with("access_token", String(repeating: "A", count: 2 << 20)), "(body)"),
    ]

    @Test("Each malformed token response is refused with the field named, and nothing changes",
          arguments: malformedResponses)
    func malformedResponseRefused(_ sample: (name: String, body: Data, field: String)) throws {
        let store = AccountStore(backend: InMemoryBackend())
        try store.save(Fixtures.tokenResponse(Fixtures.response(for: Fixtures.bob)), clientID: Fixtures.appOne,
                       authority: Fixtures.authority(), scopes: [], now: Fixtures.now)
        let before = try store.exportMSALJSON()
        let error = try #require(throws: TokenCacheError.self, "\(sample.name)") {
            try store.save(responseJSON: sample.body, clientID: Fixtures.appOne, authority: Fixtures.authority(),
                           scopes: [], now: Fixtures.now)
        }
        #expect(error.code == .invalidTokenResponse, "\(sample.name)")
        #expect(error.field == sample.field, "\(sample.name)")
        #expect(try store.exportMSALJSON() == before, "\(sample.name) changed the cache")
    }

    @Test("Invalid client IDs, authorities, groups and empty scopes are refused with a hint")
    func invalidArgumentsRefused() throws {
        let store = AccountStore(backend: InMemoryBackend())
        let response = Fixtures.tokenResponse(Self.good)
        for clientID in ["", "has space", String(repeating: "x", count: 300)] {
            #expect(throws: TokenCacheError.self) {
                try store.save(response, clientID: clientID, authority: Fixtures.authority(), scopes: [])
            }
        }
        for authority in ["http://login.microsoftonline.com/x", "https://login.microsoftonline.com", "not a url"] {
            let error = try #require(throws: TokenCacheError.self) { try Authority(authority) }
            #expect(error.code == .invalidArgument && error.hint != nil)
        }
        for group in ["", "nodots", "com..example", "com.exa mple", "com.-bad"] {
            #expect(throws: TokenCacheError.self) { try CacheGroup(group) }
        }
        try store.save(response, clientID: Fixtures.appOne, authority: Fixtures.authority(), scopes: [])
        let account = try #require(try store.allAccounts().first)
        let error = try #require(throws: TokenCacheError.self) {
            try store.accessToken(clientID: Fixtures.appOne, account: account, scopes: ["openid", "profile"])
        }
        #expect(error.field == "scopes")
    }

    @Test("ClientID takes a GUID and other providers' free-form IDs, and refuses empty, spaced, non-ASCII and over-long ones with a hint naming the app registration")
    func clientIDs() throws {
        for good in [Fixtures.appOne, "my-oidc-app", "https://contoso.com/app", String(repeating: "x", count: 256)] {
            #expect(try ClientID(good).value == good)
            #expect(try ClientID(good).description == good)
        }
        for bad in ["", "has space", "tab\there", "line\nbreak", "caf\u{E9}", String(repeating: "x", count: 257)] {
            let error = try #require(throws: TokenCacheError.self) { try ClientID(bad) }
            #expect(error.code == .invalidArgument && error.field == "client ID", "\(bad): \(error)")
            #expect(error.hint?.contains("application (client) ID") == true)
        }
        // The configuration an app is generated from checks it the same way, under its own key.
        let configuration = AppConfiguration(clientID: "has space", authority: Fixtures.authority().url.absoluteString)
        let error = try #require(throws: TokenCacheError.self) { try configuration.validate() }
        #expect(error.field == "clientId")
    }

    @Test("AAD v1 string-typed numbers are accepted")
    func stringNumbersAccepted() throws {
        let response = try TokenResponse(json: Self.with("expires_in", "3599"))
        #expect(response.expiresIn == 3599)
    }

    @Test("A malformed MSAL JSON cache is refused as a whole and nothing is imported")
    func malformedCacheRefused() throws {
        let store = AccountStore(backend: InMemoryBackend())
        for data in [Data("not json".utf8), Data("[]".utf8), Data([0xFF, 0x00]),
                     Data((String(repeating: "{\"a\":", count: 5000) + "1" + String(repeating: "}", count: 5000)).utf8)] {
            let error = try #require(throws: TokenCacheError.self) { try store.importMSALJSON(data) }
            #expect(error.code == .invalidCacheData)
        }
        #expect(try store.entries().isEmpty)
    }

    @Test("Variants other SDKs write are imported and kept (unusable ones too, never returned); only non-objects are skipped, with the reason")
    func importsVariants() throws {
        let home = Fixtures.alice.homeAccountID
        let json = """
        {
          "AccessToken": {
            "legacy-list-target": {"credential_type": "AccessToken", "secret": "at-list", "home_account_id": "\(home)",
              "environment": "login.microsoftonline.com", "client_id": "\(Fixtures.appOne)", "realm": "\(Fixtures.tenantA)",
              "target": ["User.Read", "Mail.Read"], "cached_at": 1800000000.25, "expires_on": 1800003600.5, "extended_expires_on": "1800003600"},
            "dotnet-style-key": {"credential_type": "AccessToken", "secret": "at-dotnet", "home_account_id": "\(home)",
              "environment": "login.windows.net", "client_id": "\(Fixtures.appTwo)", "realm": "\(Fixtures.tenantA)",
              "target": "Files.Read", "cached_at": "1800000000", "expires_on": "1800003600", "kid": "key-1", "future_field": {"x": [1, 2]}},
            "no-secret": {"credential_type": "AccessToken", "home_account_id": "\(home)"},
            "not-an-object": 17
          },
          "AccessToken_With_AuthScheme": {"pop": {"secret": "x"}},
          "Account": {"a": {"home_account_id": "\(home)", "environment": "login.microsoftonline.com", "realm": "\(Fixtures.tenantA)",
                            "username": "alice@contoso.com", "authority_type": "MSSTS"}},
          "RefreshToken": {"r": {"credential_type": "RefreshToken", "secret": "rt", "home_account_id": "\(home)",
                                 "environment": "login.microsoftonline.com", "client_id": "\(Fixtures.appOne)", "target": ["User.Read"]}}
        }
        """
        let store = AccountStore(backend: InMemoryBackend())
        let report = try store.importMSALJSON(Data(json.utf8))
        #expect(report.imported == [.accessToken: 3, .account: 1, .refreshToken: 1, .unknownSection: 1])
        #expect(report.skipped.map { "\($0.section)/\($0.key ?? "*"): \($0.reason)" }
                == ["AccessToken/not-an-object: the entry is a number, not a JSON object"])

        let account = try #require(try store.account("alice@contoso.com"))
        let listTarget = try store.accessToken(clientID: Fixtures.appOne, account: account, scopes: ["Mail.Read"], now: Fixtures.now)
        #expect(listTarget?.accessToken == "at-list")
        #expect(listTarget?.expiresOn == Date(timeIntervalSince1970: 1800003600.5))
        let dotnet = try store.accessToken(clientID: Fixtures.appTwo, account: account, scopes: ["Files.Read"], now: Fixtures.now)
        #expect(dotnet?.accessToken == "at-dotnet")

        // Unknown fields and keys survive export unchanged.
        let exported = try #require(try JSONSerialization.jsonObject(with: try store.exportMSALJSON()) as? [String: Any])
        let dotnetEntry = try #require((exported["AccessToken"] as? [String: Any])?["dotnet-style-key"] as? [String: Any])
        #expect(dotnetEntry["kid"] as? String == "key-1")
        #expect((dotnetEntry["future_field"] as? [String: Any])?["x"] as? [Int] == [1, 2])
        // So do the entry without a secret and the other SDK's section.
        #expect((exported["AccessToken"] as? [String: Any])?["no-secret"] != nil)
        #expect((exported["AccessToken_With_AuthScheme"] as? [String: Any])?["pop"] as? [String: String] == ["secret": "x"])
    }
}

/// Collects every log record, so tests can check what the library logs.
final class CapturingLogHandler: LogHandler, @unchecked Sendable {
    // @unchecked: the only mutable state is `records`, guarded by the mutex; `metadata` and
    // `logLevel` are set before the handler is shared.
    let records = Mutex<[String]>([])
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let text = "\(event.level) \(event.message) \(event.metadata.map { "\($0)" } ?? "")"
        records.withLock { $0.append(text) }
    }
}

@Suite("Logging", .harness)
struct LoggingTests {
    @Test("Nothing logged at trace level contains a secret, and personal data is redacted unless enabled")
    func logsNoSecretsOrPII() throws {
        let handler = CapturingLogHandler()
        var options = AccountStore.Options()
        options.logger = Logger(label: "test") { _ in handler }
        let store = AccountStore(backend: InMemoryBackend(), options: options)
        let response = Fixtures.response(for: Fixtures.alice)
        try store.save(Fixtures.tokenResponse(response), clientID: Fixtures.appOne, authority: Fixtures.authority(), scopes: [])
        let account = try #require(try store.allAccounts().first)
        _ = try store.accessToken(clientID: Fixtures.appOne, account: account, scopes: ["User.Read"])
        try store.signOut(account, clientID: Fixtures.appOne)
        try store.remove(account)
        _ = try? store.save(responseJSON: Data("{\"access_token\": 5}".utf8), clientID: Fixtures.appOne,
                            authority: Fixtures.authority(), scopes: [])

        let logs = handler.records.withLock { $0 }.joined(separator: "\n")
        #expect(!logs.isEmpty)
        for secret in ["access_token", "refresh_token", "id_token"].compactMap({ response[$0] as? String }) {
            #expect(!logs.contains(secret))
        }
        #expect(!logs.contains(Fixtures.alice.homeAccountID))
        #expect(!logs.contains(Fixtures.alice.username))
    }

    @Test("The MSAL log levels map onto swift-log levels")
    func logLevelMapping() {
        #expect(TokenCacheLogLevel.allCases.map(\.loggerLevel) == [.critical, .error, .warning, .info, .trace])
    }
}
