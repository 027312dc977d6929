import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// Memory for reading a large file whole, in 2 MiB pages where the kernel has them
/// (`MADV_HUGEPAGE`; transparent huge pages in `madvise` mode, Debian's default).
///
/// Why: read(2) into fresh memory faults in every 4 KiB page first, and for a 14 MiB cache that
/// costs more than the read's copy: reading one took 6.5 ms into malloc'ed memory and 2.0 ms into
/// huge pages (Benchmarks/results/HISTORY.md). Where huge pages are off, this is plain
/// anonymous memory and costs the same as malloc.
package struct HugePageBuffer: ~Copyable {
    /// Files from this size on are read into huge pages (two of them: below that, little to save).
    package static let minimumFileSize = 4 << 20
    private static let pageSize = 2 << 20

    /// Where the buffer starts (2 MiB aligned).
    package let start: UnsafeMutableRawPointer
    /// Usable bytes from `start`.
    package let capacity: Int
    private let mapping: UnsafeMutableRawPointer
    private let mappedCount: Int

    /// Maps at least `capacity` bytes, or nil when the mapping fails.
    package init?(capacity: Int) {
        let rounded = (capacity + Self.pageSize - 1) / Self.pageSize * Self.pageSize
        // One page more than needed, so that an aligned start lies inside the mapping.
        let count = rounded + Self.pageSize
        guard let mapping = mmap(nil, count, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
              mapping != MAP_FAILED else { return nil }
        let aligned = (Int(bitPattern: mapping) + Self.pageSize - 1) / Self.pageSize * Self.pageSize
        self.mapping = mapping
        self.mappedCount = count
        self.start = UnsafeMutableRawPointer(bitPattern: aligned)!
        self.capacity = rounded
        _ = madvise(start, rounded, MADV_HUGEPAGE)  // advice only: plain pages when refused
    }

    /// The first `count` bytes as `Data` that unmaps the buffer when freed.
    package consuming func data(count: Int) -> Data {
        let mapping = self.mapping, mappedCount = self.mappedCount
        let start = self.start
        discard self
        return Data(bytesNoCopy: start, count: count, deallocator: .custom { _, _ in munmap(mapping, mappedCount) })
    }

    deinit { munmap(mapping, mappedCount) }
}
