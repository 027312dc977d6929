import FoundationEssentials
import TokenCacheCore

/// The identity broker in the one decision: asked only when the app opts in
/// (``BrokerUse``) and another broker than this cache's own provider answers; its accounts are
/// chosen by the same rule as the cache's, and nothing it answers is saved here.
extension TokenEngine {
    /// The broker this engine's requests go to, or nil for this cache.
    /// - Throws: `backendUnavailable` / `noSessionBus` (reason
    ///   `TokenCacheError.Reason.brokerUnavailable(name:)`) when the app requires a broker and none answers.
    func brokerToAsk() async throws(TokenCacheError) -> BrokerClient? {
        let use = options.broker
        guard use != .never else { return nil }
        let found: BrokerClient? = try await BlockingWork.run { () throws(TokenCacheError) -> BrokerClient? in
            let client: BrokerClient
            do throws(TokenCacheError) { client = try BrokerClient.onSessionBus() } catch {
                if use == .whenAvailable { return nil }
                throw error
            }
            switch try client.owner() {
            case .broker?: return client
            case .ourProvider?, nil: return nil
            }
        }
        if found == nil, use == .always {
            throw TokenCacheError(.backendUnavailable, "No identity broker answers on the session bus (\(BrokerClient.busName)); this app requires one.",
                                  hint: "Install and enrol Microsoft's identity broker, or let the app use this cache (broker: when-available or never)",
                                  reason: .brokerUnavailable(name: BrokerClient.busName))
        }
        return found
    }

    /// The token of the request's account at the broker: the account chosen among the broker's
    /// accounts by the cache's own rule, the token asked at the request's authority (else the
    /// account's home tenant).
    func token(_ request: TokenRequest, through broker: BrokerClient) async throws(TokenCacheError) -> TokenResult {
        try await BlockingWork.run { () throws(TokenCacheError) -> TokenResult in
            let accounts = try broker.accounts(clientID: request.clientID.value)
            let chosen = try Self.choose(among: accounts.map(\.cachedAccount), for: request, in: nil)
            guard let account = accounts.first(where: { $0.homeAccountID == chosen.homeAccountID && $0.environment == chosen.environment }) else {
                throw TokenCacheError(.notFound, "No account of client \(request.clientID) at the identity broker.", reason: .noAccount)
            }
            let home = "https://\(account.environment.isEmpty ? "login.microsoftonline.com" : account.environment)/\(account.realm ?? "common")"
            let authority = if let asked = request.authority { asked } else { try Authority(home) }
            // The claims as MSAL sends them: the caller's challenge with the app's capabilities (cp1) merged in.
            return try broker.token(clientID: request.clientID.value, authority: authority, scopes: request.scopes,
                                    account: account, claims: try request.claimsParameter)
        }
    }

    /// The accounts the broker holds for `clientID`, when the app uses one and one answers; nil otherwise.
    package func brokerAccounts(clientID: String) async throws(TokenCacheError) -> [CachedAccount]? {
        guard let broker = try await brokerToAsk() else { return nil }
        return try await BlockingWork.run { () throws(TokenCacheError) in try broker.accounts(clientID: clientID).map(\.cachedAccount) }
    }
}
