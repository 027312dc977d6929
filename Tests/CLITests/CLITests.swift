import Foundation
import Testing
@testable import EncryptedFileStore
@testable import SecretServiceStore
@testable import TokenCache
@testable import TokenCacheCore
@testable import TokenCachePlatform
import TokenCacheTestSupport
import TokenCacheTestIdentityProvider

@Suite("tokencache CLI", .harness)
struct CLITests {
    @Test("save, then list shows the account per client without any secret", arguments: cliBackends)
    func saveAndList(backend: String) throws {
        let cli = try CLI(backend: backend)
        defer { cli.cleanUp() }
        let one = try cli.save(Fixtures.alice, client: Fixtures.appOne)
        let two = try cli.save(Fixtures.alice, client: Fixtures.appTwo, foci: nil, scope: "Files.Read")
        let list = try cli.run(["list"])
        #expect(list.status == 0)
        #expect(list.stdout.contains(Fixtures.alice.username))
        #expect(list.stdout.contains(Fixtures.appOne) && list.stdout.contains(Fixtures.appTwo))
        #expect(list.stdout.contains("signed_in"))
        #expect(list.stdout.contains("Files.Read"))
        for response in [one, two] {
            for field in ["access_token", "refresh_token", "id_token"] {
                #expect(!list.stdout.contains(response[field] as! String), "list printed a \(field)")
                #expect(!list.stderr.contains(response[field] as! String))
            }
        }
    }

    @Test("save --display-name names the app in list and list --json; later saves keep the name", arguments: cliBackends)
    func displayName(backend: String) throws {
        let cli = try CLI(backend: backend)
        defer { cli.cleanUp() }
        let response = Fixtures.json(Fixtures.response(for: Fixtures.alice, scope: "User.Read", foci: "1", tag: "named"))
        let saved = try cli.run(["save", "--client", Fixtures.appOne, "--authority", Fixtures.authority().url.absoluteString,
                                 "--scopes", "User.Read", "--display-name", "Contoso Notes"], input: response)
        #expect(saved.status == 0, "\(saved.stderr)")
        _ = try cli.save(Fixtures.alice, client: Fixtures.appOne)
        #expect(try cli.run(["list"]).stdout.contains("Contoso Notes (\(Fixtures.appOne))"))
        let json = try cli.run(["list", "--json"]).stdout
        #expect(json.contains(#""display_name" : "Contoso Notes""#) || json.contains(#""display_name":"Contoso Notes""#), "\(json)")

        // A bad name is refused before anything is stored.
        let before = try cli.exported()
        let other = Fixtures.json(Fixtures.response(for: Fixtures.bob, scope: "User.Read", foci: "1", tag: "unnamed"))
        let bad = try cli.run(["save", "--client", Fixtures.appTwo, "--authority", Fixtures.authority().url.absoluteString,
                               "--scopes", "User.Read", "--display-name", ""], input: other)
        #expect(bad.status == 64)  // a bad option value is a usage error
        #expect(bad.stderr.contains("display name"))
        #expect(try cli.exported() == before)
    }

    @Test("list --json has the documented schema with sorted keys", arguments: cliBackends)
    func listJSON(backend: String) throws {
        let cli = try CLI(backend: backend)
        defer { cli.cleanUp() }
        _ = try cli.save(Fixtures.alice, client: Fixtures.appOne)
        let output = try cli.run(["list", "--json"])
        #expect(output.status == 0)
        let json = try #require(try JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [String: Any])
        #expect(Set(json.keys) == ["group", "location", "accounts"])
        let account = try #require((json["accounts"] as? [[String: Any]])?.first)
        #expect(Set(account.keys) == ["username", "home_account_id", "environment", "tenants", "authority_type", "name", "has_photo", "clients"])
        #expect(account["has_photo"] as? Bool == false)
        let client = try #require((account["clients"] as? [[String: Any]])?.first)
        #expect(Set(client.keys) == ["client_id", "sign_in_state", "family_id", "refresh_token", "has_id_token", "access_tokens"])
        #expect(client["refresh_token"] as? String == "family")
        let token = try #require((client["access_tokens"] as? [[String: Any]])?.first)
        #expect(Set(token.keys) == ["scopes", "tenant", "expires_on", "is_expired"])
        // Sorted keys: "accounts" before "group" before "location".
        let keys = ["\"accounts\"", "\"group\"", "\"location\""].map { output.stdout.range(of: $0)!.lowerBound }
        #expect(keys == keys.sorted())
    }

