internal import CLibSecret
import FoundationEssentials
import TokenCacheCore
import TokenCacheCrypto
import TokenCacheDBus

/// The contents of a libsecret/oo7 file keyring (libsecret `secret-file-collection.c` and
/// `secret-file-item.c`, oo7 `client/src/file/api/`), byte for byte: the header
/// `"GnomeKeyring\n\r\0\n"`, version 1.0, then a little-endian GVariant `(uayutua(a{say}ay))`:
/// salt size, salt, PBKDF2 iterations, modified (Unix seconds), usage count, and the items,
/// each its attribute values' HMACs by name and its encrypted blob (``FileKeyringKey``).
/// Serialized with GLib's own GVariant code, as libsecret does.
struct FileKeyringContents {
    static let header: [UInt8] = Array("GnomeKeyring\n\r\u{0}\n".utf8)
    static let version: [UInt8] = [1, 0]
    static let fileType = "(uayutua(a{say}ay))"
    static let itemType = "(a{ss}sttay)"
    static let saltByteCount = 32
    static let defaultIterations: UInt32 = 100_000
    /// The most PBKDF2 rounds a file may ask for: ten times what libsecret and oo7 write. A
    /// hostile file asking 2^31-1 would take minutes of CPU before anything could be refused.
    static let maximumIterations: UInt32 = 1_000_000

    /// One item as stored: attribute name -> HMAC-SHA256(key, value), and the encrypted blob.
    struct EncryptedItem: Equatable {
        var hashedAttributes: [String: [UInt8]]
        var blob: [UInt8]
    }

    var salt: [UInt8]
    var iterations: UInt32
    init(salt: [UInt8], iterations: UInt32, modified: UInt64, usageCount: UInt32, items: [EncryptedItem]) {
        (self.salt, self.iterations, self.modified, self.usageCount, self.items) = (salt, iterations, modified, usageCount, items)
    }

    var modified: UInt64
    var usageCount: UInt32
    var items: [EncryptedItem]

    /// A new, empty keyring with a fresh salt (as libsecret and oo7 start one).
    static func empty() throws(TokenCacheError) -> FileKeyringContents {
        var salt = [UInt8](repeating: 0, count: saltByteCount)
        try FileKeyringKey.random(&salt)
        return FileKeyringContents(salt: salt, iterations: defaultIterations, modified: Self.now, usageCount: 0, items: [])
    }

    static var now: UInt64 { UInt64(max(0, Date().timeIntervalSince1970)) }

    // MARK: Reading

    /// Parses a keyring file. A file that is not one (header, version, a GVariant not in normal
    /// form, a salt size that disagrees) is refused with `invalidCacheData`, naming `path`.
    init(parsing data: Data, path: String) throws(TokenCacheError) {
        func refused(_ why: String) -> TokenCacheError {
            TokenCacheError(.invalidCacheData, "\(path) is not a usable keyring file: \(why).",
                            hint: "It was not changed; move it away only if it holds nothing you need (libsecret and oo7 read the same file)")
        }
        let prefix = Self.header.count + Self.version.count
        guard data.count >= prefix, data.prefix(Self.header.count).elementsEqual(Self.header) else { throw refused("the header is not GnomeKeyring's") }
        guard data.dropFirst(Self.header.count).prefix(2).elementsEqual(Self.version) else { throw refused("its version is not 1.0") }
        let body = data.dropFirst(prefix)
        let variant = body.withUnsafeBytes { bytes in
            let copy = g_bytes_new(bytes.baseAddress, gsize(bytes.count))
            defer { g_bytes_unref(copy) }
            return withVariantType(Self.fileType) { GVariantRef(sinking: g_variant_new_from_bytes($0, copy, 0)) }
        }
        // Untrusted bytes: GLib reads anything safely, but only a normal-form value is one a writer made.
        guard withExtendedLifetime(variant, { g_variant_is_normal_form(variant.pointer) != 0 }) else { throw refused("its contents are malformed") }
        let file = Self.littleEndian(variant)
        let saltCount = file[0].uint32
        salt = Self.bytes(of: file[1])
        guard Int(saltCount) == salt.count, !salt.isEmpty else { throw refused("its salt size disagrees with its salt") }
        iterations = file[2].uint32
        guard iterations >= 1, iterations <= Self.maximumIterations else {
            throw TokenCacheError(.invalidCacheData,
                                  "\(path) asks for \(iterations) key-derivation rounds; at most \(Self.maximumIterations) are accepted (libsecret and oo7 write \(Self.defaultIterations)).",
                                  hint: "It was not changed and no key was derived; move it away only if it holds nothing you need",
                                  reason: .keyDerivationRoundsOutOfBounds(rounds: Int(iterations), limit: Int(Self.maximumIterations)))
        }
        modified = file[3].uint64
        usageCount = file[4].uint32
        items = file[5].children.map { item in
            var hashed: [String: [UInt8]] = [:]
            for entry in item[0].children {
                if let name = entry[0].string { hashed[name] = Self.bytes(of: entry[1]) }
            }
            return EncryptedItem(hashedAttributes: hashed, blob: Self.bytes(of: item[1]))
        }
    }

    /// The bytes of an `ay` (a copy: ciphertext, hashes and salt, nothing secret).
    static func bytes(of array: GVariantRef) -> [UInt8] {
        array.withBytes { Array($0) }
    }

    /// The file is little-endian whatever the host (libsecret's GUINT32_TO_LE and oo7's Endian::Little).
    static func littleEndian(_ value: GVariantRef) -> GVariantRef {
        #if _endian(big)
        return GVariantRef(taking: g_variant_byteswap(value.pointer))
        #else
        return value
        #endif
    }

    // MARK: Writing

