#ifndef TOKENCACHE_CMALLOC_SHIM_H
#define TOKENCACHE_CMALLOC_SHIM_H
// glibc's malloc tuning (mallopt), which the Glibc module does not export, and the addresses of
// its heaps, for asking the kernel for transparent huge pages there (see ProcessMemory.swift);
// and the other process-level glibc calls Swift cannot make directly: secure_getenv, prctl.
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/prctl.h>

// glibc declares it only under _GNU_SOURCE, which the Glibc module is built without.
extern char *secure_getenv(const char *name);
/// getenv, but NULL in secure-execution mode (setuid, setgid, file capabilities: AT_SECURE).
static inline const char *tc_secure_getenv(const char *name) { return secure_getenv(name); }

/// prctl is variadic, so Swift cannot call it: whether the process may dump core (and be
/// ptrace-attached or have /proc/<pid>/mem read by same-uid processes). Sets 0 or 1; returns prctl's result.
static inline int tc_set_dumpable(int dumpable) { return prctl(PR_SET_DUMPABLE, (unsigned long)dumpable, 0UL, 0UL, 0UL); }
/// 1 (or 2, suid_dumpable) when the process is dumpable, 0 when not, -1 on error.
static inline int tc_get_dumpable(void) { return prctl(PR_GET_DUMPABLE, 0UL, 0UL, 0UL, 0UL); }

/// Grows the main heap (the program break) by at least `reserve` bytes of address space, without
/// touching it, and returns in `start`/`end` the part that begins at least `keepSmall` bytes past
/// the break as it was. Returns 0, or -1 when the heap did not grow (the block was mapped apart:
/// `reserve` is above the mmap threshold, or malloc is not glibc's).
static inline int tc_grow_main_heap(size_t reserve, size_t keepSmall, uintptr_t *start, uintptr_t *end) {
    uintptr_t before = (uintptr_t)sbrk(0);
    void *block = malloc(reserve);
    if (block == NULL) return -1;
    __asm__ volatile("" : : "r"(block) : "memory");  // a real allocation: not elided with the free
    uintptr_t after = (uintptr_t)sbrk(0);
    free(block);  // back to the top of the heap, which keeps it (trim threshold permitting)
    if (after < before + reserve) return -1;
    *start = before + keepSmall;
    *end = after;
    return 0;
}

/// The start of the heap the calling thread's arena allocates from, or 0 when that is the main
/// heap. glibc places every heap of a thread arena at a multiple of its maximum size (64 MiB on
/// 64-bit), so a block from the arena tells where its heap starts.
static inline uintptr_t tc_thread_arena_heap(uintptr_t heapMaximumSize) {
    void *probe = malloc(4096);  // larger than any per-thread cache bin: from the arena itself
    if (probe == NULL) return 0;
    __asm__ volatile("" : : "r"(probe) : "memory");
    uintptr_t address = (uintptr_t)probe;
    free(probe);
    extern char end;  // the end of the program's data: the main heap lies between it and the break
    if (address >= (uintptr_t)&end && address < (uintptr_t)sbrk(0)) return 0;
    return address & ~(heapMaximumSize - 1);
}
#endif
