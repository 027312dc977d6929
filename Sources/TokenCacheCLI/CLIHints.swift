import TokenCache

/// What the command line offers where an error happens, so that a library error's hint can be
/// said as something to type there.
struct HintContext: Sendable {
    /// The option that chooses the backend (`--backend`), or nil where there is none (migrate
    /// names both sides with --from and --to).
    var backendOption: String? = "--backend"
    /// The option that names the Secret Service collection.
    var collectionOption = "--collection"
    /// What the user runs, for hints that say to run it again elsewhere.
    var action = "the command"

    /// A `migrate` side: its collection option, and no --backend.
    static func migrate(collectionOption: String) -> HintContext {
        HintContext(backendOption: nil, collectionOption: collectionOption, action: "the migration")
    }

    /// `unlock`, which works on the Secret Service only.
    static let unlock = HintContext(backendOption: nil, action: "tokencache unlock")

    /// Runs `body`, turning a library error into a CLIError whose hint is this context's.
    func translating<Value>(_ body: () throws -> Value) throws -> Value {
        do {
            return try body()
        } catch let error as TokenCacheError {
            throw CLIError(message: error.message, hint: CLIHints.hint(for: error, in: self),
                           exitCode: error.code == .invalidArgument ? 64 : 1)
        }
    }
}

/// The library's hints speak to apps (options structs, API names) and to every caller; the CLI
/// says each one as an action its user can take at the prompt.
enum CLIHints {
    static func hint(for error: TokenCacheError, in context: HintContext = HintContext()) -> String? {
        guard let hint = error.hint else { return nil }
        let collection = context.collectionOption
        switch error.code {
        case .keyringLocked:
            return "Run `tokencache unlock` (or add --allow-prompt) and answer the provider's unlock prompt, or unlock it in your desktop session; nothing was read or changed"
        case .promptDismissed where error.message.hasPrefix("Creating the collection"):
            return "Add --allow-prompt and answer the provider's password prompt, create the collection in your keyring manager, or use \(collection) default, which never prompts"
        case .promptDismissed where error.message.contains("unlock prompt"), .timedOut where error.message.contains("unlock prompt"):
            return "Run `tokencache unlock` in your desktop session and answer the provider's prompt, then retry; nothing was read or changed"
        case .collectionMissing where error.message.contains("is labelled"):
            return "Add --create to create it (the provider asks for its password: add --allow-prompt too), create it in your keyring manager, or use \(collection) default"
        case .collectionMissing where error.message.contains("'session'"):
            return "This Secret Service provider has no in-memory session collection: use \(collection) default or a collection's label"
        case .collectionMissing where error.message.contains("'default'") && context.backendOption == nil:
            return "Log in to the desktop once so the login keyring exists, or name an existing collection with \(collection)"
        case .noSessionBus where context.backendOption == nil:
            return "Run \(context.action) inside the desktop session, where the Secret Service is"
        case .noSecretService where context.backendOption == nil:
            return "Start gnome-keyring-daemon (or KWallet, KeePassXC), then run \(context.action) again"
        case .libsecretMissing where context.backendOption == nil, .libgcryptMissing where context.backendOption == nil:
            return installPart(of: hint) + "; \(context.action) needs it"
        case .libcurlMissing:
            return installPart(of: hint) + ", or leave out --refresh: cached tokens need no libcurl"
        case .ambiguousAccount:
            return AccountSelector.authorityHint
        case .browserUnavailable where error.message.contains("no display"):
            return "Run `tokencache login` again with --device-code: it signs in from a browser on any device (for SSH sessions and machines without a display)"
        case .browserUnavailable where error.message.contains("in BROWSER"):
            return "Fix BROWSER (commands separated by ':'; %s in one is replaced by the URL, else it is appended) or unset it, or run `tokencache login` again with --device-code"
        case .browserUnavailable:
            return "Run `tokencache login` again with --device-code (for SSH sessions and machines without a browser), or set a default browser (xdg-settings set default-web-browser)"
        case .portUnavailable where hint.contains("redirectPort"):
            return "Another program uses that port: free it, or leave out --port (any free port)"
        case .interactionRequired where error.server?.claims != nil:
            let claims = error.server?.claims ?? ""
            return "Sign in again with the claims challenge the server sent: `tokencache login --client ID --authority URL --scopes … --claims '\(claims)'` (--device-code without a browser)"
        case .timedOut where hint.contains("InteractiveTokenParameters.timeout"):
            return "Finish signing in in the browser sooner, or raise --timeout"
        case .invalidArgument where hint.contains("configure the token endpoint"):
            return "Check --authority: the token endpoint is found through the authority's OpenID configuration"
        default:
            return phrases.reduce(hint) { $0.replacing($1.library, with: $1.cli) }
        }
    }

    /// Library wording (for apps) and what the CLI says instead, wherever it occurs.
    private static let phrases: [(library: String, cli: String)] = [
        (" (apps: EncryptedFileBackend.acceptRolledBackFile(for:))", ""),
        ("Use an authority on", "Pass --authority on"),
        ("Sign the user in interactively", "Sign in again: `tokencache login --client ID --authority URL --scopes …` (--device-code without a browser)"),
        ("sign the user in interactively at", "sign in again (`tokencache login`) at"),
        ("use acquireToken (browser) instead", "run `tokencache login` without --device-code (browser) instead"),
        ("Check the app registration (client ID, authority)", "Check --client and --authority against the app registration"),
    ]

    /// "Install it (Debian/Ubuntu: apt-get install X)" out of a missing library's hint, without
    /// the alternative the library offers its callers.
    private static func installPart(of hint: String) -> String {
        guard let end = hint.firstRange(of: "), or ") else { return hint }
        return String(hint[..<end.lowerBound]) + ")"
    }
}
