// tokencache_store_* : opening a group's cache, accounts, tokens, saving and signing out.
internal import CTokenCache
import FoundationEssentials
import Logging
import TokenCache

/// What a `tokencache_store *` points at.
final class StoreHandle {
    let store: AccountStore
    /// The stores set by tokencache_store_set_sso_stores.
    let singleSignOnStores = Locked<[ExternalStore]>([])
    /// The client capabilities set by tokencache_store_set_client_capabilities (`cp1`).
    let clientCapabilities = Locked<[String]>([])
    /// When the identity broker answers, set by tokencache_store_set_broker.
    let brokerUse = Locked<BrokerUse>(.never)
    /// The engine that answers this handle's token requests, made again when the single
    /// sign-on stores change (its apps are kept: their endpoints are discovered once).
    private let engines = Locked<(stores: [String], broker: BrokerUse, engine: TokenEngine)?>(nil)
    /// What opening named (a group; a backend other than AUTO): with neither, the pipeline may
    /// route to TOKENCACHE_AGENT_SOCK's agent (as for the CLI without --backend or --group).
    let namedGroup: Bool, namedBackend: Bool
    init(store: AccountStore, namedGroup: Bool = true, namedBackend: Bool = true) {
        self.store = store
        self.namedGroup = namedGroup
        self.namedBackend = namedBackend
    }

    /// The engine for the current single sign-on stores, which answers this handle's token
    /// requests and account lists; with stores set a local cache is chosen (``EngineRoute``).
    var engine: TokenEngine {
        let stores = singleSignOnStores.withLock { $0 }
        let broker = brokerUse.withLock { $0 }
        return engines.withLock { kept in
            if let kept, kept.stores == stores.map(\.name), kept.broker == broker { return kept.engine }
            var options = PublicClientApplication.Options()
            options.singleSignOnStores = stores
            options.broker = broker
            let route = EngineRoute(namedGroup: namedGroup, namedBackend: namedBackend, otherStores: !stores.isEmpty, group: store.group.name)
            let engine = TokenEngine(store: store, route: route, options: options)
            kept = (stores.map(\.name), broker, engine)
            return engine
        }
    }

    /// The handle's app for a client and authority (for sign-in): the engine's.
    func application(clientID: ClientID, authority: Authority) -> PublicClientApplication {
        engine.application(clientID: clientID, authority: authority, capabilities: clientCapabilities.withLock { $0 })
    }

    /// The handle behind a C pointer, refused when NULL or of another kind.
    static func from(_ pointer: OpaquePointer?) throws(TokenCacheError) -> StoreHandle {
        guard let handle = Handle.get(pointer, as: StoreHandle.self) else { throw .invalidArgument("store", "is NULL or not a store") }
        return handle
    }

    /// An account by username or home account ID, in the authority's cloud when given.
    func account(_ pointer: UnsafePointer<CChar>?, authority: Authority? = nil) throws(TokenCacheError) -> CachedAccount {
        let name = try requiredString(pointer, "account")
        guard let account = try store.account(name, clientID: nil, authority: authority) else {
            throw TokenCacheError(.notFound, "No account '\(name)' in group \(store.group).",
                                  hint: "List the group's accounts with tokencache_store_accounts")
        }
        return account
    }
}

/// A list of accounts, with its strings, for `tokencache_accounts *`.
final class AccountsHandle {
    /// Per account: home account ID, environment, username, local account ID, home tenant.
    let fields: [[UnsafePointer<CChar>]]
    private let strings = CStrings()

    init(_ accounts: [CachedAccount]) {
        let strings = self.strings
        fields = accounts.map { account in
            [account.homeAccountID, account.environment, account.username, account.localAccountID,
             account.homeTenantID ?? ""].map { strings.keep($0) }
        }
    }

    func field(_ index: Int, _ column: Int) -> UnsafePointer<CChar>? {
        // A size_t past Int.max arrives negative: refused like any index out of range.
        fields.indices.contains(index) ? fields[index][column] : nil
    }
}

