import FoundationEssentials
import TokenCacheCore
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
    /// The file's path for a configuration directory (`ExternalStore.azureConfigDirectory(home:)`).
    public static func path(configDirectory: String) -> String { configDirectory + "/config" }

    /// Sets `encrypt_token_cache = true` in `[core]`, keeping every other line, comment and
    /// section as it was; the file is replaced atomically with its mode kept (0600 when new).
    /// Returns false when it was already set so.
    /// - Throws: file errors, naming the file.
    /// - Throws: `unsafeFile` for a file that is not a regular file (a symbolic link is not
    ///   replaced); `invalidArgument` for content this edit cannot interpret as configparser does
    ///   (then nothing is written, and `az config set` is the way); file errors.
    @discardableResult
    public static func enableEncryptedTokenCache(configDirectory: String) throws(TokenCacheError) -> Bool {
        let (text, mode) = try contents(configDirectory: configDirectory)
        guard let updated = try settingEncryption(in: text) else { return false }
        if mode == nil && mkdir(configDirectory, 0o700) != 0 && errno != EEXIST {
            throw FileIO.error("create the folder", configDirectory)
        }
        _ = try FileIO.atomicReplace(path(configDirectory: configDirectory), with: Data(updated.utf8),
                                     temporaryPrefix: ".config.tokencache-", mode: mode ?? 0o600)
        return true
    }

    /// Checks, without writing, that ``enableEncryptedTokenCache(configDirectory:)`` can edit the
    /// file: for callers that must not start what they could not finish.
    public static func checkEditable(configDirectory: String) throws(TokenCacheError) {
        _ = try settingEncryption(in: try contents(configDirectory: configDirectory).text)
    }

    /// The file's text and mode (nil mode: no file yet).
    private static func contents(configDirectory: String) throws(TokenCacheError) -> (text: String, mode: mode_t?) {
        let path = path(configDirectory: configDirectory)
        var info = stat()
        guard lstat(path, &info) == 0 else {
            if errno == ENOENT { return ("", nil) }
            throw FileIO.error("inspect", path)
        }
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw TokenCacheError(.unsafeFile, "\(path) is not a regular file (a symbolic link?); it was left unchanged.",
                                  hint: "Run `az config set core.encrypt_token_cache=true` instead")
        }
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)  // swapped for a FIFO since the lstat: no hang
        guard descriptor >= 0 else { throw FileIO.error("open", path) }
        defer { close(descriptor) }
        guard let text = String(validating: try FileIO.readAll(descriptor, path: path), as: UTF8.self) else {
            throw unsupported(path: path, "is not UTF-8 text")
        }
        return (text, info.st_mode & 0o7777)
    }

    private static func unsupported(path: String = "Azure CLI's config file", _ problem: String) -> TokenCacheError {
        TokenCacheError(.invalidArgument, "\(path) \(problem), so it is not edited here; nothing was changed.",
                        hint: "Run `az config set core.encrypt_token_cache=true` instead")
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
    /// - Throws: `invalidArgument` for lines whose meaning to configparser this edit does not
    ///   follow (indented lines, which continue a value or start a section's first option; a
    ///   section header followed by more text), which the change could otherwise corrupt.
    package static func settingEncryption(in text: String) throws(TokenCacheError) -> String? {
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        if lines.last == "" { lines.removeLast() }
        for line in lines {
            let trimmed = Substring(line).trimmingWhitespace
            if trimmed.isEmpty { continue }
            if line.first == " " || line.first == "\t" { throw unsupported("has indented lines") }
            if trimmed.first == "[" && !trimmed.hasSuffix("]") { throw unsupported("has a section header followed by more text") }
        }
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
