package import COpenSSL
import TokenCacheCore
import TokenCachePlatform

/// OpenSSL's libcrypto 3, loaded at run time (``LoadedLibrary``) when the encrypted file (or
/// SHA-256, the file keyring) is first used: processes that only use the Secret Service never map it.
///
/// `TOKENCACHE_LIBCRYPTO_PATH` overrides the file loaded (default `libcrypto.so.3`, OpenSSL 3's
/// stable ABI): for packagers with OpenSSL in a non-standard place, and for tests that need it
/// to be absent.
package typealias LibCrypto = LoadedLibrary<LibCryptoDescriptor>

/// How libcrypto is found and reported (``LibCrypto``).
package enum LibCryptoDescriptor: LibraryDescriptor {
    package static let loaded = LibCrypto.load()
    package static let facts = LibraryFacts(name: "OpenSSL's libcrypto 3", role: "which the encrypted file needs", sonames: ["libcrypto.so.3"],
                                    overrideVariable: "TOKENCACHE_LIBCRYPTO_PATH", packages: ("libssl3", "Fedora: openssl-libs"),
                                    otherwise: "use the Secret Service backend", missingCode: .libcryptoMissing)

    package static func resolve(_ handle: UnsafeMutableRawPointer) -> (TCOpenSSLFunctions, missing: UnsafePointer<CChar>?) {
        var functions = TCOpenSSLFunctions()
        let missing = tc_openssl_resolve(handle, &functions)
        return (functions, missing)
    }

    /// OpenSSL's own version line ("OpenSSL 3.0.13 30 Jan 2024") and the file.
    package static func describe(_ library: LibCrypto) -> String {
        "\(library.OpenSSL_version(Int32(TC_OPENSSL_VERSION)).map { String(cString: $0) } ?? "OpenSSL") (loaded: \(library.path))"
    }

    /// AES-256-GCM, fetched from the default provider once and kept for the life of the process,
    /// like the library: passing `EVP_aes_256_gcm()` makes OpenSSL 3 fetch the implementation
    /// again on every init (a fifth of a 16 KiB seal).
    // nonisolated(unsafe): an immutable pointer to OpenSSL's shared, thread-safe cipher object.
    nonisolated(unsafe) package static let aes256GCM: OpaquePointer? = {
        guard let crypto = try? LibCrypto.shared() else { return nil }
        let cipher = crypto.EVP_CIPHER_fetch(nil, "AES-256-GCM", nil) ?? crypto.EVP_aes_256_gcm()
        crypto.ERR_clear_error()  // a failed fetch queues errors that belong to no later call
        return cipher
    }()
}

extension LoadedLibrary where Library == LibCryptoDescriptor {
    /// AES-256-GCM, fetched once (``LibCryptoDescriptor/aes256GCM``).
    package var aes256GCM: OpaquePointer? { LibCryptoDescriptor.aes256GCM }
}
