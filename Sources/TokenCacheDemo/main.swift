// The main job: two client apps share one user's sign-in through the token cache.
//
// App "Mail" signs Alice in (we feed it a token endpoint response, as if it had just redeemed
// an authorization code), app "Notes" finds her account and gets its own access token silently
// by redeeming the family refresh token at the token endpoint (a local stand-in for
// login.microsoftonline.com on 127.0.0.1), every account in the group is listed, then Mail
// signs out while Notes stays signed in. The demo removes its account at the end unless
// --keep is given.
import Foundation
import TokenCache

let keep = CommandLine.arguments.contains("--keep")
let mail = (name: "Mail", clientID: "d3590ed6-52b3-4102-aeff-aad2292ab01c")
let notes = (name: "Notes", clientID: "04b07795-8ddb-461a-bbee-02f9e1bf7b46")
let identityProvider = try LoopbackIdentityProvider()
let authority = try Authority(identityProvider.authority)

func section(_ title: String) { print("\n== \(title)") }

func demoResponse(refreshToken: String) -> Data {
    func b64(_ object: [String: String]) -> String {
        (try! JSONSerialization.data(withJSONObject: object, options: .sortedKeys)).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
    let uid = "9f4880d8-80ba-4c40-97bc-f7a23c703084"
    let tenant = "72f988bf-86f1-41af-91ab-2d7cd011db47"
    let idToken = b64(["alg": "none"]) + "." + b64([
        "oid": uid, "tid": tenant, "sub": "demo-sub", "name": "Alice Demo",
        "preferred_username": "alice.demo@contoso.com"]) + ".sig"
    let response: [String: Any] = [
        "token_type": "Bearer", "expires_in": 3600, "ext_expires_in": 3600,
        "scope": "User.Read Mail.Read", "foci": "1",
        "access_token": "demo-access-token-\(UUID().uuidString)",
        "refresh_token": refreshToken,
        "id_token": idToken, "client_info": b64(["uid": uid, "utid": tenant]),
    ]
    return try! JSONSerialization.data(withJSONObject: response)
}

/// Runs the `tokencache` admin CLI built next to the demo on the same backend and group, as an
/// admin would; falls back to listing through the library when the CLI was not built.
func listWithCLI(backend: any CacheBackend, group: CacheGroup) throws {
    let cli = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        .deletingLastPathComponent().appendingPathComponent("tokencache")
    guard FileManager.default.isExecutableFile(atPath: cli.path) else {
        for account in try AccountStore(backend: backend, group: group).allAccounts() {
            print("\(account.username)  \(account.homeAccountID)  tenants \(account.tenants.joined(separator: ","))")
        }
        return
    }
    let arguments = ["list", "--backend", backend is SecretServiceBackend ? "secret-service" : "file", "--group", group.name]
    print("$ tokencache \(arguments.joined(separator: " "))")
    fflush(nil)  // flush stdout first: the CLI writes to the same terminal or pipe
    let process = Process()
    process.executableURL = cli
    process.arguments = arguments
    try process.run()
    process.waitUntilExit()
}

do {
    let (backend, why) = try DemoBackend.open()
    let group = CacheGroup.universalStorage
    print("swift-tokencache demo")
    print("Backend: \(backend.location(of: group))")
    print("  (\(why))")

    let mailStore = AccountStore(backend: backend, group: group)
    let notesStore = AccountStore(backend: backend, group: group)

    section("\(mail.name) signs Alice in and saves the token response")
    let refreshToken = "demo-refresh-token-\(UUID().uuidString)"
    identityProvider.accept(refreshToken: refreshToken, uid: "9f4880d8-80ba-4c40-97bc-f7a23c703084",
                            utid: "72f988bf-86f1-41af-91ab-2d7cd011db47", username: "alice.demo@contoso.com", name: "Alice Demo")
    let saved = try mailStore.save(responseJSON: demoResponse(refreshToken: refreshToken), clientID: mail.clientID,
                                   authority: authority, scopes: ["User.Read", "Mail.Read"])
    try mailStore.setAppDisplayName(mail.name, clientID: mail.clientID, authority: authority)
    print("Saved an access token for \(saved.scopes.joined(separator: " ")), expires \(saved.expiresOn)")

    section("\(notes.name), which never signed in, looks for accounts")
    let visible = try notesStore.accounts(clientID: notes.clientID)
    for account in visible { print("Found \(account.username) (\(account.homeAccountID)) — \(account.claims?.name ?? "")") }
    guard let alice = visible.first(where: { $0.username == "alice.demo@contoso.com" }) else {
        fatalError("Notes should see the account Mail signed in")
    }
    if let refresh = try notesStore.refreshToken(clientID: notes.clientID, account: alice) {
        let kind = refresh.familyID.map { "family \($0) refresh token" } ?? "own refresh token"
        print("Notes can sign in silently with the \(kind) issued to \(refresh.clientID == mail.clientID ? mail.name : refresh.clientID)")
    }
    let noAccessToken = try notesStore.accessToken(clientID: notes.clientID, account: alice, scopes: ["Notes.Read"]) == nil
    print("Notes has no access token of its own yet: \(noAccessToken)")

    section("\(notes.name) signs in silently (SSO): it redeems the family refresh token")
    let notesApp = PublicClientApplication(clientID: notes.clientID, authority: authority, store: notesStore)
    let token = try await notesApp.acquireTokenSilent(scopes: ["Notes.Read"], account: alice)
    print("Token endpoint \(identityProvider.authority) (local stand-in for login.microsoftonline.com) issued")
    print("an access token for \(token.scopes.joined(separator: " ")), expires \(token.expiresOn); the rotated refresh token was saved")
    let again = try await notesApp.acquireTokenSilent(scopes: ["Notes.Read"], account: alice)
    print("Asking again is served from the cache: \(again.accessToken == token.accessToken)")
    // The name `tokencache list` shows for Notes.
    try notesStore.setAppDisplayName(notes.name, clientID: notes.clientID, authority: authority)

    section("Every account in the group, as `tokencache list` shows it")
    try listWithCLI(backend: backend, group: group)

    section("\(mail.name) signs out; \(notes.name) stays signed in")
    try mailStore.signOut(alice, clientID: mail.clientID)
    print("Mail sees \(try mailStore.accounts(clientID: mail.clientID).count) account(s)")
    print("Notes sees \(try notesStore.accounts(clientID: notes.clientID).map(\.username))")
    let stillSignedIn = try await notesApp.acquireTokenSilent(scopes: ["Notes.Read"], account: alice)
    print("Notes still gets its token: \(stillSignedIn.accessToken == token.accessToken)")

    if !keep {
        try mailStore.remove(alice)
        print("\nRemoved the demo account (run with --keep to keep it).")
    }
} catch let error as TokenCacheError {
    FileHandle.standardError.write(Data("demo failed: \(error)\n".utf8))
    exit(1)
}
