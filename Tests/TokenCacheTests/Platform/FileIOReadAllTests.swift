import Foundation
import Testing
@testable import TokenCacheCore
@testable import TokenCachePlatform
#if canImport(Glibc)
import Glibc
#endif
import TokenCacheTestSupport

/// `FileIO.readAll` reads into a buffer sized from `fstat` (not zero-filled first) and grows it
/// when more comes: every byte read, and only those, is returned.
@Suite("FileIO.readAll returns exactly the bytes read", .harness)
struct FileIOReadAllTests {
    static func bytes(_ count: Int) -> Data { Data((0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }) }

    @Test("A regular file, empty or not, comes back byte for byte; from 4 MiB on it is read into huge pages, at their boundaries too",
          arguments: [0, 1, 4095, 4096, 70_001, HugePageBuffer.minimumFileSize - 1, HugePageBuffer.minimumFileSize,
                      HugePageBuffer.minimumFileSize + 1, (6 << 20) - 1, 6 << 20, (6 << 20) + 3])
    func regularFile(size: Int) throws {
        let directory = try TestEnvironment.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("file").path
        try Self.bytes(size).write(to: URL(fileURLWithPath: path))
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        try #require(descriptor >= 0)
        defer { close(descriptor) }
        #expect(try FileIO.readAll(descriptor, path: path) == Self.bytes(size))
    }

    @Test("A pipe (fstat says 0 bytes) longer than the first buffer comes back whole: the buffer grows")
    func pipeBeyondTheFirstBuffer() throws {
        var ends: [Int32] = [0, 0]
        try #require(pipe(&ends) == 0)
        let expected = Self.bytes(200_003)
        let readEnd = ends[0], writeEnd = ends[1]
        let writer = Thread {
            expected.withUnsafeBytes { buffer in
                var written = 0
                while written < buffer.count {
                    let count = write(writeEnd, buffer.baseAddress! + written, buffer.count - written)
                    if count <= 0 { break }
                    written += count
                }
            }
            close(writeEnd)
        }
        writer.start()
        defer { close(readEnd) }
        #expect(try FileIO.readAll(readEnd, path: "a pipe") == expected)
    }
}
