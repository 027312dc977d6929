import Foundation
import PackagePlugin

/// `swift package tokencache <command> …`: runs the `tokencache` CLI for this package's own app,
/// taking the client ID and group from its `tokencache.json`, so a developer can list or clear
/// their app's cache while developing.
///
///     swift package tokencache list
///     swift package tokencache remove --account alice@contoso.com --yes
///     swift package tokencache --target MyApp token --scopes User.Read
@main
struct TokenCacheCommandPlugin: CommandPlugin {
    /// Subcommands that accept `--client`.
    static let clientScoped: Set<String> = ["list", "remove", "token", "save"]

    func performCommand(context: PluginContext, arguments: [String]) throws {
        var extractor = ArgumentExtractor(arguments)
        let targetNames = extractor.extractOption(named: "target")
        var remaining = extractor.remainingArguments

        let configured = context.package.targets.compactMap { $0 as? SourceModuleTarget }
            .filter { targetNames.isEmpty || targetNames.contains($0.name) }
            .map { $0.directoryURL.appending(path: "tokencache.json") }
            .filter { FileManager.default.fileExists(atPath: $0.path) }
        guard configured.count == 1, let file = configured.first else {
            Diagnostics.error(configured.isEmpty
                ? "No target has a tokencache.json; add one or pass --target NAME"
                : "Several targets have a tokencache.json; pick one with --target NAME")
            return
        }
        let data = try Data(contentsOf: file)
        guard let json = try JSONSerialization.jsonObject(with: data) as? [String: Any],
              let clientID = json["clientId"] as? String else {
            Diagnostics.error("\(file.path): field 'clientId' is missing or not a string")
            return
        }
        if let subcommand = remaining.first, Self.clientScoped.contains(subcommand),
           !remaining.contains("--client"), !remaining.contains("--all") {
            remaining += ["--client", clientID]
        }
        if let group = json["group"] as? String, let subcommand = remaining.first, !subcommand.hasPrefix("-"),
           !remaining.contains("--group") {
            remaining += ["--group", group]
        }

        let tool = try context.tool(named: "tokencache")
        let process = Process()
        process.executableURL = tool.url
        process.arguments = remaining
        try process.run()
        process.waitUntilExit()
        if process.terminationStatus != 0 {
            Diagnostics.error("tokencache \(remaining.joined(separator: " ")) exited with status \(process.terminationStatus)")
        }
    }
}
