import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
@testable import TokenCache

/// The local OpenID provider of Fixtures/fake_idp.py, on a loopback port, for one test.
final class FakeIdentityProvider: @unchecked Sendable {
    // @unchecked: the process and pipe are set once in init and only read afterwards.
    let port: Int
    private let process: Process
    private let input: Pipe

    init() throws {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../Fixtures/fake_idp.py").standardizedFileURL.path
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [script]
        input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        var line = Data()
        while let byte = try output.fileHandleForReading.read(upToCount: 1), !byte.isEmpty, byte != Data("\n".utf8) {
            line.append(byte)
        }
        guard let port = Int(String(decoding: line, as: UTF8.self)) else {
            process.terminate()
            throw TokenCacheError(.network, "fake_idp.py did not start")
        }
        self.port = port
    }

    deinit {
        try? input.fileHandleForWriting.close()
        process.terminate()
        process.waitUntilExit()
    }

    func authority(_ tenant: String = Fixtures.tenantA) -> Authority {
        try! Authority("http://127.0.0.1:\(port)/\(tenant)")
    }

    func control(_ command: [String: Any]) async throws {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)/control")!)
        request.httpMethod = "POST"
        request.httpBody = try JSONSerialization.data(withJSONObject: command)
        _ = try await URLSession.shared.data(for: request)
    }

    /// Makes the provider accept a refresh token.
    func seed(refreshToken: String, user: Fixtures.User, clientID: String, family: String?) async throws {
        var seed: [String: Any] = ["refresh_token": refreshToken, "uid": user.uid, "utid": user.tenant,
                                   "client_id": clientID, "username": user.username]
        if let family { seed["family"] = family }
        try await control(["seed": seed])
    }

    struct Stats: Decodable {
        struct Grant: Decodable { var client_id: String; var outcome: String; var redeemed: String?; var issued: String? }
        var token_requests: Int
        var grants: [Grant]
    }

    func stats() async throws -> Stats {
        let (data, _) = try await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(port)/stats")!)
        return try JSONDecoder().decode(Stats.self, from: data)
    }
}
