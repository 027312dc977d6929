#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import FoundationEssentials
import TokenCacheCore

/// What a client checks before it tells an agent anything (issue #44): a fake agent another user
/// runs at the path `TOKENCACHE_AGENT_SOCK` names would learn every request's client, scopes,
/// account and authority, and could answer a token of its choosing.
package enum AgentTrust {
    /// The socket file must be a socket of a trusted user, in a directory of a trusted user (or
    /// root) that no other user can write to: otherwise another user could have put it there
    /// first (a `/tmp` path for `ssh -R`, which sshd does not replace).
    package static func checkPath(_ path: String, trusting uids: Set<UInt32>) throws(TokenCacheError) {
        let directory = UnixSocket.parent(of: path)
        var folder = stat()
        guard stat(directory, &folder) == 0 else { return }  // connect reports the missing path
        let folderTrusted = folder.st_uid == 0 || uids.contains(folder.st_uid)
        if !folderTrusted || folder.st_mode & 0o022 != 0 {
            throw untrusted(path, folderTrusted
                ? "its directory \(directory) can be written by other users, who could have put a socket of theirs there"
                : "its directory \(directory) belongs to uid \(folder.st_uid)", uid: folder.st_uid)
        }
        var socket = stat()
        guard lstat(path, &socket) == 0 else { return }
        guard socket.st_mode & S_IFMT == S_IFSOCK else {
            throw untrusted(path, "it is not a socket", uid: socket.st_uid)
        }
        guard uids.contains(socket.st_uid) else {
            throw untrusted(path, "the socket belongs to uid \(socket.st_uid)", uid: socket.st_uid)
        }
    }

    /// The listening process must run as a trusted user (SO_PEERCRED): on the remote side of
    /// `ssh -R` that is sshd running as this user; in a container, the uid `TOKENCACHE_AGENT_UID` names.
    package static func checkPeer(of socket: SocketDescriptor, at path: String, trusting uids: Set<UInt32>) throws(TokenCacheError) {
        guard let peer = socket.peerCredentials() else {
            throw untrusted(path, "the kernel did not say who listens there", uid: nil)
        }
        guard uids.contains(peer.uid) else {
            throw untrusted(path, "the process listening there (pid \(peer.pid)) runs as uid \(peer.uid)", uid: peer.uid)
        }
    }

    private static func untrusted(_ path: String, _ why: String, uid: UInt32?) -> TokenCacheError {
        TokenCacheError(.agentUnavailable, "The token agent at \(path) is not trusted: \(why). Nothing was sent to it.",
                        hint: "Start your own agent with a socket under $XDG_RUNTIME_DIR (`eval $(tokencache agent --daemon)`); "
                            + "for a container whose user differs from the agent's, set \(AgentClient.trustedUIDVariable) to the agent's uid",
                        reason: .agentUntrusted(path: path, uid: uid.map(Int.init)))
    }

    /// An error the agent answered, shown as the agent's words: its code and reason are kept, its
    /// message is labelled as the agent's (control characters removed), and its hint, labelled
    /// too, loses anything that looks like a link: an agent must not be able to send the user to
    /// a page (a policy refusal's "restart the agent with --client" still gets through).
    package static func asAgentsAnswer(_ error: TokenCacheError, path: String) -> TokenCacheError {
        let hint = error.hint.map { hint in
            ServerText.printable(hint, limit: 300).split(separator: " ", omittingEmptySubsequences: false)
                .map { looksLikeLink($0) ? "[link removed]" : String($0) }.joined(separator: " ")
        }
        return TokenCacheError(error.code, "The token agent at \(path) answered: \(ServerText.printable(error.message, limit: 500))",
                               hint: hint.map { "The agent suggests: \($0)" },
                               server: error.server, reason: error.reason)
    }

    /// A URL, or a host name followed by a path ("www.x", "evil.example/device").
    private static func looksLikeLink(_ word: Substring) -> Bool {
        let lowered = word.lowercased()
        if lowered.contains("://") || lowered.hasPrefix("www.") { return true }
        guard let slash = lowered.firstIndex(of: "/"), slash != lowered.startIndex else { return false }
        let host = lowered[..<slash]
        return host.contains(".") && host.last?.isLetter == true
    }
}
