import FoundationEssentials
import TokenCacheCore

/// The identity broker in the one decision: asked only when the app opts in (the façade's
/// `BrokerUse`, behind ``EngineServices/broker()``) and another broker than this cache's own
/// provider answers; its accounts are chosen by the same rule as the cache's, and nothing it
/// answers is saved here.
extension TokenEngine {
    /// The broker this engine's requests go to, or nil for this cache, asked on the caller's
    /// thread (a session bus call).
    /// - Throws: `backendUnavailable` / `noSessionBus` (reason
    ///   `TokenCacheError.Reason.brokerUnavailable(name:)`) when the app requires a broker and none answers.
    package func brokerNow() throws(TokenCacheError) -> (any BrokerConnection)? {
        guard services.mayAskBroker else { return nil }
        return try services.broker()
    }

    /// ``brokerNow()`` off the cooperative pool.
    package func brokerToAsk() async throws(TokenCacheError) -> (any BrokerConnection)? {
        guard services.mayAskBroker else { return nil }
        return try await BlockingWork.run { () throws(TokenCacheError) in try self.brokerNow() }
    }

    /// The decision at the broker: the account chosen among the broker's accounts by the cache's
    /// own rule, the token to be asked at the request's authority (else the account's home tenant).
    package func decide<Broker: BrokerConnection>(_ request: TokenRequest, through broker: Broker) throws(TokenCacheError) -> Decision {
        let accounts = try broker.accounts(clientID: request.clientID)
        let chosen = try Self.choose(among: accounts.map(\.cachedAccount), for: request, in: nil)
        guard let account = accounts.first(where: {
            $0.cachedAccount.homeAccountID == chosen.homeAccountID && $0.cachedAccount.environment == chosen.environment
        }) else {
            throw TokenCacheError(.notFound, "No account of client \(request.clientID) at the identity broker.", reason: .noAccount)
        }
        let environment = account.cachedAccount.environment
        let home = "https://\(environment.isEmpty ? "login.microsoftonline.com" : environment)/\(account.realm ?? "common")"
        let authority = if let asked = request.authority { asked } else { try Authority(home) }
        return .broker { (request: TokenRequest) throws(TokenCacheError) -> TokenResult in
            // The claims as MSAL sends them: the caller's challenge with the app's capabilities (cp1) merged in.
            try broker.token(clientID: request.clientID, authority: authority, scopes: request.scopes,
                             account: account, claims: try request.claimsParameter)
        }
    }

    /// The token of the request's account at the broker (``decide(_:through:)``), off the cooperative pool.
    package func token(_ request: TokenRequest, through broker: any BrokerConnection) async throws(TokenCacheError) -> TokenResult {
        try await token(request, decidedBy: { () throws(TokenCacheError) in try self.decide(request, through: broker) })
    }

    /// The accounts the broker holds for `clientID`, when the app uses one and one answers; nil otherwise.
    package func brokerAccounts(clientID: ClientID) async throws(TokenCacheError) -> [CachedAccount]? {
        guard services.mayAskBroker else { return nil }
        return try await BlockingWork.run { () throws(TokenCacheError) in
            try self.brokerNow().map { broker throws(TokenCacheError) in try broker.cachedAccounts(clientID: clientID) }
        }
    }
}
