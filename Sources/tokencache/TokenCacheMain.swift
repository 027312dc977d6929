import CMalloc
import TokenCacheCLI

/// The `tokencache` executable: everything lives in TokenCacheCLI.
@main
struct TokenCacheMain {
    static func main() async {
        // One malloc arena, grown 16 MB at a time. The commands run on a Dispatch worker thread,
        // whose own arena grows one mprotect call at a time: 7,700 calls (a tenth of the run)
        // when listing 1,000 accounts. Nothing here allocates from several threads at once.
        // Set before any other thread allocates.
        mallopt(M_ARENA_MAX, 1)
        mallopt(M_TOP_PAD, 16 << 20)
        await TokenCacheCommand.main()
    }
}
