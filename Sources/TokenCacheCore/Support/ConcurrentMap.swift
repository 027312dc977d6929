import Dispatch
import Glibc

extension Array where Element: Sendable {
    /// `map` spread over the machine's cores, for CPU-bound work on many elements (describing
    /// 1,000 accounts for `tokencache list`): the elements are cut into a few chunks per online
    /// CPU, which Dispatch runs at once on its worker threads and the calling thread. The result
    /// is in the elements' order. Below `minimumCount` elements, or with one CPU online, it is
    /// `map`. (A process confined to fewer CPUs, by `taskset` or a cpuset, still splits the work;
    /// its chunks then take turns, at the cost of a few thread switches.)
    package func concurrentMap<T: Sendable>(minimumCount: Int, _ transform: @Sendable (Element) -> T) -> [T] {
        // The element count first: counting CPUs reads a file in /sys.
        guard count >= minimumCount else { return map(transform) }
        let cores = onlineCPUCount()
        guard cores > 1 else { return map(transform) }
        // Several chunks per core, so a core that finishes early takes another.
        let chunkCount = Swift.min(count, cores * 4)
        let chunks = Locked([[T]](repeating: [], count: chunkCount))
        DispatchQueue.concurrentPerform(iterations: chunkCount) { chunk in
            let part = self[chunk * count / chunkCount ..< (chunk + 1) * count / chunkCount].map(transform)
            chunks.withLock { $0[chunk] = part }
        }
        return chunks.withLock { $0.flatMap { $0 } }
    }
}

/// The CPUs online (`sysconf`, which reads a file in /sys: ask only when the work is large).
package func onlineCPUCount() -> Int {
    Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))
}
