import TokenCacheCore

/// What the package knows about one C library it loads at run time (libsecret, libgcrypt,
/// libcrypto, libcurl): where to find it, how to make its function table, and what to tell
/// people when it is missing. A caseless enum conforms; ``LoadedLibrary`` does the rest, so the
/// load-once, `shared()`, doctor description and typed missing-library error exist once.
package protocol LibraryDescriptor: Sendable {
    /// The C struct of function pointers the library is used through.
    associatedtype Functions

    /// Where the library is found and what its absence is called.
    static var facts: LibraryFacts { get }

    /// The library, or why not: written by each descriptor as `static let loaded = LoadedLibrary<Self>.load()`,
    /// because only a concrete type can hold a static let, which Swift initializes once per
    /// process, thread-safely, on first access.
    static var loaded: Result<LoadedLibrary<Self>, TokenCacheError> { get }

    /// The function table from a dlopen handle, with the name of the first missing function, or nil.
    static func resolve(_ handle: UnsafeMutableRawPointer) -> (Functions, missing: UnsafePointer<CChar>?)
    /// One-time set-up once resolved (`curl_global_init`); why it failed, or nil. Default: none.
    static func prepare(_ functions: Functions) -> String?
    /// The error message when no candidate could be used. Default: "libcurl, which refreshing
    /// tokens needs, could not be loaded (…)."
    static func message(_ failure: LoadFailure) -> String
    /// For `tokencache doctor` once loaded. Default: "libsecret (loaded: /usr/lib/…/libsecret-1.so.0)".
    static func describe(_ library: LoadedLibrary<Self>) -> String
}

/// The facts of a ``LibraryDescriptor``: names, sonames and the error when it is missing.
package struct LibraryFacts: Sendable {
    /// Its name in messages and in `tokencache doctor`: "libgcrypt", "OpenSSL's libcrypto 3".
    package var name: String
    /// What needs it, for the message: "which the encrypted file needs".
    package var role: String
    /// Sonames tried in order when the override variable is not set.
    package var sonames: [String]
    /// The environment variable naming the file to load instead (`TOKENCACHE_LIBGCRYPT_PATH`).
    package var overrideVariable: String
    /// The Debian/Ubuntu package that installs it, and other distributions' ("Fedora: openssl-libs").
    package var packages: (apt: String, others: String?)
    /// What to do instead of installing it, the hint's end ("use the Secret Service backend").
    package var otherwise: String
    /// The error code when it cannot be loaded.
    package var missingCode: TokenCacheError.Code

    package init(name: String, role: String, sonames: [String], overrideVariable: String,
                 packages: (apt: String, others: String?), otherwise: String, missingCode: TokenCacheError.Code) {
        (self.name, self.role, self.sonames, self.overrideVariable) = (name, role, sonames, overrideVariable)
        (self.packages, self.otherwise, self.missingCode) = (packages, otherwise, missingCode)
    }

    /// "Debian/Ubuntu: apt-get install libgcrypt20; Fedora: libgcrypt": how to install it.
    var install: String { "Debian/Ubuntu: apt-get install \(packages.apt)\(packages.others.map { "; " + $0 } ?? "")" }

    /// "Install it (Debian/Ubuntu: apt-get install libgcrypt20), or use the encrypted-file backend …".
    var hint: String { "Install it (\(install)), or \(otherwise)" }
}

extension LibraryDescriptor {
    package static func prepare(_ functions: Functions) -> String? { nil }
    package static func message(_ failure: LoadFailure) -> String {
        "\(facts.name), \(facts.role), could not be loaded (\(failure.reason))."
    }
    package static func describe(_ library: LoadedLibrary<Self>) -> String { "\(facts.name) (loaded: \(library.path))" }
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

    /// Loads the library (``DynamicLibrary/open(_:override:resolve:prepare:)``): only for the
    /// descriptor's `loaded`, which keeps the result for the process.
    package static func load() -> Result<LoadedLibrary, TokenCacheError> {
        let facts = Library.facts
        return DynamicLibrary.open(facts.sonames, override: facts.overrideVariable, resolve: Library.resolve, prepare: Library.prepare)
            .map { LoadedLibrary(functions: $0.functions, path: $0.path) }
            .mapError { TokenCacheError(facts.missingCode, Library.message($0), hint: facts.hint,
                                        reason: .libraryMissing(name: facts.name, install: facts.install)) }
    }
}