    @Test("token prints the cached token; exit code 2 when there is none", arguments: cliBackends)
    func tokenCommand(backend: String) throws {
        let cli = try CLI(backend: backend)
        defer { cli.cleanUp() }
        let response = try cli.save(Fixtures.alice, client: Fixtures.appOne)
        let found = try cli.run(["token", "--client", Fixtures.appOne, "--scopes", "User.Read"])
        #expect(found.status == 0)
        #expect(found.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == response["access_token"] as? String)
        let json = try cli.run(["token", "--client", Fixtures.appOne, "--scopes", "Mail.Read", "--json"])
        let result = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect(result["token_type"] as? String == "Bearer")
        #expect((result["authorization_header"] as? String)?.hasPrefix("Bearer ") == true)
        // Cache only: a refresh would go to login.microsoftonline.com, which tests never reach.
        let missing = try cli.run(["token", "--client", Fixtures.appOne, "--scopes", "Calendars.Read", "--no-refresh"])
        #expect(missing.status == 2)
        #expect(missing.stdout.isEmpty)
        #expect(missing.stderr.contains("hint:"))
    }

    @Test("200 cold token lookups on the Secret Service in a row all find the token (gnome-keyring answered a call on the default alias's object path, made while the process's session was being opened, with a collection path that does not exist: 2 % of cold lookups failed with 'no default collection')",
          .enabled(if: TestEnvironment.runsSecretServiceTests))
    func coldLookupsInARow() throws {
        let cli = try CLI(backend: "secret-service")
        defer { cli.cleanUp() }
        let response = try cli.save(Fixtures.alice, client: Fixtures.appOne)
        var failures: [String] = []
        for _ in 0..<200 {
            let found = try cli.run(["token", "--client", Fixtures.appOne, "--scopes", "User.Read"])
            if found.status != 0 || found.stdout.trimmingCharacters(in: .whitespacesAndNewlines) != response["access_token"] as? String {
                failures.append("exit \(found.status): \(found.stderr.prefix(200))")
            }
        }
        #expect(failures.isEmpty, "\(failures.count) of 200 failed, first: \(failures.first ?? "")")
    }

    @Test("token --account picks the account by username or home account ID among several; an unknown account exits 2",
          arguments: cliBackends)
    func tokenForAccount(backend: String) throws {
        let cli = try CLI(backend: backend)
        defer { cli.cleanUp() }
        let alice = try cli.save(Fixtures.alice, client: Fixtures.appOne)
        let bob = try cli.save(Fixtures.bob, client: Fixtures.appOne)
        let ambiguous = try cli.run(["token", "--client", Fixtures.appOne, "--scopes", "User.Read"])
        #expect(ambiguous.status == 64 && ambiguous.stderr.contains("--account"))
        for (selector, response) in [("ALICE@contoso.com", alice), (Fixtures.bob.homeAccountID, bob)] {
            let found = try cli.run(["token", "--client", Fixtures.appOne, "--scopes", "User.Read", "--account", selector])
            #expect(found.status == 0, "\(found.stderr)")
            #expect(found.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == response["access_token"] as? String)
        }
        let unknown = try cli.run(["token", "--client", Fixtures.appOne, "--scopes", "User.Read", "--account", "carol@contoso.com"])
        #expect(unknown.status == 2 && unknown.stdout.isEmpty)
    }

    @Test("token --refresh redeems the family refresh token at the token endpoint for an app that never signed in",
          arguments: cliBackends)
    func tokenRefresh(backend: String) async throws {
        let idp = try FakeIdentityProvider()
        let cli = try CLI(backend: backend)
        defer { cli.cleanUp() }
        var response = Fixtures.response(for: Fixtures.alice, scope: "User.Read", foci: "1", tag: "mail")
        response["refresh_token"] = "rt-initial-family"
        let saved = try cli.run(["save", "--client", Fixtures.appOne, "--authority", idp.authority().url.absoluteString,
                                 "--scopes", "User.Read"], input: Fixtures.json(response))
        #expect(saved.status == 0, "\(saved.stderr)")
        try await idp.seed(refreshToken: "rt-initial-family", user: Fixtures.alice, clientID: Fixtures.appOne, family: "1")

        // With --no-refresh there is nothing for app two: exit 2, no request.
        let cached = try cli.run(["token", "--client", Fixtures.appTwo, "--scopes", "User.Read", "--no-refresh"])
        #expect(cached.status == 2)
        #expect(try await idp.stats().token_requests == 0)

        let refreshed = try cli.run(["token", "--client", Fixtures.appTwo, "--scopes", "User.Read", "--refresh",
                                     "--account", Fixtures.alice.username, "--authority", idp.authority().url.absoluteString])
        #expect(refreshed.status == 0, "\(refreshed.stderr)")
        #expect(refreshed.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "at-issued-1")
        let grants = try await idp.stats().grants
        #expect(grants.count == 1 && grants.first?.client_id == Fixtures.appTwo && grants.first?.redeemed == "rt-initial-family")
        // Saved: the next call is served from the cache.
        #expect(try cli.run(["token", "--client", Fixtures.appTwo, "--scopes", "User.Read"]).stdout.hasPrefix("at-issued-1"))
        #expect(try await idp.stats().token_requests == 1)
        #expect(!refreshed.stderr.contains("rt-"))
    }

