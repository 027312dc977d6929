// An app that declares its token-cache settings in tokencache.json; the TokenCacheConfigPlugin
// turns them into `AppConfiguration.current` at build time. The app opens its group from that
// configuration, lists the accounts it can use and their cached tokens, and with `--sign-in`
// signs a user in with the device code flow (`--browser`: the system browser) when it has none.
import Foundation
import TokenCache

let configuration = AppConfiguration.current
print("Client \(configuration.clientID), authority \(configuration.authority), group \(configuration.group)")

do {
    let app = try await PublicClientApplication.open(configuration: configuration)
    print("Backend: \(app.store.location)")
    var accounts = try await app.accounts()
    if accounts.isEmpty, CommandLine.arguments.contains("--sign-in") {
        let result = if CommandLine.arguments.contains("--browser") {
            try await app.acquireToken(InteractiveTokenParameters(scopes: configuration.scopes))
        } else {
            try await app.acquireTokenWithDeviceCode(DeviceCodeParameters(scopes: configuration.scopes)) { print($0.message) }
        }
        print("Signed in as \(result.idTokenClaims?.username ?? "?")")
        accounts = try await app.accounts()
    }
    print(accounts.isEmpty ? "No signed-in accounts." : "Signed in: \(accounts.map(\.username).joined(separator: ", "))")
    for account in accounts {
        // Only what the cache holds: this example never asks the network for a token.
        if let token = try app.store.accessToken(clientID: app.clientID, account: account, scopes: configuration.scopes) {
            print("\(account.username): access token valid until \(token.expiresOn)")
        }
    }
} catch {
    FileHandle.standardError.write(Data("error: \(error)\n".utf8))
    exit(1)
}
