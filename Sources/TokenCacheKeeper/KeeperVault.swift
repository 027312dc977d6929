#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import EncryptedFileStore
import FoundationEssentials
import Logging
import TokenCacheCore
import TokenCacheCrypto
import TokenCachePlatform

/// Where the keeper keeps enrolled users' groups: `STATE/UID/GROUP.tkc`, each user's directory
/// 0700 and the keeper's, encrypted (the encrypted file's format) with the key in
/// `STATE/keeper.key`, 0600, which only the keeper reads. A user's own processes reach none of it.
package struct KeeperVault: Sendable {
    /// The state directory (default `/var/lib/tokencache`).
    package let directory: String
    private let logger: Logger

    /// The key file's path.
    /// The key's name in the state directory.
    package static let keyFileName = "keeper.key"
    package var keyFile: String { directory + "/" + Self.keyFileName }

    /// Makes the state directory (0700, the keeper's) and the key when missing.
    /// - Throws: `unsafeFile` when the directory or key is another user's, a link, or open to others.
    package init(directory: String, logger: Logger) throws(TokenCacheError) {
        self.directory = directory
        self.logger = logger
        try FileIO.ensureDirectory(URL(fileURLWithPath: directory), purpose: "keeper state directory")
        try Self.createKey(at: keyFile)
    }

    /// The vault in `directory` as it is, making nothing: for root's `--list`, `--log` and
    /// `--unenroll`, which read a keeper's state and must not create one where there is none.
    /// - Throws: `notFound` when the state directory or its key is missing; `unsafeFile` when the
    ///   directory is another user's, a link, or open to others.
    package static func openExisting(directory: String, logger: Logger) throws(TokenCacheError) -> KeeperVault {
        var info = stat()
        guard lstat(directory, &info) == 0, lstat(directory + "/" + keyFileName, &info) == 0 else {
            throw TokenCacheError(.notFound, "There is no keeper state in \(directory) (a state directory holding \(keyFileName)).",
                                  hint: "Name it with --state-dir")
        }
        // The directory and key exist: the init checks the directory and makes nothing.
        return try KeeperVault(directory: directory, logger: logger)
    }

    /// Creates the key file once: 32 random bytes written to a new O_EXCL|O_NOFOLLOW file, synced,
    /// then linked into place (never over an existing key), so a crash leaves no truncated key.
    static func createKey(at path: String) throws(TokenCacheError) {
        var existing = stat()
        if lstat(path, &existing) == 0 { return }  // the encrypted file's reader checks its owner, mode and size
        let temporary = path + ".new.\(getpid())"
        unlink(temporary)
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw FileIO.error("create", temporary) }
        defer { unlink(temporary) }
        var key = [UInt8](repeating: 0, count: 32)
        defer { for index in key.indices { key[index] = 0 } }
        let filled = SecureRandom.fill(&key) == nil
        let written = filled ? key.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } : -1
        let synced = written == 32 && fsync(fd) == 0
        close(fd)
        guard synced else { throw TokenCacheError(.fileSystem, "The keeper's key \(path) could not be written.") }
        // link, not rename: a key another keeper made meanwhile is kept, never replaced.
        guard link(temporary, path) == 0 || errno == EEXIST else { throw FileIO.error("link", path) }
    }

    /// Where the keeper lists each user's enrolled groups for that user's processes to find it
    /// (``KeeperDiscovery``): beside the state directory (`/var/lib/tokencache-enrolled` for the
    /// default one, which is where processes look), root's, 0755; `UID` in it is root's, 0644, one
    /// group name per line.
    package var enrolledDirectory: String {
        var state = directory
        while state.count > 1 && state.hasSuffix("/") { state.removeLast() }
        return state + "-enrolled"
    }

    /// Writes `uid`'s list of enrolled groups whole (a new file renamed over the old, the
    /// directory synced), or removes it when the user has none left, under the directory's lock
    /// (the keeper's threads and root's `--unenroll` publish alike). A user directory that cannot
    /// be read leaves the list as it was. A failure is logged: the user's processes then do not
    /// find the keeper by themselves (`TOKENCACHE_AGENT_SOCK` still names it) until the next
    /// start, which lists every user again.
    package func publishEnrolledGroups(uid: UInt32) {
        do throws(TokenCacheError) {
            try ensureEnrolledDirectory()
            let lock = try FileLock(path: "\(enrolledDirectory)/.lock")
            defer { withExtendedLifetime(lock) {} }
            let path = "\(enrolledDirectory)/\(uid)"
            guard let groups = try readableGroups(uid: uid) else { return }
            if groups.isEmpty {
                guard unlink(path) == 0 || errno == ENOENT else { throw FileIO.error("remove", path) }
            } else {
                try Self.replace(path, in: enrolledDirectory, with: Array(groups.map { $0 + "\n" }.joined().utf8))
            }
            Self.sync(directory: enrolledDirectory)
        } catch {
            logger.error("The keeper's list of a user's enrolled groups was not written", metadata: [
                "uid": "\(uid)", "error": "\(error.code): \(error.message)"])
        }
    }

    /// Lists every enrolled user's groups again, and removes the lists of users with none and the
    /// new files a crash left (at the keeper's start: a list lost, never written or left over is mended).
    package func publishEveryonesEnrolledGroups() {
        removeLeftoverNewFiles()
        let listed = names(in: enrolledDirectory).compactMap(UInt32.init)
        for uid in Set(uids() + listed).sorted() { publishEnrolledGroups(uid: uid) }
    }

    /// Removes `.new.*` files of writes a crash cut short, under the directory's lock.
    private func removeLeftoverNewFiles() {
        guard let lock = try? FileLock(path: "\(enrolledDirectory)/.lock"), let listing = opendir(enrolledDirectory) else { return }
        defer { closedir(listing); withExtendedLifetime(lock) {} }
        while let item = readdir(listing) {
            let name = withUnsafeBytes(of: item.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name.hasPrefix(".new.") { unlinkat(dirfd(listing), name, 0) }
        }
    }

    /// `uid`'s groups; empty when it has no directory; nil when its directory could not be read
    /// (descriptors exhausted, a permission): not the same as none.
    private func readableGroups(uid: UInt32) throws(TokenCacheError) -> [String]? {
        do throws(ListingFailure) {
            return Self.groups(in: try Self.listing("\(directory)/\(uid)"))
        } catch {
            if error.code == ENOENT { return [] }
            logger.error("A user's directory in the keeper's state could not be read; its list of enrolled groups is left as it was", metadata: [
                "uid": "\(uid)", "error": "\(String(cString: strerror(error.code)))"])
            return nil
        }
    }

    /// Writes `bytes` to a new file (root's 0644) renamed over `path`: readers see the old list or the new one, whole.
    private static func replace(_ path: String, in directory: String, with bytes: [UInt8]) throws(TokenCacheError) {
        var random = [UInt8](repeating: 0, count: 8)
        if SecureRandom.fill(&random) != nil { throw TokenCacheError(.fileSystem, "No random name for a new file in \(directory).") }
        let temporary = directory + "/.new." + ASCII.hex(Data(random))
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw FileIO.error("create", temporary) }
        defer { unlink(temporary) }
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        let done = fchmod(fd, 0o644) == 0 && written == bytes.count && fsync(fd) == 0
        close(fd)
        guard done, rename(temporary, path) == 0 else { throw FileIO.error("write", path) }
    }

    /// Syncs a directory, so a rename or unlink in it lasts a crash.
    private static func sync(directory: String) {
        let folder = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard folder >= 0 else { return }
        fsync(folder)
        close(folder)
    }

    /// Makes the list directory (root's, 0755: every user reads their own list) or checks it.
    private func ensureEnrolledDirectory() throws(TokenCacheError) {
        let path = enrolledDirectory
        // Under the unit /var/lib is read-only: tmpfiles.d makes the directory (at boot, at installation).
        if mkdir(path, 0o755) != 0 && errno != EEXIST { throw FileIO.error("create directory", path) }
        var info = stat()
        guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFDIR, info.st_uid == geteuid() else {
            throw TokenCacheError(.unsafeFile, "The keeper's list directory \(path) is not a directory of the keeper's user.",
                                  hint: "Remove \(path), run `systemd-tmpfiles --create tokencache-keeper.conf` (the package's tmpfiles.d entry makes it), then restart the keeper")
        }
        guard info.st_mode & 0o7777 == 0o755 || chmod(path, 0o755) == 0 else { throw FileIO.error("chmod", path) }
    }

    /// The group's store for `uid`, in that user's directory (made 0700 when missing).
    package func store(uid: UInt32, group: CacheGroup, creating: Bool) throws(TokenCacheError) -> AccountStore? {
        let userDirectory = URL(fileURLWithPath: "\(directory)/\(uid)")
        if !creating {
            var info = stat()
            guard lstat(userDirectory.path, &info) == 0 else { return nil }
        }
        try FileIO.ensureDirectory(userDirectory, purpose: "keeper's directory of uid \(uid)")
        let backend = EncryptedFileBackend(directory: userDirectory, keySource: .keyFile(URL(fileURLWithPath: keyFile)))
        if !creating {
            var info = stat()
            guard lstat(backend.fileURL(for: group).path, &info) == 0 else { return nil }
        }
        var options = AccountStore.Options()
        options.logger = logger
        return AccountStore(backend: backend, group: group, options: options)
    }

    /// The revision of `uid`'s stored group: the SHA-256 of its file, which every save changes (a
    /// fresh nonce); nil when there is none.
    package func revision(uid: UInt32, group: CacheGroup) throws(TokenCacheError) -> String? {
        let path = file(uid: uid, group: group)
        guard let file = try FileIO.openExisting(path) else { return nil }
        defer { close(file.descriptor) }
        return ASCII.hex(try OpenSSL.sha256(try FileIO.readAll(file.descriptor, path: path)))
    }

    /// `uid`'s group as MSAL JSON (refresh tokens included: for root's `--unenroll` only, never
    /// over the socket), the accounts and clients in it, and the revision of the file it was read from.
    package func export(uid: UInt32, group: CacheGroup) throws(TokenCacheError) -> KeeperProtocol.Export {
        guard let before = try revision(uid: uid, group: group), let store = try store(uid: uid, group: group, creating: false) else {
            throw TokenCacheError(.notFound, "The token keeper holds no group \(group.name) of uid \(uid).",
                                  hint: "`tokencache keeper --list` as root shows every user's groups", reason: .noAccount)
        }
        let cache = String(decoding: try store.exportMSALJSON(), as: UTF8.self)
        var inventory = try store.inventory()
        guard try revision(uid: uid, group: group) == before else {
            throw TokenCacheError(.migrationNotVerified, "The token keeper's copy of group \(group.name) changed while it was read (an app refreshed a token).",
                                  hint: "Run the --unenroll again")
        }
        inventory.location = "token keeper"
        return KeeperProtocol.Export(cache: cache, revision: before, inventory: inventory)
    }

    /// Deletes `uid`'s stored group if its file is still at `revision`, holding the group's lock
    /// (the one every save of the group holds, in this keeper or another), so that a refresh saved
    /// meanwhile is never deleted unseen. The directory is synced after.
    /// - Returns: false when the file changed since (nothing was deleted).
    package func remove(uid: UInt32, group: CacheGroup, ifAt revision: String) throws(TokenCacheError) -> Bool {
        let userDirectory = "\(directory)/\(uid)"
        let lock = try FileLock(path: "\(userDirectory)/\(group.name).lock")
        defer { withExtendedLifetime(lock) {} }
        guard try self.revision(uid: uid, group: group) == revision else { return false }
        let path = file(uid: uid, group: group)
        guard unlink(path) == 0 else { throw FileIO.error("remove", path) }
        let folder = open(userDirectory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if folder >= 0 {
            fsync(folder)
            close(folder)
        }
        return true
    }

    /// Why root's unenrolment of a group stopped, after it was exported: each says what is left
    /// where, so the administrator is never told "failed" about consents that are already gone.
    package struct UnenrollmentFailure: Error {
        package enum Reason: Equatable, Sendable {
            /// The consents could not be withdrawn: nothing changed, the group is still held.
            case consentsNotWithdrawn
            /// `withdrawn` consents of the group were withdrawn, then the group's file could not be removed: still held.
            case consentsWithdrawnGroupKept(withdrawn: Int)
        }
        package let reason: Reason
        /// The error of the step that failed.
        package let cause: TokenCacheError
    }

    /// How root's unenrolment of an exported group ended.
    package enum Unenrollment: Equatable, Sendable {
        /// Its consents withdrawn and its file removed.
        case removed(withdrawnConsents: Int)
        /// Its consents withdrawn; the group changed after the export (an app refreshed) and was not removed.
        case changed(withdrawnConsents: Int)
    }

    /// Withdraws `uid`'s consents for `group` (first: taking rights away is always safe), then
    /// removes the group if it is still at `revision`. Blocking.
    /// - Throws: ``UnenrollmentFailure``, saying whether the consents were withdrawn.
    package func unenroll(uid: UInt32, group: CacheGroup, ifAt revision: String) throws(UnenrollmentFailure) -> Unenrollment {
        let withdrawn: Int
        do throws(TokenCacheError) {
            withdrawn = try KeeperConsents(directory: directory).revokeAll(uid: uid, group: group.name)
        } catch {
            throw UnenrollmentFailure(reason: .consentsNotWithdrawn, cause: error)
        }
        do throws(TokenCacheError) {
            guard try remove(uid: uid, group: group, ifAt: revision) else { return .changed(withdrawnConsents: withdrawn) }
            publishEnrolledGroups(uid: uid)
            return .removed(withdrawnConsents: withdrawn)
        } catch {
            throw UnenrollmentFailure(reason: .consentsWithdrawnGroupKept(withdrawn: withdrawn), cause: error)
        }
    }

    /// The path of `uid`'s stored group (the encrypted file backend's name for it).
    private func file(uid: UInt32, group: CacheGroup) -> String {
        EncryptedFileBackend(directory: URL(fileURLWithPath: "\(directory)/\(uid)"), keySource: .keyFile(URL(fileURLWithPath: keyFile))).fileURL(for: group).path
    }

    /// The uids with a directory here, in order.
    package func uids() -> [UInt32] {
        names(in: directory).compactMap(UInt32.init).sorted()
    }

    /// `uid`'s enrolled groups: how many accounts each holds and which apps `apps` allows it; no secret.
    package func enrolled(uid: UInt32, apps: AppRegistry) -> [KeeperProtocol.EnrolledGroup] {
        groups(uid: uid).map { name in
            var accounts: Int?, problem: String?
            do throws(TokenCacheError) {
                accounts = try store(uid: uid, group: try CacheGroup(name), creating: false)?.inventory().accounts.count ?? 0
            } catch {
                problem = "\(error.code): \(error.message)"
            }
            let allowed = apps.entries.filter { $0.groups.contains(name) }.map { $0.executable ?? $0.flatpak.map { "flatpak \($0)" } ?? $0.snap.map { "snap \($0)" } ?? "?" }
            return KeeperProtocol.EnrolledGroup(uid: uid, group: name, accounts: accounts, problem: problem, apps: allowed)
        }
    }

    /// The groups `uid` has enrolled.
    package func groups(uid: UInt32) -> [String] {
        Self.groups(in: names(in: "\(directory)/\(uid)"))
    }

    private static func groups(in names: [String]) -> [String] {
        names.filter { $0.hasSuffix(".tkc") }.map { String($0.dropLast(4)) }.sorted()
    }

    /// The names in `folder` not starting with a dot; none when it cannot be read.
    private func names(in folder: String) -> [String] {
        (try? Self.listing(folder)) ?? []
    }

    /// Why a directory could not be listed: its errno.
    private struct ListingFailure: Error {
        let code: Int32
    }

    /// The names in `folder` not starting with a dot, read from one handle; the errno when it could
    /// not be opened or read whole (descriptors exhausted, a permission, not a directory).
    private static func listing(_ folder: String) throws(ListingFailure) -> [String] {
        guard let listing = opendir(folder) else { throw ListingFailure(code: errno) }
        defer { closedir(listing) }
        var names: [String] = []
        while true {
            errno = 0
            guard let item = readdir(listing) else {
                if errno != 0 { throw ListingFailure(code: errno) }
                return names
            }
            let name = withUnsafeBytes(of: item.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if !name.hasPrefix(".") { names.append(name) }
        }
    }
}
