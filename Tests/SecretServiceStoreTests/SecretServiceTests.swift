import Foundation
import Testing
@testable import SecretServiceStore
@_spi(Testing) @_spi(Backend) @testable import TokenCache
@_spi(Backend) @testable import TokenCacheCore
@testable import TokenCacheDBus
@testable import TokenCachePlatform
import TokenCacheTestSupport
import CLibSecret

/// Against a real gnome-keyring in an isolated D-Bus session (scripts/with-test-keyring.sh).
/// In CI these must run: a missing session makes them fail, never skip.
@Suite("Secret Service backend", .enabled(if: TestEnvironment.runsSecretServiceTests), .harness)
struct SecretServiceTests {
    let group = try! CacheGroup("org.swift-tokencache.ss-\(UUID().uuidString.prefix(8).lowercased())")

    static var helper: String { TestEnvironment.binDirectory.appendingPathComponent("TokenCacheTestHelper").path }

    func save(_ store: AccountStore, _ user: Fixtures.User, client: String) throws {
        try store.save(Fixtures.tokenResponse(Fixtures.response(for: user, tag: client)), clientID: client,
                       authority: Fixtures.authority(), scopes: [], now: Fixtures.now)
    }

    @Test("The account store runs unchanged on the Secret Service")
    func accountStoreRoundTrip() throws {
        let store = AccountStore(backend: try SecretServiceBackend(), group: group)
        defer { try? store.removeAll() }
        try save(store, Fixtures.alice, client: Fixtures.appOne)
        try save(store, Fixtures.alice, client: Fixtures.appTwo)
        let reopened = AccountStore(backend: try SecretServiceBackend(), group: group)
        let account = try #require(try reopened.account(Fixtures.alice.username, clientID: Fixtures.appTwo))
        #expect(try reopened.accessToken(clientID: Fixtures.appOne, account: account, scopes: ["User.Read"], now: Fixtures.now) != nil)
        #expect(try reopened.refreshToken(clientID: try ClientID(Fixtures.appThree), account: account)?.familyID == "1")
        try reopened.signOut(account, clientID: Fixtures.appOne)
        #expect(try store.accounts(clientID: Fixtures.appOne).isEmpty)
        #expect(try store.accounts(clientID: Fixtures.appTwo).count == 1)
        try store.remove(account)
        #expect(try reopened.allAccounts().isEmpty)
        // Only app metadata (not tied to an account) remains; no credential of the account.
        let left = try SecretServiceBackend().load(group).entries
        #expect(left.allSatisfy { $0.kind == .appMetadata }, "\(left.map(\.kind))")
    }

    @Test("Items are visible to secret-tool with the documented attributes, labels and MSAL JSON secrets")
    func itemsVisibleToSecretTool() throws {
        let store = AccountStore(backend: try SecretServiceBackend(), group: group)
        defer { try? store.removeAll() }
        try save(store, Fixtures.alice, client: Fixtures.appOne)
        let output = try runProcess("/usr/bin/secret-tool", ["search", "--all", "group", group.name, "kind", "AccessToken"])
        let text = output.stdout + output.stderr
        #expect(text.contains("schema = org.swift-tokencache.Entry"))
        for attribute in ["schema_version = 1", "group = \(group.name)", "kind = AccessToken", "client_id = \(Fixtures.appOne)",
                          "home_account_id = \(Fixtures.alice.homeAccountID)", "environment = login.microsoftonline.com",
                          "realm = \(Fixtures.tenantA)", "key = "] {
            #expect(text.contains("attribute.\(attribute)"), "missing attribute \(attribute)")
        }
        #expect(text.contains("label = Access token · \(Fixtures.alice.username) · \(Fixtures.appOne) · Mail.Read User.Read"))
        // The secret is MSAL unified JSON that MSAL Python could load as a cache.
        let secretLine = try #require(text.split(separator: "\n").first { $0.hasPrefix("secret = ") })
        let secret = try #require(try JSONSerialization.jsonObject(with: Data(secretLine.dropFirst(9).utf8)) as? [String: Any])
        #expect(secret.keys.first == "AccessToken")
    }

