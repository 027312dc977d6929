// An app that keeps its tokens in the encrypted file only: it depends on the
// `TokenCacheEncryptedFile` product, not the façade, so it links neither GLib/GIO nor libcurl
// (libcurl is loaded on the first token request; a test reads its ELF NEEDED entries).
//   tokencache-file-example CLIENT_ID [GROUP]
//       lists the accounts an app (client ID) has signed in, in the MSAL group or the one named;
//   tokencache-file-example token CLIENT_ID AUTHORITY SCOPES [GROUP]
//       prints an access token for the app's only account, refreshed at AUTHORITY and saved when
//       the cached one is stale (AccountStore.acquireTokenSilent, the token pipeline's).
import EncryptedFileStore
import Foundation
import TokenCacheCore
import TokenCachePipeline

let arguments = Array(CommandLine.arguments.dropFirst())
do {
    if arguments.first == "token", (4...5).contains(arguments.count) {
        let group = arguments.count == 5 ? try CacheGroup(arguments[4]) : .universalStorage
        let store = AccountStore(backend: EncryptedFileBackend(), group: group)
        let token = try await store.acquireTokenSilent(clientID: try ClientID(arguments[1]),
                                                       scopes: arguments[3].split(separator: " ").map(String.init),
                                                       authority: try Authority(arguments[2]))
        print(token.accessToken)
    } else if let clientID = arguments.first, arguments.count <= 2 {
        let group = try arguments.dropFirst().first.map { try CacheGroup($0) } ?? .universalStorage
        let store = AccountStore(backend: EncryptedFileBackend(), group: group)
        for account in try store.accounts(clientID: clientID) {
            print(account.username.isEmpty ? account.homeAccountID : account.username)
        }
    } else {
        FileHandle.standardError.write("usage: tokencache-file-example CLIENT_ID [GROUP]\n"
                                       + "       tokencache-file-example token CLIENT_ID AUTHORITY SCOPES [GROUP]\n")
        exit(64)
    }
} catch {
    FileHandle.standardError.write("\(error)\n")   // message and hint; never a secret
    exit(1)
}

extension FileHandle {
    fileprivate func write(_ text: String) { write(Data(text.utf8)) }
}
