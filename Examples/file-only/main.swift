// An app that keeps its tokens in the encrypted file only: it depends on the
// `TokenCacheEncryptedFile` product, not the façade, so it links neither GLib/GIO nor libcurl
// (a test reads its ELF NEEDED entries). Lists the accounts an app (client ID) has signed in,
// in the MSAL group or the one named.
import EncryptedFileStore
import Foundation
import TokenCacheCore

let arguments = CommandLine.arguments.dropFirst()
guard let clientID = arguments.first, arguments.count <= 2 else {
    FileHandle.standardError.write("usage: tokencache-file-example CLIENT_ID [GROUP]\n")
    exit(64)
}
do {
    let group = try arguments.dropFirst().first.map { try CacheGroup($0) } ?? .universalStorage
    let store = AccountStore(backend: EncryptedFileBackend(), group: group)
    for account in try store.accounts(clientID: clientID) {
        print(account.username.isEmpty ? account.homeAccountID : account.username)
    }
} catch {
    FileHandle.standardError.write("\(error)\n")   // message and hint; never a secret
    exit(1)
}

extension FileHandle {
    fileprivate func write(_ text: String) { write(Data(text.utf8)) }
}
