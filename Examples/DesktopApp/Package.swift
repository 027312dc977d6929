// swift-tools-version: 6.1
import Foundation
import PackageDescription

// A GNOME desktop app (GTK 4 and libadwaita) on the library, as a developer would write one: its
// own package, so the library never depends on GTK. It depends on the repository it lives in by
// path (SwiftPM names a path dependency after its directory, which differs between clones, so
// compute it).
let tokenCachePackage = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().appendingPathComponent("../..").standardizedFileURL

let package = Package(
    name: "DesktopApp",
    dependencies: [
        .package(path: tokenCachePackage.path),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
    ],
    targets: [
        // libadwaita 1.2 and GTK 4 (Debian's libadwaita-1-dev, whose pkg-config pulls in gtk4), with a
        // small header of inline helpers for what Swift cannot call directly (cast macros,
        // g_signal_connect, variadic functions).
        .systemLibrary(name: "CGtk", pkgConfig: "libadwaita-1", providers: [.apt(["libadwaita-1-dev"])]),
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
