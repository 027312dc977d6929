internal import CLinux
import FoundationEssentials
import Synchronization
import TokenCache
import TokenCachePlatform
#if canImport(Glibc)
import Glibc
#endif

/// Where an effective setting came from, as `doctor` shows it.
enum SettingSource: Sendable, Equatable, CustomStringConvertible {
    /// A command-line option, such as `--backend`.
    case flag(String)
    /// An environment variable, such as `TOKENCACHE_BACKEND`.
    case environment(String)
    /// The config file at this path.
    case configFile(String)
    /// Nothing set it.
    case defaultValue

    var description: String {
        switch self {
        case .flag(let name): name
        case .environment(let name): name
        case .configFile(let path): "config file \(path)"
        case .defaultValue: "default"
        }
    }

    /// For `doctor --json`: the option, the variable, the file's path or "default".
    var jsonValue: String {
        switch self {
        case .flag(let name), .environment(let name), .configFile(let name): name
        case .defaultValue: "default"
        }
    }
}

/// One effective setting and where it came from.
struct Setting<Value: Sendable>: Sendable {
    var value: Value
    var source: SettingSource

    /// The one precedence chain of every setting: the option when given, else the variable
    /// (`parse`d; empty counts as unset), else the config file's value; nil when none sets it.
    static func first(option: (name: String, value: Value?), variable: String, file: (path: String, value: Value?)? = nil,
                      parse: (String) throws(CLIError) -> Value) throws(CLIError) -> Setting? {
        if let value = option.value { return Setting(value: value, source: .flag(option.name)) }
        if let text = StoreSettings.environment(variable) { return Setting(value: try parse(text), source: .environment(variable)) }
        if let file, let value = file.value { return Setting(value: value, source: .configFile(file.path)) }
        return nil
    }
}

extension Setting where Value == String {
    /// ``first(option:variable:file:parse:)`` for a setting whose variable is taken as it is.
    static func first(option: (name: String, value: String?), variable: String,
                      file: (path: String, value: String?)? = nil) throws(CLIError) -> Setting? {
        try first(option: option, variable: variable, file: file) { text throws(CLIError) in text }
    }
}

/// Backend, group and collection as every subcommand uses them, resolved with precedence
/// option > `TOKENCACHE_*` variable > config file > default.
struct StoreSettings: Sendable {
    var backend: Setting<BackendPolicy>
    var group: Setting<CacheGroup>
    var collection: Setting<String>
    /// `--passphrase-file` or `TOKENCACHE_PASSPHRASE_FILE`, when either is set.
    var passphraseFile: Setting<String>?
    /// `--key-source`, `TOKENCACHE_KEY_SOURCE` or the config file's "key_source", when set.
    var keySource: Setting<KeySourceChoice>?
    /// `TOKENCACHE_TPM_TCTI` or the config file's "tpm_tcti", when set.
    var tpmTCTI: Setting<String>?
    /// The config file consulted (it may not exist).
    var configPath: String

    static let backendVariable = "TOKENCACHE_BACKEND"
    static let groupVariable = "TOKENCACHE_GROUP"
    static let collectionVariable = "TOKENCACHE_COLLECTION"
    static let passphraseFileVariable = "TOKENCACHE_PASSPHRASE_FILE"
    static let keySourceVariable = "TOKENCACHE_KEY_SOURCE"
    static let tpmTCTIVariable = "TOKENCACHE_TPM_TCTI"

    static let allowedBackends = BackendPolicy.allCases.map(\.rawValue).joined(separator: ", ")

