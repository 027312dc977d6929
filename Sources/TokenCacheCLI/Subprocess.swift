internal import CLinux
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// A child process of the CLI: standard input on /dev/null, standard output on a pipe to us,
/// standard error shared, and no other descriptor of ours (a pipe end left open in it would keep
/// a reader from ever seeing end of file; log files, a D-Bus connection).
enum Subprocess {
    /// Why a program did not start: the `posix_spawn` or `pipe` error.
    struct SpawnFailure: Error {
        var code: Int32
        var reason: String { String(cString: strerror(code)) }
    }

    /// Starts `arguments` (`executable`, else `arguments[0]` searched on PATH): its pid and the
    /// read end of its standard output, which the caller closes.
    static func spawn(_ arguments: [String], executable: String? = nil) throws(SpawnFailure) -> (pid: pid_t, output: Int32) {
        var pipeFDs: [Int32] = [0, 0]
        // Close-on-exec: a program another thread starts meanwhile must not inherit either end
        // (its copy of the write end would keep our reader from ever seeing end of file).
        guard tc_pipe_cloexec(&pipeFDs) == 0 else { throw SpawnFailure(code: errno) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, pipeFDs[1], STDOUT_FILENO)
        tc_spawn_close_from(&actions, 3)
        var pid: pid_t = 0
        let argv = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let spawned = executable.map { posix_spawn(&pid, $0, &actions, nil, argv, environ) }
            ?? posix_spawnp(&pid, arguments[0], &actions, nil, argv, environ)
        close(pipeFDs[1])
        guard spawned == 0 else {
            close(pipeFDs[0])
            throw SpawnFailure(code: spawned)
        }
        return (pid, pipeFDs[0])
    }

    /// Runs `arguments` (searched on PATH) to its end: its standard output (empty if it wrote
    /// more than `limit` bytes) and wait status.
    static func run(_ arguments: [String], limit: Int = 16 << 20) throws(SpawnFailure) -> (status: Int32, output: Data) {
        let (pid, output) = try spawn(arguments)
        let data = StandardIO.readAll(from: output, limit: limit) ?? Data()
        // Closed before the wait: a program writing past the limit then gets EPIPE and ends,
        // rather than blocking on a full pipe nobody reads while we wait for it.
        close(output)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        return (status, data)
    }
}
