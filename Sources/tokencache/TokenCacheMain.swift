import CMalloc
import TokenCache
import TokenCacheCLI

/// The `tokencache` executable: everything lives in TokenCacheCLI.
@main
struct TokenCacheMain {
    /// Synchronous on purpose: an async main hands the main thread to `dispatch_main`, which ends it
    /// with `pthread_exit` (libgcc_s loaded and the stack unwound at every start).
    static func main() {
        // One malloc arena, the main heap. The worker threads' own arenas grow by one mprotect
        // call per few pages (7,700 calls, a tenth of the time, when a listing of 1,000 accounts
        // ran on a worker). The few threads of a command rarely allocate at the same moment, so
        // sharing one arena costs nothing measurable. Set before they start.
        mallopt(M_ARENA_MAX, 1)
        // Large blocks from that heap too, not a fresh mapping each (glibc's default from 128 KB):
        // listing a 14 MB cache reads it into one buffer and grows arrays and tables of 10,000
        // entries, and every fresh mapping is faulted in page by page, then unmapped when freed
        // or grown. From the heap, freed memory is used again. Interleaved runs, 40 each:
        // list --json of 1,000 accounts x 3 on the encrypted file 73.1 -> 67.8 ms, 2,000 fewer faults.
        // (32 MB: older glibc refuses more than half its heap size, 32 MB on 64-bit.)
        mallopt(M_MMAP_THRESHOLD, 32 << 20)
        // Connecting to the Secret Service (loading libsecret, the bus handshake, the session's
        // key exchange) overlaps parsing the command line (swift-argument-parser: 1.6-2.4 ms).
        if TokenCacheCommand.mayUseSecretService(Array(CommandLine.arguments.dropFirst())) {
            SecretServiceBackend.connectInBackground()
        }
        TokenCacheCommand.main()
    }
}