    /// Resolves the settings from the options given (nil when absent), the environment and the config file.
    /// - Throws: ``CLIError`` usage (exit 64) for a bad value in a variable or the file, naming where it is.
    static func resolve(backend: BackendPolicy?, group: String?, collection: String?,
                        passphraseFile: String?, keySource: KeySourceChoice? = nil) throws(CLIError) -> StoreSettings {
        let config = try ConfigFile.load()
        let backendSetting = try Setting.first(option: ("--backend", backend), variable: backendVariable, file: (config.path, config.backend)) { text throws(CLIError) in
            guard let value = BackendPolicy(rawValue: text) else {
                throw CLIError.usage("\(backendVariable) is '\(text)', which is not a backend.",
                                     hint: "Set it to one of \(allowedBackends), or unset it")
            }
            return value
        } ?? Setting(value: .automatic, source: .defaultValue)
        // A --group value was checked by StoreOptions.validate() already.
        let groupSetting = try Setting.first(option: ("--group", group.map { (try? CacheGroup($0)) ?? .universalStorage }),
                                             variable: groupVariable, file: (config.path, config.group)) { text throws(CLIError) in
            do { return try CacheGroup(text) } catch {
                throw CLIError.usage("\(groupVariable) is '\(text)', which is not a reverse-DNS group name.",
                                     hint: "Use letters, digits, '-' and '_' in dot-separated labels, for example com.example.myapp; or unset it")
            }
        } ?? Setting(value: .universalStorage, source: .defaultValue)
        let collectionSetting = try Setting.first(option: ("--collection", collection), variable: collectionVariable,
                                                  file: (config.path, config.collection)) ?? Setting(value: "default", source: .defaultValue)
        let passphraseSetting = try Setting.first(option: ("--passphrase-file", passphraseFile), variable: passphraseFileVariable)
        let keySourceSetting = try Setting.first(option: ("--key-source", keySource), variable: keySourceVariable,
                                                 file: (config.path, config.keySource)) { text throws(CLIError) in
            guard let value = KeySourceChoice(rawValue: text) else {
                throw CLIError.usage("\(keySourceVariable) is '\(text)', which is not a key source.",
                                     hint: "Set it to one of \(KeySourceChoice.allowed), or unset it")
            }
            return value
        }
        let tctiSetting = try Setting.first(option: ("", nil), variable: tpmTCTIVariable, file: (config.path, config.tpmTCTI))
        return StoreSettings(backend: backendSetting, group: groupSetting, collection: collectionSetting,
                             passphraseFile: passphraseSetting, keySource: keySourceSetting, tpmTCTI: tctiSetting, configPath: config.path)
    }

    /// A variable, read with `secure_getenv` (ignored when tokencache runs setuid, setgid or with
    /// file capabilities); empty counts as unset.
    static func environment(_ name: String) -> String? {
        SecureEnvironment.value(name)
    }
}

/// How a new encrypted file is keyed (`--key-source`): an existing file keeps the key it has.
enum KeySourceChoice: String, CaseIterable, Sendable {
    /// A random key in `cache.key` (0600) beside the cache.
    case keyFile = "key-file"
    /// A random key sealed to this machine's TPM 2.0 (`cache.key.tpm`).
    case tpm
    /// A passphrase, asked for on a terminal or read from `--passphrase-file`.
    case passphrase

    static let allowed = allCases.map(\.rawValue).joined(separator: ", ")
}

/// A token request's client, account and authority, each with precedence option >
/// `TOKENCACHE_CLIENT_ID` / `TOKENCACHE_ACCOUNT` / `TOKENCACHE_AUTHORITY` > the config file's
/// "client" / "account" / "authority": so a script can name them once.
struct RequestSettings: Sendable {
    var client: Setting<ClientID>?
    var account: Setting<String>?
    var authority: Setting<Authority>?
    /// The client capabilities (`cp1`) token requests declare: `TOKENCACHE_CLIENT_CAPABILITIES`
    /// (comma- or space-separated) > the config file's "client_capabilities"; none by default.
    var capabilities: [String] = []

    static let clientVariable = "TOKENCACHE_CLIENT_ID"
    static let accountVariable = "TOKENCACHE_ACCOUNT"
    static let authorityVariable = "TOKENCACHE_AUTHORITY"
    static let capabilitiesVariable = "TOKENCACHE_CLIENT_CAPABILITIES"

