import Foundation
import Testing
@testable import TokenCache
@testable import TokenCacheCore
import TokenCacheTestSupport

/// The C interface's silent acquisition through `tokencache agent` (#38): Tests/CTests/test_capi.c
/// in a fresh container home, with only TOKENCACHE_AGENT_SOCK set.
@Suite("Agent C interface", .harness, .serialized)
struct AgentCAPITests {
    @Test("tokencache_acquire_token_silent on a default store (AUTO, NULL group) in a fresh container home gets the token through the agent, which refreshed at the identity provider; the container home stays empty")
    func silentThroughAgent() async throws {
        let scenario = try await AgentScenario()
        defer { scenario.cleanUp() }
        let agent = try scenario.startAgent(["--authority", scenario.authority])
        defer { agent.stop() }
        let silent = try await silentInContainer("auto", scenario, socket: agent.socket)
        #expect(silent.status == 0, "\(silent.stderr)")
        #expect(silent.stdout == "at-issued-1 \(Fixtures.alice.username)\n")
        let grants = try await scenario.idp.stats().grants
        #expect(grants.count == 1 && grants.first?.client_id == Fixtures.appTwo && grants.first?.redeemed == AgentScenario.refreshToken)
        #expect(agent.log.contains("test_capi[") && agent.log.contains("token (client \(Fixtures.appTwo), scopes User.Read, account \(Fixtures.alice.username)) -> granted"),
                "\(agent.log)")
        #expect(scenario.containerFiles().isEmpty, "\(scenario.containerFiles().keys)")
    }

    @Test("an explicitly chosen backend (FILE) uses the local cache, not the agent: NOT_FOUND in the empty container; with the agent gone, a default store's call is BACKEND_UNAVAILABLE naming the socket")
    func explicitBackendAndAgentGone() async throws {
        let scenario = try await AgentScenario()
        defer { scenario.cleanUp() }
        let agent = try scenario.startAgent(["--authority", scenario.authority])
        let local = try await silentInContainer("file", scenario, socket: agent.socket)
        #expect(local.status == 1 && local.stderr.contains("NOT_FOUND"), "\(local.stderr)")
        #expect(!agent.log.contains("token (client"), "the agent was asked: \(agent.log)")
        #expect(try await scenario.idp.stats().token_requests == 0)

        agent.stop()
        let gone = try await silentInContainer("auto", scenario, socket: agent.socket)
        #expect(gone.status == 1 && gone.stderr.contains("BACKEND_UNAVAILABLE") && gone.stderr.contains(agent.socket), "\(gone.stderr)")
    }
}

/// test_capi's `silent` mode (backend "auto" or "file") in the container, for app two, Alice and
/// User.Read; built outside the container home (the binary holds test_capi's test tokens).
func silentInContainer(_ backend: String, _ scenario: AgentScenario, socket: String) async throws -> ProcessOutput {
    let build = try TestEnvironment.temporaryDirectory()
    defer { try? FileManager.default.removeItem(at: build) }
    let program = try CTestPrograms.testCAPI()
    let arguments = ["silent", backend, Fixtures.appTwo, scenario.authority, Fixtures.alice.username, "User.Read"]
    let environment = scenario.containerEnvironment(socket: socket)
    return try await offThePool { try runProcess(program, arguments, environment: environment) }
}
