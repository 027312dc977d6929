import TokenCache

/// Signing one app out, for `logout` and `remove --client`: one rule and one message. The
/// library chooses the account (``AccountStore/signOutTarget(clientID:account:authority:)``, the
/// rule C follows too); this says it in options. It never asks: only that app's own tokens go
/// (as `gh auth logout` and `az logout` do), and `--dry-run` shows what would go.
enum SignOut {
    static func run(client: ClientID, account: String?, authority: Authority?, in store: AccountStore, dryRun: Bool) throws {
        let target: CachedAccount
        do {
            target = try store.signOutTarget(clientID: client, account: account, authority: authority)
        } catch {
            throw translated(error)
        }
        let plan = "client \(client) out of \(Terminal.escape(target.username)) (\(target.homeAccountID)); other apps stay signed in."
        if dryRun {
            Terminal.print("Would sign \(plan)")
            return
        }
        try store.signOut(target, clientID: client)
        Terminal.print("Signed \(plan)")
    }

    /// The library's reasons said in options: nothing to sign out of is not found (exit 2), an
    /// account to pick is a usage error (64).
    private static func translated(_ error: TokenCacheError) -> Error {
        let hint: String? = switch error.reason.value {
        case .severalAccounts(let accounts): "Pick one with --account NAME or its home account ID: \(accounts.joined(separator: ", "))"
        case .accountInSeveralClouds: AccountSelector.authorityHint
        case .noAccount: (error.hint.map { "\($0); " } ?? "") + "`tokencache list` shows the group"
        default: CLIHints.hint(for: error)
        }
        switch error.code {
        case .notFound: return CLIError.notFound(error.message, hint: hint)
        case .ambiguousAccount: return CLIError.usage(error.message, hint: hint)
        default: return error
        }
    }
}
