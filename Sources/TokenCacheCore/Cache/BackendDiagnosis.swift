/// What `tokencache doctor` reports: which backend a policy selects and why, and the state of
/// everything it depends on.
package struct BackendDiagnosis: Sendable, Hashable, Codable {
    /// One fact that was checked.
    package struct Check: Sendable, Hashable, Codable {
        /// The outcome of a check.
        package enum Status: String, Sendable, Hashable, Codable { case ok, warning, failed, info }
        /// What was checked, for example "session bus".
        package var name: String
        package var status: Status
        /// What was found.
        package var detail: String

        package init(name: String, status: Status, detail: String) {
            self.name = name
            self.status = status
            self.detail = detail
        }
    }

    /// The policy diagnosed.
    package var policy: BackendPolicy
    /// The backend the policy selects here, or nil when it cannot work.
    package var selected: String?
    /// Why.
    package var reason: String
    /// Everything checked.
    package var checks: [Check]
    /// The fix, in one line, when the policy cannot work.
    package var fix: String?
    /// The error the fix answers, when it is one (a CLI says its hint in its own words).
    package var problem: TokenCacheError?

    // `problem` stays out of the JSON: its message and hint are already in `reason` and `fix`.
    private enum CodingKeys: String, CodingKey { case policy, selected, reason, checks, fix }

    /// Whether the policy's backend can work here.
    package var isUsable: Bool { selected != nil }

    package init(policy: BackendPolicy, selected: String?, reason: String, checks: [Check], fix: String?,
                 problem: TokenCacheError? = nil) {
        self.problem = problem
        self.policy = policy
        self.selected = selected
        self.reason = reason
        self.checks = checks
        self.fix = fix
    }
}