    static func resolve(client: ClientID?, account: String?, authority: String?) throws(CLIError) -> RequestSettings {
        let config = try ConfigFile.load()
        let clientSetting = try Setting.first(option: ("--client", client), variable: clientVariable, file: (config.path, config.client)) { text throws(CLIError) in
            do throws(TokenCacheError) { return try ClientID(text) } catch {
                throw CLIError.usage("\(clientVariable) is '\(text)': \(error.message)", hint: "Set it to an application (client) ID, or unset it")
            }
        }
        let accountSetting = try Setting.first(option: ("--account", account), variable: accountVariable, file: (config.path, config.account))
        let parsedOption: Authority?
        do throws(TokenCacheError) { parsedOption = try authority.map { text throws(TokenCacheError) in try Authority(text) } } catch {
            throw CLIError.usage(error.message, hint: error.hint ?? "Give an authority URL such as https://login.microsoftonline.com/organizations")
        }
        let authoritySetting = try Setting.first(option: ("--authority", parsedOption), variable: authorityVariable,
                                                 file: (config.path, config.authority)) { text throws(CLIError) in
            do throws(TokenCacheError) { return try Authority(text) } catch {
                throw CLIError.usage("\(authorityVariable) is '\(text)': \(error.message)", hint: "Set it to an authority URL such as https://login.microsoftonline.com/organizations, or unset it")
            }
        }
        var capabilities = config.clientCapabilities
        if let text = StoreSettings.environment(capabilitiesVariable) {
            capabilities = text.split(whereSeparator: { $0 == "," || $0 == " " }).map(String.init)
            if let bad = capabilities.first(where: { !AppConfiguration.isCapability($0) }) {
                throw CLIError.usage("\(capabilitiesVariable) names '\(bad)', which is not a client capability.",
                                     hint: "Set it to capability names such as cp1, or unset it")
            }
        }
        return RequestSettings(client: clientSetting, account: accountSetting, authority: authoritySetting, capabilities: capabilities)
    }

    /// The client, or a usage error (exit 64) naming every way to give one.
    func requiredClient() throws(CLIError) -> ClientID {
        guard let client else {
            throw CLIError.usage("No client named.", hint: "Pass --client ID, or set \(Self.clientVariable) or \"client\" in the config file")
        }
        return client.value
    }

    /// The authority, or a usage error (exit 64) naming every way to give one.
    func requiredAuthority() throws(CLIError) -> Authority {
        guard let authority else {
            throw CLIError.usage("No authority named.",
                                 hint: "Pass --authority URL (such as https://login.microsoftonline.com/organizations), or set \(Self.authorityVariable) or \"authority\" in the config file")
        }
        return authority.value
    }

    /// The authority as written, in the same chain: for native sign-in, which completes a bare
    /// `https://TENANT.ciamlogin.com` itself (the option and the variable are taken as given).
    static func authorityText(option: String?) throws(CLIError) -> String {
        let config = try ConfigFile.load()
        guard let setting = try Setting.first(option: ("--authority", option), variable: authorityVariable,
                                              file: (config.path, config.authority?.url.absoluteString)) else {
            throw CLIError.usage("No authority named.",
                                 hint: "Pass --authority URL (such as https://contoso.ciamlogin.com), or set \(authorityVariable) or \"authority\" in the config file")
        }
        return setting.value
    }
}

/// `$XDG_CONFIG_HOME/tokencache/config.json` (`~/.config/...` when unset): a JSON object with any
/// of ``keys``: "stores" are other tools' MSAL caches (``ExternalStoreConfig``), "single_sign_on"
/// ``SingleSignOnSetting``, "graph_endpoint" ``GraphEndpointSetting``. Keys are snake_case, as
/// MSAL's own JSON is; a key written with '-' for '_' is read with a note. JSON rather than TOML:
/// the project already parses JSON, and a TOML library would add a dependency for a dozen keys.
struct ConfigFile: Sendable {
    static let keys = ["backend", "group", "collection", "stores", "single_sign_on", "client", "account", "authority",
                       "client_capabilities", "key_source", "tpm_tcti", "graph_endpoint"]

