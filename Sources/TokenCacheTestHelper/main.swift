// A small executable the tests run as separate processes (multi-process sharing, kill -9,
// missing bus). Each backend contributes its commands in its own file.
import Foundation
@_spi(Testing) import TokenCache

// Trace-level logs go to the suite's shared log file (checked for secrets after the run).
LineFileLogHandler.bootstrapFromEnvironment()

typealias HelperCommand = @Sendable ([String]) throws -> Void

let commands: [String: HelperCommand] = secretServiceCommands
    .merging(encryptedFileCommands) { first, _ in first }
    .merging(storeCommands) { first, _ in first }
    .merging(ssoCommands) { first, _ in first }
    .merging(externalStoreCommands) { first, _ in first }

let arguments = Array(CommandLine.arguments.dropFirst())
guard let name = arguments.first, let command = commands[name] else {
    FileHandle.standardError.write(Data("usage: tokencache-test-helper <\(commands.keys.sorted().joined(separator: "|"))> …\n".utf8))
    exit(64)
}
do {
    try command(Array(arguments.dropFirst()))
} catch {
    FileHandle.standardError.write(Data("error: \(error)\n".utf8))
    exit(1)
}
