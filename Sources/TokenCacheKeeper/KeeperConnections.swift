import Synchronization
import TokenCacheCore

/// Connections the keeper serves at once per uid (SO_PEERCRED): one user's processes, holding
/// connections open, cannot take every one of the keeper's ``KeeperServer`` slots and so keep
/// other users out. A connection over the limit is answered with an `overloaded` error at once
/// and closed.
package final class KeeperConnections: Sendable {
    /// Connections of one uid served at once.
    package let limit: Int
    private let counts = Mutex<[UInt32: Int]>([:])

    package init(limit: Int) { self.limit = limit }

    /// Takes one of `uid`'s slots; end it with ``release(uid:)``.
    /// - Returns: false when `uid` already has ``limit`` connections served (nothing taken).
    package func acquire(uid: UInt32) -> Bool {
        counts.withLock { counts in
            let count = counts[uid, default: 0]
            guard count < limit else { return false }
            counts[uid] = count + 1
            return true
        }
    }

    /// Gives back a slot ``acquire(uid:)`` took.
    package func release(uid: UInt32) {
        counts.withLock { counts in
            let count = counts[uid, default: 0] - 1
            counts[uid] = count > 0 ? count : nil
        }
    }

    /// Served connections of `uid` now.
    package func count(uid: UInt32) -> Int { counts.withLock { $0[uid, default: 0] } }

    /// The refusal sent on a connection over the limit: what happened and what to do.
    package func refusal(uid: UInt32) -> TokenCacheError {
        TokenCacheError(.overloaded, "The token keeper is busy with \(limit) connections of uid \(uid) at once, its limit per user; this one was not served.",
                        hint: "Retry when fewer of your programs are talking to the keeper; a program that holds connections to it open (\(limit) or more) keeps yours out: stop it")
    }
}
