import Foundation
import TokenCache

/// Test-helper commands for the external-store tests.
let externalStoreCommands: [String: HelperCommand] = [
    // external-hammer FILE N TAG: N read-modify-write updates of the msal-extensions file store
    // FILE, each under its lock (FILE.lockfile) adding one AccessToken with target
    // api://swift-hammer/TAG-i. Prints {"updates", "seconds"}.
    "external-hammer": { arguments in
        let path = arguments[0], count = Int(arguments[1])!, tag = arguments[2]
        let store = ExternalStore(name: "hammer", persistence: .file(path: path, signal: nil),
                                  lockFiles: [path + ".lockfile"], source: "test")
        let access = ExternalStoreAccess(store, secretService: nil)
        let start = ContinuousClock.now
        for index in 0..<count {
            let target = "api://swift-hammer/\(tag)-\(index)"
            let entry: [String: Any] = [
                "credential_type": "AccessToken", "home_account_id": "9f4880d8-80ba-4c40-97bc-f7a23c703084.72f988bf-86f1-41af-91ab-2d7cd011db47",
                "environment": "login.microsoftonline.com", "client_id": "04b07795-8ddb-461a-bbee-02f9e1bf7b46",
                "realm": "72f988bf-86f1-41af-91ab-2d7cd011db47", "target": target, "secret": "swift-hammer-\(tag)-\(index)",
                "token_type": "Bearer", "cached_at": "1700000000", "expires_on": "4000000000", "extended_expires_on": "4000000000",
            ]
            let document = try JSONSerialization.data(withJSONObject: ["AccessToken": ["swift-\(tag)-\(index)": entry]])
            try access.modify { (accounts) throws(TokenCacheError) in
                try accounts.importMSALJSON(document)
                return (true, ())
            }
        }
        printJSON(["updates": count, "seconds": milliseconds(ContinuousClock.now - start) / 1e3])
    },
    // sso-locked-store STORE APP_CLIENT: STORE (a keyring store of the catalogue) is created as
    // its owner creates it, holding a family refresh token of locked@contoso.com; an app opted
    // into it lists the account; then the store's collection is locked, and the app lists
    // accounts, looks the account up and asks for a token again. Prints each outcome (an error
    // code, or what was found) and whether the item is still there behind the lock.
    "sso-locked-store": { arguments in
        let authority = try Authority("https://login.microsoftonline.com/common")
        let store = try ExternalStore.catalogue().first { $0.name == arguments[0] }
            .orThrow(TokenCacheError(.notFound, "no store \(arguments[0])"))
        guard case .secretService(let item) = store.persistence else { throw TokenCacheError(.invalidArgument, "not a keyring store") }
        let keyring = try SecretServiceBackend()
        try ExternalStoreAccess(store, secretService: keyring).modify(creatingIfMissing: true) { (theirs) throws(TokenCacheError) in
            try theirs.save(helperResponse(username: "locked@contoso.com"), clientID: try ClientID("04b07795-8ddb-461a-bbee-02f9e1bf7b46"),
                            authority: authority, scopes: ["User.Read"], homeAccountID: nil)
            return (true, ())
        }
        var options = PublicClientApplication.Options()
        options.singleSignOnStores = [store]
        let app = PublicClientApplication(clientID: arguments[1], authority: authority,
                                          store: AccountStore(backend: InMemoryBackend()), options: options)
        let outcome = try runAsync { () async -> [String: String] in
            func describe<T>(_ body: () async throws(TokenCacheError) -> T) async -> String {
                do {
                    let value = try await body()
                    return "ok: \(value)"
                } catch {
                    return "\(error.code)"
                }
            }
            var outcome: [String: String] = [:]
            outcome["unlockedAccounts"] = await describe { () async throws(TokenCacheError) in try await app.accounts().map(\.username) }
            let account = try? await app.account(forUsername: "locked@contoso.com")
            do {
                let found = try keyring.findExternalItem(attributeSets: [item.attributes], schema: nil)
                try lock(try found.orThrow(TokenCacheError(.notFound, "the item was not created")).collection)
            } catch {
                return ["lock": "\(error)"]
            }
            outcome["accounts"] = await describe { () async throws(TokenCacheError) in try await app.accounts().map(\.username) }
            outcome["account"] = await describe { () async throws(TokenCacheError) in
                try await app.account(forUsername: "locked@contoso.com")?.username ?? "none"
            }
            if let account {
                outcome["silent"] = await describe { () async throws(TokenCacheError) in
                    try await app.acquireTokenSilent(scopes: ["User.Read"], account: account).isFromCache
                }
            }
            outcome["item"] = await describe { () async throws(TokenCacheError) in
                try SecretServiceBackend().findExternalItem(attributeSets: [item.attributes], schema: nil) != nil
            }
            return outcome
        }
        printJSON(outcome)
    },
]

extension Optional {
    func orThrow(_ error: TokenCacheError) throws(TokenCacheError) -> Wrapped {
        guard let self else { throw error }
        return self
    }
}
