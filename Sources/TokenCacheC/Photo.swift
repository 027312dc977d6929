// tokencache_account_photo: PublicClientApplication.photo(accountNamed:refresh:) behind a blocking C call.
internal import CTokenCache
import FoundationEssentials
import TokenCache
#if canImport(Glibc)
import Glibc
#endif

/// The account's Graph photo, cached or fetched; succeeds with NULL outputs when it has none.
@_cdecl("tokencache_account_photo")
public func tokencache_account_photo(_ store: OpaquePointer?, _ clientID: UnsafePointer<CChar>?, _ authority: UnsafePointer<CChar>?,
                                     _ account: UnsafePointer<CChar>?, _ flags: UInt32,
                                     _ data: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>?, _ length: UnsafeMutablePointer<Int>?,
                                     _ contentType: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
                                     _ error: UnsafeMutableRawPointer?) -> Int32 {
    data?.pointee = nil
    length?.pointee = 0
    contentType?.pointee = nil
    return boundary(error) { () throws(TokenCacheError) in
        let handle = try StoreHandle.from(store)
        let (dataOut, lengthOut, typeOut) = (try requiredOut(data, "data"), try requiredOut(length, "length"), try requiredOut(contentType, "content_type"))
        guard flags & ~UInt32(TOKENCACHE_PHOTO_REFRESH) == 0 else { throw .invalidArgument("flags", "has unknown bits set") }
        let app = PublicClientApplication(clientID: try checkedClientID(clientID), authority: try Authority(try requiredString(authority, "authority")),
                                          store: handle.store)
        let name = try optionalString(account, "account"), refresh = flags & UInt32(TOKENCACHE_PHOTO_REFRESH) != 0
        guard let photo = try app.blockingPhoto(accountNamed: name, refresh: refresh) else { return }
        let type = try mallocCopy(photo.contentType)
        guard let bytes = malloc(max(photo.data.count, 1))?.assumingMemoryBound(to: UInt8.self) else {
            free(type)
            throw TokenCacheError(.fileSystem, "Out of memory.")
        }
        photo.data.copyBytes(to: bytes, count: photo.data.count)
        (dataOut.pointee, lengthOut.pointee, typeOut.pointee) = (bytes, photo.data.count, type)
    }
}
