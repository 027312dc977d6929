import FoundationEssentials
import TokenCacheCore
import TokenCachePlatform
#if canImport(Glibc)
import Glibc
#endif

/// The highest generation this machine has seen (read or written) of one cache file, kept
/// outside that file, so that an older, validly encrypted copy put back later (by an attacker or
/// a restore) is refused instead of bringing removed accounts back (docs/EncryptedFile.md).
///
/// One small file per cache file, `<group>.generation`, in the key file's directory (key-file
/// mode) or the cache directory; a line per key ID the group's file was written with:
///
///     tokencache-generations 1
///     <key ID> <generation>
///
/// Changed only under the group's lock, written whole (temporary file + rename, 0600,
/// `O_NOFOLLOW`) and only ever raised, except by an explicit ``EncryptedFileBackend/acceptRolledBackFile(for:)``.
/// A missing or unreadable file means nothing is known: any generation is accepted.
struct GenerationState {
    let path: String

    private static let firstLine = "tokencache-generations 1"
    /// Records kept per file: one per key the group was written with (a passphrase file gets a
    /// new salt, so a new key ID, when it is created anew); the most recently raised first.
    static let maximumRecords = 16

    /// The remembered generation of each key ID, most recently raised first; empty when the file
    /// is missing or not in this format.
    /// - Throws: `unsafeFile` for a link or a file others can reach, as for every file here.
    func read() throws(TokenCacheError) -> [(keyID: String, generation: UInt64)] {
        guard let file = try FileIO.openExisting(path) else { return [] }
        defer { close(file.descriptor) }
        guard file.info.st_size <= 4096 else { return [] }  // not ours: nothing known
        let text = String(decoding: try FileIO.readAll(file.descriptor, path: path), as: UTF8.self)
        var lines = text.split(separator: "\n")
        guard lines.first == Substring(Self.firstLine) else { return [] }
        lines.removeFirst()
        var records: [(keyID: String, generation: UInt64)] = []
        for line in lines {
            let fields = line.split(separator: " ")
            guard fields.count == 2, let generation = UInt64(fields[1]), !records.contains(where: { $0.keyID == fields[0] }) else { continue }
            records.append((String(fields[0]), generation))
        }
        return records
    }

    /// The remembered generation of files written with `keyID`, nil when nothing is known.
    func generation(keyID: String) throws(TokenCacheError) -> UInt64? {
        try read().first { $0.keyID == keyID }?.generation
    }

    /// Remembers `generation` for `keyID` if it is higher than what is remembered (or, with
    /// `lowering`, whatever it is). Call with the group's lock held.
    func remember(_ generation: UInt64, keyID: String, lowering: Bool = false) throws(TokenCacheError) {
        var records = try read()
        if let old = records.first(where: { $0.keyID == keyID })?.generation, old >= generation, !lowering { return }
        records.removeAll { $0.keyID == keyID }
        records.insert((keyID, generation), at: 0)
        let text = ([Self.firstLine] + records.prefix(Self.maximumRecords).map { "\($0.keyID) \($0.generation)" })
            .joined(separator: "\n") + "\n"
        let name = path.split(separator: "/").last.map(String.init) ?? path
        let folder = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? "."
        let temporaryPrefix = ".\(name).tmp."
        // Under the group's lock no live writer owns one: a killed writer's is stale.
        FileIO.removeStaleTemporaryFiles(in: URL(fileURLWithPath: folder), prefix: temporaryPrefix)
        // Not synced: it is written after the cache file is durable, so a crash can only leave it
        // behind the cache file (accepted, then raised), never ahead.
        _ = try FileIO.atomicReplace(path, with: Data(text.utf8), temporaryPrefix: temporaryPrefix, sync: false)
    }
}
