import FoundationEssentials

/// An account's picture, as Microsoft Graph's `/me/photo/$value` gives it.
public struct AccountPhoto: Sendable, Hashable {
    /// The image's bytes.
    public let data: Data
    /// Its MIME type: a raster image type (`image/jpeg`, `image/png`, `image/gif`, `image/webp` or `image/bmp`).
    public let contentType: String

    /// Creates a photo.
    public init(data: Data, contentType: String) {
        self.data = data
        self.contentType = contentType
    }

    /// The largest photo accepted and cached, 4 MiB (Graph's largest size, 648×648, is far smaller).
    public static let maximumBytes = 4 << 20

    /// Raster formats only: SVG is a document that can carry script, and anything else (text/html) is no picture.
    static let rasterTypes: Set<String> = ["image/jpeg", "image/png", "image/gif", "image/webp", "image/bmp"]

    /// Whether a photo of this MIME type (lowercase, without parameters) is accepted, fetched or cached.
    package static func isRaster(_ contentType: String) -> Bool { rasterTypes.contains(contentType) }
}

/// The cached Graph photo of an account in one cloud: this library's `AccountPhoto` section,
/// keyed `accountphoto-<home account ID>-<environment>`. An entry without `data` records that
/// Graph answered 404 (the account has no photo), so the answer is not asked again for a day.
public struct AccountPhotoRecord: CacheEntityView {
    public static let kind = EntityKind.accountPhoto
    public let entry: CacheEntry
    public init(entry: CacheEntry) { self.entry = entry }

    /// The photo, or nil when Graph said the account has none, when the entry was read for a
    /// listing (which may leave the bytes out: see ``hasPhoto``), or when the entry fails the
    /// checks a fetched photo passes (a raster type, at most ``AccountPhoto/maximumBytes``):
    /// any app of the group can write this entry, so it is checked again on every read.
    public var photo: AccountPhoto? {
        guard let type = entry["content_type"], AccountPhoto.isRaster(type), let text = entry["data"],
              text.utf8.count <= (AccountPhoto.maximumBytes + 2) / 3 * 4,  // base64 of the largest photo: nothing larger is decoded
              let data = Data(base64Encoded: text), data.count <= AccountPhoto.maximumBytes else { return nil }
        return AccountPhoto(data: data, contentType: type)
    }
    /// Whether a photo (not Graph's "none") is cached.
    public var hasPhoto: Bool { entry["content_type"] != nil }
    /// When Graph was last asked.
    public var fetchedAt: Date? { date("cached_at") }

    /// The entry for an account's photo (nil: Graph has none) fetched at `now`.
    package static func entry(for account: CachedAccount, photo: AccountPhoto?, now: Date) -> CacheEntry {
        var fields: JSONObject = ["home_account_id": .string(account.homeAccountID), "environment": .string(account.environment),
                                  "cached_at": .string(String(Int(now.timeIntervalSince1970)))]
        if let photo {
            fields["content_type"] = .string(photo.contentType)
            fields["data"] = .string(photo.data.base64EncodedString())
        }
        return CacheEntry(kind: .accountPhoto, fields: fields)
    }
}

extension AccountStore {
    /// The photo record cached for an account (in the account's cloud), or nil.
    public func photoRecord(of account: CachedAccount) throws(TokenCacheError) -> AccountPhotoRecord? {
        try read { index in Self.photoEntry(of: account, in: index).map(AccountPhotoRecord.init(entry:)) }
    }

    /// Whether a photo of the account is cached, from a listing's index (bytes not needed).
    package static func hasPhoto(home: String, inCloud wanted: String, in index: CacheIndex) -> Bool {
        index.entries(.accountPhoto, homeAccountID: home).contains { cloud(of: $0) == wanted && AccountPhotoRecord(entry: $0).hasPhoto }
    }

    /// Caches what Graph answered for an account: its photo, or nil for none. Nothing is saved
    /// when the account is no longer in the group (removed while the photo was fetched), so a
    /// photo never outlives its account.
    /// - Throws: `invalidArgument` for a photo over ``AccountPhoto/maximumBytes`` or not of a raster type.
    package func savePhoto(_ photo: AccountPhoto?, of account: CachedAccount, now: Date) throws(TokenCacheError) {
        if let photo, photo.data.count > AccountPhoto.maximumBytes {
            throw TokenCacheError.invalidArgument("photo", "is larger than \(AccountPhoto.maximumBytes) bytes")
        }
        if let photo, !AccountPhoto.isRaster(photo.contentType) {
            throw TokenCacheError.invalidArgument("photo", "is not a raster image (JPEG, PNG, GIF, WebP or BMP)")
        }
        try mutate { index in
            guard Self.clouds(ofHomeAccountID: account.homeAccountID, in: index).contains(Environment.canonical(account.environment)) else { return [] }
            let entry = AccountPhotoRecord.entry(for: account, photo: photo, now: now)
            if let stored = Self.photoEntry(of: account, in: index), stored.key != entry.key {
                return [.remove(.accountPhoto, key: stored.key), .upsert(entry)]
            }
            return [.upsert(entry)]
        } result: { _ in () }
    }

    private static func photoEntry(of account: CachedAccount, in index: CacheIndex) -> CacheEntry? {
        let cloud = Environment.canonical(account.environment)
        return index.entries(.accountPhoto, homeAccountID: account.homeAccountID).filter { Self.cloud(of: $0) == cloud }
            .min { $0.key < $1.key }
    }
}
