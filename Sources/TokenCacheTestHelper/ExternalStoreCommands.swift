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
]
