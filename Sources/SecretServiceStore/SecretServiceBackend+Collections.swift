import TokenCacheCore
import TokenCacheCrypto
import TokenCachePlatform
import FoundationEssentials

extension SecretServiceBackend {
    /// The D-Bus object path the backend addresses the group's collection by: the collection's
    /// own path, resolved once (``resolvedCollectionPath(for:)``), then cached.
    ///
    /// Not the alias's object path (`/org/freedesktop/secrets/aliases/default`), which would
    /// save the ReadAlias round trip: gnome-keyring answers a call on it that arrives while the
    /// same client's session is being opened with "Object does not exist at path
    /// /org/freedesktop/secrets/collection/<garbage>" (2 % of cold `tokencache token` runs,
    /// 14 % of OpenSession + SearchItems pairs sent together; calls on the collection's own
    /// path and ReadAlias never failed). A locked collection is found where it shows: an empty
    /// search or a GetSecrets answer that leaves items out leads to one Locked check
    /// (`checkUnlocked(_:)`), and writes and deletes fail with IsLocked. With unlock prompts
    /// allowed, the collection is unlocked up front.
    ///
    /// Resolved with plain D-Bus calls (ReadAlias, Properties.Get) rather than libsecret's
    /// collection proxies, whose construction loads every property, including the path of every
    /// item in the collection: 12 ms of a cold lookup at 300 items, and a race with items
    /// being deleted meanwhile ("No such secret item").
    package func collectionPath(for group: CacheGroup) throws(TokenCacheError) -> String {
        let mapping = mapping(for: group)
        if let known = cachedCollectionPath(mapping) { return known }
        let path = try resolvedCollectionPath(for: group)
        if options.allowsUnlockPrompt { try checkUnlocked(path) }
        rememberCollectionPath(mapping, path)
        return path
    }

    /// The collection's own object path (an alias resolved with ReadAlias, a dedicated collection
    /// found by label or created), for people and for calls that need it, such as Unlock.
    package func resolvedCollectionPath(for group: CacheGroup) throws(TokenCacheError) -> String {
        let mapping = mapping(for: group)
        if let alias = Self.alias(of: mapping) {
            if let path = try client.readAlias(alias) { return path }
            guard alias == "default" else { throw Self.missingAlias(alias) }
            return try createDefaultCollection()
        }
        guard case .dedicated(let label, let createIfMissing) = mapping else { preconditionFailure("every other mapping is an alias") }
        if let found = try findCollection(labelled: label) { return found }
        return try createCollection(labelled: label, allowed: createIfMissing)
    }

    /// Checks that the group's collection exists and is unlocked (one Locked read), unlocking it
    /// when prompts are allowed. Backend selection calls it so that a locked keyring is reported
    /// up front.
    /// - Throws: `collectionMissing`, `keyringLocked`, `promptDismissed` or a connection error.
    package func checkCollection(for group: CacheGroup) throws(TokenCacheError) {
        try checkUnlocked(try collectionPath(for: group))
    }

    /// Throws `keyringLocked` when the collection is locked, or unlocks it when prompts are
    /// allowed. Returns whether it was locked (and so has just been unlocked): what was read
    /// from it before must be read again.
    @discardableResult
    package func checkUnlocked(_ collection: String) throws(TokenCacheError) -> Bool {
        guard try client.isLocked(collection) else { return false }
        do {
            try unlock(collection)
        } catch {
            // Another process's unlock may have won meanwhile (kwalletd5 then answers this one's
            // prompt as gone): what counts is that the collection is unlocked now.
            guard try client.isLocked(collection) else { return true }
            throw error
        }
        return true
    }

    /// The error of a failed write into `collection`; when the collection turns out to be
    /// locked, `keyringLocked` (gnome-keyring refuses such a write with a generic error, "Cannot
    /// delete a locked item", not IsLocked, so the collection's state decides).
    func writeFailure(_ error: TokenCacheError, in collection: String) -> TokenCacheError {
        // The call was sent, and a daemon that is only slow (#56: gnome-keyring starved of CPU)
        // still makes the change when it gets to it. Writes are upserts and deletes: safe to repeat.
        if error.code == .timedOut {
            return TokenCacheError(.timedOut, "The Secret Service did not confirm a write to \(collection) in time.",
                                   hint: "It may still make the change. Check that the keyring daemon is responsive, then retry: repeating the write is safe")
        }
        guard error.code == .secretServiceFailure, (try? client.isLocked(collection)) == true else { return error }
        return Self.locked(collection)
    }

