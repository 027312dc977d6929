import Foundation
import Testing
@testable import SecretServiceStore
@testable import TokenCache
@testable import TokenCacheCore
@testable import TokenCachePlatform
import TokenCacheTestSupport
import TokenCacheTestIdentityProvider

extension OtherToolsStores {
    /// Single sign-on with other tools' caches (#29): a family refresh token Azure CLI keeps (written
    /// by the real msal-extensions and MSAL Python) is redeemed here only when the store is opted in,
    /// the rotated token goes back into Azure CLI's cache under its lock, and Azure CLI's own MSAL
    /// then keeps refreshing from it at a provider that rotates refresh tokens.
    @Suite("Single sign-on with other tools' caches", .harness, .serialized, .enabled(if: TestEnvironment.runsInteropTests))
    struct ExternalStoreSSOTests {
        static let azureCLIClient = "04b07795-8ddb-461a-bbee-02f9e1bf7b46"
        static let armScope = "https://management.core.windows.net//user_impersonation"

        /// Azure CLI signed Alice in at `idp` (through msal-extensions, as Azure CLI does), with a
        /// family refresh token the provider knows; an unknown top-level field is added.
        static func azureCLISignedIn(_ machine: ExternalStoreTests.Machine, store: [String], idp: FakeIdentityProvider,
                                     refreshToken: String) async throws {
            var response = Fixtures.response(for: Fixtures.alice, scope: armScope, foci: "1", tag: "az", expiresIn: 3600)
            response["refresh_token"] = refreshToken
            let seed = machine.home.appendingPathComponent("seed.json")
            // MSAL Python accepts only https authorities; it files the tokens under the host alone
            // (127.0.0.1), as this project does for the provider's http address.
            try JSONSerialization.data(withJSONObject: ["client_id": azureCLIClient, "authority": "https://127.0.0.1/\(Fixtures.alice.tenant)",
                                                        "scope": [armScope], "response": response]).write(to: seed)
            _ = try machine.peer(store, ["write", seed.path])
            _ = try machine.peer(store, ["add-field", "FutureSection", #"{"kept": true}"#])
            try await idp.seed(refreshToken: refreshToken, user: Fixtures.alice, clientID: azureCLIClient, family: "1")
        }

        static func refreshTokenSecrets(_ listing: [String: Any]) -> [String] {
            ((listing["tokens"] as? [[String: Any]]) ?? []).filter { ($0["credential_type"] as? String) == "RefreshToken" }
                .compactMap { $0["secret"] as? String }
        }

        func token(_ machine: ExternalStoreTests.Machine, _ idp: FakeIdentityProvider, _ extra: [String]) throws -> ProcessOutput {
            // The group on the encrypted file in the machine's directory (--backend file --group …).
            try machine.cli.run(["token", "--client", Fixtures.appTwo, "--scopes", "User.Read", "--refresh",
                                 "--account", Fixtures.alice.username, "--authority", idp.authority().url.absoluteString] + extra)
        }

        @Test("token --refresh --sso-store: Azure CLI's family refresh token gets this app a token, saved in the group; the rotated token is written back, kept with the unknown field, and Azure CLI's MSAL refreshes with it",
              arguments: ["azure-cli", "azure-cli-encrypted"])
        func refreshThroughAzureCLI(_ name: String) async throws {
            if name == "azure-cli-encrypted" { try #require(TestEnvironment.runsSecretServiceTests, "no Secret Service") }
            let idp = try FakeIdentityProvider(https: true)
            let machine = try ExternalStoreTests.Machine()
            defer { machine.cleanUp() }
            let catalogue = ExternalStore.catalogue(home: machine.home.path, dataHome: machine.cli.dataHome.path)
            let external = try #require(catalogue.first { $0.name == name })
            var store = ["--file", machine.azureCLIFile]
            var cleanUp: () -> Void = {}
            if name == "azure-cli-encrypted" {
                let (arguments, item) = try ExternalStoreTests.libsecretArguments(external)
                store = arguments
                let backend = try SecretServiceBackend()
                cleanUp = {
                    while let found = try? backend.findExternalItem(attributeSets: [item.attributes], schema: nil) {
                        _ = try? backend.client.delete(found.path)
                    }
                }
                cleanUp()
            }
            defer { cleanUp() }
            try await Self.azureCLISignedIn(machine, store: store, idp: idp, refreshToken: "rt-az-initial")

            // Off by default: the account is not this app's, and nothing is sent anywhere.
            let off = try token(machine, idp, [])
            #expect(off.status == 2, "\(off.stdout) \(off.stderr)")
            #expect(try await idp.stats().token_requests == 0)

            let on = try token(machine, idp, ["--sso-store", name])
            #expect(on.status == 0, "\(on.stderr)")
            let accessToken = on.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(accessToken.hasPrefix("at-issued-"))
            let grants = try await idp.stats().grants
            #expect(grants.count == 1)
            #expect(grants.first?.redeemed == "rt-az-initial" && grants.first?.client_id == Fixtures.appTwo)
            let rotated = try #require(grants.first?.issued)

            // Saved in the group: the next call is served from the cache, without the store.
            let cached = try machine.cli.run(["token", "--client", Fixtures.appTwo, "--scopes", "User.Read",
                                              "--account", Fixtures.alice.username])
            #expect(cached.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == accessToken)
            // Azure CLI's cache got the rotated refresh token in place of the redeemed one, and
            // nothing of this app's: its client's tokens stay in the group.
            let listing = try machine.peer(store + ["--show-secrets"], ["list"])
            #expect(Self.refreshTokenSecrets(listing) == [rotated])
            #expect(((listing["tokens"] as? [[String: Any]]) ?? []).allSatisfy { $0["client_id"] as? String == Self.azureCLIClient })
            #expect(listing["unknown_top_level_fields"] as? [String] == ["FutureSection"])
            #expect(!FileManager.default.fileExists(atPath: external.lockFiles[0]))

            // Azure CLI's MSAL keeps working: the provider no longer accepts the redeemed token.
            let azure = try machine.peer(store, ["silent", "--client", Self.azureCLIClient, "--authority", idp.httpsAuthority(),
                                                 "--ca-bundle", try #require(idp.certificate).path,
                                                 "--username", Fixtures.alice.username, "--scopes", Self.armScope])
            let result = try #require(azure["result"] as? [String: Any])
            #expect(result["error"] == nil, "Azure CLI's MSAL could not refresh: \(result)")
            #expect((result["access_token"] as? String)?.hasPrefix("at-issued-") == true)
            #expect(try await idp.stats().grants.last?.redeemed == rotated)
        }

        @Test("The app API lists an opted-in store's accounts and signs in silently with its family token; after remove(account) neither happens")
        func appAPI() async throws {
            let idp = try FakeIdentityProvider()
            let machine = try ExternalStoreTests.Machine()
            defer { machine.cleanUp() }
            try await Self.azureCLISignedIn(machine, store: ["--file", machine.azureCLIFile], idp: idp, refreshToken: "rt-az-app")
            let azureCLI = try #require(ExternalStore.catalogue(home: machine.home.path, dataHome: machine.cli.dataHome.path)
                .first { $0.name == "azure-cli" })
            let group = AccountStore(backend: InMemoryBackend())

            let plain = PublicClientApplication(clientID: Fixtures.appTwo, authority: idp.authority(), store: group)
            #expect(try await plain.accounts().isEmpty)

            var options = PublicClientApplication.Options()
            options.singleSignOnStores = [azureCLI]
            let app = PublicClientApplication(clientID: Fixtures.appTwo, authority: idp.authority(), store: group, options: options)
            let account = try #require(try await app.account(forUsername: Fixtures.alice.username))
            let result = try await app.acquireTokenSilent(scopes: ["User.Read"], account: account)
            #expect(!result.isFromCache && result.accessToken.hasPrefix("at-issued-"))
            #expect(try await app.accounts().map(\.homeAccountID) == [Fixtures.alice.homeAccountID])
            #expect(try group.accounts(clientID: Fixtures.appTwo).count == 1, "the token was not saved in the group")

            // Signed out here means signed out for this app, wherever tokens are.
            try await app.remove(account)
            #expect(try await app.accounts().isEmpty)
            let requests = try await idp.stats().token_requests
            await #expect(throws: TokenCacheError.self) {
                _ = try await app.acquireTokenSilent(scopes: ["User.Read"], account: account, forceRefresh: true)
            }
            #expect(try await idp.stats().token_requests == requests, "a signed-out app redeemed a store's token")
        }

        @Test("A configuration's singleSignOnStores (tokencache.json) opts the app into those built-in stores; an unknown name is refused naming the field")
        func configuration() throws {
            let json = Data(#"{"clientId": "aaaaaaaa-0000-0000-0000-000000000002", "authority": "https://login.microsoftonline.com/common", "singleSignOnStores": ["azure-cli"]}"#.utf8)
            let configuration = try AppConfiguration.load(json: json)
            #expect(configuration.singleSignOnStores == ["azure-cli"])
            let app = try PublicClientApplication(configuration: configuration, store: AccountStore(backend: InMemoryBackend()))
            #expect(app.options.singleSignOnStores.map(\.name) == ["azure-cli"])
            #expect(app.options.singleSignOnStores.first?.location == ExternalStore.azureConfigDirectory(home: ExternalStore.defaultHome) + "/msal_token_cache.json")
            let plain = AppConfiguration(clientID: Fixtures.appTwo, authority: "https://login.microsoftonline.com/common")
            #expect(try PublicClientApplication(configuration: plain, store: AccountStore(backend: InMemoryBackend())).options.singleSignOnStores.isEmpty)
            var unknown = configuration
            unknown.singleSignOnStores = ["no-such-tool"]
            #expect { try PublicClientApplication(configuration: unknown, store: AccountStore(backend: InMemoryBackend())) } throws: { error in
                (error as? TokenCacheError)?.field == "singleSignOnStores" && (error as? TokenCacheError)?.message.contains("no-such-tool") == true
            }
            unknown.singleSignOnStores = ["not a name"]
            #expect(throws: TokenCacheError.self) { try unknown.validate() }
        }

        @Test("A store's refresh token never goes to another host: an app at a foreign authority neither lists the account nor sends anything")
        func hostRule() async throws {
            let idp = try FakeIdentityProvider()
            let foreign = try FakeIdentityProvider(host: "127.0.0.2")
            let machine = try ExternalStoreTests.Machine()
            defer { machine.cleanUp() }
            try await Self.azureCLISignedIn(machine, store: ["--file", machine.azureCLIFile], idp: idp, refreshToken: "rt-az-host")
            let azureCLI = try #require(ExternalStore.catalogue(home: machine.home.path, dataHome: machine.cli.dataHome.path)
                .first { $0.name == "azure-cli" })
            var options = PublicClientApplication.Options()
            options.singleSignOnStores = [azureCLI]
            let app = PublicClientApplication(clientID: Fixtures.appTwo, authority: foreign.authority(), store: AccountStore(backend: InMemoryBackend()),
                                              options: options)
            // Not listed (its tokens cannot go to this authority), and not redeemed when named.
            #expect(try await app.accounts().isEmpty)
            let account = try #require(try ExternalStoreAccess(azureCLI, secretService: nil).read()?.account(Fixtures.alice.username))
            await #expect(throws: TokenCacheError.self) { _ = try await app.acquireTokenSilent(scopes: ["User.Read"], account: account) }
            #expect(try await foreign.stats().token_requests == 0)
            #expect(try await idp.stats().token_requests == 0)
        }

