// An app that declares its token-cache settings in tokencache.json; the TokenCacheConfigPlugin
// turns them into `AppConfiguration.current` at build time.
import Foundation
import TokenCache

let configuration = AppConfiguration.current
print("Client \(configuration.clientID), authority \(configuration.authority), group \(configuration.group)")

do {
    let selection = try BackendSelection.open(policy: configuration.backend)
    let store = AccountStore(backend: selection.backend, group: try configuration.cacheGroup)
    let accounts = try store.accounts(clientID: configuration.clientID)
    print("Backend: \(selection.backend.location(of: store.group)) (\(selection.reason))")
    print(accounts.isEmpty ? "No signed-in accounts." : "Signed in: \(accounts.map(\.username).joined(separator: ", "))")
    for account in accounts {
        if let token = try store.accessToken(clientID: configuration.clientID, account: account, scopes: configuration.scopes) {
            print("\(account.username): access token valid until \(token.expiresOn)")
        }
    }
} catch {
    FileHandle.standardError.write(Data("error: \(error)\n".utf8))
    exit(1)
}
