import FoundationEssentials

/// An MSAL cache another tool keeps on this machine (Azure CLI, azure-identity, Azure PowerShell,
/// azureauth, any msal-extensions app): where its one blob lives and the lock its owner takes.
/// Read and changed by ``ExternalStoreAccess`` under the owner's protocol. Parameters and their
/// sources: docs/EXTERNAL-STORES.md.
public struct ExternalStore: Sendable, Hashable {
    /// How a keyring blob is encoded.
    public enum BlobEncoding: String, Sendable, Hashable, CaseIterable {
        /// The MSAL JSON text itself (msal-extensions Python).
        case raw
        /// Base64 of the JSON's UTF-8 bytes (MSAL.NET and Java extensions).
        case base64
        /// Whatever was read (`{` starts raw JSON, else base64), written back the same way.
        case detect
    }

    /// One Secret Service item holding the whole cache.
    public struct SecretServiceItem: Sendable, Hashable {
        /// The schema name (`xdg:schema`).
        public var schema: String
        /// Whether lookups match on the schema name (flag NONE: Python, Java); .NET's
        /// DONT_MATCH_NAME matches on the attributes only.
        public var matchesSchema: Bool
        /// The owner's attributes; ``alternativeAttributes`` are other spellings tried after them.
        public var attributes: [String: String]
        /// Other attribute sets the same owner has used (older releases), tried in order.
        public var alternativeAttributes: [[String: String]]
        /// The label a new item gets (labels never take part in lookups).
        public var label: String
        /// The collection alias or label; nil = the `default` alias.
        public var collection: String?
        /// The signal files whose mtime tells Python peers the blob changed (touched after a write).
        public var signalFiles: [String]
        /// How the secret is encoded.
        public var encoding: BlobEncoding

        /// An item description.
        public init(schema: String, matchesSchema: Bool, attributes: [String: String], alternativeAttributes: [[String: String]] = [],
                    label: String, collection: String? = nil, signalFiles: [String], encoding: BlobEncoding) {
            self.schema = schema
            self.matchesSchema = matchesSchema
            self.attributes = attributes
            self.alternativeAttributes = alternativeAttributes
            self.label = label
            self.collection = collection
            self.signalFiles = signalFiles
            self.encoding = encoding
        }
    }

    /// Where the blob lives.
    public enum Persistence: Sendable, Hashable {
        /// A plaintext JSON file (msal-extensions FilePersistence); `signal` is touched after a
        /// write when the owner watches another file.
        case file(path: String, signal: String?)
        /// A Secret Service item.
        case secretService(SecretServiceItem)
    }

    /// The name `tokencache stores` shows and `--store` takes.
    public var name: String
    /// Where the blob lives.
    public var persistence: Persistence
    /// The lock files the owner(s) take, in the order they are taken; empty = none known (then
    /// the store is only read, never written).
    public var lockFiles: [String]
    /// What the parameters were read from (a repository, path and commit), or "config file".
    public var source: String

    /// A store description.
    public init(name: String, persistence: Persistence, lockFiles: [String], source: String) {
        self.name = name
        self.persistence = persistence
        self.lockFiles = lockFiles
        self.source = source
    }

    /// Whether the blob is kept encrypted (in the keyring) rather than in a plaintext file.
    public var isEncrypted: Bool {
        if case .secretService = persistence { return true }
        return false
    }

    /// Where the blob lives, for people.
    public var location: String {
        switch persistence {
        case .file(let path, _): return path
        case .secretService(let item):
            let attributes = item.attributes.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ", ")
            return "Secret Service item schema '\(item.schema)' (\(attributes))"
        }
    }
}