        @Test("doctor shows the stores opted in and where from; an unknown name is a usage error; off by default")
        func doctorShowsOptIn() throws {
            var machine = try ExternalStoreTests.Machine()
            defer { machine.cleanUp() }
            func row(_ output: ProcessOutput) throws -> [String: Any] {
                let report = try ExternalStoreTests.json(output)
                return try #require((report["settings"] as? [String: Any])?["single_sign_on_stores"] as? [String: Any])
            }
            #expect(try row(machine.tokencache(["doctor", "--json"]))["value"] as? String == "none")
            #expect(try row(machine.tokencache(["doctor", "--json"]))["source"] as? String == "default")

            let config = machine.cli.dataHome.appendingPathComponent("config")
            try FileManager.default.createDirectory(at: config.appendingPathComponent("tokencache"), withIntermediateDirectories: true)
            try Data(#"{"single_sign_on": ["azure-cli"]}"#.utf8).write(to: config.appendingPathComponent("tokencache/config.json"))
            var cli = machine.cli
            cli.environmentOverrides["XDG_CONFIG_HOME"] = config.path
            machine = ExternalStoreTests.Machine(cli: cli)
            let fromFile = try row(machine.tokencache(["doctor", "--json"]))
            #expect(fromFile["value"] as? String == "azure-cli")
            #expect((fromFile["source"] as? String)?.hasSuffix("config.json") == true)
            let table = try machine.tokencache(["doctor"])
            #expect(table.stdout.contains("single sign-on with azure-cli"))

            cli.environmentOverrides["TOKENCACHE_SSO_STORES"] = "azure-cli-encrypted, azure-cli"
            machine = ExternalStoreTests.Machine(cli: cli)
            let fromVariable = try row(machine.tokencache(["doctor", "--json"]))
            #expect(fromVariable["value"] as? String == "azure-cli-encrypted,azure-cli")
            #expect(fromVariable["source"] as? String == "TOKENCACHE_SSO_STORES")

            cli.environmentOverrides["TOKENCACHE_SSO_STORES"] = "no-such-tool"
            machine = ExternalStoreTests.Machine(cli: cli)
            let unknown = try machine.tokencache(["doctor"])
            #expect(unknown.status == 64)
            #expect(unknown.stderr.contains("no-such-tool") && unknown.stderr.contains("azure-cli"))
            let flag = try machine.tokencache(["token", "--client", Fixtures.appTwo, "--scopes", "User.Read", "--sso-store", "nope",
                                               "--refresh", "--authority", "https://login.microsoftonline.com/organizations"])
            #expect(flag.status == 64)
            #expect(flag.stderr.contains("nope"))
            let alone = try machine.tokencache(["token", "--client", Fixtures.appTwo, "--scopes", "User.Read", "--sso-store", "azure-cli", "--no-refresh"])
            #expect(alone.status == 64)
            #expect(alone.stderr.contains("--no-refresh"))
        }

        @Test("token --store reads another tool's cached access token; --store with --refresh is a usage error naming --sso-store")
        func tokenFromStore() throws {
            let machine = try ExternalStoreTests.Machine()
            defer { machine.cleanUp() }
            try machine.writeAzureCLICache()
            let found = try machine.tokencache(["token", "--store", "azure-cli", "--client", Self.azureCLIClient,
                                                "--scopes", "https://management.core.windows.net//user_impersonation"])
            #expect(found.status == 0, "\(found.stderr)")
            let listing = try machine.peer(["--file", machine.azureCLIFile, "--show-secrets"], ["list"])
            let accessTokens = ((listing["tokens"] as? [[String: Any]]) ?? []).filter { $0["credential_type"] as? String == "AccessToken" }
            #expect(accessTokens.compactMap { $0["secret"] as? String } == [found.stdout.trimmingCharacters(in: .whitespacesAndNewlines)])
            let missing = try machine.tokencache(["token", "--store", "azure-cli", "--client", Fixtures.appTwo, "--scopes", "User.Read"])
            // Alice is an account of every family app there (Azure CLI's token is a family token),
            // but the store has no access token of this app.
            #expect(missing.status == 2)
            #expect(missing.stderr.contains("No usable cached access token for client \(Fixtures.appTwo)"))
            let nobody = try machine.tokencache(["token", "--store", "azure-cli", "--client", Self.azureCLIClient, "--scopes", "User.Read",
                                                 "--account", "nobody@contoso.example"])
            #expect(nobody.status == 2)
            #expect(nobody.stderr.contains("in store azure-cli"))
            // The way to a token there is Azure CLI's own sign-in: tokencache login would not put it there.
            for output in [missing, nobody] {
                #expect(output.stderr.contains("az login") && !output.stderr.contains("tokencache login"), "\(output.stderr)")
            }
            let refused = try machine.tokencache(["token", "--store", "azure-cli", "--client", Self.azureCLIClient, "--scopes", "x",
                                                  "--refresh", "--authority", "https://login.microsoftonline.com/organizations"])
            #expect(refused.status == 64)
            #expect(refused.stderr.contains("--sso-store"))
        }
    }
}
