import FoundationEssentials
import TokenCacheCore

/// The identity broker in the one decision: asked only when the app opts in (its ``BrokerUse``,
/// applied here to what ``EngineServices/brokerOnBus()`` finds) and another broker than this
/// cache's own provider answers; its accounts are chosen by the same rule as the cache's, and nothing it
/// answers is saved here.
extension TokenEngine {
    /// The broker this engine's requests go to, or nil for this cache, asked on the caller's
    /// thread (a session bus call).
    /// - Throws: `backendUnavailable` / `noSessionBus` (reason
    ///   `TokenCacheError.Reason.brokerUnavailable(name:)`) when the app requires a broker and none answers.
    package func brokerNow() throws(TokenCacheError) -> (any BrokerConnection)? {
        let use = services.brokerUse
        guard use != .never else { return nil }
        switch try services.brokerOnBus() {
        case .broker(let broker): return broker
        case .noBus(let error) where use == .always: throw error
        case .ourProvider where use == .always:
            // `tokencache broker` serves this same cache: by design it is never asked (#59 item 6).
            throw TokenCacheError(.backendUnavailable,
                                  "Only tokencache's own broker (`tokencache broker`) answers on the session bus (\(Self.brokerBusName)): it serves this same cache, so it is never asked; this app requires Microsoft's identity broker.",
                                  hint: "Let the app use this cache (broker: when-available or never), or install and enrol Microsoft's identity broker",
                                  reason: .brokerUnavailable(name: Self.brokerBusName))
        case .nobody where use == .always:
            throw TokenCacheError(.backendUnavailable, "No identity broker answers on the session bus (\(Self.brokerBusName)); this app requires one.",
                                  hint: "Install and enrol Microsoft's identity broker, or let the app use this cache (broker: when-available or never)",
                                  reason: .brokerUnavailable(name: Self.brokerBusName))
        case .noBus, .ourProvider, .nobody: return nil
        }
    }

    /// The identity broker's well-known name on the session bus.
    package static let brokerBusName = "com.microsoft.identity.broker1"

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

    /// The accounts the broker holds for `clientID`, when the app uses one and one answers; nil
    /// otherwise. Blocking (a session-bus call), on the caller's thread: its one caller, the CLI, blocks.
    package func brokerAccounts(clientID: ClientID) throws(TokenCacheError) -> [CachedAccount]? {
        guard services.brokerUse != .never else { return nil }
        return try brokerNow().map { broker throws(TokenCacheError) in try broker.cachedAccounts(clientID: clientID) }
    }
}
