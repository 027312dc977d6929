internal import CLibSecret
import TokenCacheCore
import TokenCachePlatform
import FoundationEssentials

/// libgcrypt, loaded at run time for the Secret Service's encrypted transfer
/// (``TransferSession``). It is libsecret's own crypto library, so by the time the backend needs
/// it, loading libsecret has already mapped it: opening it again costs nothing.
///
/// `TOKENCACHE_LIBGCRYPT_PATH` overrides the file loaded (default `libgcrypt.so.20`).
final class Gcrypt: @unchecked Sendable {
    // @unchecked: the table is written once, before the instance is shared, and never changed.
    let functions: TCGcryptFunctions

    private init(functions: TCGcryptFunctions) { self.functions = functions }

    /// The soname loaded when `TOKENCACHE_LIBGCRYPT_PATH` is not set.
    static let soname = "libgcrypt.so.20"

    private static let loaded: Result<Gcrypt, TokenCacheError> = load()

    /// The library, loading and initializing it on first call.
    /// - Throws: ``TokenCacheError`` `libsecretMissing`, with the package to install.
    static func shared() throws(TokenCacheError) -> Gcrypt { try loaded.get() }

    private static func load() -> Result<Gcrypt, TokenCacheError> {
        DynamicLibrary.open([soname], override: "TOKENCACHE_LIBGCRYPT_PATH", empty: TCGcryptFunctions(),
                            resolve: { tc_gcrypt_resolve($0, &$1) },
                            prepare: { functions in withUnsafePointer(to: functions) { tc_gcrypt_prepare($0).map { String(cString: $0) } } })
            .map { Gcrypt(functions: $0.functions) }
            .mapError { failure in
                TokenCacheError(.libsecretMissing,
                                "libgcrypt, which encrypts secrets on their way from the Secret Service, could not be used (\(failure.reason)).",
                                hint: "Install it (Debian/Ubuntu: apt-get install libgcrypt20), or use the encrypted-file backend (--backend file)")
            }
    }
}
