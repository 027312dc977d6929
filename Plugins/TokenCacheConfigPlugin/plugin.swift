import Foundation
import PackagePlugin

/// Reads `tokencache.json` in a target (client ID, authority, redirect URI, scopes, sharing
/// group, backend policy) and generates `AppConfiguration.current` for the app to use.
@main
struct TokenCacheConfigPlugin: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        guard let target = target as? SourceModuleTarget else { return [] }
        let input = target.directoryURL.appending(path: "tokencache.json")
        guard FileManager.default.fileExists(atPath: input.path) else {
            Diagnostics.error("\(target.name) uses TokenCacheConfigPlugin but has no tokencache.json in \(target.directoryURL.path)")
            return []
        }
        let output = context.pluginWorkDirectoryURL.appending(path: "TokenCacheConfiguration.swift")
        return [
            .buildCommand(
                displayName: "Generating token cache configuration from \(target.name)/tokencache.json",
                executable: try context.tool(named: "tokencache-config-gen").url,
                arguments: [input.path, output.path],
                inputFiles: [input],
                outputFiles: [output]),
        ]
    }
}
