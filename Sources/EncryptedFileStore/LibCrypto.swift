internal import COpenSSL
import TokenCacheCore
import TokenCachePlatform
import FoundationEssentials

/// OpenSSL's libcrypto 3, loaded at run time when the encrypted file is first used
/// (``DynamicLibrary``): processes that only use the Secret Service never map it.
///
/// `TOKENCACHE_LIBCRYPTO_PATH` overrides the file loaded (default `libcrypto.so.3`, found the
/// usual way): for packagers with OpenSSL in a non-standard place, and for tests that need it to
/// be absent.
@dynamicMemberLookup
final class LibCrypto: @unchecked Sendable {
    // @unchecked: the table is written once, before the instance is shared, and never changed.
    private let functions: TCOpenSSLFunctions
    /// The file name the library was loaded by.
    let path: String
    /// AES-256-GCM, fetched from the default provider once: passing `EVP_aes_256_gcm()` makes
    /// OpenSSL 3 fetch the implementation again on every init (a fifth of a 16 KiB seal).
    let aes256GCM: OpaquePointer?

    /// The library's functions by their C names: `crypto.EVP_CIPHER_CTX_new()`.
    subscript<Function>(dynamicMember name: KeyPath<TCOpenSSLFunctions, Function?>) -> Function {
        functions[keyPath: name]!  // all non-nil: `load` fails unless every function resolved
    }

    /// The soname loaded when `TOKENCACHE_LIBCRYPTO_PATH` is not set (OpenSSL 3's stable ABI).
    static let soname = "libcrypto.so.3"

    /// The loaded library, or why it could not be loaded; initialized once, on first access.
    private static let loaded: Result<LibCrypto, TokenCacheError> = load()

    /// The library, loading it on first call.
    /// - Throws: ``TokenCacheError`` `libcryptoMissing`, with the package to install.
    static func shared() throws(TokenCacheError) -> LibCrypto { try loaded.get() }

    /// For `tokencache doctor`: the OpenSSL loaded and its version, or why it could not be loaded.
    static var description: String {
        switch loaded {
        case .success(let library):
            "\(library.OpenSSL_version(Int32(TC_OPENSSL_VERSION)).map { String(cString: $0) } ?? "OpenSSL") (loaded: \(library.path))"
        case .failure(let error): error.message
        }
    }

    private init(functions: TCOpenSSLFunctions, path: String) {
        self.functions = functions
        self.path = path
        // Kept for the life of the process, like the library.
        aes256GCM = functions.EVP_CIPHER_fetch!(nil, "AES-256-GCM", nil) ?? functions.EVP_aes_256_gcm!()
        functions.ERR_clear_error!()  // a failed fetch queues errors that belong to no later call
    }

    private static func load() -> Result<LibCrypto, TokenCacheError> {
        DynamicLibrary.open([soname], override: "TOKENCACHE_LIBCRYPTO_PATH", empty: TCOpenSSLFunctions(),
                            resolve: { tc_openssl_resolve($0, &$1) })
            .map { LibCrypto(functions: $0.functions, path: $0.path) }
            .mapError { failure in
                TokenCacheError(.libcryptoMissing, "OpenSSL's libcrypto 3, which the encrypted file needs, could not be loaded (\(failure.reason)).",
                                hint: "Install it (Debian/Ubuntu: apt-get install libssl3; Fedora: openssl-libs), or use the Secret Service backend")
            }
    }
}
