import ArgumentParser
import FoundationEssentials
import TokenCache

struct UnlockCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unlock",
        abstract: "Unlock the Secret Service collection the group maps onto, with the provider's prompt.",
        discussion: """
        Asks the provider to unlock the --collection (GNOME Keyring and KeePassXC show their \
        password dialog, KWallet opens the wallet) and waits up to 60 s for you to answer. \
        Exits 0 when the collection is unlocked (or already was), 1 when the prompt was \
        dismissed or could not be shown (no desktop session).

        Examples:
          tokencache unlock
          tokencache unlock --collection "Work keyring"
        """)

    @OptionGroup var store: StoreOptions

    func run() throws {
        try reportingErrors(.unlock) {
            let settings = try store.settings()
            var options = store.secretServiceOptions(settings)
            // Answering the prompt is the point of this command.
            options.allowsUnlockPrompt = true
            let backend = try SecretServiceBackend(options: options)
            let path = try backend.resolvedCollectionPath(for: settings.group.value)
            let wasLocked = try backend.checkUnlocked(path)
            Terminal.print(wasLocked ? "Unlocked collection \(path)." : "Collection \(path) is already unlocked.")
        }
    }
}
