internal import CLinux

/// glibc malloc settings for `tokencache`, a process that reads a large cache once and exits.
/// Process-wide, so they live in the executable, never in the library (an app's heap is its
/// own business). Figures: Benchmarks/results/HISTORY.md.
enum MallocTuning {
    /// Call first thing in `main`, before any other thread starts.
    static func apply() {
        // Two arenas: the main heap and one the worker threads share (a shared arena's lock
        // made the threads describing accounts wait on each other).
        mallopt(M_ARENA_MAX, 2)
        // Grow heaps 16 MB at a time instead of a page at a time (address space, not memory).
        mallopt(M_TOP_PAD, 16 << 20)
        // Large blocks from the heap, reused, rather than a fresh mapping faulted in each time.
        mallopt(M_MMAP_THRESHOLD, 32 << 20)
    }
}
