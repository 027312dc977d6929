import FoundationEssentials
import ArgumentParser
import TokenCache

/// The config file's "stores": name → `{"file": PATH, "signal"?: PATH, "lock"?: PATH}` or
/// `{"libsecret": {"schema", "attributes": {…}, "label"?, "collection"?, "signal", "encoding"?:
/// raw|base64|detect, "match_schema"?: true}, "lock"?: PATH}`. The lock defaults to the
/// msal-extensions one: `<file or signal>.lockfile`. A leading `~/` is the home directory.
enum ExternalStoreConfig {
    static let example = #"{"stores": {"mytool": {"file": "~/.mytool/msal_cache.json"}, "other": {"libsecret": {"schema": "my.schema", "attributes": {"app": "x"}, "signal": "~/.other/cache.sig"}}}}"#

    static func parse(_ value: JSONValue, path: String, home: String) throws(CLIError) -> [ExternalStore] {
        guard case .object(let stores) = value else { throw bad(path, "\"stores\" is not an object of store names") }
        var result: [ExternalStore] = []
        for (name, declaration) in stores.sorted(by: { $0.key < $1.key }) {
            guard !name.isEmpty, name.allSatisfy({ $0.isLetter || $0.isNumber || "-_.".contains($0) }) else {
                throw bad(path, "store name '\(name)' is not letters, digits, '-', '_' and '.'")
            }
            guard case .object(let fields) = declaration else { throw bad(path, "store \(name) is not an object") }
            func expand(_ text: String) -> String { text.hasPrefix("~/") ? home + text.dropFirst(1) : text }
            func string(_ object: JSONObject, _ key: String, required: Bool) throws(CLIError) -> String? {
                guard let value = object[key] else {
                    if required { throw bad(path, "store \(name) has no \"\(key)\"") }
                    return nil
                }
                guard case .string(let text) = value else { throw bad(path, "store \(name): \"\(key)\" is not a string") }
                return text
            }
            for key in fields.keys.sorted() where !["file", "signal", "lock", "libsecret"].contains(key) {
                throw bad(path, "store \(name) has an unknown key \"\(key)\" (allowed: file, signal, lock, libsecret)")
            }
            let lock = try string(fields, "lock", required: false).map(expand)
            if let lock, !lock.hasPrefix("/") { throw bad(path, "store \(name): \"lock\" is not an absolute path") }
            if let file = try string(fields, "file", required: false).map(expand) {
                guard fields["libsecret"] == nil else { throw bad(path, "store \(name) has both \"file\" and \"libsecret\"") }
                let signal = try string(fields, "signal", required: false).map(expand)
                guard file.hasPrefix("/") else { throw bad(path, "store \(name): \"file\" is not an absolute path") }
                result.append(ExternalStore(name: name, persistence: .file(path: file, signal: signal),
                                            lockFiles: [lock ?? file + ".lockfile"], source: "config file \(path)"))
                continue
            }
            guard case .object(let item)? = fields["libsecret"] else {
                throw bad(path, "store \(name) needs \"file\" or a \"libsecret\" object")
            }
            let schema = try string(item, "schema", required: true)!
            let signal = expand(try string(item, "signal", required: true)!)
            guard signal.hasPrefix("/") else { throw bad(path, "store \(name): \"signal\" is not an absolute path") }
            guard case .object(let attributeValues)? = item["attributes"], !attributeValues.isEmpty else {
                throw bad(path, "store \(name): \"attributes\" is not a non-empty object of strings")
            }
            var attributes: [String: String] = [:]
            for (key, value) in attributeValues {
                guard case .string(let text) = value else { throw bad(path, "store \(name): attribute \"\(key)\" is not a string") }
                attributes[key] = text
            }
            let encodingText = try string(item, "encoding", required: false) ?? "detect"
            guard let encoding = ExternalStore.BlobEncoding(rawValue: encodingText) else {
                throw bad(path, "store \(name): \"encoding\" is '\(encodingText)', not raw, base64 or detect")
            }
            var matchesSchema = true
            if let value = item["match_schema"] {
                guard case .bool(let flag) = value else { throw bad(path, "store \(name): \"match_schema\" is not true or false") }
                matchesSchema = flag
            }
            let persistence = ExternalStore.Persistence.secretService(.init(
                schema: schema, matchesSchema: matchesSchema, attributes: attributes,
                label: try string(item, "label", required: false) ?? "", collection: try string(item, "collection", required: false),
                signalFiles: [signal], encoding: encoding))
            result.append(ExternalStore(name: name, persistence: persistence, lockFiles: [lock ?? signal + ".lockfile"],
                                        source: "config file \(path)"))
        }
        try refuseLocksOnData(result, path: path)
        return result
    }

