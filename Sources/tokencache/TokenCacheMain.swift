import CMalloc
import TokenCache
import TokenCacheCLI

/// The `tokencache` executable: everything lives in TokenCacheCLI.
@main
struct TokenCacheMain {
    static func main() async {
        // One malloc arena, the main heap. The commands run on a Dispatch worker thread, whose
        // own arena grows by one mprotect call per few pages: 7,700 calls, a tenth of the time,
        // to list 1,000 accounts. The few threads of a command rarely allocate at the same
        // moment, so sharing one arena costs nothing measurable. Set before they start.
        mallopt(M_ARENA_MAX, 1)
        // Connecting to the Secret Service (loading libsecret, the bus handshake, the session's
        // key exchange) overlaps parsing the command line (swift-argument-parser: 1.6-2.4 ms).
        if TokenCacheCommand.mayUseSecretService(Array(CommandLine.arguments.dropFirst())) {
            SecretServiceBackend.connectInBackground()
        }
        await TokenCacheCommand.main()
    }
}