    static func locked(_ collection: String) -> TokenCacheError {
        TokenCacheError(.keyringLocked, "The keyring collection \(collection) is locked.",
                        hint: "Unlock it (log in to the desktop, open the wallet or database, or allow the prompt: --allow-prompt); nothing was read or changed")
    }

    static func alias(of mapping: CollectionMapping) -> String? {
        switch mapping {
        case .defaultCollection: "default"
        case .session: "session"
        case .dedicated: nil
        }
    }

    /// The label of the default collection this backend creates: libsecret's ("Default keyring").
    package static let defaultCollectionLabel = "Default keyring"

    /// Whether a window can be shown in this session: DISPLAY or WAYLAND_DISPLAY is set. Without
    /// one, gnome-keyring's prompter (gcr-prompter, a GTK window) cannot start and gnome-keyring
    /// dismisses a prompt at once.
    package static var hasDisplay: Bool {
        let environment = ProcessInfo.processInfo.environment
        return !(environment["DISPLAY"] ?? "").isEmpty || !(environment["WAYLAND_DISPLAY"] ?? "").isEmpty
    }

    /// Creates the missing default collection as libsecret's store does: CreateCollection with
    /// the label "Default keyring" and the alias "default", whose prompt ("Choose password for
    /// new keyring") the user completes. The prompt's rule is the unlock prompt's
    /// (`Options.allowsUnlockPrompt`), except that with a display and no prompts allowed nothing
    /// is shown (a password dialog dismissed after 2 s would only confuse); without a display
    /// the prompt is tried within `silentPromptTimeout`, for a provider whose own prompter
    /// answers, and gnome-keyring's is dismissed at once. Two processes creating it at once get
    /// one collection: CreateCollection with an alias already in use returns that collection
    /// (the specification's rule; a dismissed prompt reads the alias again too).
    /// - Throws: `collectionMissing` (`defaultCollectionMissing`: prompts not allowed where one
    ///   could be shown; `defaultCollectionUncreatable`: no display and the prompt could not be
    ///   shown, so no keyring can be created here), `promptDismissed`
    ///   (`createCollectionPromptDismissed`: the user dismissed it or nobody answered).
    private func createDefaultCollection() throws(TokenCacheError) -> String {
        let display = Self.hasDisplay
        guard options.createsDefaultCollection, options.allowsUnlockPrompt || !display else {
            throw display ? Self.missingAlias("default") : Self.defaultCollectionUncreatable()
        }
        do {
            return try client.createCollection(labelled: Self.defaultCollectionLabel, alias: "default", timeout: promptTimeout)
        } catch where error.code == .promptDismissed {
            // Another process (or the user, in Seahorse) may have created it meanwhile.
            if let path = try client.readAlias("default") { return path }
            guard display else { throw Self.defaultCollectionUncreatable() }
            throw TokenCacheError(.promptDismissed,
                                  "The Secret Service has no 'default' collection, and the prompt to create it (\"Choose password for new keyring\") was dismissed or not answered.",
                                  hint: "Retry and choose a password for the new keyring, create one in Seahorse (Passwords and Keys) and set it as default, or use --backend file",
                                  reason: .createCollectionPromptDismissed(label: Self.defaultCollectionLabel))
        }
    }

    static func missingAlias(_ alias: String) -> TokenCacheError {
        TokenCacheError(.collectionMissing, "The Secret Service has no '\(alias)' collection.",
                        hint: alias == "default"
                            ? "Allow the provider's prompt to create it (--allow-prompt) and choose a password for the new keyring, log in to the desktop once so the login keyring exists, or use --backend file"
                            : "This Secret Service provider has no session collection; use the default mapping",
                        reason: alias == "default" ? .defaultCollectionMissing : .sessionCollectionUnsupported)
    }

    /// No 'default' collection and none can be created here: no display for the provider's prompt.
    static func defaultCollectionUncreatable() -> TokenCacheError {
        TokenCacheError(.collectionMissing,
                        "The Secret Service has no 'default' collection, and none can be created here: creating one needs the provider's password prompt, which cannot be shown without a display (DISPLAY and WAYLAND_DISPLAY are not set; gnome-keyring dismissed it at once).",
                        hint: "Use --backend file (the encrypted file; --backend auto uses it here), or create the keyring once in a desktop session: `secret-tool store --label=init x y` (asks for the new keyring's password) or Seahorse (Passwords and Keys > + > Password keyring, then Set as default)",
                        reason: .defaultCollectionUncreatable)
    }

    /// The collection labelled `label`: the service's Collections, then each one's Label.
    func findCollection(labelled label: String) throws(TokenCacheError) -> String? {
        for path in try client.collections() {
            // A collection deleted meanwhile is simply not the one.
            do {
                if try client.label(of: path) == label { return path }
            } catch where error.code == .collectionMissing {}
        }
        return nil
    }

