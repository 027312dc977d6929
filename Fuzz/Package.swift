// swift-tools-version: 6.1
import Foundation
import PackageDescription

// Coverage-guided fuzzing of the parsers that read untrusted input. A package of its own so
// normal builds never link libFuzzer. Run through scripts/fuzz.sh.
let tokenCachePackage = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().appendingPathComponent("..").standardizedFileURL

let package = Package(
    name: "TokenCacheFuzz",
    dependencies: [.package(path: tokenCachePackage.path)],
    targets: [
        .executableTarget(
            name: "TokenCacheFuzz",
            dependencies: [.product(name: "TokenCache", package: tokenCachePackage.lastPathComponent),
                           // The servers' request parsers (the broker's), which apps do not link.
                           .product(name: "TokenCacheServers", package: tokenCachePackage.lastPathComponent)]
        ),
    ],
    swiftLanguageModes: [.v6]
)
