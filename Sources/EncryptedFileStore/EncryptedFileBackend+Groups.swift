@_spi(Backend) import TokenCacheCore
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

extension EncryptedFileBackend: GroupListingBackend {
    package func groupsLocation(alongside group: CacheGroup) -> String {
        "encrypted files in \(directory.path)"
    }

    /// The groups with a `<group>.tkc` file in the directory, each read for listing (token
    /// secrets stay in the decrypted document). A file that cannot be read fails the listing with
    /// its own error: it is never shown as empty.
    package func groupSummaries(alongside group: CacheGroup) throws(TokenCacheError) -> [GroupSummary] {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        } catch {
            var info = stat()
            // No directory yet: nothing was ever saved here.
            if lstat(directory.path, &info) != 0 && errno == ENOENT { return [] }
            throw TokenCacheError(.fileSystem, "Cannot list \(directory.path): \(error).", hint: "Check the directory's permissions")
        }
        var summaries: [GroupSummary] = []
        for name in names.sorted() where name.hasSuffix(".tkc") && !name.hasPrefix(".") {
            // Files whose name is not a group are not this library's.
            guard let found = try? CacheGroup(String(name.dropLast(4))) else { continue }
            let entries = try loadForListing(found).entries
            guard !entries.isEmpty else { continue }
            summaries.append(GroupSummary(name: found.name, items: entries.map { ($0.kind, $0["home_account_id"]) }))
        }
        return summaries
    }
}