    @Test("token --refresh without libcurl fails with the typed libcurlMissing message and install hint, sends nothing and keeps the cache; lookups from the cache still work")
    func tokenRefreshWithoutLibcurl() async throws {
        let idp = try FakeIdentityProvider()
        var cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        cli.environmentOverrides["TOKENCACHE_LIBCURL_PATH"] = "/nonexistent/libcurl.so.4"
        // Saved as issued by the provider, so the refresh would go there (no other host may see it).
        let saved = try cli.run(["save", "--client", Fixtures.appOne, "--authority", idp.authority().url.absoluteString,
                                 "--scopes", "User.Read Mail.Read"],
                                input: Fixtures.json(Fixtures.response(for: Fixtures.alice, foci: "1", tag: Fixtures.appOne)))
        #expect(saved.status == 0, "\(saved.stderr)")
        let before = try cli.run(["export", "--format", "msal-json"]).stdout
        let refreshed = try cli.run(["token", "--client", Fixtures.appTwo, "--scopes", "User.Read", "--refresh",
                                     "--account", Fixtures.alice.username, "--authority", idp.authority().url.absoluteString])
        #expect(refreshed.status == 1)
        #expect(refreshed.stderr.contains("libcurl, which refreshing tokens needs, could not be loaded"), "\(refreshed.stderr)")
        #expect(refreshed.stderr.contains("apt-get install libcurl4"), "\(refreshed.stderr)")
        #expect(try await idp.stats().token_requests == 0)
        #expect(try cli.run(["export", "--format", "msal-json"]).stdout == before)
        let cached = try cli.run(["token", "--client", Fixtures.appOne, "--scopes", "User.Read"])
        #expect(cached.status == 0, "\(cached.stderr)")
    }

    @Test("Without libcrypto the encrypted file fails with the typed libcryptoMissing message and install hint and keeps the file; lookups on the Secret Service never load it")
    func withoutLibcrypto() throws {
        var cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        _ = try cli.save(Fixtures.alice, client: Fixtures.appOne)
        let before = try cli.run(["export", "--format", "msal-json"]).stdout
        cli.environmentOverrides["TOKENCACHE_LIBCRYPTO_PATH"] = "/nonexistent/libcrypto.so.3"
        let list = try cli.run(["list"])
        #expect(list.status == 1)
        #expect(list.stderr.contains("error: OpenSSL's libcrypto 3, which the encrypted file needs, could not be loaded (/nonexistent/libcrypto.so.3: "),
                "\(list.stderr)")
        #expect(list.stderr.contains("apt-get install libssl3"), "\(list.stderr)")
        let doctor = try cli.run(["doctor", "--json"])
        #expect(doctor.status == 1, "doctor fails: the file backend cannot work")
        #expect(doctor.stdout.contains("libcrypto 3, which the encrypted file needs, could not be loaded"), "\(doctor.stdout)")
        cli.environmentOverrides["TOKENCACHE_LIBCRYPTO_PATH"] = nil
        #expect(try cli.run(["export", "--format", "msal-json"]).stdout == before)

