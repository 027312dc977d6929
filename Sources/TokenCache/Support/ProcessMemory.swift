internal import CMalloc
import Glibc

/// glibc malloc tuning for processes that read a large cache once and exit, such as
/// `tokencache`: fewer page faults and lock waits when a 14 MB cache is read, parsed on two
/// threads and described on all cores. Not for long-running apps, whose heaps this would keep
/// larger than they need.
public enum ProcessMemory {
    private struct State {
        var hugePages = false
        /// Thread-arena heaps already advised.
        var advisedHeaps: Set<UInt> = []
    }
    private static let state = Locked(State())

    /// The span of glibc's thread-arena heaps, each aligned to it (HEAP_MAX_SIZE on 64-bit).
    static let threadHeapSize: UInt = 64 << 20
    /// The main heap's address space reserved for huge pages (below the mmap threshold).
    static let hugeReserve = 30 << 20

    /// Makes this process non-dumpable (`PR_SET_DUMPABLE` 0): a crash writes no core file
    /// holding decrypted tokens, and other processes of the same user can no longer attach a
    /// debugger or read its memory through /proc. Call first thing in `main`; it lasts until
    /// the process execs another program. Returns whether it took effect.
    @discardableResult
    public static func disableCoreDumps() -> Bool { tc_set_dumpable(0) == 0 }

    /// Whether this process is non-dumpable (`PR_GET_DUMPABLE` is 0): see ``disableCoreDumps()``.
    public static var coreDumpsDisabled: Bool { tc_get_dumpable() == 0 }

    /// Tunes malloc for reading large caches. Call once, first thing in `main`, before any other
    /// thread starts. Numbers are interleaved runs of `tokencache list --json` of 1,000 accounts
    /// x 3 clients on the encrypted file (same output); see Benchmarks/results/HISTORY.md.
    public static func tuneForLargeCaches() {
        // Two malloc arenas: the main heap, and one the worker threads share. A large cache is
        // parsed on two threads at once, each allocating tens of thousands of strings and
        // tables: in one shared arena they wait on its lock (72 ms instead of 62 ms without the
        // second thread).
        mallopt(M_ARENA_MAX, 2)
        // A worker arena otherwise grows by one mprotect call per page or so (2,300 calls in that
        // listing): with a 16 MB pad, its first heap is made writable 16 MB at a time, and the
        // main heap grows by 16 MB steps instead of page by page (130 brk calls -> 5). Address
        // space only: pages not touched are not resident. 56.9 ms (two arenas) -> 55.0 ms (and the pad).
        mallopt(M_TOP_PAD, 16 << 20)
        // Large blocks from that heap too, not a fresh mapping each (glibc's default from 128 KB):
        // listing reads the cache into one buffer and grows arrays and tables of 10,000 entries,
        // and every fresh mapping is faulted in page by page, then unmapped when freed or grown.
        // From the heap, freed memory is used again: 73.1 -> 67.8 ms, 2,000 fewer faults.
        // (32 MB: older glibc refuses more than half its heap size, 32 MB on 64-bit.)
        mallopt(M_MMAP_THRESHOLD, 32 << 20)
        enableHugePages()
    }

    /// Transparent huge pages (2 MiB) for the memory a large cache is read and parsed into.
    ///
    /// Even from reused heap memory, reading and parsing the cache filled 36 MB of fresh pages,
    /// each a page fault in 4 KiB pages: 9,000 faults, a sixth of the listing. Where the kernel
    /// gives huge pages only to memory that asks for them (`madvise` in
    /// /sys/kernel/mm/transparent_hugepage/enabled, the usual default), this asks for them in the
    /// main heap, from 2 MiB past its current end (a small command keeps its few pages small),
    /// and in the heaps of the threads that parse and describe large caches
    /// (``adviseCurrentThreadHeap()``): 53.2 -> 46.6 ms, 9,000 -> 1,400-2,000 faults, as with
    /// `GLIBC_TUNABLES=glibc.malloc.hugetlb=1`. Peak RSS of a cold `tokencache token` unchanged.
    /// Advice only: without transparent huge pages nothing changes.
    static func enableHugePages() {
        // Grow the main heap by 30 MB of address space (not memory) so the advice covers it,
        // and keep that part from being trimmed: a heap grown again would lose the advice.
        mallopt(M_TRIM_THRESHOLD, Int32(2 * hugeReserve))
        var start: UInt = 0, end: UInt = 0
        if tc_grow_main_heap(hugeReserve, 2 << 20, &start, &end) == 0 {
            advise(from: start, to: end)
        }
        state.withLock { $0.hugePages = true }
    }

    /// Asks for huge pages in the heap the calling thread allocates from, once per heap, when
    /// huge pages are enabled and that heap is a thread arena's (the main heap is advised up
    /// front). Returns the heap advised.
    @discardableResult
    static func adviseCurrentThreadHeap() -> UInt? {
        guard state.withLock({ $0.hugePages }) else { return nil }
        let heap = tc_thread_arena_heap(threadHeapSize)
        guard heap != 0, state.withLock({ $0.advisedHeaps.insert(heap).inserted }) else { return nil }
        advise(from: heap, to: heap + threadHeapSize)
        return heap
    }

    private static func advise(from start: UInt, to end: UInt) {
        let hugePage: UInt = 2 << 20
        let alignedStart = (start + hugePage - 1) & ~(hugePage - 1)
        guard end > alignedStart else { return }
        // Where huge pages are off, or part of the range is not mapped, nothing breaks.
        _ = madvise(UnsafeMutableRawPointer(bitPattern: alignedStart), Int(end - alignedStart), MADV_HUGEPAGE)
    }
}
