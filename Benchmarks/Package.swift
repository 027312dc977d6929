// swift-tools-version: 6.1
import Foundation
import PackageDescription

// In-process benchmarks (ordo-one/benchmark). A package of its own so the library's build and
// tests never pay for the benchmark dependencies. Run through scripts/bench.sh.
let tokenCachePackage = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().appendingPathComponent("..").standardizedFileURL

let package = Package(
    name: "TokenCacheBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
        .package(path: tokenCachePackage.path),
    ],
    targets: [
        .executableTarget(
            name: "WarmLookup",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "TokenCache", package: tokenCachePackage.lastPathComponent),
            ],
            path: "Benchmarks/WarmLookup",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        // Whole-operation measurements scripts/bench.sh compares with MSAL Python (no Benchmark
        // dependency: a plain executable that prints JSON).
        .executableTarget(
            name: "bench-tool",
            dependencies: [.product(name: "TokenCache", package: tokenCachePackage.lastPathComponent)],
            path: "Tools/BenchTool"
        ),
    ],
    swiftLanguageModes: [.v6]
)
