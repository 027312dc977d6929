// tokencache_store_watch_accounts: an app's accounts as they change, to a C callback.
internal import CTokenCache
import Dispatch
import FoundationEssentials
import TokenCache
@_spi(Backend) import TokenCacheCore

/// The C callback: `void (*)(const tokencache_accounts *, const tokencache_error *, void *)`.
public typealias AccountsChangedCallback = @convention(c) (OpaquePointer?, UnsafeRawPointer?, UnsafeMutableRawPointer?) -> Void

/// A running watch: a loop on its own dispatch thread (not the Swift concurrency pool, so the
/// callback may call blocking functions of this library) that polls the group's revision and
/// reads the accounts again only when it moved, as `PublicClientApplication.accountChanges` does.
/// `@unchecked Sendable`: its state is immutable except `stop` and `done`, which are semaphores.
final class WatchHandle: @unchecked Sendable {
    private let store: AccountStore
    private let clientID: ClientID
    private let interval: DispatchTimeInterval
    private let callback: AccountsChangedCallback
    private let userData: UnsafeMutableRawPointer?
    private let stopping = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)

    init(store: AccountStore, clientID: ClientID, intervalMilliseconds: Int, callback: @escaping AccountsChangedCallback,
         userData: UnsafeMutableRawPointer?) {
        self.store = store
        self.clientID = clientID
        self.interval = .milliseconds(intervalMilliseconds)
        self.callback = callback
        self.userData = userData
    }

    func start() {
        DispatchQueue(label: "org.swift-tokencache.watch").async { [self] in
            run()
            finished.signal()
        }
    }

    /// Signals the loop and waits until it has returned.
    func stop() {
        stopping.signal()
        finished.wait()
    }

    private func run() {
        var last: [CachedAccount]?
        var revision: CacheRevision?
        var reported = false
        repeat {
            do throws(TokenCacheError) {
                // The revision first: a change between the two reads is seen on the next round.
                let now = try store.backend.currentRevision(of: store.group)
                if now == nil || now != revision || !reported {
                    let accounts = try store.accounts(clientID: clientID)
                    revision = now
                    if accounts != last || !reported {
                        last = accounts
                        reported = true
                        let list = Handle.make(AccountsHandle(accounts))
                        callback(list, nil, userData)
                        Handle.release(list)
                    }
                }
            } catch {
                var failure = tokencache_error()
                fill(&failure, with: error)
                withUnsafePointer(to: &failure) { callback(nil, UnsafeRawPointer($0), userData) }
                reported = false
            }
        } while stopping.wait(timeout: .now() + interval) == .timedOut
    }
}

/// Starts calling back with an app's accounts as they change.
@_cdecl("tokencache_store_watch_accounts")
public func tokencache_store_watch_accounts(_ store: OpaquePointer?, _ clientID: UnsafePointer<CChar>?,
                                            _ intervalMilliseconds: UInt32, _ callback: AccountsChangedCallback?,
                                            _ userData: UnsafeMutableRawPointer?,
                                            _ watch: UnsafeMutablePointer<OpaquePointer?>?,
                                            _ error: UnsafeMutableRawPointer?) -> Int32 {
    watch?.pointee = nil
    return boundary(error) { () throws(TokenCacheError) in
        let handle = try StoreHandle.from(store)
        let clientID = try checkedClientID(clientID)
        guard let callback else { throw .invalidArgument("callback", "is NULL") }
        let out = try requiredOut(watch, "watch")
        let running = WatchHandle(store: handle.store, clientID: clientID,
                                  intervalMilliseconds: intervalMilliseconds == 0 ? 1000 : Int(intervalMilliseconds),
                                  callback: callback, userData: userData)
        running.start()
        out.pointee = Handle.make(running)
    }
}

/// Stops a watch and waits until its callback no longer runs.
@_cdecl("tokencache_watch_stop")
public func tokencache_watch_stop(_ watch: OpaquePointer?) {
    guard let running = Handle.get(watch, as: WatchHandle.self) else { return }
    running.stop()
    Handle.release(watch)
}
