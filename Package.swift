// swift-tools-version: 6.1
// Licensed under the MIT License (see LICENSE), as the MSAL libraries are.
import Foundation
import PackageDescription

let package = Package(
    name: "swift-tokencache",
    products: [
        // Every module the façade is built from is listed, so that `swift package
        // diagnose-api-breaking-changes` (scripts/check-api.sh) compares each one's API.
        .library(name: "TokenCache", targets: ["TokenCache", "TokenCacheCore", "TokenCachePlatform", "TokenCacheCrypto",
                                               "TokenCacheDBus", "SecretServiceStore", "EncryptedFileStore", "SandboxStore",
                                               "TokenCachePipeline", "TokenCacheHTTP"]),
        // For apps that use only part of it, without linking what they do not use (#35): the MSAL
        // model and account store (no C library at all), or that with the encrypted file and the
        // token pipeline, which refreshes (OpenSSL and libcurl loaded at run time; no GLib/GIO).
        .library(name: "TokenCacheCore", targets: ["TokenCacheCore"]),
        // The observable model a desktop UI binds to (Observation): apart, so that the C library
        // (static stdlib) and the command-line tools do not link Observation.
        .library(name: "TokenCacheModel", targets: ["TokenCacheModel"]),
        .library(name: "TokenCacheEncryptedFile", targets: ["EncryptedFileStore", "TokenCacheCore", "TokenCachePlatform", "TokenCacheCrypto",
                                                            "TokenCachePipeline", "TokenCacheHTTP"]),
        .executable(name: "tokencache", targets: ["tokencache"]),
        .executable(name: "tokencache-demo", targets: ["TokenCacheDemo"]),
        // The servers (the agent's and the identity broker's), for the fuzz package only (Fuzz/, which
        // fuzzes their request parsers): no app links them; scripts/check-no-agent-server.sh checks
        // that apps and libtokencache.so hold none of them.
        .library(name: "TokenCacheServers", targets: ["TokenCacheAgent", "TokenCacheBroker"]),
        // The C interface; scripts/build-c-library.sh links it as libtokencache.so.0.
        .library(name: "TokenCacheC", type: .dynamic, targets: ["TokenCacheC"]),
        .plugin(name: "TokenCacheConfigPlugin", targets: ["TokenCacheConfigPlugin"]),
        .plugin(name: "TokenCacheCommandPlugin", targets: ["TokenCacheCommandPlugin"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-system", from: "1.4.0"),
    ],
    targets: [
        // C shims: the only places C types live.
        // GLib/GIO headers and libraries (the Secret Service client's GDBus calls, the portals);
        // libsecret is not used at all.
        .systemLibrary(
            name: "CLibSecret",
            pkgConfig: "gio-2.0",
            providers: [.apt(["libglib2.0-dev"])]
        ),
        // libgcrypt's declarations only (the Secret Service's transfer crypto): loaded at run time.
        .systemLibrary(name: "CGcrypt"),
        // libcurl's declarations only: loaded at run time on the first HTTP request.
        .systemLibrary(name: "CCurl"),
        // OpenSSL libcrypto's declarations only: loaded at run time when the encrypted file is used.
        .systemLibrary(name: "COpenSSL"),
        // tpm2-tss's declarations only: loaded at run time when the TPM key source is used.
        .systemLibrary(name: "CTSS2"),
        // glibc calls Swift cannot make directly: secure_getenv, prctl, mallopt.
        .systemLibrary(name: "CLinux"),

        // The layers, each a module, so the package graph keeps them apart (docs/ARCHITECTURE.md
        // draws it). "->" lists each one's Swift dependencies here, C modules in parentheses:
        //   TokenCacheCore      MSAL model, JSON, MSAL rules, account store, backend protocol (no C)
        //   TokenCachePlatform  Linux glue: one dlopen loader, safe file I/O       -> Core (CLinux)
        //   TokenCacheCrypto    the primitives: libcrypto and libgcrypt, both dlopened; SHA-256,
        //                       AES-GCM, the Secret Service's DH transfer crypto, random
        //                                                          -> Platform, Core (COpenSSL, CGcrypt)
        //   TokenCacheDBus      GVariant/GDBus ownership, the typed Secret Service client and its
        //                       session, the item schema, the desktop portals
        //                                                  -> Crypto, Platform, Core (CLibSecret: GLib)
        //   SecretServiceStore  the Secret Service backend    -> DBus, Crypto, Platform, Core (CLibSecret)
        //   EncryptedFileStore  the encrypted-file backend    -> Crypto, Platform, Core (COpenSSL, CTSS2, CLinux)
        //   SandboxStore        the Secret portal's file keyring (Flatpak, Snap)
        //                                                     -> DBus, Crypto, Platform, Core (CLibSecret)
        //   The three stores are leaves: none imports another; sign-in (TokenCache/SignIn) imports
        //   none either (scripts/check-module-graph.sh).
        //   TokenCacheHTTP      the HTTP layer under the pipeline: the transport protocol and its types,
        //                       libcurl's transport (dlopened; no GLib)    -> Platform, Core (CCurl)
        //   TokenCachePipeline  the token pipeline, on no store (#58 item 1): the token endpoint client,
        //                       the refresh lock, the agent's client, the token request and the engine
        //                       that decides it, with the seams the façade fills (apps, broker, single
        //                       sign-on stores) and its own for an app on a store alone
        //                                                      -> HTTP, Platform, Core (CLinux)
        //   TokenCache          the façade apps import: backend selection, sign-in, silent SSO, the
        //                       engine's seams filled
        //                          -> Pipeline, HTTP, the three stores, DBus, Crypto, Platform, Core (CLinux)
        //   TokenCacheAgent     the token agent's servers (socket, managed-identity endpoint): the CLI only
        //   TokenCacheBroker    the identity broker on the session bus (a GDBus server on DBus's owning
        //                       types: it imports none of the package's C modules): the CLI only
        //   TokenCacheKeeper    the token keeper, a system service (#62): the CLI only
        .target(
            name: "TokenCacheCore",
            dependencies: [.product(name: "Logging", package: "swift-log")]
        ),
        .target(
            name: "TokenCachePlatform",
            dependencies: ["TokenCacheCore", "CLinux", .product(name: "SystemPackage", package: "swift-system"),
                           .product(name: "Logging", package: "swift-log")]
        ),
        .target(
            name: "TokenCacheCrypto",
            dependencies: ["TokenCacheCore", "TokenCachePlatform", "COpenSSL", "CGcrypt"]
        ),
        .target(
            name: "TokenCacheDBus",
            dependencies: ["TokenCacheCore", "TokenCachePlatform", "TokenCacheCrypto", "CLibSecret"]
        ),
        .target(
            name: "SecretServiceStore",
            dependencies: ["TokenCacheCore", "TokenCachePlatform", "TokenCacheCrypto", "TokenCacheDBus", "CLibSecret",
                           .product(name: "Logging", package: "swift-log")]
        ),
        .target(
            name: "EncryptedFileStore",
            dependencies: ["TokenCacheCore", "TokenCachePlatform", "TokenCacheCrypto", "COpenSSL", "CTSS2", "CLinux",
                           .product(name: "Logging", package: "swift-log")]
        ),
        // Sandboxed apps (Flatpak, Snap): the Secret portal and the libsecret/oo7 file keyring.
        .target(
            name: "SandboxStore",
            dependencies: ["TokenCacheCore", "TokenCachePlatform", "TokenCacheCrypto", "TokenCacheDBus", "CLibSecret",
                           .product(name: "Logging", package: "swift-log")]
        ),
        // Under the pipeline, not in it: the pipeline's sources import no C module of libcurl, and
        // every product with the pipeline (the encrypted-file-only one too) gets a transport that refreshes.
        .target(
            name: "TokenCacheHTTP",
            dependencies: ["TokenCacheCore", "TokenCachePlatform", "CCurl"]
        ),
        .target(
            name: "TokenCachePipeline",
            dependencies: ["TokenCacheCore", "TokenCachePlatform", "TokenCacheHTTP", "CLinux", .product(name: "Logging", package: "swift-log")]
        ),
        .target(
            name: "TokenCache",
            dependencies: [
                "TokenCachePipeline",
                "TokenCacheHTTP",
                "SandboxStore",
                "TokenCacheCore",
                "TokenCachePlatform",
                "TokenCacheCrypto",
                "TokenCacheDBus",
                "SecretServiceStore",
                "EncryptedFileStore",
                "CLinux",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // AccountsModel, the @Observable state of a desktop app's accounts (see the product).
        .target(name: "TokenCacheModel", dependencies: ["TokenCache"]),

        // The token agent's servers, out of the library apps link (#45): only the CLI, the tests
        // and the fuzz package (through TokenCacheServers) depend on it, and scripts/check-no-agent-server.sh checks an app and
        // libtokencache.so hold none of it.
        .target(
            name: "TokenCacheAgent",
            dependencies: ["TokenCache", "TokenCacheCore", "TokenCachePlatform", .product(name: "Logging", package: "swift-log")]
        ),

        // The identity broker on the session bus (`tokencache broker`, #47), its request parser
        // included: like the agent's servers, in no product apps use; scripts/check-no-agent-server.sh checks apps hold none of it.
        .target(
            name: "TokenCacheBroker",
            dependencies: ["TokenCache", "TokenCacheCore", "TokenCachePlatform", "TokenCacheAgent", "TokenCacheDBus", .product(name: "Logging", package: "swift-log")]
        ),

        // The token keeper (`tokencache keeper`, #62): a system service holding enrolled users'
        // groups out of their own processes' reach, serving each app the groups its root-owned
        // apps file allows. Server side, like the agent's and the broker's: the CLI only.
        .target(
            name: "TokenCacheKeeper",
            dependencies: ["TokenCache", "TokenCacheCore", "TokenCachePlatform", "TokenCacheCrypto", "EncryptedFileStore",
                           "TokenCacheAgent", "TokenCacheBroker", .product(name: "Logging", package: "swift-log")]
        ),

        // Admin-only API the façade does not re-export (Azure CLI's configuration file): the CLI and tests.
        .target(
            name: "TokenCacheAdmin",
            dependencies: ["TokenCacheCore", "TokenCachePlatform"]
        ),

        // The `tokencache` admin CLI: commands in a library, a thin executable.
        .target(
            name: "TokenCacheCLI",
            dependencies: [
                "TokenCache",
                "TokenCacheAgent",
                "TokenCacheBroker",
                "TokenCacheKeeper",
                "TokenCacheAdmin",
                "TokenCacheCore",
                "TokenCachePlatform",
                "CLinux",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            plugins: ["BuildInfoPlugin"]
        ),
        .executableTarget(
            name: "tokencache",
            dependencies: ["TokenCache", "TokenCacheCLI", "CLinux"],
            // Full RELRO as libtokencache (#34): every symbol bound at start, then the GOT read-only.
            // Unsafe flags on this executable only: the products apps depend on (the library and the
            // build plugin) do not contain it, so SwiftPM still accepts the package as a dependency.
            linkerSettings: [.unsafeFlags(["-Xlinker", "-z", "-Xlinker", "now", "-Xlinker", "-z", "-Xlinker", "relro"], .when(platforms: [.linux]))]
        ),

        // The C interface (#30): tokencache.h and its plain-C parts, and the Swift functions behind it.
        .target(name: "CTokenCache"),
        .target(
            name: "TokenCacheC",
            dependencies: ["TokenCache", "TokenCacheCore", "CTokenCache", .product(name: "Logging", package: "swift-log")],
            exclude: ["tokencache.map", "tokencache.symbols", "tokencache.pc.in"]
        ),

        // SwiftPM plugins: typed configuration from tokencache.json, and `swift package tokencache`.
        .executableTarget(
            name: "tokencache-config-gen",
            dependencies: ["TokenCacheCore"],  // the configuration's rules only: no keyring, OpenSSL or libcurl
            path: "Sources/TokenCacheConfigGenerator"
        ),
        .plugin(
            name: "TokenCacheConfigPlugin",
            capability: .buildTool(),
            dependencies: ["tokencache-config-gen"]
        ),
        // The commit a build came from, for `tokencache --version`.
        .plugin(name: "BuildInfoPlugin", capability: .buildTool()),
        .plugin(
            name: "TokenCacheCommandPlugin",
            capability: .command(
                intent: .custom(verb: "tokencache", description: "Run the tokencache CLI for this package's app (client ID from tokencache.json)")
            ),
            dependencies: ["tokencache"]
        ),

        // The main job: a short demo of two apps sharing sign-in.
        .executableTarget(
            name: "TokenCacheDemo",
            dependencies: ["TokenCache", "TokenCacheCore"]
        ),

        // An app on the encrypted file only (the TokenCacheEncryptedFile product's modules): tests
        // check that it links no GLib/GIO nor libcurl, and that it refreshes a stale token.
        .executableTarget(
            name: "tokencache-file-example",
            dependencies: ["EncryptedFileStore", "TokenCacheCore", "TokenCachePipeline"],
            path: "Examples/file-only"
        ),

        // Run by the tests as separate processes (sharing between processes, crashes).
        .executableTarget(
            name: "TokenCacheTestHelper",
            dependencies: ["TokenCache", "TokenCacheCore"]
        ),

        // Tests, one target per module (#35). TokenCacheCoreTests needs no C module, keyring or
        // network: `swift test --filter TokenCacheCoreTests` runs anywhere in seconds.

        // Helpers shared by the test targets: environment, subprocesses, fixtures, log capture, the
        // CLI runner, MSAL Python, the C test build. On the core only, so that the core's tests
        // build without GLib, OpenSSL or libcurl.
        .target(
            name: "TokenCacheTestSupport",
            dependencies: ["TokenCacheCore"],
            path: "Tests/TokenCacheTestSupport",
            resources: [.copy("Fixtures")]
        ),
        // The local identity provider (fake_idp.py) and headless Chromium, for the sign-in and SSO tests.
        .target(
            name: "TokenCacheTestIdentityProvider",
            dependencies: ["TokenCache", "TokenCacheCore", "TokenCacheTestSupport"],
            path: "Tests/TokenCacheTestIdentityProvider",
            resources: [.copy("Fixtures")]
        ),
        .testTarget(
            name: "TokenCacheCoreTests",
            dependencies: ["TokenCacheCore", "TokenCacheTestSupport", .product(name: "Logging", package: "swift-log")]
        ),
        // The primitives with fixed vectors: SHA-256, AES-256-GCM, the transfer's DH, HKDF and AES-CBC, random.
        .testTarget(
            name: "TokenCacheCryptoTests",
            dependencies: ["TokenCacheCrypto", "TokenCacheCore", "TokenCachePlatform", "TokenCacheTestSupport"]
        ),
        .testTarget(
            name: "EncryptedFileStoreTests",
            dependencies: ["EncryptedFileStore", "TokenCacheCore", "TokenCachePlatform", "TokenCacheCrypto", "TokenCacheTestSupport",
                           "TokenCacheTestHelper"]
        ),
        .testTarget(
            name: "SecretServiceStoreTests",
            dependencies: ["SecretServiceStore", "TokenCacheCore", "TokenCachePlatform", "TokenCacheCrypto", "TokenCacheDBus",
                           "TokenCacheTestSupport", "TokenCache", "CLibSecret", "TokenCacheTestHelper"]
        ),
        .testTarget(
            name: "SandboxStoreTests",
            dependencies: ["SandboxStore", "TokenCacheCrypto", "TokenCacheCore", "TokenCachePlatform", "TokenCacheTestSupport",
                           "TokenCacheTestHelper"]
        ),
        // The façade: app API, sign-in, silent SSO, native authentication, the token agent.
        .testTarget(
            name: "TokenCacheTests",
            dependencies: ["TokenCache", "TokenCacheAgent", "TokenCacheBroker", "TokenCacheCore", "TokenCachePlatform", "TokenCachePipeline",
                           "SecretServiceStore", "EncryptedFileStore", "TokenCacheTestSupport", "TokenCacheTestIdentityProvider", "TokenCacheTestHelper"],
            resources: [.copy("Fixtures")]
        ),
        .testTarget(
            name: "CLITests",
            dependencies: ["TokenCacheCLI", "TokenCacheKeeper", "TokenCache", "TokenCacheCore", "TokenCachePlatform", "SecretServiceStore",
                           "EncryptedFileStore", "TokenCacheTestSupport", "TokenCacheTestIdentityProvider", "TokenCacheTestHelper"]
        ),
        // Several processes and other tools: multi-process load, MSAL Python, Azure CLI, other
        // tools' stores, the SDK cache corpus, the C interface beside the CLI.
        .testTarget(
            name: "IntegrationTests",
            dependencies: ["TokenCache", "TokenCacheCore", "TokenCachePlatform", "TokenCacheDBus", "SecretServiceStore", "EncryptedFileStore",
                           "TokenCacheAdmin", "TokenCacheAgent", "TokenCacheTestSupport", "TokenCacheTestIdentityProvider", "TokenCacheTestHelper", "TokenCacheModel"],
            resources: [.copy("Fixtures")]
        ),
    ],
    swiftLanguageModes: [.v6]
)

// Documentation is opt-in so normal builds stay lean:
//   TOKENCACHE_DOCS=1 swift package generate-documentation --target TokenCache
if ProcessInfo.processInfo.environment["TOKENCACHE_DOCS"] != nil {
    package.dependencies.append(.package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"))
}
