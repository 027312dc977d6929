import TokenCacheCore

/// What the package knows about one C library it loads at run time (libsecret, libgcrypt,
/// libcrypto, libcurl): where to find it, how to fill its function table, and what to tell
/// people when it is missing. A caseless enum conforms; ``LoadedLibrary`` does the rest, so the
/// load-once, `shared()`, doctor description and typed missing-library error exist once.
package protocol LibraryDescriptor: Sendable {
    /// The C struct of function pointers the library is used through.
    associatedtype Functions

    /// Its name in messages and in `tokencache doctor`: "libsecret", "OpenSSL's libcrypto 3".
    static var name: String { get }
    /// Sonames tried in order when the override variable is not set.
    static var sonames: [String] { get }
    /// The environment variable naming the file to load instead (`TOKENCACHE_LIBSECRET_PATH`).
    static var overrideVariable: String { get }
    /// The Debian/Ubuntu package that installs it, for the hint.
    static var aptPackage: String { get }
    /// The hint's other distributions ("Fedora: openssl-libs"), if any.
    static var otherPackages: String? { get }
    /// What to do instead of installing it, the hint's end ("use the Secret Service backend").
    static var otherwise: String { get }
    /// The error code when it cannot be loaded.
    static var missingCode: TokenCacheError.Code { get }

    /// The library, or why not: written by each descriptor as `static let loaded = LoadedLibrary<Self>.load()`,
    /// because only a concrete type can hold a static let, which Swift initializes once per
    /// process, thread-safely, on first access.
    static var loaded: Result<LoadedLibrary<Self>, TokenCacheError> { get }

    /// The function table, every entry nil.
    static var unresolved: Functions { get }
    /// Fills the table from a dlopen handle; the name of the first missing function, or nil.
    static func resolve(_ handle: UnsafeMutableRawPointer, _ functions: inout Functions) -> UnsafePointer<CChar>?
    /// One-time set-up once resolved (`curl_global_init`); why it failed, or nil.
    static func prepare(_ functions: Functions) -> String?
    /// The error message when no candidate could be used.
    static func message(_ failure: LoadFailure) -> String
    /// For `tokencache doctor` once loaded: "libcurl (loaded: /usr/lib/…/libcurl.so.4, …)".
    static func describe(_ library: LoadedLibrary<Self>) -> String
}

extension LibraryDescriptor {
    package static var otherPackages: String? { nil }
    package static func prepare(_ functions: Functions) -> String? { nil }
    package static func message(_ failure: LoadFailure) -> String { "\(name) could not be loaded (\(failure.reason))." }
    package static func describe(_ library: LoadedLibrary<Self>) -> String { "\(name) (loaded: \(library.path))" }
}

/// A library of ``LibraryDescriptor`` loaded with ``DynamicLibrary``: its function table and the
/// file it came from. Never unloaded (libsecret registers GObject types).
@dynamicMemberLookup
package final class LoadedLibrary<Library: LibraryDescriptor>: @unchecked Sendable {
    // @unchecked: the table is written once, before the instance is shared, and never changed.
    /// The function table, every entry non-nil.
    package let functions: Library.Functions
    /// The file name the library was loaded by.
    package let path: String

    private init(functions: Library.Functions, path: String) {
        self.functions = functions
        self.path = path
    }

    /// The library's functions by their C names: `libsecret.secret_service_open_sync(…)`.
    package subscript<Function>(dynamicMember name: KeyPath<Library.Functions, Function?>) -> Function {
        functions[keyPath: name]!  // all non-nil: `load` fails unless every function resolved
    }

    /// The library, loading it on first call (once per process).
    /// - Throws: ``TokenCacheError`` with the descriptor's `missingCode` and the package to install.
    package static func shared() throws(TokenCacheError) -> LoadedLibrary { try Library.loaded.get() }

    /// For `tokencache doctor`: the library loaded, or why it could not be loaded.
    package static var description: String {
        switch Library.loaded {
        case .success(let library): Library.describe(library)
        case .failure(let error): error.message
        }
    }

    /// Loads the library (``DynamicLibrary/open(_:override:empty:resolve:prepare:)``): only for
    /// the descriptor's `loaded`, which keeps the result for the process.
    package static func load() -> Result<LoadedLibrary, TokenCacheError> {
        DynamicLibrary.open(Library.sonames, override: Library.overrideVariable, empty: Library.unresolved,
                            resolve: Library.resolve, prepare: Library.prepare)
            .map { LoadedLibrary(functions: $0.functions, path: $0.path) }
            .mapError { TokenCacheError(Library.missingCode, Library.message($0), hint: hint) }
    }

    /// "Install it (Debian/Ubuntu: apt-get install libgcrypt20), or use the encrypted-file backend …".
    static var hint: String {
        "Install it (Debian/Ubuntu: apt-get install \(Library.aptPackage)\(Library.otherPackages.map { "; " + $0 } ?? "")), or \(Library.otherwise)"
    }
}
