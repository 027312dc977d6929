#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import FoundationEssentials
import Logging
import TokenCacheBroker
import TokenCacheCore

/// Which groups and client IDs each app may use: root-owned JSON files in the apps directory
/// (`/etc/tokencache/apps.d/*.json`), installed by app packages as entitlements are. A file or a
/// directory a user could have written is ignored, with a log line.
///
/// A file names one app, by its executable or its Flatpak app ID or snap name:
/// `{"executable": "/usr/bin/foo", "groups": ["com.example.foo"], "clientIDs": ["…"]}`.
package struct AppRegistry: Sendable {
    /// One app's entitlement.
    package struct Entry: Sendable, Hashable, Decodable {
        /// The executable's absolute path.
        package var executable: String?
        /// The Flatpak app ID.
        package var flatpak: String?
        /// The snap name.
        package var snap: String?
        /// The groups it may use, the first its default.
        package var groups: [String]
        /// The client IDs it may use; empty: any.
        package var clientIDs: [String]?

        /// Whether this entry names `identity`.
        func names(_ identity: CallerIdentity) -> Bool {
            switch identity {
            case .host(let path): executable == path
            case .flatpak(let id): flatpak == id
            case .snap(let name): snap == name
            case .unknown: false
            }
        }

        /// Whether it may use `client` (case-insensitive, as client IDs compare).
        package func allows(client: ClientID) -> Bool { allows(storedClient: client.value) }

        /// ``allows(client:)`` for a client ID read back from the store (an inventory row).
        package func allows(storedClient: String) -> Bool {
            guard let clientIDs, !clientIDs.isEmpty else { return true }
            return clientIDs.contains { ASCII.equalsIgnoringCase($0, storedClient) }
        }
    }

    /// The entries read, by file name order.
    package var entries: [Entry]

    package init(entries: [Entry]) { self.entries = entries }

    /// The largest entry file read.
    static let maximumFileBytes = 64 << 10

    /// Reads every `*.json` in `directory`; a missing directory is an empty registry.
    /// - Throws: `unsafeFile` when the directory itself is not root's or others could write to it.
    package static func load(_ directory: String, logger: Logger) throws(TokenCacheError) -> AppRegistry {
        var info = stat()
        guard lstat(directory, &info) == 0 else {
            if errno == ENOENT { return AppRegistry(entries: []) }
            throw TokenCacheError(.fileSystem, "The apps directory \(directory) cannot be inspected: \(String(cString: strerror(errno))).")
        }
        guard info.st_mode & S_IFMT == S_IFDIR, info.st_uid == 0, info.st_mode & 0o022 == 0 else {
            throw TokenCacheError(.unsafeFile, "The apps directory \(directory) is not a directory of root's that only root can write to.",
                                  hint: "chown root:root \(directory) && chmod 755 \(directory)")
        }
        guard let folder = opendir(directory) else {
            throw TokenCacheError(.fileSystem, "The apps directory \(directory) cannot be read: \(String(cString: strerror(errno))).")
        }
        defer { closedir(folder) }
        var names: [String] = []
        while let item = readdir(folder) {
            let name = withUnsafeBytes(of: item.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name.hasSuffix(".json"), !name.hasPrefix(".") { names.append(name) }
        }
        var entries: [Entry] = []
        for name in names.sorted() {
            let path = directory + "/" + name
            do throws(TokenCacheError) {
                entries.append(try readEntry(path))
            } catch {
                logger.warning("Keeper ignores an apps file", metadata: ["file": "\(path)", "why": "\(error.message)"])
            }
        }
        return AppRegistry(entries: entries)
    }

    /// One file: root's, a regular file no one else can write, a JSON entry naming one app.
    static func readEntry(_ path: String) throws(TokenCacheError) -> Entry {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { throw TokenCacheError(.unsafeFile, "it cannot be opened (or is a link): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { throw TokenCacheError(.unsafeFile, "it is not a regular file") }
        guard info.st_uid == 0, info.st_mode & 0o022 == 0 else {
            throw TokenCacheError(.unsafeFile, "it is not root's, or group or others can write to it")
        }
        var bytes = [UInt8](repeating: 0, count: maximumFileBytes + 1)
        let count = Glibc.read(fd, &bytes, bytes.count)
        guard count >= 0, count <= maximumFileBytes else { throw TokenCacheError(.invalidArgument, "it is larger than \(maximumFileBytes) bytes or unreadable") }
        guard let entry = try? JSONDecoder().decode(Entry.self, from: Data(bytes[..<count])) else {
            throw TokenCacheError(.invalidArgument, "it is not an entry {\"executable\"|\"flatpak\"|\"snap\": …, \"groups\": […], \"clientIDs\": […]}")
        }
        let named = [entry.executable, entry.flatpak, entry.snap].compactMap { $0 }
        guard named.count == 1, entry.executable.map({ $0.hasPrefix("/") }) ?? true else {
            throw TokenCacheError(.invalidArgument, "it must name exactly one of executable (an absolute path), flatpak or snap")
        }
        guard !entry.groups.isEmpty else { throw TokenCacheError(.invalidArgument, "it names no group") }
        for group in entry.groups { _ = try CacheGroup(group) }
        return entry
    }

    /// The entries that name `identity` (several files may entitle one app).
    package func entries(for identity: CallerIdentity) -> [Entry] { entries.filter { $0.names(identity) } }
}
