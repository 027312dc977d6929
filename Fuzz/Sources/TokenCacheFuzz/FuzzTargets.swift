// libFuzzer entry point for the parsers that read untrusted input. Built only by
// scripts/fuzz.sh (`swift build -sanitize=fuzzer`); TOKENCACHE_FUZZ_TARGET picks the parser:
//   msal-json       AccountStore.importMSALJSON
//   token-response  TokenResponse(json:) and saving it
//   jwt             IDTokenClaims(jwt:) and ClientInfo.parse
//   encrypted-file  the encrypted-file parser (when built)
import Foundation
@testable import TokenCache
#if canImport(Glibc)
import Glibc
#endif

let target = ProcessInfo.processInfo.environment["TOKENCACHE_FUZZ_TARGET"] ?? "msal-json"
let authority = try! Authority("https://login.microsoftonline.com/common")

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let data = Data(bytes: start, count: count)
    switch target {
    case "msal-json":
        let store = AccountStore(backend: InMemoryBackend())
        if (try? store.importMSALJSON(data)) != nil {
            // Whatever was imported must export and import again unchanged.
            let exported = try! store.exportMSALJSON()
            let again = AccountStore(backend: InMemoryBackend())
            _ = try! again.importMSALJSON(exported)
            precondition(try! again.exportMSALJSON() == exported, "export/import round trip changed the cache")
            for account in try! store.allAccounts() {
                _ = try? store.accessToken(clientID: "c", account: account, scopes: ["s"])
                _ = try? store.refreshTokens(clientID: "c", account: account)
            }
        }
    case "token-response":
        let store = AccountStore(backend: InMemoryBackend())
        if (try? store.save(responseJSON: data, clientID: "client", authority: authority, scopes: ["User.Read"])) == nil {
            precondition(try! store.entries().isEmpty, "a refused response changed the cache")
        }
    case "jwt":
        let text = String(decoding: data, as: UTF8.self)
        _ = try? IDTokenClaims(jwt: text)
        _ = try? ClientInfo.parse(text)
        _ = Base64URL.decode(text)
    default:
        fatalError("unknown TOKENCACHE_FUZZ_TARGET \(target)")
    }
    return 0
}
