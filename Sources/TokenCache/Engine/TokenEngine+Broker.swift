import FoundationEssentials
import TokenCacheCore
import TokenCachePipeline

/// The identity broker in the one decision: asked only when the app opts in
/// (``BrokerUse``) and another broker than this cache's own provider answers; its accounts are
/// chosen by the same rule as the cache's, and nothing it answers is saved here.
extension TokenEngine {
    /// The broker this engine's requests go to, or nil for this cache, asked on the caller's
    /// thread (a session bus call).
    /// - Throws: `backendUnavailable` / `noSessionBus` (reason
    ///   `TokenCacheError.Reason.brokerUnavailable(name:)`) when the app requires a broker and none answers.
    func brokerNow() throws(TokenCacheError) -> BrokerClient? {
        let use = options.broker
        guard use != .never else { return nil }
        let client: BrokerClient?
        do throws(TokenCacheError) { client = try BrokerClient.onSessionBus() } catch {
            if use != .whenAvailable { throw error }
            client = nil
        }
        let owner = try client?.owner()
        let found: BrokerClient? = if let client, case .broker? = owner { client } else { nil }
        if found == nil, use == .always, case .ourProvider? = owner {
            // `tokencache broker` serves this same cache: by design it is never asked (#59 item 6).
            throw TokenCacheError(.backendUnavailable,
                                  "Only tokencache's own broker (`tokencache broker`) answers on the session bus (\(BrokerWire.busName)): it serves this same cache, so it is never asked; this app requires Microsoft's identity broker.",
                                  hint: "Let the app use this cache (broker: when-available or never), or install and enrol Microsoft's identity broker",
                                  reason: .brokerUnavailable(name: BrokerWire.busName))
        }
        if found == nil, use == .always {
            throw TokenCacheError(.backendUnavailable, "No identity broker answers on the session bus (\(BrokerWire.busName)); this app requires one.",
                                  hint: "Install and enrol Microsoft's identity broker, or let the app use this cache (broker: when-available or never)",
                                  reason: .brokerUnavailable(name: BrokerWire.busName))
        }
        return found
    }

    /// ``brokerNow()`` off the cooperative pool.
    func brokerToAsk() async throws(TokenCacheError) -> BrokerClient? {
        guard options.broker != .never else { return nil }
        return try await BlockingWork.run { () throws(TokenCacheError) in try self.brokerNow() }
    }

    /// The decision at the broker: the account chosen among the broker's accounts by the cache's
    /// own rule, the token to be asked at the request's authority (else the account's home tenant).
    func decide(_ request: TokenRequest, through broker: BrokerClient) throws(TokenCacheError) -> Decision {
        let accounts = try broker.accounts(clientID: request.clientID)
        let chosen = try Self.choose(among: accounts.map(\.cachedAccount), for: request, in: nil)
        guard let account = accounts.first(where: { $0.homeAccountID == chosen.homeAccountID && $0.environment == chosen.environment }) else {
            throw TokenCacheError(.notFound, "No account of client \(request.clientID) at the identity broker.", reason: .noAccount)
        }
        let home = "https://\(account.environment.isEmpty ? "login.microsoftonline.com" : account.environment)/\(account.realm ?? "common")"
        let authority = if let asked = request.authority { asked } else { try Authority(home) }
        return .broker(broker, account, authority)
    }

    /// The token of the request's account at the broker (``decide(_:through:)``), off the cooperative pool.
    func token(_ request: TokenRequest, through broker: BrokerClient) async throws(TokenCacheError) -> TokenResult {
        try await token(request, decidedBy: { () throws(TokenCacheError) in try self.decide(request, through: broker) })
    }

    /// The accounts the broker holds for `clientID`, when the app uses one and one answers; nil otherwise.
    package func brokerAccounts(clientID: ClientID) async throws(TokenCacheError) -> [CachedAccount]? {
        guard options.broker != .never else { return nil }
        return try await BlockingWork.run { () throws(TokenCacheError) in
            try self.brokerNow().map { broker throws(TokenCacheError) in try broker.accounts(clientID: clientID).map(\.cachedAccount) }
        }
    }
}