    var path: String
    var backend: BackendPolicy?
    var group: CacheGroup?
    var collection: String?
    /// Stores declared under "stores".
    var stores: [ExternalStore] = []
    /// The store names listed under "single_sign_on" (``SingleSignOnSetting``).
    var singleSignOn: [String]?
    /// A token request's client, account and authority (``RequestSettings``).
    var client: ClientID?
    var account: String?
    var authority: Authority?
    /// "client_capabilities": what token requests declare (`["cp1"]`: claims challenges handled).
    var clientCapabilities: [String] = []
    /// "key_source": how a new encrypted file is keyed.
    var keySource: KeySourceChoice?
    /// "tpm_tcti": the TCTI of the TPM key source, in tpm2-tss syntax.
    var tpmTCTI: String?
    /// "graph_endpoint": Microsoft Graph for the account photo, as written (checked where used).
    var graphEndpoint: String?

    /// The config file's path; a relative `XDG_CONFIG_HOME` is ignored, as the XDG spec says.
    static var path: String {
        let configHome = StoreSettings.environment("XDG_CONFIG_HOME").flatMap { $0.hasPrefix("/") ? $0 : nil }
            ?? homeDirectory + "/.config"
        return configHome + "/tokencache/config.json"
    }

    /// Reads the file; nothing set when it does not exist.
    /// - Throws: ``CLIError`` usage (exit 64) naming the file and key for anything it does not
    ///   understand; failed (exit 1) when it exists but cannot be read.
    static func load() throws(CLIError) -> ConfigFile {
        let path = Self.path
        var config = ConfigFile(path: path)
        let data: Data
        let info: stat
        do {
            guard let read = try readSmallFile(path) else { return config }
            (data, info) = read
        } catch {
            throw CLIError.failed("Cannot read the config file \(path): \(error.message).",
                                  hint: "Fix its permissions, or move it away to use the defaults")
        }
        try checkOwnership(path, info)
        let allowed = "allowed keys: \(keys.joined(separator: ", "))"
        let written = try parse(data, path: path, allowed: allowed)
        var object: JSONObject = [:]
        for (key, value) in written {
            let spelled = String(key.map { $0 == "-" ? "_" : $0 })
            guard spelled != key, keys.contains(spelled) else { object[key] = value; continue }
            guard written[spelled] == nil else {
                throw CLIError.usage("The config file \(path) sets both \"\(key)\" and \"\(spelled)\", the same setting.",
                                     hint: "Keep \"\(spelled)\" and remove \"\(key)\"")
            }
            object[spelled] = value
            ConfigNotes.once("note: the config file \(path) spells \"\(key)\"; it was read as \"\(spelled)\", the documented spelling.")
        }
        func text(_ key: String, _ allowedValues: String) throws(CLIError) -> String? {
            guard let value = object[key] else { return nil }
            guard case .string(let text) = value, !text.isEmpty else {
                throw CLIError.usage("The config file \(path) sets \"\(key)\" to something other than a non-empty string.",
                                     hint: "Allowed values for \"\(key)\": \(allowedValues)")
            }
            return text
        }
        for key in object.keys.sorted() where !keys.contains(key) {
            let meant = TokenCacheCommand.nearest(to: key, among: keys).map { "Did you mean \"\($0)\"? " } ?? ""
            throw CLIError.usage("The config file \(path) has an unknown key \"\(key)\".",
                                 hint: "\(meant)Remove or rename it; \(allowed)")
        }
        if let text = try text("backend", StoreSettings.allowedBackends) {
            guard let value = BackendPolicy(rawValue: text) else {
                throw CLIError.usage("The config file \(path) sets \"backend\" to '\(text)', which is not a backend.",
                                     hint: "Allowed values for \"backend\": \(StoreSettings.allowedBackends)")
            }
            config.backend = value
        }
        let groupValues = "a reverse-DNS name such as com.example.myapp (letters, digits, '-' and '_' in dot-separated labels)"
        if let text = try text("group", groupValues) {
            do { config.group = try CacheGroup(text) } catch {
                throw CLIError.usage("The config file \(path) sets \"group\" to '\(text)', which is not a reverse-DNS name.",
                                     hint: "Allowed values for \"group\": \(groupValues)")
            }
        }
        config.collection = try text("collection", "default, session or a collection's label")
        if let text = try text("client", "an application (client) ID") {
            do throws(TokenCacheError) { config.client = try ClientID(text) } catch {
                throw CLIError.usage("The config file \(path) sets \"client\" to '\(text)': \(error.message)", hint: "Allowed values for \"client\": an application (client) ID")
            }
        }
        config.account = try text("account", "a username or home account ID")
        if let text = try text("authority", "an authority URL such as https://login.microsoftonline.com/organizations") {
            do throws(TokenCacheError) { config.authority = try Authority(text) } catch {
                throw CLIError.usage("The config file \(path) sets \"authority\" to '\(text)': \(error.message)",
                                     hint: "Allowed values for \"authority\": an authority URL such as https://login.microsoftonline.com/organizations")
            }
        }
        if let text = try text("key_source", KeySourceChoice.allowed) {
            guard let value = KeySourceChoice(rawValue: text) else {
                throw CLIError.usage("The config file \(path) sets \"key_source\" to '\(text)', which is not a key source.",
                                     hint: "Allowed values for \"key_source\": \(KeySourceChoice.allowed)")
            }
            config.keySource = value
        }
        config.tpmTCTI = try text("tpm_tcti", "a TCTI in tpm2-tss syntax, such as device:/dev/tpmrm0 or swtpm:host=127.0.0.1,port=2321")
        config.graphEndpoint = try text("graph_endpoint", "https://HOST or http://127.0.0.1:PORT")
        if let stores = object["stores"] {
            config.stores = try ExternalStoreConfig.parse(stores, path: path, home: homeDirectory)
        }
        if let capabilities = object["client_capabilities"] {
            let usage = CLIError.usage("The config file \(path) sets \"client_capabilities\" to something other than a list of capability names.",
                                       hint: #"Write it as "client_capabilities": ["cp1"]"#)
            guard case .array(let values) = capabilities else { throw usage }
            for value in values {
                guard case .string(let name) = value, AppConfiguration.isCapability(name) else { throw usage }
                config.clientCapabilities.append(name)
            }
        }
        if let names = object["single_sign_on"] {
            guard case .array(let values) = names else {
                throw CLIError.usage("The config file \(path) sets \"single_sign_on\" to something other than a list of store names.",
                                     hint: #"Write it as "single_sign_on": ["azure-cli"] (names from `tokencache stores`)"#)
            }
            var list: [String] = []
            for value in values {
                guard case .string(let name) = value, !name.isEmpty else {
                    throw CLIError.usage("The config file \(path) lists something other than a store name under \"single_sign_on\".",
                                         hint: #"Write it as "single_sign_on": ["azure-cli"] (names from `tokencache stores`)"#)
                }
                list.append(name)
            }
            config.singleSignOn = list
        }
        return config
    }

    /// The file's JSON object. Refused with where: line and column, and a trailing comma named as
    /// such (JSON has none; people editing by hand write them).
    private static func parse(_ data: Data, path: String, allowed: String) throws(CLIError) -> JSONObject {
        let example = #"Write it as {"backend": "file", "group": "com.example.app"} ("# + allowed + ")"
        let body = data.starts(with: [0xEF, 0xBB, 0xBF]) ? data.dropFirst(3) : data[...]
        func parsed(trailingCommas: Bool) -> Result<JSONValue, JSONParser.SyntaxError> {
            body.withUnsafeBytes { bytes in
                Result { () throws(JSONParser.SyntaxError) in
                    try JSONParser.parse(bytes, maximumDepth: JSON.maximumDepth, allowingTrailingCommas: trailingCommas)
                }
            }
        }
        switch parsed(trailingCommas: false) {
        case .success(.object(let object)):
            return object
        case .success:
            throw CLIError.usage("The config file \(path) is JSON but not an object: it must start with '{'.", hint: example)
        case .failure(let error):
            let (line, column) = position(of: error.offset, in: body)
            if case .success = parsed(trailingCommas: true), let comma = trailingComma(before: error.offset, in: body) {
                let (line, column) = position(of: comma, in: body)
                throw CLIError.usage("The config file \(path) has a trailing comma at line \(line), column \(column); JSON allows none before '}' or ']'.",
                                     hint: "Remove that comma")
            }
            throw CLIError.usage("The config file \(path) is not valid JSON: \(error.reason) at line \(line), column \(column).", hint: example)
        }
    }

    /// The 1-based line and column (in characters) of a byte offset.
    private static func position(of offset: Int, in body: Data.SubSequence) -> (line: Int, column: Int) {
        let before = body.prefix(offset)
        let line = before.reduce(1) { $1 == UInt8(ascii: "\n") ? $0 + 1 : $0 }
        let lineStart = before.lastIndex(of: UInt8(ascii: "\n")).map { before.index(after: $0) } ?? before.startIndex
        return (line, String(decoding: before[lineStart...], as: UTF8.self).count + 1)
    }

    /// The offset of the comma that, with only whitespace after it, precedes the byte at `offset`.
    private static func trailingComma(before offset: Int, in body: Data.SubSequence) -> Int? {
        let before = body.prefix(offset)
        guard let last = before.lastIndex(where: { ![0x20, 0x09, 0x0A, 0x0D].contains($0) }), before[last] == UInt8(ascii: ",") else { return nil }
        return last - body.startIndex
    }

    /// Refuses a config file, or a directory holding it, that another user owns or group or others
    /// may write: its "tpm_tcti" chooses code to run and its "graph_endpoint" where tokens go.
    /// - Throws: ``CLIError`` usage (exit 64) naming the file or directory and the fix.
    private static func checkOwnership(_ path: String, _ info: stat) throws(CLIError) {
        if let problem = OwnFile.problem(info, refusing: 0o022) {
            throw CLIError.usage("The config file \(path) \(problem); it was not used, as its settings choose code and where tokens go.",
                                 hint: info.st_uid == geteuid() ? "Run `chmod go-w \(path)`" : "Move it away, or make it yours: `chown \(geteuid()) \(path)`, then `chmod go-w \(path)`")
        }
        let directory = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
        var folder = stat()
        guard stat(directory.isEmpty ? "/" : directory, &folder) == 0 else {
            throw CLIError.failed("Cannot inspect the config file's directory \(directory): \(String(cString: strerror(errno))).",
                                  hint: "Fix its permissions, or move the config file away to use the defaults")
        }
        if let problem = OwnFile.problem(folder, refusing: 0o022) {
            throw CLIError.usage("The config file's directory \(directory) \(problem); the config file \(path) in it was not used, as another user could replace it.",
                                 hint: folder.st_uid == geteuid() ? "Run `chmod go-w \(directory)`"
                                     : "Move the config file to a directory of your own (set XDG_CONFIG_HOME), or make \(directory) yours: `chown \(geteuid()) \(directory)`")
        }
    }

    /// Up to 64 KiB of a file and its status, or nil when it does not exist.
    private static func readSmallFile(_ path: String) throws(TokenCacheError) -> (Data, stat)? {
        // O_NONBLOCK and a regular file only: a FIFO in the config file's place must not hang every command.
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        if descriptor < 0 {
            if errno == ENOENT || errno == ENOTDIR { return nil }
            throw TokenCacheError(.fileSystem, String(cString: strerror(errno)))
        }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            throw TokenCacheError(.fileSystem, "not a regular file")
        }
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while data.count <= 64 << 10 {
            let count = read(descriptor, &buffer, buffer.count)
            if count < 0 && errno == EINTR { continue }
            if count < 0 { throw TokenCacheError(.fileSystem, String(cString: strerror(errno))) }
            if count == 0 { return (data, info) }
            data.append(contentsOf: buffer[..<count])
        }
        throw TokenCacheError(.fileSystem, "larger than 64 KiB, so not a tokencache config file")
    }

    /// `$HOME`, else the password database's entry.
    static var homeDirectory: String {
        if let home = StoreSettings.environment("HOME") { return home }
        guard let entry = getpwuid(geteuid()), let directory = entry.pointee.pw_dir else { return "/" }
        return String(cString: directory)
    }
}

/// Notes about the config file, printed once per process though commands read the file several
/// times (the settings chain, the stores, the photo's endpoint).
enum ConfigNotes {
    private static let printed = Mutex<Set<String>>([])

    static func once(_ note: String) {
        if printed.withLock({ $0.insert(note).inserted }) { Terminal.note(Terminal.escape(note)) }
    }
}
