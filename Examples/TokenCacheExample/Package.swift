// swift-tools-version: 6.1
import Foundation
import PackageDescription

// The example depends on the repository it lives in by path. SwiftPM names a path dependency
// after its directory, which differs between clones, so compute it.
let tokenCachePackage = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().appendingPathComponent("../..").standardizedFileURL

let package = Package(
    name: "TokenCacheExample",
    dependencies: [
        .package(path: tokenCachePackage.path),
    ],
    targets: [
        .executableTarget(
            name: "ExampleApp",
            dependencies: [.product(name: "TokenCache", package: tokenCachePackage.lastPathComponent)],
            exclude: ["tokencache.json"],
            plugins: [.plugin(name: "TokenCacheConfigPlugin", package: tokenCachePackage.lastPathComponent)]
        ),
    ],
    swiftLanguageModes: [.v6]
)