extension ExternalStore {
    /// The stores the tools named in docs/EXTERNAL-STORES.md keep, with their parameters resolved
    /// for this user (`home`, `dataHome` = .NET's LocalApplicationData, and Azure CLI's
    /// configuration directory: `AZURE_CONFIG_DIR` when set, as Azure CLI reads it, else `~/.azure`).
    public static func catalogue(home: String = defaultHome, dataHome: String = defaultDataHome,
                                 azureConfigDirectory: String? = nil) -> [ExternalStore] {
        let azure = azureConfigDirectory ?? Self.azureConfigDirectory(home: home)
        let pythonIdentity = home + "/.IdentityService"
        let dotnetIdentity = dataHome + "/.IdentityService"
        let azureCLISource = "Azure/azure-cli src/azure-cli-core/azure/cli/core/auth/persistence.py @ 011b9d53dba5fa85fe60eb087ed2182ccc6055a2"
        let azureCLIReleasedSource = "azure-cli-core 2.91.0 from PyPI, azure/cli/core/auth/persistence.py (build_persistence); checked with az 2.91.0"
        let pythonSource = "Azure/azure-sdk-for-python sdk/identity/azure-identity/azure/identity/_persistent_cache.py @ 0794b0621b5edc4776349ef869a68f242558b621"
        var stores = [
            ExternalStore(name: "azure-cli", persistence: .file(path: azure + "/msal_token_cache.json", signal: nil),
                          lockFiles: [azure + "/msal_token_cache.json.lockfile"], source: azureCLISource),
            ExternalStore(name: "azure-cli-encrypted",
                          persistence: .secretService(SecretServiceItem(
                            schema: "Microsoft Azure CLI", matchesSchema: true, attributes: ["type": "Token cache"], label: "",
                            signalFiles: [azure + "/msal_token_cache.sig"], encoding: .raw)),
                          lockFiles: [azure + "/msal_token_cache.sig.lockfile"], source: azureCLISource),
            // Released Azure CLI (2.91.0 and before) keeps the item under msal-extensions' sample
            // parameters, with msal_token_cache.bin as its signal file; its service-principal
            // secrets use the very same item (a JSON list then, which is reported as not MSAL).
            ExternalStore(name: "azure-cli-encrypted-2.91",
                          persistence: .secretService(SecretServiceItem(
                            schema: "my_schema_name", matchesSchema: true, attributes: ["my_attr1": "foo", "my_attr2": "bar"], label: "",
                            signalFiles: [azure + "/msal_token_cache.bin"], encoding: .raw)),
                          lockFiles: [azure + "/msal_token_cache.bin.lockfile"], source: azureCLIReleasedSource),
        ]
        for suffix in ["nocae", "cae"] {
            let name = "msal.cache." + suffix
            stores.append(ExternalStore(
                name: "azure-identity-python" + (suffix == "cae" ? "-cae" : ""),
                persistence: .secretService(SecretServiceItem(
                    schema: name, matchesSchema: true, attributes: ["MsalClientID": "Microsoft.Developer.IdentityService"],
                    label: "MSALCache", signalFiles: [pythonIdentity + "/" + name], encoding: .raw)),
                lockFiles: [pythonIdentity + "/" + name + ".lockfile"], source: pythonSource))
        }
        // Their plaintext fallbacks (allow_unencrypted_storage, UnsafeAllowUnencryptedStorage) keep
        // the blob at the signal file's path; while the keyring is used that file is empty.
        for suffix in ["nocae", "cae"] {
            let python = pythonIdentity + "/msal.cache." + suffix, dotnet = dotnetIdentity + "/msal.cache." + suffix
            let tail = suffix == "cae" ? "-cae-plaintext" : "-plaintext"
            stores.append(ExternalStore(name: "azure-identity-python" + tail, persistence: .file(path: python, signal: nil),
                                        lockFiles: [python + ".lockfile"], source: pythonSource))
            stores.append(ExternalStore(name: "dotnet-identity-service" + tail, persistence: .file(path: dotnet, signal: nil),
                                        lockFiles: [dotnet + ".lockfile"],
                                        source: "Azure/azure-sdk-for-net sdk/identity/Azure.Identity/src/TokenCache.cs @ 0015c819c29e18291c4da1c92086619fdeebb92e"))
        }
        // Azure.Identity .NET (.cae, .nocae) and Az.Accounts (msal.cache) share one item behind
        // three lock files: all three are taken, in this fixed order.
        stores.append(ExternalStore(
            name: "dotnet-identity-service",
            persistence: .secretService(SecretServiceItem(
                schema: "msal.cache", matchesSchema: false,
                attributes: ["MsalClientID": "Microsoft.Developer.IdentityService", "Microsoft.Developer.IdentityService": "1.0.0.0"],
                alternativeAttributes: [["MsalClientID": "Microsoft.Developer.IdentityService", "MsalClientVersion": "1.0.0.0"]],
                label: "msal.cache", collection: "default",
                signalFiles: ["msal.cache", "msal.cache.cae", "msal.cache.nocae"].map { dotnetIdentity + "/" + $0 }, encoding: .base64)),
            lockFiles: ["msal.cache", "msal.cache.cae", "msal.cache.nocae"].map { dotnetIdentity + "/" + $0 + ".lockfile" },
            source: "Azure/azure-sdk-for-net sdk/identity/Azure.Identity/src/Constants.cs @ 0909236e91cde88e5006cc019a9c8417badafc8e, src/TokenCache.cs @ 0015c819c29e18291c4da1c92086619fdeebb92e; Azure/azure-powershell src/Accounts/Authentication/Authentication/TokenCache/SharedTokenCacheProvider.cs @ 02b4c7acfa62e904bf45b2aec463399ebaf4c234"))
        // azureauth: one item for all tenants, a lock and signal file per tenant (those present).
        let tenants = ((try? FileManager.default.contentsOfDirectory(atPath: dotnetIdentity)) ?? [])
            .filter { $0.hasPrefix("msal_") && $0.hasSuffix(".cache") }.sorted()
        stores.append(ExternalStore(
            name: "azureauth",
            persistence: .secretService(SecretServiceItem(
                schema: "com.microsoft.identity.tokencache", matchesSchema: false,
                attributes: ["Version": "1", "ProductGroup": "Microsoft Develoepr Tools"],  // sic, as azureauth spells it
                label: "MSAL token cache", collection: "default",
                signalFiles: tenants.map { dotnetIdentity + "/" + $0 }, encoding: .base64)),
            lockFiles: tenants.map { dotnetIdentity + "/" + $0 + ".lockfile" },
            source: "AzureAD/microsoft-authentication-cli src/MSALWrapper/PCACache.cs @ de20930c34b3b86c8a0ed7bbdeeca3f662dae918"))
        return stores
    }

