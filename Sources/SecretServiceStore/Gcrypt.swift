internal import CLibSecret
import TokenCacheCore
import TokenCachePlatform

/// libgcrypt, loaded at run time (``LoadedLibrary``) for the Secret Service's encrypted transfer
/// (``TransferSession``). It is libsecret's own crypto library, so by the time the backend needs
/// it, loading libsecret has already mapped it: opening it again costs nothing.
///
/// `TOKENCACHE_LIBGCRYPT_PATH` overrides the file loaded (default `libgcrypt.so.20`).
typealias Gcrypt = LoadedLibrary<GcryptDescriptor>

/// How libgcrypt is found, initialized and reported (``Gcrypt``); missing, it is
/// `libgcryptMissing`, not libsecret's error, so the hint names the package that is missing.
enum GcryptDescriptor: LibraryDescriptor {
    static let loaded = Gcrypt.load()
    static let name = "libgcrypt"
    static let sonames = ["libgcrypt.so.20"]
    static let overrideVariable = "TOKENCACHE_LIBGCRYPT_PATH"
    static let aptPackage = "libgcrypt20"
    static let otherwise = "use the encrypted-file backend (--backend file)"
    static let missingCode = TokenCacheError.Code.libgcryptMissing
    static var unresolved: TCGcryptFunctions { TCGcryptFunctions() }

    static func resolve(_ handle: UnsafeMutableRawPointer, _ functions: inout TCGcryptFunctions) -> UnsafePointer<CChar>? {
        tc_gcrypt_resolve(handle, &functions)
    }

    /// Initializes libgcrypt unless the process already has (see `tc_gcrypt_prepare`).
    static func prepare(_ functions: TCGcryptFunctions) -> String? {
        withUnsafePointer(to: functions) { tc_gcrypt_prepare($0).map { String(cString: $0) } }
    }

    static func message(_ failure: LoadFailure) -> String {
        "libgcrypt, which encrypts secrets on their way from the Secret Service, could not be used (\(failure.reason))."
    }
}
