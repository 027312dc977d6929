import CMalloc
import TokenCache
import TokenCacheCLI

/// The `tokencache` executable: everything lives in TokenCacheCLI.
@main
struct TokenCacheMain {
    /// Synchronous on purpose: an async main hands the main thread to `dispatch_main`, which ends it
    /// with `pthread_exit` (libgcc_s loaded and the stack unwound at every start).
    static func main() {
        // Two malloc arenas: the main heap, and one the worker threads share. A large cache is
        // parsed on two threads at once, each allocating tens of thousands of strings and
        // tables: in one shared arena they wait on its lock (listing 1,000 accounts x 3 took
        // 72 ms instead of 62 ms without the second thread). Set before any thread starts.
        mallopt(M_ARENA_MAX, 2)
        // A worker arena otherwise grows by one mprotect call per page or so (2,300 calls in that
        // listing): with a 16 MB pad, its first heap is made writable 16 MB at a time, and the
        // main heap grows by 16 MB steps instead of page by page (130 brk calls -> 5). Address
        // space only: pages not touched are not resident. Listing 1,000 accounts x 3, 30
        // interleaved runs: 56.9 ms (two arenas) -> 55.0 ms (and the pad).
        mallopt(M_TOP_PAD, 16 << 20)
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
