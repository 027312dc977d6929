import Foundation
import Synchronization

/// A program a test started and talks to while it runs (`tokencache login` showing a device
/// code, a prompt waiting for input): its output is read as it arrives and its end awaited,
/// each woken by the program's own event (data or EOF on its pipes, its exit), never by polling
/// on time. A program that never shows what a test waits for is caught by the test's time limit.
package final class RunningProgram: @unchecked Sendable {  // Process is not Sendable; it is only started and signalled here
    private struct State {
        var stdout = Data(), stderr = Data()
        var status: Int32?
        var openStreams = 2
        var waiters: [(ready: @Sendable (State) -> Bool, continuation: CheckedContinuation<Void, Never>)] = []
        var finished: Bool { status != nil && openStreams == 0 }
    }

    private let state = Mutex(State())
    private let process = Process()
    private let input = Pipe()

    /// Starts `executable` with standard input a pipe (``type(_:)``, ``closeInput()``).
    package init(_ executable: URL, arguments: [String], environment: [String: String]) throws {
        let stdout = Pipe(), stderr = Pipe()
        process.executableURL = executable
        process.arguments = arguments
        process.environment = environment
        process.standardOutput = stdout
        process.standardError = stderr
        process.standardInput = input
        process.terminationHandler = { [weak self] process in
            let status = process.terminationStatus
            self?.update { $0.status = status }
        }
        try process.run()
        // A blocking reader thread per stream, ended by EOF (read gives 0): Foundation's
        // readabilityHandler on Linux crashed when cleared from inside itself at EOF.
        for (pipe, isError) in [(stdout, false), (stderr, true)] {
            // The thread keeps the pipe, so its read end stays open until EOF.
            Thread.detachNewThread { [self, pipe] in
                let descriptor = pipe.fileHandleForReading.fileDescriptor
                var buffer = [UInt8](repeating: 0, count: 65_536)
                while true {
                    let count = read(descriptor, &buffer, buffer.count)
                    if count < 0 && errno == EINTR { continue }
                    let data = count > 0 ? Data(buffer[0..<count]) : Data()
                    update { state in
                        if data.isEmpty { state.openStreams -= 1 } else if isError { state.stderr += data } else { state.stdout += data }
                    }
                    if count <= 0 { return }
                }
            }
        }
    }

    /// What it printed so far.
    package var stdout: String { String(decoding: state.withLock { $0.stdout }, as: UTF8.self) }
    package var stderr: String { String(decoding: state.withLock { $0.stderr }, as: UTF8.self) }
    package var isRunning: Bool { state.withLock { $0.status == nil } }
    package var processIdentifier: Int32 { process.processIdentifier }

    /// The first capture group of `pattern` in standard error, once it was printed.
    /// - Throws: when the program ended without printing it.
    package func shown(_ pattern: String) async throws -> String {
        let regex = try NSRegularExpression(pattern: pattern)
        let match: @Sendable (State) -> String? = { state in
            let text = String(decoding: state.stderr, as: UTF8.self)
            return regex.firstMatch(in: text, range: NSRange(text.startIndex..., in: text))
                .flatMap { Range($0.range(at: 1), in: text) }.map { String(text[$0]) }
        }
        await wait { match($0) != nil || $0.finished }
        guard let found = state.withLock({ match($0) }) else {
            throw ProgramError(description: "the program ended (status \(state.withLock { $0.status } ?? -1)) without showing \(pattern): \(stderr)")
        }
        return found
    }

    /// Waits for the program to end and for all it printed, and returns its exit status.
    package func exitStatus() async -> Int32 {
        await wait(until: \.finished)
        return state.withLock { $0.status ?? -1 }
    }

    /// Types `line` and a newline on its standard input.
    package func type(_ line: String) {
        try? input.fileHandleForWriting.write(contentsOf: Data((line + "\n").utf8))
    }

    /// Ends its standard input.
    package func closeInput() {
        try? input.fileHandleForWriting.close()
    }

    /// Sends SIGTERM (to end a program a failed test leaves waiting).
    package func terminate() {
        if isRunning { process.terminate() }
    }

    private func wait(until ready: @escaping @Sendable (State) -> Bool) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state -> Bool in
                if ready(state) { return true }
                state.waiters.append((ready, continuation))
                return false
            }
            if now { continuation.resume() }
        }
    }

    private func update(_ change: (inout State) -> Void) {
        let due = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            change(&state)
            let snapshot = state
            let due = state.waiters.filter { $0.ready(snapshot) }.map(\.continuation)
            state.waiters.removeAll { $0.ready(snapshot) }
            return due
        }
        due.forEach { $0.resume() }
    }

    struct ProgramError: Error, CustomStringConvertible {
        var description: String
    }
}
