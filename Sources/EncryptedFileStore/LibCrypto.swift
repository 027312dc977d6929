internal import COpenSSL
import TokenCacheCore
import TokenCachePlatform

/// OpenSSL's libcrypto 3, loaded at run time (``LoadedLibrary``) when the encrypted file is first
/// used: processes that only use the Secret Service never map it.
///
/// `TOKENCACHE_LIBCRYPTO_PATH` overrides the file loaded (default `libcrypto.so.3`, OpenSSL 3's
/// stable ABI): for packagers with OpenSSL in a non-standard place, and for tests that need it
/// to be absent.
typealias LibCrypto = LoadedLibrary<LibCryptoDescriptor>

/// How libcrypto is found and reported (``LibCrypto``).
enum LibCryptoDescriptor: LibraryDescriptor {
    static let loaded = LibCrypto.load()
    static let name = "OpenSSL's libcrypto 3"
    static let sonames = ["libcrypto.so.3"]
    static let overrideVariable = "TOKENCACHE_LIBCRYPTO_PATH"
    static let aptPackage = "libssl3"
    static let otherPackages: String? = "Fedora: openssl-libs"
    static let otherwise = "use the Secret Service backend"
    static let missingCode = TokenCacheError.Code.libcryptoMissing
    static var unresolved: TCOpenSSLFunctions { TCOpenSSLFunctions() }

    static func resolve(_ handle: UnsafeMutableRawPointer, _ functions: inout TCOpenSSLFunctions) -> UnsafePointer<CChar>? {
        tc_openssl_resolve(handle, &functions)
    }

    static func message(_ failure: LoadFailure) -> String {
        "OpenSSL's libcrypto 3, which the encrypted file needs, could not be loaded (\(failure.reason))."
    }

    /// OpenSSL's own version line ("OpenSSL 3.0.13 30 Jan 2024") and the file.
    static func describe(_ library: LibCrypto) -> String {
        "\(library.OpenSSL_version(Int32(TC_OPENSSL_VERSION)).map { String(cString: $0) } ?? "OpenSSL") (loaded: \(library.path))"
    }

    /// AES-256-GCM, fetched from the default provider once and kept for the life of the process,
    /// like the library: passing `EVP_aes_256_gcm()` makes OpenSSL 3 fetch the implementation
    /// again on every init (a fifth of a 16 KiB seal).
    // nonisolated(unsafe): an immutable pointer to OpenSSL's shared, thread-safe cipher object.
    nonisolated(unsafe) static let aes256GCM: OpaquePointer? = {
        guard let crypto = try? LibCrypto.shared() else { return nil }
        let cipher = crypto.EVP_CIPHER_fetch(nil, "AES-256-GCM", nil) ?? crypto.EVP_aes_256_gcm()
        crypto.ERR_clear_error()  // a failed fetch queues errors that belong to no later call
        return cipher
    }()
}

extension LoadedLibrary where Library == LibCryptoDescriptor {
    /// AES-256-GCM, fetched once (``LibCryptoDescriptor/aes256GCM``).
    var aes256GCM: OpaquePointer? { LibCryptoDescriptor.aes256GCM }
}
