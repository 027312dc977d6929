internal import CLibSecret
import TokenCacheCore
import TokenCachePlatform

/// libsecret, loaded at run time (``LoadedLibrary``) on first use of the Secret Service backend:
/// the package does not link it, so programs start on machines without it (servers, containers,
/// WSL) and automatic selection falls back to the encrypted file.
///
/// `TOKENCACHE_LIBSECRET_PATH` overrides the file loaded (default `libsecret-1.so.0`): for
/// packagers with libsecret in a non-standard place, and for tests that need it to be absent.
typealias LibSecret = LoadedLibrary<LibSecretDescriptor>

/// How libsecret is found and reported (``LibSecret``).
enum LibSecretDescriptor: LibraryDescriptor {
    static let loaded = LibSecret.load()
    static let facts = LibraryFacts(name: "libsecret", role: "which the Secret Service backend needs", sonames: ["libsecret-1.so.0"],
                                    overrideVariable: "TOKENCACHE_LIBSECRET_PATH", packages: ("libsecret-1-0", nil),
                                    otherwise: "use the encrypted-file backend (--backend file), which works without it",
                                    missingCode: .libsecretMissing)

    static func resolve(_ handle: UnsafeMutableRawPointer) -> (TCLibSecretFunctions, missing: UnsafePointer<CChar>?) {
        var functions = TCLibSecretFunctions()
        let missing = tc_libsecret_resolve(handle, &functions)
        return (functions, missing)
    }

    /// libsecret's own wording, which `doctor` and automatic selection repeat.
    static func message(_ failure: LoadFailure) -> String {
        if let (path, function) = failure.missingFunction.first {
            "The libsecret found (\(path)) has no \(function): it is too old, or not libsecret."
        } else {
            "libsecret is not installed (\(failure.reason))."
        }
    }
    // libsecret exports no version information: the default description (the file) is all there is.
}
