internal import CLibSecret
import TokenCacheCore
import TokenCachePlatform
import FoundationEssentials

/// libsecret, loaded at run time: the package does not link it, so programs start on machines
/// without it (servers, containers, WSL) and automatic selection falls back to the encrypted file.
///
/// Loaded once per process, on first use of the Secret Service backend (``DynamicLibrary``).
///
/// `TOKENCACHE_LIBSECRET_PATH` overrides the file loaded (default `libsecret-1.so.0`, found the
/// usual way): for packagers with libsecret in a non-standard place, and for tests that need it
/// to be absent.
@dynamicMemberLookup
final class LibSecret: @unchecked Sendable {
    // @unchecked: the table is written once, before the instance is shared, and never changed.
    private let functions: TCLibSecretFunctions
    /// The file name the library was loaded by (a soname is found through the usual search path).
    let path: String

    /// The library's functions by their C names: `libsecret.secret_service_open_sync(…)`.
    subscript<Function>(dynamicMember name: KeyPath<TCLibSecretFunctions, Function?>) -> Function {
        functions[keyPath: name]!  // all non-nil: `load` fails unless every function resolved
    }

    /// The soname loaded when `TOKENCACHE_LIBSECRET_PATH` is not set.
    static let soname = "libsecret-1.so.0"

    /// The loaded library, or why it could not be loaded. A static let: initialized once,
    /// thread-safely, on first access.
    private static let loaded: Result<LibSecret, TokenCacheError> = load()

    /// The library, loading it on first call.
    /// - Throws: ``TokenCacheError`` `libsecretMissing`, with the package to install.
    static func shared() throws(TokenCacheError) -> LibSecret { try loaded.get() }

    /// For `tokencache doctor`: the libsecret loaded, or why it could not be loaded.
    /// libsecret exports no version information, so the file name is the best there is.
    static var description: String {
        switch loaded {
        case .success(let library): "libsecret (loaded: \(library.path))"
        case .failure(let error): error.message
        }
    }

    private init(functions: TCLibSecretFunctions, path: String) {
        self.functions = functions
        self.path = path
    }

    private static func load() -> Result<LibSecret, TokenCacheError> {
        DynamicLibrary.open([soname], override: "TOKENCACHE_LIBSECRET_PATH", empty: TCLibSecretFunctions(),
                            resolve: { tc_libsecret_resolve($0, &$1) })
            .map { LibSecret(functions: $0.functions, path: $0.path) }
            .mapError { failure in
                if let (path, function) = failure.missingFunction.first {
                    missing("The libsecret found (\(path)) has no \(function): it is too old, or not libsecret.")
                } else {
                    missing("libsecret is not installed (\(failure.reason)).")
                }
            }
    }

    private static func missing(_ message: String) -> TokenCacheError {
        TokenCacheError(.libsecretMissing, message,
                        hint: "Install it (Debian/Ubuntu: apt-get install libsecret-1-0), or use the encrypted-file backend (--backend file), which works without it")
    }
}