        guard TestEnvironment.runsSecretServiceTests else { return }
        var keyring = try CLI(backend: "secret-service")
        defer { keyring.cleanUp() }
        let response = try keyring.save(Fixtures.alice, client: Fixtures.appOne)
        keyring.environmentOverrides["TOKENCACHE_LIBCRYPTO_PATH"] = "/nonexistent/libcrypto.so.3"
        let token = try keyring.run(["token", "--client", Fixtures.appOne, "--scopes", "User.Read", "--account", Fixtures.alice.username])
        #expect(token.status == 0, "\(token.stderr)")
        #expect(token.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == response["access_token"] as? String)
        let helper = TestEnvironment.binDirectory.appendingPathComponent("TokenCacheTestHelper").path
        let probe = try runProcess(helper, ["ss-probe"], environment: ProcessInfo.processInfo.environment)
        #expect(probe.stdout.contains(#""libcrypto_mapped":false"#), "\(probe.stdout)\(probe.stderr)")
    }

    @Test("--collection session reaches a group mapped onto the in-memory session collection, which the default collection does not hold; an unknown label is collectionMissing",
          .enabled(if: TestEnvironment.runsSecretServiceTests))
    func sessionCollection() throws {
        let cli = try CLI(backend: "secret-service")
        defer { _ = try? cli.run(["remove", "--all", "--yes", "--collection", "session"]); cli.cleanUp() }
        let response = Fixtures.response(for: Fixtures.alice, scope: "User.Read", foci: nil, tag: "session")
        let saved = try cli.run(["save", "--client", Fixtures.appOne, "--authority", Fixtures.authority().url.absoluteString,
                                 "--scopes", "User.Read", "--collection", "session"], input: Fixtures.json(response))
        #expect(saved.status == 0, "\(saved.stderr)")
        let session = try cli.run(["list", "--json", "--collection", "session"])
        #expect(session.status == 0 && session.stdout.contains(Fixtures.alice.username), "\(session.stdout)\(session.stderr)")
        let token = try cli.run(["token", "--client", Fixtures.appOne, "--scopes", "User.Read", "--account", Fixtures.alice.username,
                                 "--collection", "session"])
        #expect(token.status == 0, "\(token.stderr)")
        // The default collection holds nothing of the group: not found there (exit 2).
        let onDisk = try cli.run(["list", "--json"])
        #expect(onDisk.status == 2 && onDisk.stdout.isEmpty && onDisk.stderr.contains("No group \(cli.group) on Secret Service, collection alias 'default'"),
                "\(onDisk.stdout)\(onDisk.stderr)")
        let missing = try cli.run(["list", "--collection", "No such keyring"])
        #expect(missing.status == 1 && missing.stderr.contains("No Secret Service collection is labelled 'No such keyring'"), "\(missing.stderr)")
    }

    @Test("TOKENCACHE_LOG_FILE receives the CLI's log at trace level, one line per record, and never the token it prints",
          arguments: cliBackends)
    func logFile(backend: String) throws {
        var cli = try CLI(backend: backend)
        defer { cli.cleanUp() }
        let log = cli.dataHome.appendingPathComponent("cli.log")
        cli.environmentOverrides["TOKENCACHE_LOG_FILE"] = log.path
        let response = try cli.save(Fixtures.alice, client: Fixtures.appOne)
        let token = try cli.run(["token", "--client", Fixtures.appOne, "--scopes", "User.Read", "--account", Fixtures.alice.username])
        #expect(token.status == 0, "\(token.stderr)")
        let accessToken = try #require(response["access_token"] as? String)
        #expect(token.stdout.contains(accessToken))
        #expect(token.stderr.isEmpty, "stderr stays at warning level: \(token.stderr)")
        let lines = try String(contentsOf: log, encoding: .utf8).split(separator: "\n")
        #expect(lines.contains { $0.contains(" trace tokencache: ") }, "\(lines)")
        #expect(!lines.contains { $0.contains(accessToken) || $0.contains(response["refresh_token"] as? String ?? "-") })
        let mode = try FileManager.default.attributesOfItem(atPath: log.path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
    }

    @Test("remove --client signs one app out and keeps the others; remove without it removes for all",
          arguments: cliBackends)
    func removeCommand(backend: String) throws {
        let cli = try CLI(backend: backend)
        defer { cli.cleanUp() }
        _ = try cli.save(Fixtures.alice, client: Fixtures.appOne)
        _ = try cli.save(Fixtures.alice, client: Fixtures.appTwo)
        _ = try cli.save(Fixtures.bob, client: Fixtures.appOne)

        let dryRun = try cli.run(["remove", "--account", Fixtures.alice.username, "--dry-run"])
        #expect(dryRun.status == 0 && dryRun.stdout.contains("Would remove"))
        #expect(try cli.run(["token", "--client", Fixtures.appOne, "--scopes", "User.Read", "--account", Fixtures.alice.username]).status == 0)

        let signOut = try cli.run(["remove", "--account", Fixtures.alice.username, "--client", Fixtures.appOne, "--yes"])
        #expect(signOut.status == 0, "\(signOut.stderr)")
        #expect(try cli.run(["token", "--client", Fixtures.appOne, "--scopes", "User.Read", "--account", Fixtures.alice.username]).status == 2)
        #expect(try cli.run(["token", "--client", Fixtures.appTwo, "--scopes", "User.Read", "--account", Fixtures.alice.username]).status == 0)

        let remove = try cli.run(["remove", "--account", Fixtures.alice.homeAccountID, "--yes"])
        #expect(remove.status == 0)
        #expect(try cli.run(["token", "--client", Fixtures.appTwo, "--scopes", "User.Read", "--account", Fixtures.alice.username]).status == 2)
        let list = try cli.run(["list"])
        #expect(!list.stdout.contains(Fixtures.alice.username) && list.stdout.contains(Fixtures.bob.username))

        let unknown = try cli.run(["remove", "--account", "nobody@example.com", "--yes"])
        #expect(unknown.status == 2)
        #expect(try cli.run(["remove", "--all", "--yes"]).status == 0)
        // Wiped, the test's own group holds nothing: not found, as any group that holds nothing.
        let wiped = try cli.run(["list"])
        #expect(wiped.status == 2 && wiped.stderr.contains("No group \(cli.group) on"), "\(wiped.stderr)")
    }

    @Test("remove without --yes and without a terminal asks nothing, removes nothing and exits 64 naming --yes")
    func removeConfirmation() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        _ = try cli.save(Fixtures.alice, client: Fixtures.appOne)
        let before = try cli.run(["export", "--format", "msal-json"]).stdout
        // Standard input is a pipe, not a terminal: no question can be asked.
        for arguments in [["remove", "--all"], ["remove", "--account", Fixtures.alice.username]] {
            let output = try cli.run(arguments, input: Data("y\n".utf8))
            #expect(output.status == 64, "\(output.stderr)")
            #expect(!output.stderr.contains("Continue?"))
            #expect(output.stderr.contains("Pass --yes"), "\(output.stderr)")
        }
        #expect(try cli.run(["export", "--format", "msal-json"]).stdout == before)
        #expect(try cli.run(["remove", "--all", "--yes"]).status == 0)
    }

    @Test("remove --client refuses an invalid client ID (64) and a client that never signed in to the account (2, listing those that did), changing nothing")
    func removeUnknownClient() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        _ = try cli.save(Fixtures.alice, client: Fixtures.appOne)
        let before = try cli.run(["export", "--format", "msal-json"]).stdout
        let invalid = try cli.run(["remove", "--account", Fixtures.alice.username, "--client", "not a client id", "--yes"])
        #expect(invalid.status == 64, "\(invalid.stderr)")
        let typo = try cli.run(["remove", "--account", Fixtures.alice.username, "--client", Fixtures.appThree, "--yes"])
        #expect(typo.status == 2, "\(typo.stderr)")
        #expect(typo.stderr.contains("never signed in") && typo.stderr.contains(Fixtures.appOne), "\(typo.stderr)")
        #expect(try cli.run(["export", "--format", "msal-json"]).stdout == before)
        let real = try cli.run(["remove", "--account", Fixtures.alice.username, "--client", Fixtures.appOne, "--yes"])
        #expect(real.status == 0, "\(real.stderr)")
    }

    @Test("export writes a 0600 file and import reads it back; neither prints a secret", arguments: cliBackends)
    func exportImport(backend: String) throws {
        let cli = try CLI(backend: backend)
        defer { cli.cleanUp() }
        let response = try cli.save(Fixtures.alice, client: Fixtures.appOne)
        let file = cli.dataHome.appendingPathComponent("export.json")
        let export = try cli.run(["export", "--format", "msal-json", "--output", file.path])
        #expect(export.status == 0)
        let mode = try FileManager.default.attributesOfItem(atPath: file.path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        #expect(!export.stdout.contains(response["access_token"] as! String))
        // Refuses to overwrite.
        #expect(try cli.run(["export", "--output", file.path]).status == 64)  // a path problem

        #expect(try cli.run(["remove", "--all", "--yes"]).status == 0)
        let imported = try cli.run(["import", "--format", "msal-json", file.path])
        #expect(imported.status == 0)
        #expect(imported.stdout.contains("Imported 6 entries"))
        #expect(!imported.stdout.contains(response["refresh_token"] as! String))
        #expect(try cli.run(["token", "--client", Fixtures.appOne, "--scopes", "User.Read"]).status == 0)
    }

    @Test("migrate moves a group from the encrypted file to the Secret Service and back, losing nothing",
          .enabled(if: TestEnvironment.runsSecretServiceTests))
    func migrateBothWays() throws {
        let file = try CLI(backend: "file"), keyring = CLI(file, backend: "secret-service")
        defer { file.cleanUp(); keyring.cleanUp() }
        _ = try file.save(Fixtures.alice, client: Fixtures.appOne)
        _ = try file.save(Fixtures.bob, client: Fixtures.appTwo, foci: nil, scope: "Files.Read")
        let original = try file.exported()
        #expect(original.count >= 5)

        let there = try file.run(["migrate", "--from", "file", "--to", "secret-service", "--group", file.group])
        #expect(there.status == 0, "\(there.stderr)")
        #expect(try keyring.exported() == original)
        #expect(try file.exported().allValues.allSatisfy { ($0 as? NSDictionary)?.count ?? 0 == 0 })

        let back = try file.run(["migrate", "--from", "secret-service", "--to", "file", "--group", file.group])
        #expect(back.status == 0, "\(back.stderr)")
        #expect(try file.exported() == original)
        #expect(try keyring.exported().allValues.allSatisfy { ($0 as? NSDictionary)?.count ?? 0 == 0 })
        #expect(try file.run(["token", "--client", Fixtures.appTwo, "--scopes", "Files.Read"]).status == 0)
    }

    @Test("Bad arguments give usage help and exit 64; bad input gives one error line with a hint")
    func badArguments() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        let noAccount = try cli.run(["remove"])
        #expect(noAccount.status == 64)
        #expect(noAccount.stderr.contains("Usage:"))
        let badGroup = try cli.run(["list", "--group", "not a group"], withGroup: false)
        #expect(badGroup.status == 64)
        let badBackend = try cli.run(["list", "--backend", "floppy"], withGroup: false)
        #expect(badBackend.status == 64)
        let badResponse = try cli.run(["save", "--client", Fixtures.appOne, "--authority", Fixtures.authority().url.absoluteString,
                                       "--scopes", "User.Read"], input: Data("{\"access_token\": 42}".utf8))
        #expect(badResponse.status == 1)
        #expect(badResponse.stderr.hasPrefix("error: Token response field 'access_token'"))
        #expect(badResponse.stderr.contains("hint:"))
    }

    @Test("Every command has --help with an example")
    func helpEverywhere() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        for command in ["list", "remove", "token", "save", "import", "export", "doctor", "migrate", "groups", "unlock"] {
            let help = try cli.run([command, "--help"], withGroup: false)
            #expect(help.status == 0, "\(command)")
            #expect(help.stdout.contains("Example"), "\(command) --help has no example")
        }
    }

    @Test("tokencache makes itself non-dumpable first thing: doctor reads PR_GET_DUMPABLE back and reports core dumps disabled")
    func coreDumpsDisabled() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        let json = try cli.run(["doctor", "--backend", "file", "--json"], withGroup: false)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any], "\(json.stderr)")
        let check = (object["checks"] as? [[String: Any]] ?? []).first { $0["name"] as? String == "core dumps" }
        #expect(check?["status"] as? String == "ok", "\(json.stdout)")
        #expect(check?["detail"] as? String == "disabled for this process (not dumpable)")
        let text = try cli.run(["doctor", "--backend", "file"], withGroup: false)
        #expect(text.stdout.contains("core dumps") && text.stdout.contains("disabled for this process"), "\(text.stdout)")
    }

    @Test("doctor reports the backend and exits non-zero with a fix when it cannot work")
    func doctor() throws {
        let cli = try CLI(backend: "file")
        defer { cli.cleanUp() }
        let file = try cli.run(["doctor", "--backend", "file", "--json"], withGroup: false)
        #expect(file.status == 0, "\(file.stderr)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(file.stdout.utf8)) as? [String: Any])
        #expect(json["selected"] as? String != nil)
        var environment = cli.environment
        environment["DBUS_SESSION_BUS_ADDRESS"] = "unix:path=/nonexistent/bus"
        let binary = TestEnvironment.binDirectory.appendingPathComponent("tokencache").path
        let noBus = try runProcess(binary, ["doctor", "--backend", "secret-service"], environment: environment)
        #expect(noBus.status == 1)
        #expect(noBus.stderr.contains("hint:"))
    }
}
