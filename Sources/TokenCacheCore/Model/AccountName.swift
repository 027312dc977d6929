/// How an account is named by a person or an app (`--account`, the C API's account argument, an
/// agent's allow list): by its username or its home account ID, in any letter case. The one
/// matcher the CLI, the C API, the agent and the store use.
package enum AccountName {
    /// Whether `name` names the account with this username and home account ID.
    package static func matches(_ name: String, username: String?, homeAccountID: String?) -> Bool {
        ASCII.equalLowercased(username, name) || ASCII.equalLowercased(homeAccountID, name)
    }

    /// Whether `name` names `account`.
    package static func matches(_ name: String, _ account: CachedAccount) -> Bool {
        matches(name, username: account.username, homeAccountID: account.homeAccountID)
    }
}
