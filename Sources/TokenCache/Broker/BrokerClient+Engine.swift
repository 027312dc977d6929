import TokenCacheCore
import TokenCachePipeline

// The broker's seam of the engine (BrokerConnection), beside the client it wraps.
extension BrokerAccount: BrokerAccountDescription {}

extension BrokerClient: BrokerConnection {
    /// Who answers on the broker's bus name now (the engine decides with the app's `BrokerUse`).
    /// - Throws: what asking the name's owner throws.
    static func onBus() throws(TokenCacheError) -> BrokerOnBus {
        let client: BrokerClient
        do throws(TokenCacheError) { client = try BrokerClient.onSessionBus() } catch { return .noBus(error) }
        return switch try client.owner() {
        case .broker?: .broker(client)
        case .ourProvider?: .ourProvider
        case nil: .nobody
        }
    }
}
