import Foundation
import TokenCacheCore
import TokenCacheTestSupport

/// A resource stand-in of TokenCacheTestIdentityProvider/Fixtures (git_server.py,
/// kube_server.py) run with python3 for one test: it prints its port, and serves until its
/// standard input closes (here, when this object goes).
final class StandInServer: @unchecked Sendable {
    // @unchecked: set once in init and only read afterwards.
    let port: Int
    private let process: Process
    private let input: Pipe

    init(script name: String, arguments: [String]) throws {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../TokenCacheTestIdentityProvider/Fixtures/\(name)").standardizedFileURL.path
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [script] + arguments
        input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        var line = Data()
        while let byte = try output.fileHandleForReading.read(upToCount: 1), !byte.isEmpty, byte != Data("\n".utf8) { line.append(byte) }
        guard let port = Int(String(decoding: line, as: UTF8.self)) else {
            process.terminate()
            throw TokenCacheError(.network, "\(name) did not start")
        }
        self.port = port
    }

    deinit {
        try? input.fileHandleForWriting.close()
        process.terminate()
        process.waitUntilExit()
    }

    /// What the stand-in let through and refused (resource_gate.py), read with curl (`options`: TLS trust).
    struct Stats: Decodable, CustomStringConvertible {
        var accepted: [String]
        var refused: Int
        var anonymous: Int
        var description: String { "accepted \(accepted.count) (\(Set(accepted).count) tokens), refused \(refused), anonymous \(anonymous)" }
    }

    func stats(at url: String, curlOptions: [String] = []) throws -> Stats {
        let output = try runProcess("/usr/bin/curl", ["-sf"] + curlOptions + [url])
        return try JSONDecoder().decode(Stats.self, from: Data(output.stdout.utf8))
    }
}