    /// A lock file is removed when stale: one declared at a store's file or signal file (of any
    /// store here) would be taken for a lock and deleted.
    private static func refuseLocksOnData(_ stores: [ExternalStore], path: String) throws(CLIError) {
        func normalized(_ file: String) -> String { URL(fileURLWithPath: file).standardizedFileURL.path }
        var data: [String: String] = [:]  // path -> what it is
        for store in stores {
            switch store.persistence {
            case .file(let file, let signal):
                data[normalized(file)] = "the \"file\" of store \(store.name)"
                if let signal { data[normalized(signal)] = "the \"signal\" of store \(store.name)" }
            case .secretService(let item):
                for signal in item.signalFiles { data[normalized(signal)] = "the \"signal\" of store \(store.name)" }
            }
        }
        for store in stores {
            for lock in store.lockFiles {
                if let what = data[normalized(lock)] {
                    throw bad(path, "store \(store.name): \"lock\" \(lock) is \(what), which a stale lock's removal would delete")
                }
            }
        }
    }

    private static func bad(_ path: String, _ problem: String) -> CLIError {
        CLIError.usage("The config file \(path): \(problem).", hint: "Declare stores as in \(example)")
    }
}

/// The catalogue's stores and the config file's (a config store of the same name replaces the
/// catalogue's), and access to them.
enum ExternalStores {
    static func all() throws(CLIError) -> [ExternalStore] {
        let configured = try ConfigFile.load().stores
        let names = Set(configured.map(\.name))
        return ExternalStore.catalogue(home: ConfigFile.homeDirectory).filter { !names.contains($0.name) } + configured
    }

    /// Completes a `--store NAME` with the names `tokencache stores` shows.
    static let completion = CompletionKind.custom { _, _, _ in (try? all().map(\.name)) ?? [] }

    static func named(_ name: String) throws(CLIError) -> ExternalStore {
        let stores = try all()
        guard let store = stores.first(where: { $0.name == name }) else {
            throw CLIError.usage("There is no store named '\(name)'.",
                                 hint: "Known stores: \(stores.map(\.name).joined(separator: ", ")); declare others under \"stores\" in the config file")
        }
        return store
    }

    /// Access to `store`, with a Secret Service connection when it is a keyring store (nil when
    /// none can be made: the access then reports why).
    static func access(_ store: ExternalStore, verbose: Bool) -> ExternalStoreAccess {
        let logger = StoreOptions.logger(verbose: verbose)
        let keyring = store.isEncrypted ? try? SecretServiceBackend() : nil
        if let keyring { keepUntilExit(keyring) }
        return ExternalStoreAccess(store, secretService: keyring, logger: logger)
    }

    /// The store's accounts and tokens; not found (exit 2) when absent.
    static func read(_ access: ExternalStoreAccess, everything: Bool = false) throws -> AccountStore {
        guard let accounts = try access.read(everything: everything) else {
            throw CLIError.notFound("Store \(access.store.name) does not exist here (\(access.store.location)).",
                                    hint: "Run `tokencache stores` to see which stores exist")
        }
        keepUntilExit(accounts)
        return accounts
    }

    /// The store's accounts, in an inventory named after the store; not found (exit 2) when absent.
    static func inventory(of access: ExternalStoreAccess) throws -> (AccountStore, GroupInventory) {
        let accounts = try read(access)
        var inventory = try accounts.inventory()
        inventory.group = access.store.name
        inventory.location = access.store.location
        return (accounts, inventory)
    }
}

/// The stores whose refresh tokens `token --refresh` may redeem for single sign-on: `--sso-store`
/// > `TOKENCACHE_SSO_STORES` (comma-separated) > the config file's "single_sign_on" > none. Off
/// by default: opting a store in lets the CLI use that tool's sign-ins.
enum SingleSignOnSetting {
    static let variable = "TOKENCACHE_SSO_STORES"

    /// The opted-in stores and where the choice came from.
    /// - Throws: ``CLIError`` usage (exit 64) naming the unknown store and where it was named.
    static func resolve(flag: [String]) throws(CLIError) -> Setting<[ExternalStore]> {
        let config = try ConfigFile.load()
        let chosen = try Setting.first(option: ("--sso-store", flag.isEmpty ? nil : flag), variable: variable,
                                       file: (config.path, config.singleSignOn)) { text throws(CLIError) in
            text.split(separator: ",").map { String($0.filter { $0 != " " }) }.filter { !$0.isEmpty }
        } ?? Setting(value: [], source: .defaultValue)
        let (names, source) = (chosen.value, chosen.source)
        guard !names.isEmpty else { return Setting(value: [], source: source) }
        let known = try ExternalStores.all()
        do throws(TokenCacheError) {
            return Setting(value: try ExternalStore.named(names, in: known), source: source)
        } catch {
            throw CLIError.usage("\(source): \(error.message)",
                                 hint: "Known stores: \(known.map(\.name).joined(separator: ", ")); declare others under \"stores\" in the config file")
        }
    }
}
