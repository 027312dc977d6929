// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "swift-tokencache",
    products: [
        .library(name: "TokenCache", targets: ["TokenCache"]),
        .executable(name: "tokencache-demo", targets: ["TokenCacheDemo"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
    ],
    targets: [
        // C shims: the only places C types live.
        .systemLibrary(
            name: "CLibSecret",
            pkgConfig: "libsecret-1",
            providers: [.apt(["libsecret-1-dev", "libglib2.0-dev"])]
        ),
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),

        // The library: cache model, account store, cache abstraction and backends.
        .target(
            name: "TokenCache",
            dependencies: [
                "CLibSecret",
                "COpenSSL",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // The main job: a short demo of two apps sharing sign-in.
        .executableTarget(
            name: "TokenCacheDemo",
            dependencies: ["TokenCache"]
        ),

        // Run by the tests as separate processes (sharing between processes, crashes).
        .executableTarget(
            name: "TokenCacheTestHelper",
            dependencies: ["TokenCache"]
        ),

        .testTarget(
            name: "TokenCacheTests",
            dependencies: ["TokenCache", "TokenCacheTestHelper"],
            resources: [.copy("Fixtures")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
