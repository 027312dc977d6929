import ArgumentParser
import FoundationEssentials
import TokenCache
@_spi(Backend) import TokenCacheCore

struct GroupsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "groups",
        abstract: "List the groups present on the backend, with their accounts and tokens (never secrets).",
        discussion: """
        On the Secret Service, the groups tagged in the --collection; for the encrypted file, the \
        group files in its directory. A group shows once it holds an entry. --group is not used (a name given must still be a valid group name).

        Examples:
          tokencache groups
          tokencache groups --backend file --json

        --json prints {"location", "groups": [{"name", "accounts", "access_tokens", \
        "refresh_tokens", "id_tokens", "entries"}]}.
        """)

    @Flag(help: "Print JSON with sorted keys, for scripts.")
    var json = false

    @OptionGroup(title: "Storage options") var store: StoreOptions

    /// The documented `--json` document.
    struct Output: Encodable {
        var location: String
        var groups: [GroupSummary]
    }

    func run() throws {
        try reportingErrors {
            store.noteLocalOnly("groups")
            let (location, groups) = try Self.groups(on: try store.openStore())
            if json {
                try JSONOutput.print(Output(location: location, groups: groups))
            } else if groups.isEmpty {
                Terminal.print("No groups on \(location).")
            } else {
                Terminal.print("\(Terminal.dim("Read from")) \(location)")
                Terminal.print(Terminal.table(["GROUP", "ACCOUNTS", "ACCESS TOKENS", "REFRESH TOKENS", "ID TOKENS", "ENTRIES"], groups.map { group in
                    [TerminalText(group.name), "\(group.accounts)", "\(group.accessTokens)", "\(group.refreshTokens)",
                     "\(group.idTokens)", "\(group.entries)"]
                }))
            }
        }
    }

    /// Where groups are looked for, and those present, next to the store's group.
    static func groups(on store: AccountStore) throws -> (location: String, groups: [GroupSummary]) {
        guard let backend = store.backend as? any GroupListingBackend else {
            throw CLIError.failed("This backend cannot list its groups.", hint: "Use --backend secret-service or --backend file")
        }
        return (backend.groupsLocation(alongside: store.group), try backend.groupSummaries(alongside: store.group))
    }
}