    /// The whole file: header, version and the serialized GVariant.
    func serialized() -> Data {
        let types = ["(a{say}ay)", "{say}"].map { type in type.withCString { g_variant_type_new($0)! } }
        defer { types.forEach { g_variant_type_free($0) } }
        let itemValues = items.map { item in
            // Sorted by name in byte order, as libsecret's hash_attributes does: libsecret finds
            // the item a store replaces by comparing these serialized dictionaries.
            let entries = item.hashedAttributes.sorted { Array($0.key.utf8).lexicographicallyPrecedes(Array($1.key.utf8)) }.map { name, mac in
                GVariantRef.dictionaryEntry(.string(name), Self.byteArray(mac))
            }
            return GVariantRef.tuple([Self.array(of: types[1], entries), Self.byteArray(item.blob)])
        }
        let file = GVariantRef.tuple([
            GVariantRef(sinking: g_variant_new_uint32(UInt32(salt.count))), Self.byteArray(salt),
            GVariantRef(sinking: g_variant_new_uint32(iterations)), GVariantRef(sinking: g_variant_new_uint64(guint64(modified))),
            GVariantRef(sinking: g_variant_new_uint32(usageCount)), Self.array(of: types[0], itemValues),
        ])
        let stored = Self.littleEndian(file)
        var data = Data(Self.header + Self.version)
        withExtendedLifetime(stored) {
            let size = Int(g_variant_get_size(stored.pointer))
            data.append(contentsOf: [UInt8](unsafeUninitializedCapacity: size) { buffer, count in
                g_variant_store(stored.pointer, buffer.baseAddress)
                count = size
            })
        }
        return data
    }

    /// An `ay` of `bytes`.
    static func byteArray(_ bytes: [UInt8]) -> GVariantRef {
        bytes.withUnsafeBytes { buffer in
            let copy = g_bytes_new(buffer.baseAddress, gsize(buffer.count))
            defer { g_bytes_unref(copy) }
            return withVariantType("ay") { GVariantRef(sinking: g_variant_new_from_bytes($0, copy, 1)) }
        }
    }

    /// An array of `elements` of type `elementType` (also right when there are none).
    static func array(of elementType: OpaquePointer, _ elements: [GVariantRef]) -> GVariantRef {
        var pointers: [OpaquePointer?] = elements.map(\.pointer)
        let array = pointers.withUnsafeMutableBufferPointer { g_variant_new_array(elementType, $0.baseAddress, gsize($0.count)) }!
        return withExtendedLifetime(elements) { GVariantRef(sinking: array) }
    }
}

/// One decrypted item: what libsecret's `SecretFileItem` holds.
package struct FileKeyringItem: Sendable {
    package var attributes: [String: String]
    package var label: String
    package var created: UInt64
    package var modified: UInt64
    /// The secret; the caller wipes it after use.
    package var secret: Data

    package init(attributes: [String: String], label: String, created: UInt64, modified: UInt64, secret: Data) {
        self.attributes = attributes
        self.label = label
        self.created = created
        self.modified = modified
        self.secret = secret
    }

    /// The item serialized as libsecret's `(a{ss}sttay)`, lent to `body` in memory that is wiped after.
    func withSerialized<T>(_ body: (UnsafeRawBufferPointer) throws(TokenCacheError) -> T) throws(TokenCacheError) -> T {
        // All inside withUnsafeBytes: the value reads the secret where it lies (no copy), and a
        // short Data's bytes live only for the closure (inline storage, a temporary copy).
        let page = secret.withUnsafeBytes { bytes in
            let secretValue = withVariantType("ay") { GVariantRef(sinking: g_variant_new_from_data($0, bytes.baseAddress, gsize(bytes.count), 1, nil, nil)) }
            let item = FileKeyringContents.littleEndian(GVariantRef.tuple([
                GVariantRef.stringDictionary(attributes), GVariantRef.string(label),
                GVariantRef(sinking: g_variant_new_uint64(guint64(created))), GVariantRef(sinking: g_variant_new_uint64(guint64(modified))), secretValue,
            ]))
            return withExtendedLifetime(item) {
                let page = SecretPage(byteCount: Int(g_variant_get_size(item.pointer)))
                g_variant_store(item.pointer, page.bytes.baseAddress)
                return page
            }
        }
        return try body(UnsafeRawBufferPointer(page.bytes))
    }

    /// Parses a decrypted `(a{ss}sttay)`; nil when it is not one.
    init?(serialized bytes: UnsafeRawBufferPointer) {
        // Trusted = false: GLib checks the framing; data not in normal form is refused.
        let value = withVariantType(FileKeyringContents.itemType) { GVariantRef(sinking: g_variant_new_from_data($0, bytes.baseAddress, gsize(bytes.count), 0, nil, nil)) }
        guard withExtendedLifetime(value, { g_variant_is_normal_form(value.pointer) != 0 }) else { return nil }
        let item = FileKeyringContents.littleEndian(value)
        guard let attributes = item[0].stringDictionary, let label = item[1].string else { return nil }
        self.init(attributes: attributes, label: label, created: item[2].uint64, modified: item[3].uint64,
                  secret: item[4].withBytes { Data($0) })
    }
}

/// Lends `type` as a `GVariantType *`, which is its type string (GLib's G_VARIANT_TYPE cast).
private func withVariantType<T>(_ type: String, _ body: (OpaquePointer) -> T) -> T {
    type.withCString { body(OpaquePointer($0)) }
}

extension GVariantRef {
    /// A dictionary entry `{key value}`.
    static func dictionaryEntry(_ key: GVariantRef, _ value: GVariantRef) -> GVariantRef {
        withExtendedLifetime((key, value)) { GVariantRef(sinking: g_variant_new_dict_entry(key.pointer, value.pointer)) }
    }
}
