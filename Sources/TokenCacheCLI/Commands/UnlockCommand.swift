import ArgumentParser
import FoundationEssentials
import TokenCache

struct UnlockCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unlock",
        abstract: "Unlock the Secret Service collection the group maps onto, with the provider's prompt; or, with --file, the passphrase-protected encrypted file for this login session.",
        discussion: """
        Asks the provider to unlock the --collection (GNOME Keyring and KeePassXC show their \
        password dialog, KWallet opens the wallet) and waits up to 60 s for you to answer. \
        Exits 0 when the collection is unlocked (or already was), 1 when the prompt was \
        dismissed or could not be shown (no desktop session).

        With --file: asks for the encrypted file's passphrase once (or reads --passphrase-file), \
        derives the keys of the passphrase-protected cache files and keeps them in the kernel's \
        session keyring (keyutils), readable only by your own processes of this login session \
        (not by another user sharing it through su or sudo), for --timeout (default 15m; 0 keeps \
        them until the session ends). Later commands and apps of \
        the session read those files without asking. `tokencache lock --file` drops them; \
        logging out drops them. Nothing is written to disk.

        Examples:
          tokencache unlock
          tokencache unlock --collection "Work keyring"
          tokencache unlock --file --timeout 1h
        """)

    @OptionGroup(title: "Storage options") var store: StoreOptions

    @Flag(help: "Unlock the passphrase-protected encrypted file for this login session instead.")
    var file = false

    @Option(help: ArgumentHelp("With --file, how long the session keeps the keys: 90s, 15m, 8h or seconds; 0 until the session ends.", valueName: "duration"),
            transform: UnlockCommand.seconds)
    var timeout: UInt32?

    func validate() throws {
        if timeout != nil && !file { throw ValidationError("--timeout goes with --file.") }
    }

    /// "90s", "15m", "8h" or plain seconds.
    static func seconds(_ text: String) throws -> UInt32 {
        let units: [Character: UInt32] = ["s": 1, "m": 60, "h": 3600]
        let (digits, unit) = text.last.flatMap { units[$0] }.map { (text.dropLast(), $0) } ?? (Substring(text), 1)
        guard let value = UInt32(digits), value <= UInt32.max / unit else {
            throw ValidationError("'\(text)' is not a duration: give seconds or a number with s, m or h (15m).")
        }
        return value * unit
    }

    func run() throws {
        if file { return try unlockFile() }
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

    private func unlockFile() throws {
        try reportingErrors {
            let settings = try store.settings()
            var forFile = settings
            forFile.keySource = Setting(value: .passphrase, source: .flag("--file"))
            let backend = EncryptedFileBackend(keySource: try StoreOptions.fileKeySource(forFile))
            let seconds = timeout ?? 15 * 60
            let count = try backend.unlockSession(timeout: seconds)
            let keys = "\(count) passphrase key\(count == 1 ? "" : "s") of \(backend.directory.path)"
            switch EncryptedFileBackend.sessionKeyringScope {
            case .session:
                Terminal.print("Unlocked \(keys) for this session, \(seconds == 0 ? "until it ends" : "for \(seconds) s").")
            case .userSession:
                let until = seconds == 0 ? "until you log out everywhere" : "for \(seconds) s"
                Terminal.print("Unlocked \(keys) in your user-session keyring (this shell has no session keyring of its own), \(until): every process of yours without a session keyring of its own uses them.")
            }
        }
    }
}

struct LockCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lock",
        abstract: "With --file, drop the encrypted file's keys that `tokencache unlock --file` kept in the session keyring.",
        discussion: """
        Later commands ask for the passphrase again. Exits 0 whether or not keys were kept.

        Example:
          tokencache lock --file
        """)

    @Flag(help: "Drop the encrypted file's session keys (the only thing lock does).")
    var file = false

    func validate() throws {
        if !file { throw ValidationError("Give --file: lock drops the encrypted file's session keys (lock the keyring with its own tools).") }
    }

    func run() throws {
        try reportingErrors {
            let backend = EncryptedFileBackend()
            let dropped = try backend.lockSession()
            Terminal.print(dropped ? "Locked: the session keys of \(backend.directory.path) were dropped." : "No session keys of \(backend.directory.path) were kept.")
        }
    }
}
