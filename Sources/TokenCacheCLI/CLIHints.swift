import FoundationEssentials
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
/// says each one as an action its user can take at the prompt, chosen by the error's code and
/// reason, never by its text.
enum CLIHints {
    static func hint(for error: TokenCacheError, in context: HintContext = HintContext()) -> String? {
        guard let hint = error.hint else { return nil }
        let collection = context.collectionOption
        let sidesOnly = context.backendOption == nil
        switch (error.code, error.reason.value) {
        case (.keyringLocked, _) where !SecretServiceBackend.hasDisplay, (.promptDismissed, .noDisplay):
            return "This session has no display for the keyring's unlock prompt (as over SSH): run `tokencache unlock` in the desktop session, use \(context.backendOption ?? "--backend") file, or use the desktop's cache through the token agent (`tokencache agent` there, TOKENCACHE_AGENT_SOCK here: docs/AGENT.md); nothing was read or changed"
        case (.keyringLocked, _):
            return "Run `tokencache unlock` (or add --allow-prompt) and answer the provider's unlock prompt, or unlock it in your desktop session; nothing was read or changed"
        case (.promptDismissed, .createCollectionPromptDismissed(let label)) where label == SecretServiceBackend.defaultCollectionLabel:
            // The missing default collection: there is no other collection to point at.
            return "Run it again with --allow-prompt and choose a password for the new keyring, create a keyring in Seahorse (Passwords and Keys) and set it as default, or use \(context.backendOption ?? "--backend") file"
        case (.promptDismissed, .createCollectionPromptDismissed):
            return "Add --allow-prompt and answer the provider's password prompt, create the collection in your keyring manager, or use \(collection) default, which never prompts"
        case (.promptDismissed, .unlockPromptDismissed), (.timedOut, .unlockPromptTimedOut):
            return "Run `tokencache unlock` in your desktop session and answer the provider's prompt, then retry; nothing was read or changed"
        case (.collectionMissing, .collectionMissing):
            return "Add --create to create it (the provider asks for its password: add --allow-prompt too), create it in your keyring manager, or use \(collection) default"
        case (.collectionMissing, .sessionCollectionUnsupported):
            return "This Secret Service provider has no in-memory session collection: use \(collection) default or a collection's label"
        case (.collectionMissing, .defaultCollectionMissing) where sidesOnly:
            return "Log in to the desktop once so the login keyring exists, or name an existing collection with \(collection)"
        case (.collectionMissing, .defaultCollectionUncreatable) where sidesOnly:
            return "No keyring can be created here (no display for the provider's password prompt): create one once in a desktop session (`secret-tool store --label=init x y`, or Seahorse), or name an existing collection with \(collection)"
        case (.noSessionBus, _) where sidesOnly:
            return "Run \(context.action) inside the desktop session, where the Secret Service is"
        case (.noSecretService, _) where sidesOnly:
            return "Start gnome-keyring-daemon (or KWallet, KeePassXC), then run \(context.action) again"
        case (.libgcryptMissing, .libraryMissing(_, let install)) where sidesOnly:
            return "Install it (\(install)); \(context.action) needs it"
        case (.libcurlMissing, .libraryMissing(_, let install)):
            return "Install it (\(install)), or leave out --refresh: cached tokens need no libcurl"
        case (.ambiguousAccount, _):
            return AccountSelector.authorityHint
        case (.backendUnavailable, .brokerUnavailable), (.noSessionBus, .brokerUnavailable):
            return "Drop --broker (or use `token --broker when-available`) to read this cache, or install and enrol Microsoft's identity broker; `tokencache broker` is never asked"
        case (.browserUnavailable, .noDisplay):
            return "Run `tokencache login` again with --device-code: it signs in from a browser on any device (for SSH sessions and machines without a display)"
        case (.browserUnavailable, .browserCommandFailed):
            return "Fix BROWSER (commands separated by ':'; %s in one is replaced by the URL, else it is appended) or unset it, or run `tokencache login` again with --device-code"
        case (.browserUnavailable, _):
            return "Run `tokencache login` again with --device-code (for SSH sessions and machines without a browser), or set a default browser (xdg-settings set default-web-browser)"
        case (.portUnavailable, .redirectPortUnavailable):
            return "Another program uses that port: free it, or leave out --port (any free port)"
        case (.interactionRequired, _) where error.server?.claims != nil:
            let claims = error.server?.claims ?? ""
            return "Sign in again with the claims challenge the server sent: `tokencache login --client ID --authority URL --scopes … --claims '\(claims)'` (--device-code without a browser)"
        case (.timedOut, .signInTimedOut):
            return "Finish signing in in the browser sooner, or raise --timeout"
        case (.invalidArgument, .tokenEndpointNotFound):
            return "Check --authority: the token endpoint is found through the authority's OpenID configuration"
        case (_, .fileRolledBack(let group)):
            return "If you restored it on purpose, accept it with `tokencache doctor --backend file --group \(group) --accept-rollback`; otherwise put the newer file back. It was not changed"
        case (_, .noRefreshToken), (_, .refreshTokenRejected):
            return signInAgain
        case (_, .tokensOfAnotherAccount):
            return "Nothing was saved. \(signInAgain); if it happens again, check which token endpoint the app uses"
        case (_, .refreshTokenFromOtherHost(let aliases, let host)):
            return "Pass --authority on \(aliases.joined(separator: " or ")), or sign in again (`tokencache login`) at \(host)"
        case (_, .clientRejected):
            return "Check --client and --authority against the app registration"
        case (_, .deviceCodeUnsupported(let adfs)):
            return (adfs ? "AD FS before 2019 has no device code flow: " : "This authority has no device code flow: ")
                + "run `tokencache login` without --device-code (browser) instead"
        default:
            return hint
        }
    }

    /// How the CLI's user signs in again, where the library says to sign the user in interactively.
    private static let signInAgain = "Sign in again: `tokencache login --client ID --authority URL --scopes …` (--device-code without a browser)"
}

extension CLIHints {
    /// What the identity provider said, for people: its `AADSTS…` code and the first line of its
    /// `error_description` (what users search for), else its `error_codes`; nil when it said
    /// nothing more than the error. Never holds a token (servers do not echo them).
    static func serverLine(for error: TokenCacheError) -> String? {
        guard let server = error.server else { return nil }
        // Entra appends "Trace ID: … Correlation ID: … Timestamp: …" (on new lines or after it).
        let description: String? = server.errorDescription.flatMap { text -> String? in
            let line = text.split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
            let cut = (line.components(separatedBy: " Trace ID:").first ?? line)
            let trimmed = String(cut.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
            return trimmed.isEmpty ? nil : trimmed
        }
        if let description { return "The identity provider answered: \(description)" }
        guard !server.errorCodes.isEmpty else { return nil }
        return "The identity provider answered \(server.error) with error code\(server.errorCodes.count == 1 ? "" : "s") \(server.errorCodes.map { "AADSTS\($0)" }.joined(separator: ", "))."
    }

    /// The error's message with the provider's answer on a line of its own.
    static func message(of error: TokenCacheError) -> String {
        serverLine(for: error).map { error.message + "\n" + $0 } ?? error.message
    }
}