    private func createCollection(labelled label: String, allowed: Bool) throws(TokenCacheError) -> String {
        guard allowed else {
            throw TokenCacheError(.collectionMissing, "No Secret Service collection is labelled '\(label)'.",
                                  hint: "Create it in your keyring manager, allow creation, or use the default mapping",
                                  reason: .collectionMissing(label: label))
        }
        return try client.createCollection(labelled: label, timeout: options.unlockTimeout)
    }

    /// Unlocks a collection (Service.Unlock, its prompt run within ``promptTimeout``). Without
    /// `allowsUnlockPrompt` only a prompt that completes at once, needing nobody, unlocks it
    /// (KWallet with its wallet open); any other is dismissed and the collection is `keyringLocked`.
    func unlock(_ path: String) throws(TokenCacheError) {
        guard options.allowsUnlockPrompt else {
            do { try client.unlock(path, timeout: options.silentPromptTimeout) } catch where
                [.promptDismissed, .timedOut].contains(error.code) { throw Self.locked(path) }
            return
        }
        do { try client.unlock(path, timeout: options.unlockTimeout) } catch where error.code == .promptDismissed && !Self.hasDisplay {
            throw Self.unlockPromptUnshowable(path)
        }
    }

    /// An unlock prompt dismissed where it cannot be shown: no display in this session (SSH).
    static func unlockPromptUnshowable(_ collection: String) -> TokenCacheError {
        TokenCacheError(.promptDismissed,
                        "The keyring collection \(collection) is locked, and its unlock prompt cannot be shown here: this session has no display (DISPLAY and WAYLAND_DISPLAY are not set, as over SSH).",
                        hint: "Unlock it in the desktop session, use the encrypted file instead, or use the desktop's cache through the token agent; nothing was read or changed",
                        reason: .noDisplay)
    }
}

extension SecretServiceBackend {
    /// The libgcrypt the encrypted transfer uses: its version and file, or why it could not be
    /// loaded. Loads it if that was not tried yet.
    package static var libgcryptDescription: String { Gcrypt.description }
    /// Whether libgcrypt loads here (for `tokencache doctor`).
    package static var isLibgcryptLoadable: Bool { (try? Gcrypt.shared()) != nil }
}

extension SecretServiceBackend {
    /// Items of a group that are behind a lock (for diagnostics and tests): never read, never deleted.
    package func lockedItemCount(group: CacheGroup, collection: String) throws(TokenCacheError) -> Int {
        try searchAllPaths(["group": group.name]).locked.filter { $0.hasPrefix(collection + "/") }.count
    }
}

extension SecretServiceBackend {
    /// Item signals this backend has received (for tests and measurements).
    package var receivedSignalCount: Int64 { signals.receivedCount }
}

extension SecretServiceBackend {
    /// Which Secret Service provider answers, and what it needs to work with this backend (for
    /// `tokencache doctor`; docs/SecretService.md has the table per provider).
    package struct Provider: Sendable {
        /// Its process name (`/proc/<pid>/comm`), or "unknown".
        public let process: String
        /// The product, when known: GNOME Keyring, KeePassXC, KWallet.
        public let product: String?
        /// The settings it needs, for people; nil when none.
        public let needs: String?
    }

    /// The provider owning org.freedesktop.secrets (one call to the bus daemon, no Secret Service call).
    package var provider: Provider {
        guard let process = client.providerProcess() else { return Provider(process: "unknown", product: nil, needs: nil) }
        let name = "\(process.name) (pid \(process.pid))"
        switch process.name {
        case let comm where comm.hasPrefix("gnome-keyring"):
            return Provider(process: name, product: "GNOME Keyring", needs: nil)
        case let comm where comm.lowercased().hasPrefix("keepassxc"):
            return Provider(process: name, product: "KeePassXC",
                            needs: "expose a group in Database settings > Secret Service Integration, keep the database unlocked, and for unattended use turn off \"Confirm when passwords are retrieved by clients\" and deletion confirmation (Settings > Secret Service Integration); it has no 'session' collection")
        case let comm where comm.hasPrefix("kwalletd"):
            return Provider(process: name, product: "KWallet",
                            needs: "enable the Secret Service API ([org.freedesktop.secrets] apiEnabled=true in kwalletrc) and keep the wallet open; its collection is unlocked by a prompt that needs nobody; it has no 'session' collection")
        default:
            return Provider(process: name, product: nil, needs: nil)
        }
    }
}
