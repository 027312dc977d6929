package import CGcrypt
import TokenCacheCore
import TokenCachePlatform

/// libgcrypt, loaded at run time (``LoadedLibrary``) for the Secret Service's encrypted transfer
/// (``TransferSession``), libsecret's own crypto library; loaded when the backend connects.
///
/// `TOKENCACHE_LIBGCRYPT_PATH` overrides the file loaded (default `libgcrypt.so.20`).
package typealias Gcrypt = LoadedLibrary<GcryptDescriptor>

/// How libgcrypt is found, initialized and reported (``Gcrypt``); missing, it is `libgcryptMissing`.
package enum GcryptDescriptor: LibraryDescriptor {
    package static let loaded = Gcrypt.load()
    package static let facts = LibraryFacts(name: "libgcrypt", role: "which encrypts secrets on their way from the Secret Service",
                                    sonames: ["libgcrypt.so.20"], overrideVariable: "TOKENCACHE_LIBGCRYPT_PATH",
                                    packages: ("libgcrypt20", nil), otherwise: "use the encrypted-file backend (--backend file)",
                                    missingCode: .libgcryptMissing)

    package static func resolve(_ handle: UnsafeMutableRawPointer) -> (TCGcryptFunctions, missing: UnsafePointer<CChar>?) {
        var functions = TCGcryptFunctions()
        let missing = tc_gcrypt_resolve(handle, &functions)
        return (functions, missing)
    }

    /// Initializes libgcrypt unless the process already has (see `tc_gcrypt_prepare`).
    package static func prepare(_ functions: TCGcryptFunctions) -> String? {
        withUnsafePointer(to: functions) { tc_gcrypt_prepare($0).map { String(cString: $0) } }
    }
}