    /// Azure CLI's `GLOBAL_CONFIG_DIR`: `os.path.expanduser(os.environ.get('AZURE_CONFIG_DIR', '~/.azure'))`.
    public static func azureConfigDirectory(home: String) -> String {
        guard let configured = ProcessInfo.processInfo.environment["AZURE_CONFIG_DIR"], !configured.isEmpty else {
            return home + "/.azure"
        }
        if configured == "~" { return home }
        return configured.hasPrefix("~/") ? home + configured.dropFirst(1) : configured
    }

    /// `$HOME`.
    public static var defaultHome: String {
        ProcessInfo.processInfo.environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? "/"
    }

    /// .NET's LocalApplicationData on Linux: `$XDG_DATA_HOME` when absolute, else `~/.local/share`.
    public static var defaultDataHome: String {
        ProcessInfo.processInfo.environment["XDG_DATA_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? defaultHome + "/.local/share"
    }
}

extension ExternalStore {
    /// The stores `names` name (as `tokencache stores` shows them: `azure-cli`), in order and
    /// each once, from `known` (the catalogue unless a front end adds its own): the one lookup
    /// behind a configuration's `singleSignOnStores`, C's `tokencache_store_set_sso_stores`
    /// (and Python's `set_sso_stores`) and the CLI's `--sso-store`, so all accept the same names.
    /// - Throws: `invalidArgument` (field `singleSignOnStores`) naming the first unknown name and the known ones.
    package static func named(_ names: [String], in known: [ExternalStore] = catalogue()) throws(TokenCacheError) -> [ExternalStore] {
        var chosen: [ExternalStore] = []
        for name in names where !chosen.contains(where: { $0.name == name }) {
            guard let store = known.first(where: { $0.name == name }) else {
                throw TokenCacheError(.invalidArgument, "'\(name)' names no single sign-on store.",
                                      hint: "Use one of \(known.map(\.name).joined(separator: ", "))", field: "singleSignOnStores")
            }
            chosen.append(store)
        }
        return chosen
    }
}