/// What a `tokencache_token_info *` points at: a token's description, without the token.
final class TokenInfoHandle {
    let expiresOn: Int64
    let isFromCache: Bool
    let scheme, scopes, tenantID, homeAccountID, username: UnsafePointer<CChar>
    private let strings = CStrings()

    init(_ result: TokenResult) {
        // Saturated: a date past Int64's range would trap the host app.
        expiresOn = Int64(min(max(result.expiresOn.timeIntervalSince1970.rounded(.down), -9e18), 9e18))
        isFromCache = result.isFromCache
        scheme = strings.keep(result.authenticationScheme)
        scopes = strings.keep(result.scopes.joined(separator: " "))
        tenantID = strings.keep(result.tenantID ?? "")
        homeAccountID = strings.keep(result.account?.homeAccountID ?? "")
        username = strings.keep(result.account?.username ?? "")
    }
}

/// A client (application) ID argument: required, checked as ``ClientID`` here, where it enters,
/// and carried as one to the store.
func checkedClientID(_ pointer: UnsafePointer<CChar>?) throws(TokenCacheError) -> ClientID {
    try ClientID(try requiredString(pointer, "client_id"))
}

/// The library's logger behind the C interface: a C app has no swift-log to configure, and a
/// library must not write to its standard output or error (the fallback notice is in the diagnosis).
let silent = Logger(label: "tokencache", factory: { _ in SwiftLogNoOpLogHandler() })

func backendPolicy(_ value: Int32) throws(TokenCacheError) -> BackendPolicy {
    switch value {
    case Int32(TOKENCACHE_BACKEND_AUTO.rawValue): .automatic
    case Int32(TOKENCACHE_BACKEND_SECRET_SERVICE.rawValue): .secretService
    case Int32(TOKENCACHE_BACKEND_FILE.rawValue): .file
    default: throw .invalidArgument("backend", "\(value) is not a tokencache_backend value")
    }
}

func cacheGroup(_ pointer: UnsafePointer<CChar>?) throws(TokenCacheError) -> CacheGroup {
    try optionalString(pointer, "group").map { name throws(TokenCacheError) in try CacheGroup(name) } ?? .universalStorage
}

/// Runs a call that yields a token: out parameters cleared first, then the secret handed over in
/// a wiped-on-free buffer and the rest as token info.
func tokenBoundary(_ accessToken: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?, _ info: UnsafeMutablePointer<OpaquePointer?>?,
                   _ error: UnsafeMutableRawPointer?, _ body: () throws(TokenCacheError) -> TokenResult) -> Int32 {
    accessToken?.pointee = nil
    info?.pointee = nil
    return boundary(error) { () throws(TokenCacheError) in
        let out = try requiredOut(accessToken, "access_token")
        let result = try body()
        out.pointee = try mallocCopy(result.accessToken)
        info?.pointee = Handle.make(TokenInfoHandle(result))
    }
}

/// Opens a group's cache on the backend a policy selects (tokencache.h documents every C function).
@_cdecl("tokencache_store_open")
public func tokencache_store_open(_ groupName: UnsafePointer<CChar>?, _ backend: Int32,
                                  _ store: UnsafeMutablePointer<OpaquePointer?>?, _ error: UnsafeMutableRawPointer?) -> Int32 {
    store?.pointee = nil
    return boundary(error) { () throws(TokenCacheError) in
        let out = try requiredOut(store, "store")
        let group = try cacheGroup(groupName)
        let opened = try AccountStore.open(group: group, policy: try backendPolicy(backend), logger: silent).store
        out.pointee = Handle.make(StoreHandle(store: opened, namedGroup: groupName != nil,
                                              namedBackend: backend != Int32(TOKENCACHE_BACKEND_AUTO.rawValue)))
    }
}

/// Releases a store handle.
@_cdecl("tokencache_store_close")
public func tokencache_store_close(_ store: OpaquePointer?) {
    Handle.release(store)
}

