import FoundationEssentials
import TokenCache
import TokenCacheCore

extension KeeperServer {
    /// An app's browser sign-in, finished here (``KeeperCodeRedemption``): the app is authorized
    /// for the group and client as for a token (its apps file entry or its user's consent), the
    /// code is redeemed at the token endpoint the keeper's own discovery of the authority names,
    /// the ID token's nonce is checked, and the tokens are saved to the caller's uid's store. The
    /// answer carries the access token, ID token and account; the refresh token stays here. The
    /// code, verifier and nonce are never logged.
    func redeem(_ message: Data, group named: String?, from caller: KeeperCaller) -> AgentProtocol.Response {
        let redemption = try? JSONDecoder().decode(KeeperCodeRedemption.self, from: message)
        let logged = redemption.map { AgentProtocol.Request(operation: .token, clientID: $0.clientID, scopes: $0.scopes, authority: $0.authority) }
        let op = KeeperCodeRedemption.operation
        do throws(TokenCacheError) {
            guard let redemption else {
                throw TokenCacheError.invalidArgument("request", "is not a sign-in to redeem (client_id, authority, scopes, code, redirect_uri, code_verifier, nonce)",
                                                      hint: "See docs/KEEPER.md, \"Signing in\"")
            }
            let client = try ClientID(required: redemption.clientID, field: "client_id")
            let authority = try Authority(redemption.authority)
            try redemption.check()
            let (store, _) = try authorize(caller, group: named, client: client)
            let app = PublicClientApplication(clientID: client, authority: authority, store: store, options: options)
            let result = try app.blockingRedeem(redemption, clientID: client, authority: authority)
            guard let account = result.account else {
                throw TokenCacheError.invalidResponse("id_token", "names no account: the sign-in was not saved as one")
            }
            decided(caller, op: op, group: store.group.name, request: logged, outcome: "granted: signed in \(account.username) (\(account.homeAccountID))")
            return AgentProtocol.Response(token: AgentProtocol.Token(forBroker: result, account: account))
        } catch {
            decided(caller, op: op, group: named, request: logged, outcome: "\(error.code == .accessDenied ? "refused" : "failed"): \(error.code) \(error.message)")
            return AgentProtocol.Response(error)
        }
    }
}

extension KeeperServer {
    /// A device code sign-in run here for an app (``KeeperDeviceCodeSignIn``), authorized as a
    /// token is: the keeper asks the authority for the code, sends the app what to show the user
    /// (`interim`: the user code and where to enter it, never the device code), polls, saves the
    /// tokens to the caller's uid's store and answers with the access token, ID token and account.
    /// The caller hanging up (`hungUp`) ends the polling; nothing is saved then.
    func deviceCodeSignIn(_ message: Data, group named: String?, from caller: KeeperCaller,
                          interim: @escaping (AgentProtocol.Response) -> Bool, hungUp: @escaping @Sendable () -> Bool) -> AgentProtocol.Response {
        let request = try? JSONDecoder().decode(KeeperDeviceCodeSignIn.self, from: message)
        let logged = request.map { AgentProtocol.Request(operation: .token, clientID: $0.clientID, scopes: $0.scopes, authority: $0.authority) }
        let op = KeeperDeviceCodeSignIn.operation
        do throws(TokenCacheError) {
            guard let request else {
                throw TokenCacheError.invalidArgument("request", "is not a device code sign-in (client_id, authority, scopes)",
                                                      hint: "See docs/KEEPER.md, \"Signing in\"")
            }
            let client = try ClientID(required: request.clientID, field: "client_id")
            let authority = try Authority(request.authority)
            guard !request.scopes.isEmpty else { throw TokenCacheError.invalidArgument("scopes", "is empty", hint: "Name at least one scope") }
            if let timeout = request.timeoutSeconds, !(1...KeeperDeviceCodeSignIn.maximumTimeoutSeconds).contains(timeout) {
                throw TokenCacheError.invalidArgument("timeout_seconds", "is not from 1 to \(KeeperDeviceCodeSignIn.maximumTimeoutSeconds)")
            }
            let (store, _) = try authorize(caller, group: named, client: client)
            let app = PublicClientApplication(clientID: client, authority: authority, store: store, options: options)
            var parameters = DeviceCodeParameters(scopes: request.scopes)
            parameters.claims = request.claims
            parameters.timeout = request.timeoutSeconds.map(TimeInterval.init)
            let result = try app.blockingDeviceCodeSignIn(parameters, onCode: { code in
                _ = interim(AgentProtocol.Response(deviceCode: code.wire))
            }, isCancelled: hungUp)
            guard let account = result.account else {
                throw TokenCacheError.invalidResponse("id_token", "names no account")
            }
            decided(caller, op: op, group: store.group.name, request: logged, outcome: "granted: signed in \(account.username) (\(account.homeAccountID))")
            return AgentProtocol.Response(token: AgentProtocol.Token(forBroker: result, account: account))
        } catch {
            decided(caller, op: op, group: named, request: logged, outcome: "\(error.code == .accessDenied ? "refused" : "failed"): \(error.code) \(error.message)")
            return AgentProtocol.Response(error)
        }
    }
}

extension KeeperServer {
    /// A native authentication sign-in's last grant (``KeeperNativeRedemption``), redeemed here
    /// for an app authorized as for a token, and saved as a native sign-in is (the tenant's realm,
    /// one account per client at the host). The provider's refusal goes back with its server
    /// details, so the app reads the same typed reason (a wrong code, an expired flow) as when it
    /// redeems itself. The grant's secrets are never logged.
    func redeemNative(_ message: Data, group named: String?, from caller: KeeperCaller) -> AgentProtocol.Response {
        let redemption = try? JSONDecoder().decode(KeeperNativeRedemption.self, from: message)
        let logged = redemption.map { AgentProtocol.Request(operation: .token, clientID: $0.clientID, scopes: $0.scopes, authority: $0.authority) }
        let op = "\(KeeperNativeRedemption.operation) \(redemption?.grant["grant_type"].map { KeeperAudit.printable($0) } ?? "-")"
        do throws(TokenCacheError) {
            guard let redemption else {
                throw TokenCacheError.invalidArgument("request", "is not a native sign-in to redeem (client_id, authority, scopes, grant)",
                                                      hint: "See docs/KEEPER.md, \"Signing in\"")
            }
            let client = try ClientID(required: redemption.clientID, field: "client_id")
            try redemption.check()
            let (store, _) = try authorize(caller, group: named, client: client)
            let finished: (account: NativeAuthAccount, token: TokenResult)
            do throws(NativeAuthError) {
                let app = try NativeAuthPublicClientApplication(clientID: client, authority: redemption.authority, store: store, options: options)
                finished = try app.redeemHere(redemption.grant, scopes: redemption.scopes, isCancelled: { false })
            } catch {
                if case .tokenCache(let underlying) = error.reason { throw underlying }
                throw TokenCacheError(.authorizationFailed, error.message, hint: error.hint, server: error.server)
            }
            let account = finished.account.account
            decided(caller, op: op, group: store.group.name, request: logged, outcome: "granted: signed in \(account.username) (\(account.homeAccountID))")
            return AgentProtocol.Response(token: AgentProtocol.Token(forBroker: finished.token, account: account))
        } catch {
            decided(caller, op: op, group: named, request: logged, outcome: "\(error.code == .accessDenied ? "refused" : "failed"): \(error.code) \(error.message)")
            return AgentProtocol.Response(error)
        }
    }
}
