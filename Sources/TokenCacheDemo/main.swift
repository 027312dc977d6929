// The main job: two client apps share one user's sign-in through the token cache.
//
// App "Mail" signs Alice in with the device code flow (RFC 8628) at a local stand-in for
// login.microsoftonline.com on 127.0.0.1, whose demo user enters the code; app "Notes" finds her
// account and gets its own access token silently by redeeming the family refresh token at the
// token endpoint, every account in the group is listed, then Mail signs out while Notes stays
// signed in. Then app "Shop" signs a customer in natively with an email code (Entra External ID:
// its own UI, no browser). The demo removes its accounts at the end unless --keep is given.
import Foundation
import TokenCache
@_spi(Backend) import TokenCacheCore

let keep = CommandLine.arguments.contains("--keep")
let mail = (name: "Mail", clientID: "d3590ed6-52b3-4102-aeff-aad2292ab01c")
let notes = (name: "Notes", clientID: "04b07795-8ddb-461a-bbee-02f9e1bf7b46")
let identityProvider = try LoopbackIdentityProvider()
let authority = try Authority(identityProvider.authority)

func section(_ title: String) { print("\n== \(title)") }

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

    section("\(mail.name) signs Alice in with a device code")
    identityProvider.approveDeviceCodes(as: "9f4880d8-80ba-4c40-97bc-f7a23c703084", utid: "72f988bf-86f1-41af-91ab-2d7cd011db47",
                                        username: "alice.demo@contoso.com", name: "Alice Demo")
    let mailApp = PublicClientApplication(clientID: mail.clientID, authority: authority, store: mailStore)
    let saved = try await mailApp.acquireTokenWithDeviceCode(DeviceCodeParameters(scopes: ["User.Read", "Mail.Read"])) { code in
        print(code.message)
        print("(Alice enters \(code.userCode) in her browser; the local identity provider plays her part)")
    }
    try mailStore.setAppDisplayName(mail.name, clientID: mail.clientID, authority: authority)
    print("Signed in as \(saved.idTokenClaims?.username ?? "?"); access token for \(saved.scopes.joined(separator: " ")), expires \(saved.expiresOn)")

    section("\(notes.name), which never signed in, looks for accounts")
    let notesApp = PublicClientApplication(clientID: notes.clientID, authority: authority, store: notesStore)
    let visible = try await notesApp.accounts()
    for account in visible { print("Found \(account.username) (\(account.homeAccountID)) — \(account.claims?.name ?? "")") }
    guard let alice = visible.first(where: { $0.username == "alice.demo@contoso.com" }) else {
        fatalError("Notes should see the account Mail signed in")
    }
    if let refresh = try notesStore.refreshToken(clientID: try ClientID(notes.clientID), account: alice) {
        let kind = refresh.familyID.map { "family \($0) refresh token" } ?? "own refresh token"
        print("Notes can sign in silently with the \(kind) issued to \(refresh.clientID == mail.clientID ? mail.name : refresh.clientID)")
    }
    let noAccessToken = try notesStore.accessToken(clientID: notes.clientID, account: alice, scopes: ["Notes.Read"]) == nil
    print("Notes has no access token of its own yet: \(noAccessToken)")

    section("\(notes.name) signs in silently (SSO): it redeems the family refresh token")
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
    try await mailApp.remove(alice)
    print("Mail sees \(try await mailApp.accounts().count) account(s)")
    print("Notes sees \(try await notesApp.accounts().map(\.username))")
    let stillSignedIn = try await notesApp.acquireTokenSilent(scopes: ["Notes.Read"], account: alice)
    print("Notes still gets its token: \(stillSignedIn.accessToken == token.accessToken)")

    section("Shop signs a customer in natively: email + one-time code, in its own UI")
    identityProvider.acceptNativeSignIn(as: "0714a000-0000-4000-8000-00000000c0de", utid: "72f988bf-86f1-41af-91ab-2d7cd011db47",
                                        username: "olivia.demo@contoso.com", name: "Olivia Demo")
    let shop = try NativeAuthPublicClientApplication(clientID: "5a0b0000-0000-4000-8000-000000000001",
                                                     authority: identityProvider.authority, challengeTypes: [.oob], store: notesStore)
    try notesStore.setAppDisplayName("Shop", clientID: shop.clientID, authority: shop.authority)
    guard case .codeRequired(let codeState) = try await shop.signIn(username: "olivia.demo@contoso.com", scopes: ["Orders.Read"]) else {
        fatalError("the demo's customer signs in with an email code")
    }
    print("A \(codeState.codeLength)-digit code was emailed to \(codeState.sentTo); Olivia types it into Shop's own form")
    let customer = try await codeState.submitCode(identityProvider.mailedCode ?? "")
    print("Signed in as \(customer.username) (\(customer.claims?.name ?? "")), home account \(customer.account.homeAccountID)")
    let orders = try await customer.getAccessToken(scopes: ["Orders.Read"])
    print("Shop's access token for \(orders.scopes.joined(separator: " ")) comes from the cache: \(orders.isFromCache)")
    print("(Shop keeps one native account, as MSAL does: it is signed out of Alice, whom it saw through the family token)")
    try listWithCLI(backend: backend, group: group)

    if !keep {
        try await notesApp.removeFromEveryApp(alice)
        try notesStore.remove(customer.account)
        print("\nRemoved the demo accounts (run with --keep to keep them).")
    }
} catch let error as TokenCacheError {
    FileHandle.standardError.write(Data("demo failed: \(error)\n".utf8))
    exit(1)
} catch let error as NativeAuthError {
    FileHandle.standardError.write(Data("demo failed: \(error)\n".utf8))
    exit(1)
}
