import FoundationEssentials
import TokenCachePlatform
#if canImport(Glibc)
import Glibc
#endif

/// Azure CLI's configuration file, `$AZURE_CONFIG_DIR/config` (an INI file read by Python's
/// configparser through knack), where `[core] encrypt_token_cache = true` makes Azure CLI keep its
/// MSAL cache in its keyring item (the `azure-cli-encrypted-2.91` store for released Azure CLI,
/// `azure-cli-encrypted` for its main branch) instead of the plaintext file.
/// Edited by hand: no INI library is available here, and one key in one section is all it takes.
public enum AzureCLIConfiguration {
    /// The file's path for a configuration directory (``ExternalStore/azureConfigDirectory(home:)``).
    public static func path(configDirectory: String) -> String { configDirectory + "/config" }

    /// Sets `encrypt_token_cache = true` in `[core]`, keeping every other line, comment and
    /// section as it was; the file is replaced atomically with its mode kept (0600 when new).
    /// Returns false when it was already set so.
    /// - Throws: file errors, naming the file.
    @discardableResult
    public static func enableEncryptedTokenCache(configDirectory: String) throws(TokenCacheError) -> Bool {
        let path = path(configDirectory: configDirectory)
        var info = stat()
        let exists = lstat(path, &info) == 0
        var text = ""
        if exists {
            let descriptor = open(path, O_RDONLY | O_CLOEXEC)
            guard descriptor >= 0 else { throw FileIO.error("open", path) }
            defer { close(descriptor) }
            text = String(decoding: try FileIO.readAll(descriptor, path: path), as: UTF8.self)
        } else if mkdir(configDirectory, 0o700) != 0 && errno != EEXIST {
            throw FileIO.error("create the folder", configDirectory)
        }
        guard let updated = settingEncryption(in: text) else { return false }
        _ = try FileIO.atomicReplace(path, with: Data(updated.utf8), temporaryPrefix: ".config.tokencache-",
                                     mode: exists ? info.st_mode & 0o7777 : 0o600)
        return true
    }

    /// Whether `[core] encrypt_token_cache` is true, as configparser's getboolean reads it.
    public static func encryptsTokenCache(configDirectory: String) -> Bool {
        let path = path(configDirectory: configDirectory)
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        guard let data = try? FileIO.readAll(descriptor, path: path) else { return false }
        var inCore = false
        for line in String(decoding: data, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false) {
            if let section = sectionName(line) { inCore = section == "core"; continue }
            if inCore, let (key, value) = option(line), key == "encrypt_token_cache" {
                return ["1", "yes", "true", "on"].contains(value.lowercased())
            }
        }
        return false
    }

    /// The text with the option set, or nil when it already was.
    static func settingEncryption(in text: String) -> String? {
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        if lines.last == "" { lines.removeLast() }
        let setting = "encrypt_token_cache = true"
        var coreHeader: Int?
        var inCore = false
        for (index, line) in lines.enumerated() {
            if let section = sectionName(Substring(line)) {
                inCore = section == "core"
                if inCore && coreHeader == nil { coreHeader = index }
                continue
            }
            if inCore, let (key, value) = option(Substring(line)), key == "encrypt_token_cache" {
                if value.lowercased() == "true" { return nil }
                lines[index] = setting
                return lines.joined(separator: "\n") + "\n"
            }
        }
        if let coreHeader {
            lines.insert(setting, at: coreHeader + 1)
        } else {
            if let last = lines.last, !last.isEmpty { lines.append("") }
            lines += ["[core]", setting]
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// `[name]` → name.
    private static func sectionName(_ line: Substring) -> String? {
        let trimmed = line.trimmingWhitespace
        guard trimmed.hasPrefix("["), trimmed.hasSuffix("]") else { return nil }
        return String(trimmed.dropFirst().dropLast())
    }

    /// `key = value` or `key: value` (configparser's delimiters; keys compared lower-cased, as its
    /// optionxform does); nil for comments, blank and continuation lines.
    private static func option(_ line: Substring) -> (key: String, value: String)? {
        guard let first = line.first, first != " ", first != "\t", first != "#", first != ";" else { return nil }
        guard let delimiter = line.firstIndex(where: { $0 == "=" || $0 == ":" }) else { return nil }
        return (line[..<delimiter].trimmingWhitespace.lowercased(), String(line[line.index(after: delimiter)...].trimmingWhitespace))
    }
}

private extension Substring {
    var trimmingWhitespace: Substring {
        var result = self
        while let first = result.first, first == " " || first == "\t" || first == "\r" { result.removeFirst() }
        while let last = result.last, last == " " || last == "\t" || last == "\r" { result.removeLast() }
        return result
    }
}