    @Test("Unchanged entries are not rewritten, and lookups are targeted attribute searches")
    func targetedAndSkippedWrites() throws {
        let backend = try SecretServiceBackend()
        let store = AccountStore(backend: backend, group: group)
        defer { try? store.removeAll() }
        try save(store, Fixtures.alice, client: Fixtures.appOne)
        try save(store, Fixtures.bob, client: Fixtures.appOne)
        // (The revision itself may move: other tests write to the same daemon in parallel.)
        let writes = backend.signals.localWriteCount
        try save(store, Fixtures.alice, client: Fixtures.appOne)  // same response: nothing to write
        #expect(backend.signals.localWriteCount == writes)
        let bobs = try backend.entries(of: .refreshToken, matching: [.homeAccountID: Fixtures.bob.homeAccountID], in: group)
        #expect(bobs.count == 1 && bobs[0]["secret"] == "rt-\(Fixtures.bob.uid)-\(Fixtures.appOne)")
    }

    @Test("The session collection mapping keeps items in the in-memory session collection")
    func sessionMapping() throws {
        var options = SecretServiceBackend.Options()
        options.mappings[group] = .session
        let backend = try SecretServiceBackend(options: options)
        guard TestEnvironment.provider == .gnomeKeyring else {
            // KeePassXC and KWallet have no `session` alias (ReadAlias answers "/"): a typed
            // collectionMissing that says so and points at the default mapping (docs/SecretService.md).
            let error = try #require(throws: TokenCacheError.self) { try backend.collectionPath(for: group) }
            #expect(error.code == .collectionMissing && error.message == "The Secret Service has no 'session' collection.")
            #expect(error.hint?.contains("use the default mapping") == true)
            return
        }
        let store = AccountStore(backend: backend, group: group)
        defer { try? store.removeAll() }
        try save(store, Fixtures.alice, client: Fixtures.appOne)
        #expect(try backend.collectionPath(for: group) == "/org/freedesktop/secrets/collection/session")
        #expect(try AccountStore(backend: SecretServiceBackend(), group: group).allAccounts().isEmpty, "default mapping sees nothing")
        #expect(try AccountStore(backend: SecretServiceBackend(options: options), group: group).allAccounts().count == 1)
    }

    @Test("The default mapping addresses its collection by the collection's own path (ReadAlias), with or without unlock prompts; a missing alias is collectionMissing in the mapping's terms")
    func aliasAddressing() throws {
        let backend = try SecretServiceBackend()
        let login = try backend.collectionPath(for: group)
        #expect(login.hasPrefix("/org/freedesktop/secrets/collection/"))
        #expect(try backend.resolvedCollectionPath(for: group) == login)
        try backend.checkCollection(for: group)
        var options = SecretServiceBackend.Options()
        options.allowsUnlockPrompt = true
        #expect(try SecretServiceBackend(options: options).collectionPath(for: group) == login)

        let missing = SecretServiceBackend.missingAlias("default")
        #expect(missing.code == .collectionMissing)
        #expect(missing.message == "The Secret Service has no 'default' collection.")
        #expect(missing.hint?.contains("--backend file") == true)
    }

    @Test("A dedicated collection is found by label (a pre-made keyring file, unlocked without a prompt)",
          .enabled(if: TestEnvironment.provider == .gnomeKeyring, "GNOME Keyring's keyring files, in a nested GNOME Keyring of its own: runs in the GNOME Keyring run"))
    func dedicatedCollection() throws {
        // gnome-keyring loads keyring files when it starts: write it before the nested daemon runs.
        let keyring = "[keyring]\ndisplay-name=Token cache test\nctime=0\nmtime=0\nlock-on-idle=false\nlock-after=false\n"
        let results = try inFreshKeyring(#"$H ss-dedicated "Token cache test""#,
                                              keyringFiles: ["tokencache_test.keyring": keyring])
        #expect(results.first?["accounts"] as? Int == 1, "\(results)")
        #expect((results.first?["collection"] as? String)?.hasSuffix("/tokencache_5ftest") == true, "\(results)")
    }

