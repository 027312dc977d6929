/// What `tokencache doctor` reports: which backend a policy selects and why, and the state of
/// everything it depends on.
public struct BackendDiagnosis: Sendable, Hashable, Codable {
    /// One fact that was checked.
    public struct Check: Sendable, Hashable, Codable {
        /// The outcome of a check.
        public enum Status: String, Sendable, Hashable, Codable { case ok, warning, failed, info }
        /// What was checked, for example "session bus".
        public var name: String
        public var status: Status
        /// What was found.
        public var detail: String

        public init(name: String, status: Status, detail: String) {
            self.name = name
            self.status = status
            self.detail = detail
        }
    }

    /// The policy diagnosed.
    public var policy: BackendPolicy
    /// The backend the policy selects here, or nil when it cannot work.
    public var selected: String?
    /// Why.
    public var reason: String
    /// Everything checked.
    public var checks: [Check]
    /// The fix, in one line, when the policy cannot work.
    public var fix: String?

    /// Whether the policy's backend can work here.
    public var isUsable: Bool { selected != nil }

    public init(policy: BackendPolicy, selected: String?, reason: String, checks: [Check], fix: String?) {
        self.policy = policy
        self.selected = selected
        self.reason = reason
        self.checks = checks
        self.fix = fix
    }
}
