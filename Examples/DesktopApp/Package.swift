// swift-tools-version: 6.1
import Foundation
import PackageDescription

// A GTK 4 desktop app on the library, as a developer would write one: its own package, so the
// library never depends on GTK. It depends on the repository it lives in by path (SwiftPM names a
// path dependency after its directory, which differs between clones, so compute it).
let tokenCachePackage = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().appendingPathComponent("../..").standardizedFileURL

let package = Package(
    name: "DesktopApp",
    dependencies: [
        .package(path: tokenCachePackage.path),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
    ],
    targets: [
        // GTK 4 from Debian's libgtk-4-dev, with a small header of inline helpers for what Swift
        // cannot call directly (GTK's cast macros, g_signal_connect, variadic functions).
        .systemLibrary(name: "CGtk", pkgConfig: "gtk4", providers: [.apt(["libgtk-4-dev"])]),
        .executableTarget(
            name: "DesktopApp",
            dependencies: [
                "CGtk",
                .product(name: "TokenCache", package: tokenCachePackage.lastPathComponent),
                .product(name: "TokenCacheModel", package: tokenCachePackage.lastPathComponent),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