    @Test("Creating a collection headless fails fast with promptDismissed and suggests the default mapping")
    func headlessCreationFails() throws {
        let results = try inFreshKeyring(#"$H ss-create-collection "Brand new""#)
        #expect(results.first?["result"] as? String == "promptDismissed")
        #expect((results.first?["hint"] as? String)?.contains("default mapping") == true)
    }

    @Test("Two processes share a group, and a removal by another process is seen on the next lookup")
    func sharingBetweenProcesses() throws {
        let store = AccountStore(backend: try SecretServiceBackend(), group: group)
        defer { try? store.removeAll() }
        let saved = try runProcess(Self.helper, ["ss-save", group.name, "carol@contoso.com", Fixtures.appOne])
        #expect(saved.status == 0, "\(saved.stderr)")
        let account = try #require(try store.account("carol@contoso.com", clientID: Fixtures.appTwo))
        #expect(try store.accessToken(clientID: Fixtures.appOne, account: account, scopes: ["User.Read"]) != nil)
        // Warm: the token comes from memory; then another process removes the account.
        let removed = try runProcess(Self.helper, ["ss-remove", group.name, "carol@contoso.com"])
        #expect(removed.status == 0, "\(removed.stderr)")
        // The signal arrives asynchronously; the next lookup after it must not return the token.
        // (Polled up to 10 s: on an idle machine it is gone within milliseconds.)
        var stillThere = true
        let deadline = Date().addingTimeInterval(10)
        while stillThere, Date() < deadline {
            stillThere = try store.accessToken(clientID: Fixtures.appOne, account: account, scopes: ["User.Read"]) != nil
            if stillThere { usleep(10_000) }
        }
        #expect(!stillThere, "a removed token was still returned after 10 s")
        #expect(try store.allAccounts().isEmpty)
    }

    @Test("Reading a group over and over does not grow memory (libsecret 0.20.5 leaks every GetSecrets reply; the backend frees it)")
    func repeatedBulkReadsKeepMemoryFlat() throws {
        let store = AccountStore(backend: try SecretServiceBackend(), group: group)
        defer { try? store.removeAll() }
        for index in 0..<20 {
            let user = Fixtures.User(uid: String(format: "%08x-0000-0000-0000-00000000beef", index), tenant: Fixtures.tenantA,
                                     username: "memory\(index)@contoso.com", name: "Memory \(index)")
            try save(store, user, client: Fixtures.appOne)
        }
        let run = try runProcess(Self.helper, ["ss-reload-memory", group.name, "300"])
        #expect(run.status == 0, "\(run.stderr)")
        let result = try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Int])
        let grownKB = try #require(result["rssAfterKB"]) - (try #require(result["rssBeforeKB"]))
        let readKB = try #require(result["bytesRead"]) / 1024
        // Leaking the replies would grow memory by about what was read (measured: 2.5 MB per read
        // of 1,000 items); freeing them keeps it flat.
        #expect(readKB > 8 * 1024, "the reads must return enough data for a leak to show")
        #expect(grownKB < 2 * 1024, "memory grew by \(grownKB) KB over reads of \(readKB) KB in all")
    }

    @Test("A bulk read in several GetSecrets batches returns every entry, exactly as one call does")
    func bulkReadInBatches() throws {
        let store = AccountStore(backend: try SecretServiceBackend(), group: group)
        defer { try? store.removeAll() }
        try save(store, Fixtures.alice, client: Fixtures.appOne)
        try save(store, Fixtures.bob, client: Fixtures.appOne)
        try save(store, Fixtures.bob, client: Fixtures.appTwo)
        let whole = try SecretServiceBackend().load(group).entries
        var options = SecretServiceBackend.Options()
        options.secretsPerCall = 3
        let batched = try SecretServiceBackend(options: options).load(group).entries
        #expect(whole.count > 3 * 3, "enough entries for several batches")
        func keyed(_ entries: [CacheEntry]) -> [String: CacheEntry] {
            Dictionary(uniqueKeysWithValues: entries.map { ("\($0.kind.rawValue)/\($0.key)", $0) })
        }
        #expect(keyed(batched) == keyed(whole))
    }

    @Test("Searches sent together answer as the same searches one after another, empty answers included; a failed one throws the usual typed error")
    func searchesSentTogether() throws {
        let store = AccountStore(backend: try SecretServiceBackend(), group: group)
        defer { try? store.removeAll() }
        try save(store, Fixtures.alice, client: Fixtures.appOne)
        try save(store, Fixtures.bob, client: Fixtures.appTwo)
        let backend = try SecretServiceBackend()
        let collection = try backend.collectionPath(for: group)
        let queries: [[String: String]] = [
            ["group": group.name, "kind": EntityKind.appMetadata.rawValue],
            ["group": group.name, "home_account_id": Fixtures.alice.homeAccountID],
            ["group": group.name, "home_account_id": "nobody.nowhere"],
            ["group": group.name, "kind": EntityKind.account.rawValue],
        ]
        let together = try backend.client.searchItems(in: collection, eachOf: queries)
        let oneByOne = try queries.map { try backend.client.searchItems(in: collection, $0) }
        #expect(together.map { Set($0) } == oneByOne.map { Set($0) })
        #expect(together[0].count == 2 && together[1].count >= 4 && together[2].isEmpty && together[3].count == 2)
        // Through the backend: an account's entries and the app metadata, read at once.
        let read = try backend.entries(matchingAny: [CacheQuery(kind: .appMetadata), CacheQuery(attributes: [.homeAccountID: Fixtures.bob.homeAccountID])], in: group)
        #expect(Set(read.map(\.key)) == Set(try SecretServiceBackend().load(group).entries
            .filter { $0.kind == .appMetadata || $0["home_account_id"] == Fixtures.bob.homeAccountID }.map(\.key)))
        let nowhere = "/org/freedesktop/secrets/collection/no_such_collection"
        let together2 = try #require(throws: TokenCacheError.self) { try backend.client.searchItems(in: nowhere, eachOf: queries) }
        let alone = try #require(throws: TokenCacheError.self) { try backend.client.searchItems(in: nowhere, queries[0]) }
        #expect(together2.code == alone.code && together2.message == alone.message)
    }

    /// Another process's removal can land between a search and the read of an item's attributes:
    /// every provider then answers that the item is gone (UnknownObject, gnome-keyring's
    /// UnknownMethod), which the backend leaves out of what it found.
    @Test("An item deleted between a search and the read of its attributes reads as gone, and is left out of what the search found")
    func itemDeletedAfterSearch() throws {
        let store = AccountStore(backend: try SecretServiceBackend(), group: group)
        defer { try? store.removeAll() }
        try save(store, Fixtures.alice, client: Fixtures.appOne)
        let backend = try SecretServiceBackend()
        let paths = try backend.searchPaths(CacheQuery(kind: .account), in: group)
        let appMetadata = try backend.searchPaths(CacheQuery(kind: .appMetadata), in: group)
        #expect(paths.count == 1 && appMetadata.count == 1)
        let other = try SecretServiceBackend()
        try other.write(in: try other.collectionPath(for: group)) { () throws(TokenCacheError) in try other.client.delete(paths[0]) }
        let gone = try #require(throws: TokenCacheError.self) { try backend.client.attributes(of: paths[0]) }
        #expect(gone.code == .collectionMissing, "\(gone)")
        let read = try backend.client.attributes(ofItems: paths + appMetadata)
        #expect(read.count == 1 && read.first?["kind"] == EntityKind.appMetadata.rawValue, "\(read)")
    }

    /// KeePassXC answered UnknownInterface for an item another test was deleting (CI, `list` on
    /// KeePassXC): its Qt node outlives the item for a moment, too briefly to reproduce on purpose.
    @Test("Every answer a provider gives for an item or collection that is gone maps to collectionMissing; the service object's do not", arguments: [
        "org.freedesktop.Secret.Error.NoSuchObject", "org.freedesktop.DBus.Error.UnknownObject",
        "org.freedesktop.DBus.Error.UnknownMethod", "org.freedesktop.DBus.Error.UnknownInterface"])
    func goneAnswers(name: String) {
        let item = "/org/freedesktop/secrets/collection/login/1"
        func mapped(_ object: String) -> TokenCacheError {
            SecretServiceErrors.map(g_dbus_error_new_for_dbus_error(name, "gone"), action: "read an item", object: object)
        }
        #expect(mapped(item).code == .collectionMissing)
        let service = mapped(SecretServiceClient.servicePath)
        #expect(service.code == (name.hasPrefix("org.freedesktop.DBus.Error.Unknown") && name != "org.freedesktop.DBus.Error.UnknownObject"
                                 ? .secretServiceFailure : .collectionMissing), "\(service)")
    }

    @Test("An account-scoped view reads only that account's tokens, by attribute search, and finds what the whole group finds")
    func accountScopedView() throws {
        let backend = try SecretServiceBackend()
        let store = AccountStore(backend: backend, group: group)
        defer { try? store.removeAll() }
        try save(store, Fixtures.alice, client: Fixtures.appOne)
        try save(store, Fixtures.alice, client: Fixtures.appTwo)
        try save(store, Fixtures.bob, client: Fixtures.appOne)
        let view = try AccountScopedBackend(backend, account: "Alice@Contoso.com", in: group)
        #expect(view.homeAccountIDs == [Fixtures.alice.homeAccountID])
        let entries = try view.load(group).entries
        let tokenOwners = Set(entries.filter { $0.kind != .account && $0.kind != .appMetadata }.compactMap { $0["home_account_id"] })
        #expect(tokenOwners == [Fixtures.alice.homeAccountID])
        #expect(entries.filter { $0.kind == .account }.compactMap { $0["username"] } == [Fixtures.alice.username], "only the chosen account's record")
        #expect(entries.count < (try backend.load(group)).entries.count)

        let scoped = AccountStore(backend: view, group: group)
        for client in [Fixtures.appOne, Fixtures.appTwo] {
            let whole = try #require(try store.account("alice@contoso.com", clientID: client))
            let part = try #require(try scoped.account("alice@contoso.com", clientID: client))
            #expect(try scoped.accessToken(clientID: client, account: part, scopes: ["User.Read"])?.accessToken
                    == (try store.accessToken(clientID: client, account: whole, scopes: ["User.Read"]))?.accessToken)
        }
        // A save through the view lands in the group, seen by a store over the whole group.
        try save(scoped, Fixtures.alice, client: Fixtures.appThree)
        let alice = try #require(try store.account("alice@contoso.com", clientID: Fixtures.appThree))
        #expect(try store.accessToken(clientID: Fixtures.appThree, account: alice, scopes: ["User.Read"]) != nil)
    }

    @Test("An account record stored without the username attribute (written before it existed) is still found; a save that changes it (a renamed user) leaves one item, found by the new name")
    func accountRecordWithoutUsernameAttribute() throws {
        let backend = try SecretServiceBackend()
        let store = AccountStore(backend: backend, group: group)
        defer { try? store.removeAll() }
        try save(store, Fixtures.alice, client: Fixtures.appOne)
        let record = try #require(try backend.entries(of: .account, matching: [.username: "ALICE@contoso.com"], in: group).first)
        // Replace the record by one with the previous attribute set, stored by libsecret itself.
        var attributes = SecretItemSchema.attributes(of: record, group: group)
        #expect(attributes.removeValue(forKey: "username") == Fixtures.alice.username.lowercased())
        _ = try backend.apply([.remove(.account, key: record.key)], to: group, expected: nil)
        let secret = String(decoding: try JSON.encode(SecretItemSchema.secret(of: record)), as: UTF8.self)
        let python = try #require(TestEnvironment.python, "the venv is missing: run scripts/install-deps.sh")
        // kwalletd5 sometimes drops libsecret's fresh transfer session before its first call ("Can't
        // find session"; our own client retries that in a new session): libsecret does not, so
        // the planting is tried again, up to three times.
        var stored = ProcessOutput(status: -1, stdout: "", stderr: "")
        for _ in 0..<3 {
            stored = try runProcess(python, ["-c", """
                import json, sys, gi
                gi.require_version("Secret", "1")
                from gi.repository import Secret
                attributes = json.loads(sys.argv[1])
                schema = Secret.Schema.new("org.swift-tokencache.Entry", Secret.SchemaFlags.NONE,
                                           {name: Secret.SchemaAttributeType.STRING for name in attributes})
                assert Secret.password_store_sync(schema, attributes, Secret.COLLECTION_DEFAULT, "legacy", sys.stdin.read(), None)
                """, String(decoding: try JSONSerialization.data(withJSONObject: attributes), as: UTF8.self)],
                input: Data(secret.utf8))
            if stored.status == 0 || !stored.stderr.contains("Can't find session") { break }
        }
        #expect(stored.status == 0, "\(stored.stderr)")
        #expect(try backend.entries(of: .account, matching: [.username: Fixtures.alice.username], in: group).isEmpty)

        let view = try AccountScopedBackend(backend, account: Fixtures.alice.username, in: group)
        #expect(view.homeAccountIDs == [Fixtures.alice.homeAccountID])
        #expect(try AccountStore(backend: view, group: group).account(Fixtures.alice.username) != nil)

        var renamed = Fixtures.alice
        renamed.username = "alice.renamed@contoso.com"
        try save(store, renamed, client: Fixtures.appOne)
        let copies = try backend.searchPaths(["group": group.name, "kind": "Account", "key": record.key],
                                             collection: try backend.collectionPath(for: group))
        #expect(copies.count == 1)
        #expect(try backend.entries(of: .account, matching: [.username: renamed.username], in: group).count == 1)
        #expect(try AccountStore(backend: backend, group: group).accounts(clientID: Fixtures.appOne).map(\.username) == [renamed.username])
    }

    @Test("A locked collection is reported as locked, never read as empty, and nothing is deleted")
    func lockedCollection() throws {
        let results = try inFreshKeyring("$H ss-locked org.example.locked")
        let result = try #require(results.first)
        #expect(result["longLivedRead"] as? String == "keyringLocked", "\(result)")
        #expect(result["read"] as? String == "keyringLocked", "\(result)")
        #expect(result["removeAll"] as? String == "keyringLocked", "\(result)")
        #expect(result["saved"] as? Int == 6)
        #expect(result["stillThereLocked"] as? Int == 6)
    }

    @Test("A single sign-on store in a locked collection is keyringLocked for accounts(), account lookup, acquireTokenSilent and token --refresh --sso-store, never 'no account'; its item stays")
    func lockedSingleSignOnStore() throws {
        let tokencache = TestEnvironment.binDirectory.appendingPathComponent("tokencache").path
        let results = try inFreshKeyring("""
            $H sso-locked-store azure-cli-encrypted-2.91 \(Fixtures.appTwo)
            status=0
            message="$('\(tokencache)' token --client \(Fixtures.appTwo) --scopes User.Read --refresh --account locked@contoso.com \
                --authority https://login.microsoftonline.com/common --sso-store azure-cli-encrypted-2.91 \\
                --backend file --group org.example.sso 2>&1)" || status=$?
            python3 -c 'import json, sys; print(json.dumps({"cliStatus": int(sys.argv[1]), "cliMessage": sys.argv[2]}))' "$status" "$message"
            """)
        let app = try #require(results.first)
        // Unlocked, the app finds the account through the store: the locked answers below are the lock's.
        #expect(app["unlockedAccounts"] as? String == #"ok: ["locked@contoso.com"]"#, "\(app)")
        #expect(app["accounts"] as? String == "keyringLocked", "\(app)")
        #expect(app["account"] as? String == "keyringLocked", "\(app)")
        #expect(app["silent"] as? String == "keyringLocked", "\(app)")
        #expect(app["item"] as? String == "keyringLocked", "the item is gone: \(app)")
        let cli = try #require(results.dropFirst().first)
        let message = cli["cliMessage"] as? String ?? ""
        #expect(cli["cliStatus"] as? Int == 1, "\(cli)")
        #expect(message.contains("locked") && message.contains("tokencache unlock"), "\(message)")
        #expect(!message.localizedCaseInsensitiveContains("no account"), "\(message)")
    }

    @Test("An unlock prompt a headless daemon cannot show is promptDismissed at once; without prompts the collection is keyringLocked")
    func headlessUnlockPrompt() throws {
        let results = try inFreshKeyring("$H ss-unlock-headless org.example.unlock")
        let result = try #require(results.first)
        #expect(result["prompted"] as? String == "promptDismissed", "\(result)")
        // At once: far below the 60 s an allowed prompt waits (bounds leave room for a loaded CI machine).
        #expect((result["seconds"] as? Double ?? .infinity) < 15, "\(result)")
        #expect(result["unprompted"] as? String == "keyringLocked", "\(result)")
    }

    @Test("A daemon killed mid-session gives a typed error quickly; once it is back nothing was lost")
    func daemonKilled() throws {
        let results = try inFreshKeyring("""
            $H ss-save org.example.kill alice@contoso.com c1 && $H ss-save org.example.kill bob@contoso.com c1
            $H ss-kill-mid org.example.kill
            sleep 0.2; pid=$(keyring_pid); [ -n "$pid" ] && kill -9 $pid; sleep 0.2
            start_keyring
            $H ss-count org.example.kill
            $H ss-save org.example.kill carol@contoso.com c1
            """)
        #expect(results.count == 5, "\(results)")
        guard results.count == 5 else { return }
        let mid = results[2]
        let outcome = mid["result"] as? String ?? "-"
        // Either a typed error, or (if D-Bus activation brought a daemon back in time) every entry.
        #expect(["secretServiceFailure", "noSecretService", "keyringLocked", "timedOut", "collectionMissing"].contains(outcome)
                || (outcome == "ok" && mid["after"] as? Int == mid["before"] as? Int), "\(mid)")
        #expect((mid["seconds"] as? Double ?? 99) < 15, "\(mid)")  // not D-Bus's 25 s default call timeout
        #expect(results[3]["entries"] as? Int == results[2]["before"] as? Int, "\(results)")
        #expect(results[4]["accounts"] as? Int == 3)
    }

    @Test("A daemon that stops answering gives timedOut within the configured bound, nothing is lost, and a write it was sent is reported unconfirmed, not undone: it lands once the daemon runs again")
    func unresponsiveDaemon() throws {
        let results = try inFreshKeyring("""
            $H ss-save org.example.stall alice@contoso.com c1
            $H ss-timeout org.example.stall
            """)
        let result = try #require(results.last)
        #expect(result["result"] as? String == "timedOut", "\(result)")
        let seconds = result["seconds"] as? Double ?? 99
        #expect(seconds >= 0.9 && seconds < 6, "\(result)")  // the bound is 1 s; the rest is a loaded machine's slack
        #expect(result["write"] as? String == "timedOut", "\(result)")
        let message = result["writeMessage"] as? String ?? ""
        #expect(message.contains("did not confirm a write") && message.contains("may still make the change")
                && !message.contains("nothing was changed"), "\(result)")
        #expect(result["afterResume"] as? Int == (result["before"] as? Int ?? -1) + 1, "\(result)")
    }

    /// What it costs is measured, not bounded here (#56 failure G: 2.3 µs against a 2 µs bound on a
    /// shared core): the warm-lookup benchmark reads the revision on every lookup
    /// (Benchmarks/results/RESULTS.md), and this test prints its own figures.
    @Test("currentRevision stays the same over a million reads without a write, and each of 30 writes by another connection reaches it (its signal arrives, the revision moves)")
    func coherenceCost() throws {
        let result = try #require(try inFreshKeyring("$H ss-measure").first)
        print("Secret Service coherence measurement: \(result)")
        #expect(result["unchanged"] as? Bool == true, "\(result)")
        #expect(result["signalsLost"] as? Int == 0, "\(result)")
        #expect(result["roundsRevisionMoved"] as? Int == 30, "\(result)")
        #expect(result["revisionChangedByWrites"] as? Bool == true, "\(result)")
    }

    @Test("With no session bus the error is noSessionBus")
    func noBus() throws {
        var environment = ProcessInfo.processInfo.environment
        environment["DBUS_SESSION_BUS_ADDRESS"] = "unix:path=/nonexistent/bus"
        let output = try runProcess(Self.helper, ["ss-probe"], environment: environment)
        #expect(output.stdout.contains(#""result":"noSessionBus""#))
        environment["DBUS_SESSION_BUS_ADDRESS"] = nil
        environment["DISPLAY"] = nil
        #expect(try runProcess(Self.helper, ["ss-probe"], environment: environment).stdout.contains(#""result":"noSessionBus""#))
        // A failed background connection is forgotten: the backend connects itself and reports why.
        #expect(try runProcess(Self.helper, ["ss-probe", "early"], environment: environment).stdout.contains(#""result":"noSessionBus""#))
    }

    @Test("On a bus with no Secret Service provider reads fail with noSecretService, and automatic selection falls back to the encrypted file",
          .enabled(if: TestEnvironment.provider == .gnomeKeyring, "no provider at all, on a bus of its own: runs in the GNOME Keyring run"))
    func noProvider() throws {
        let folder = try TestEnvironment.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: folder) }
        // A session bus of its own that can start no service (no service directories).
        let config = folder.appendingPathComponent("session.conf")
        try Data("""
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>session</type>
              <listen>unix:tmpdir=\(folder.path)</listen>
              <auth>EXTERNAL</auth>
              <policy context="default">
                <allow send_destination="*" eavesdrop="true"/>
                <allow eavesdrop="true"/>
                <allow own="*"/>
              </policy>
            </busconfig>
            """.utf8).write(to: config)
        let bus = try PrivateBus(configuration: config)
        defer { withExtendedLifetime(bus) {} }  // the bus lives until the last probe ran
        var environment = ProcessInfo.processInfo.environment
        environment["DBUS_SESSION_BUS_ADDRESS"] = bus.address
        environment["XDG_DATA_HOME"] = folder.appendingPathComponent("data").path
        for mode in [[], ["early"]] {
            let probe = try runProcess(Self.helper, ["ss-probe"] + mode, environment: environment)
            #expect(probe.stdout.contains(#""result":"noSecretService""#), "\(mode): \(probe.stdout)\(probe.stderr)")
        }
        let tokencache = TestEnvironment.binDirectory.appendingPathComponent("tokencache").path
        let automatic = try runProcess(tokencache, ["list", "--json", "--backend", "auto", "--verbose"], environment: environment)
        #expect(automatic.status == 0, "\(automatic.stderr)")
        #expect(automatic.stdout.contains(#""location" : "encrypted file"#), "\(automatic.stdout)")
        #expect(automatic.stderr.contains("falls back to the encrypted file") && automatic.stderr.contains("No Secret Service provider"),
                "\(automatic.stderr)")
        let requested = try runProcess(tokencache, ["list", "--backend", "secret-service"], environment: environment)
        #expect(requested.status == 1 && requested.stderr.contains("No Secret Service provider is running"), "\(requested.stderr)")
    }

    @Test("A connection started in the background is taken by the next backend, which reads the group; later backends connect themselves")
    func connectionInBackground() throws {
        let store = AccountStore(backend: try SecretServiceBackend(), group: group)
        defer { try? store.removeAll() }
        try save(store, Fixtures.alice, client: Fixtures.appOne)
        let output = try runProcess(Self.helper, ["ss-early", group.name])
        let result = try #require(try JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [String: Any], "\(output.stderr)")
        #expect(result["firstEarly"] as? Bool == true)
        #expect(result["secondEarly"] as? Bool == false)
        #expect(result["first"] as? [String] == [Fixtures.alice.username])
        #expect(result["second"] as? [String] == [Fixtures.alice.username])
    }

    @Test("Attributes are read without secrets and equal what the in-memory backend derives from the same entries")
    func attributesWithoutSecrets() throws {
        let backend = try SecretServiceBackend()
        let store = AccountStore(backend: backend, group: group)
        defer { try? store.removeAll() }
        let memory = AccountStore(backend: InMemoryBackend(), group: group)
        for target in [store, memory] {
            try save(target, Fixtures.alice, client: Fixtures.appOne)
            try save(target, Fixtures.bob, client: Fixtures.appOne)
        }
        let found = try backend.attributes(of: .account, matching: [.username: "ALICE@Contoso.com"], in: group)
        #expect(found.count == 1)
        #expect(found.first?[.homeAccountID] == Fixtures.alice.homeAccountID)
        #expect(found.first?[.username] == Fixtures.alice.username.lowercased())
        #expect(found == (try memory.backend.attributes(of: .account, matching: [.username: "ALICE@Contoso.com"], in: group)))
        let tokens = try backend.attributes(of: .accessToken, matching: [.homeAccountID: Fixtures.bob.homeAccountID], in: group)
        #expect(tokens.map { $0[.clientID] } == [Fixtures.appOne])
        #expect(try backend.attributes(of: .account, matching: [.username: "nobody@contoso.com"], in: group).isEmpty)
    }

    @Test("Automatic selection picks the Secret Service with a bus, and the encrypted file without one")
    func automaticSelection() throws {
        let selected = try BackendSelection.open(policy: .automatic)
        #expect(selected.backend is SecretServiceBackend)
        var environment = ProcessInfo.processInfo.environment
        environment["DBUS_SESSION_BUS_ADDRESS"] = "unix:path=/nonexistent/bus"
        environment["XDG_DATA_HOME"] = try TestEnvironment.temporaryDirectory().path
        let binary = TestEnvironment.binDirectory.appendingPathComponent("tokencache").path
        let output = try runProcess(binary, ["doctor", "--json"], environment: environment)
        let json = try #require(try JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [String: Any])
        #expect((json["selected"] as? String)?.hasPrefix("encrypted file") == true)
        #expect((json["reason"] as? String)?.contains("no usable Secret Service") == true)
    }
}