/// The accounts of an app (or of the group) as a list handle.
@_cdecl("tokencache_store_accounts")
public func tokencache_store_accounts(_ store: OpaquePointer?, _ clientID: UnsafePointer<CChar>?,
                                      _ accounts: UnsafeMutablePointer<OpaquePointer?>?,
                                      _ error: UnsafeMutableRawPointer?) -> Int32 {
    accounts?.pointee = nil
    return boundary(error) { () throws(TokenCacheError) in
        let handle = try StoreHandle.from(store)
        let out = try requiredOut(accounts, "accounts")
        let client = clientID == nil ? nil : try checkedClientID(clientID)
        // The engine that answers this handle's tokens lists: the agent's accounts when it
        // answers. An app's listing has no authority yet: the single sign-on stores' accounts
        // whose token the app could redeem where it was issued (the silent call applies the host rule).
        out.pointee = Handle.make(AccountsHandle(try handle.engine.accounts(clientID: client)))
    }
}

/// How many accounts a list holds.
@_cdecl("tokencache_accounts_count")
public func tokencache_accounts_count(_ accounts: OpaquePointer?) -> Int {
    Handle.get(accounts, as: AccountsHandle.self)?.fields.count ?? 0
}

private func accountField(_ accounts: OpaquePointer?, _ index: Int, _ column: Int) -> UnsafePointer<CChar>? {
    Handle.get(accounts, as: AccountsHandle.self)?.field(index, column)
}

/// An account's home account ID, borrowed from the list.
@_cdecl("tokencache_accounts_home_account_id")
public func tokencache_accounts_home_account_id(_ accounts: OpaquePointer?, _ index: Int) -> UnsafePointer<CChar>? {
    accountField(accounts, index, 0)
}

/// An account's authority host, borrowed from the list.
@_cdecl("tokencache_accounts_environment")
public func tokencache_accounts_environment(_ accounts: OpaquePointer?, _ index: Int) -> UnsafePointer<CChar>? {
    accountField(accounts, index, 1)
}

/// An account's username, borrowed from the list.
@_cdecl("tokencache_accounts_username")
public func tokencache_accounts_username(_ accounts: OpaquePointer?, _ index: Int) -> UnsafePointer<CChar>? {
    accountField(accounts, index, 2)
}

/// An account's local (object) ID, borrowed from the list.
@_cdecl("tokencache_accounts_local_account_id")
public func tokencache_accounts_local_account_id(_ accounts: OpaquePointer?, _ index: Int) -> UnsafePointer<CChar>? {
    accountField(accounts, index, 3)
}

/// An account's home tenant, borrowed from the list.
@_cdecl("tokencache_accounts_tenant_id")
public func tokencache_accounts_tenant_id(_ accounts: OpaquePointer?, _ index: Int) -> UnsafePointer<CChar>? {
    accountField(accounts, index, 4)
}

/// Releases an account list.
@_cdecl("tokencache_accounts_free")
public func tokencache_accounts_free(_ accounts: OpaquePointer?) {
    Handle.release(accounts)
}

/// A cached access token, without any request.
@_cdecl("tokencache_store_find_access_token")
public func tokencache_store_find_access_token(_ store: OpaquePointer?, _ clientID: UnsafePointer<CChar>?,
                                               _ account: UnsafePointer<CChar>?, _ scopes: UnsafePointer<CChar>?,
                                               _ authority: UnsafePointer<CChar>?,
                                               _ accessToken: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
                                               _ info: UnsafeMutablePointer<OpaquePointer?>?,
                                               _ error: UnsafeMutableRawPointer?) -> Int32 {
    tokenBoundary(accessToken, info, error) { () throws(TokenCacheError) -> TokenResult in
        let handle = try StoreHandle.from(store)
        var request = TokenRequest(clientID: try checkedClientID(clientID), scopes: try scopeList(scopes),
                                   account: try requiredString(account, "account"),
                                   authority: try optionalString(authority, "authority").map { url throws(TokenCacheError) in try Authority(url) })
        // This process's cache only, never the agent, and nothing redeemed: the engine's rule on the local store.
        request.redeemsRefreshTokens = false
        return try TokenEngine(store: handle.store).blockingToken(request)
    }
}

/// Stores a token endpoint response.
@_cdecl("tokencache_store_save_response")
public func tokencache_store_save_response(_ store: OpaquePointer?, _ clientID: UnsafePointer<CChar>?,
                                           _ authority: UnsafePointer<CChar>?, _ scopes: UnsafePointer<CChar>?,
                                           _ responseJSON: UnsafePointer<CChar>?, _ length: Int,
                                           _ info: UnsafeMutablePointer<OpaquePointer?>?,
                                           _ error: UnsafeMutableRawPointer?) -> Int32 {
    info?.pointee = nil
    return boundary(error) { () throws(TokenCacheError) in
        let handle = try StoreHandle.from(store)
        let clientID = try checkedClientID(clientID)
        let authority = try Authority(try requiredString(authority, "authority"))
        let scopes = try scopeList(scopes)
        guard let responseJSON else { throw .invalidArgument("response_json", "is NULL") }
        guard length > 0, length <= 1 << 20 else { throw .invalidArgument("length", "must be 1 byte to 1 MiB") }
        // No copy of the secret-bearing body: parsed in place, the caller keeps and wipes it.
        let body = Data(bytesNoCopy: UnsafeMutableRawPointer(mutating: responseJSON), count: length, deallocator: .none)
        let result = try handle.store.save(try TokenResponse(json: body), clientID: clientID, authority: authority, scopes: scopes,
                                           homeAccountID: nil)
        info?.pointee = Handle.make(TokenInfoHandle(result))
    }
}

/// A token's expiry in Unix seconds.
@_cdecl("tokencache_token_info_expires_on")
public func tokencache_token_info_expires_on(_ info: OpaquePointer?) -> Int64 {
    Handle.get(info, as: TokenInfoHandle.self)?.expiresOn ?? 0
}

/// A token's authentication scheme.
@_cdecl("tokencache_token_info_scheme")
public func tokencache_token_info_scheme(_ info: OpaquePointer?) -> UnsafePointer<CChar>? {
    Handle.get(info, as: TokenInfoHandle.self)?.scheme
}

/// A token's scopes, space-separated.
@_cdecl("tokencache_token_info_scopes")
public func tokencache_token_info_scopes(_ info: OpaquePointer?) -> UnsafePointer<CChar>? {
    Handle.get(info, as: TokenInfoHandle.self)?.scopes
}

/// The tenant that issued a token.
@_cdecl("tokencache_token_info_tenant_id")
public func tokencache_token_info_tenant_id(_ info: OpaquePointer?) -> UnsafePointer<CChar>? {
    Handle.get(info, as: TokenInfoHandle.self)?.tenantID
}

/// The home account ID of a token's account.
@_cdecl("tokencache_token_info_home_account_id")
public func tokencache_token_info_home_account_id(_ info: OpaquePointer?) -> UnsafePointer<CChar>? {
    Handle.get(info, as: TokenInfoHandle.self)?.homeAccountID
}

/// The username of a token's account.
@_cdecl("tokencache_token_info_username")
public func tokencache_token_info_username(_ info: OpaquePointer?) -> UnsafePointer<CChar>? {
    Handle.get(info, as: TokenInfoHandle.self)?.username
}

/// Whether a token came from the cache (1) or the token endpoint (0).
@_cdecl("tokencache_token_info_is_from_cache")
public func tokencache_token_info_is_from_cache(_ info: OpaquePointer?) -> Int32 {
    Handle.get(info, as: TokenInfoHandle.self)?.isFromCache == true ? 1 : 0
}

/// Releases token info.
@_cdecl("tokencache_token_info_free")
public func tokencache_token_info_free(_ info: OpaquePointer?) {
    Handle.release(info)
}

/// Signs one app out of an account it is signed in to, chosen by the library's one rule
/// (``AccountStore/signOutTarget(clientID:account:authority:)``), as the CLI's `logout`.
@_cdecl("tokencache_store_sign_out")
public func tokencache_store_sign_out(_ store: OpaquePointer?, _ clientID: UnsafePointer<CChar>?,
                                      _ account: UnsafePointer<CChar>?, _ error: UnsafeMutableRawPointer?) -> Int32 {
    boundary(error) { () throws(TokenCacheError) in
        let handle = try StoreHandle.from(store)
        let clientID = try checkedClientID(clientID)
        let target = try handle.store.signOutTarget(clientID: clientID, account: try requiredString(account, "account"))
        try handle.store.signOut(target, clientID: clientID)
    }
}

/// Removes an account for every app of the group.
@_cdecl("tokencache_store_remove_account")
public func tokencache_store_remove_account(_ store: OpaquePointer?, _ account: UnsafePointer<CChar>?,
                                            _ removed: UnsafeMutablePointer<Int>?, _ error: UnsafeMutableRawPointer?) -> Int32 {
    removed?.pointee = 0
    return boundary(error) { () throws(TokenCacheError) in
        let handle = try StoreHandle.from(store)
        // Computed first: `removed?.pointee = f()` would skip f() when removed is NULL.
        let count = try handle.store.remove(try handle.account(account))
        removed?.pointee = count
    }
}

/// Sets the other tools' caches the store's apps may use for single sign-on (none: off).
@_cdecl("tokencache_store_set_sso_stores")
public func tokencache_store_set_sso_stores(_ store: OpaquePointer?, _ names: UnsafePointer<CChar>?,
                                            _ error: UnsafeMutableRawPointer?) -> Int32 {
    boundary(error) { () throws(TokenCacheError) in
        let handle = try StoreHandle.from(store)
        let text = try optionalString(names, "names") ?? ""
        let names = text.split(whereSeparator: { $0 == "," || $0 == " " }).map(String.init)
        let chosen: [ExternalStore]
        do throws(TokenCacheError) {
            chosen = try ExternalStore.named(names)
        } catch {
            throw TokenCacheError(.invalidArgument, error.message, hint: error.hint, field: "names")  // this function's argument
        }
        handle.singleSignOnStores.withLock { $0 = chosen }
    }
}

/// Sets the client capabilities (`cp1`) the store's token requests and sign-ins declare (none: off).
@_cdecl("tokencache_store_set_client_capabilities")
public func tokencache_store_set_client_capabilities(_ store: OpaquePointer?, _ capabilities: UnsafePointer<CChar>?,
                                                     _ error: UnsafeMutableRawPointer?) -> Int32 {
    boundary(error) { () throws(TokenCacheError) in
        let handle = try StoreHandle.from(store)
        var chosen: [String] = []
        for name in (try optionalString(capabilities, "capabilities") ?? "").split(whereSeparator: { $0 == "," || $0 == " " }).map(String.init)
        where !chosen.contains(name) {
            guard AppConfiguration.isCapability(name) else {
                throw TokenCacheError(.invalidArgument, "'\(name)' is not a client capability.", hint: "Use a capability name such as cp1",
                                      field: "capabilities")
            }
            chosen.append(name)
        }
        handle.clientCapabilities.withLock { $0 = chosen }
    }
}

/// Sets when the store's silent requests ask the identity broker (TOKENCACHE_BROKER_*).
@_cdecl("tokencache_store_set_broker")
public func tokencache_store_set_broker(_ store: OpaquePointer?, _ use: UInt32, _ error: UnsafeMutableRawPointer?) -> Int32 {
    boundary(error) { () throws(TokenCacheError) in
        let handle = try StoreHandle.from(store)
        let chosen: BrokerUse
        switch use {
        case UInt32(TOKENCACHE_BROKER_NEVER): chosen = .never
        case UInt32(TOKENCACHE_BROKER_WHEN_AVAILABLE): chosen = .whenAvailable
        case UInt32(TOKENCACHE_BROKER_ALWAYS): chosen = .always
        default:
            throw TokenCacheError(.invalidArgument, "\(use) is not a broker setting.",
                                  hint: "Use TOKENCACHE_BROKER_NEVER, TOKENCACHE_BROKER_WHEN_AVAILABLE or TOKENCACHE_BROKER_ALWAYS", field: "use")
        }
        handle.brokerUse.withLock { $0 = chosen }
    }
}
