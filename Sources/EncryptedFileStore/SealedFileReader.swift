import Dispatch
import TokenCacheCore
import TokenCachePlatform
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// Reads a cache file and decrypts it in place, returning the plaintext's range only once the
/// tag has verified it (unauthenticated plaintext is wiped).
///
/// A large file is decrypted while it is read: a helper thread reads it in pieces into the
/// final buffer while this thread decrypts the pieces already there, so reading (the kernel's
/// copy and page faults) and decrypting run on two cores instead of one after the other. Nothing
/// decrypted is used before the whole file has been read and the tag checked.
enum SealedFileReader {
    struct Opened {
        /// The file's bytes, the plaintext decrypted where the ciphertext was.
        var data: Data
        var header: CacheFileFormat.Header
        /// Where the plaintext is in `data`.
        var plaintext: Range<Int>
    }

    /// - Parameters:
    ///   - key: checks the header (group, key ID) and returns the key to decrypt with.
    ///   - concurrentFrom: files from this size are read and decrypted at once.
    ///   - piece: how much the helper reads at a time.
    static func read(_ descriptor: Int32, path: String, key: (CacheFileFormat.Header) throws(TokenCacheError) -> SymmetricKey,
                     concurrentFrom threshold: Int = 1 << 20, piece: Int = 1 << 20) throws(TokenCacheError) -> Opened {
        var info = stat()
        let expected = fstat(descriptor, &info) == 0 ? max(Int(info.st_size), 0) : 0
        if expected >= threshold, expected <= FileIO.readLimit,
           let opened = try readWhileDecrypting(descriptor, path: path, expected: expected, key: key, piece: piece) {
            return opened
        }
        // Small, or it grew while being read: one read, then one decryption.
        guard lseek(descriptor, 0, SEEK_SET) == 0 else { throw FileIO.error("read", path) }
        var data = try FileIO.readAll(descriptor, path: path)
        let parsed = try CacheFileFormat.parse(data, path: path)
        let key = try key(parsed.header)
        guard let plaintext = try OpenSSL.openInPlace(&data, sealed: parsed.sealedRange, key: key, nonce: parsed.nonce,
                                                      authenticating: parsed.associatedData) else {
            throw CacheFileFormat.damaged(path)
        }
        return Opened(data: data, header: parsed.header, plaintext: plaintext)
    }

    /// The concurrent read of a file `expected` bytes long; nil when it turns out shorter or
    /// longer (the caller then reads it the plain way).
    static func readWhileDecrypting(_ descriptor: Int32, path: String, expected: Int,
                                    key: (CacheFileFormat.Header) throws(TokenCacheError) -> SymmetricKey,
                                    piece: Int) throws(TokenCacheError) -> Opened? {
        guard lseek(descriptor, 0, SEEK_SET) == 0 else { throw FileIO.error("read", path) }
        // Room past the expected end, to notice a file that grew since fstat. Not zero-filled
        // (`Data(count:)` is a calloc, whose memset and page faults would come before the first
        // read, on this thread): every byte used is read from the file first.
        let capacity = expected + 4096
        guard let buffer = malloc(capacity) else {
            throw TokenCacheError(.fileSystem, "Out of memory reading \(path) (\(capacity) bytes).", hint: "Free memory and retry; nothing was changed")
        }
        var data = Data(bytesNoCopy: buffer, count: capacity, deallocator: .free)
        let outcome = data.withUnsafeMutableBytes { raw in
            Result { () throws(TokenCacheError) -> (CacheFileFormat.Header, Range<Int>, Int)? in
                let base = raw.baseAddress!.assumingMemoryBound(to: UInt8.self)
                // The whole file on a helper thread, from its first byte, which this thread always
                // waits for before the buffer can go. Meanwhile this thread reads the key and loads
                // libcrypto (and OpenSSL's configuration) for the header.
                let progress = ReadProgress(filled: 0)
                nonisolated(unsafe) let buffer = base
                DispatchQueue.global().async {
                    var filled = 0
                    do throws(TokenCacheError) {
                        while filled < capacity {
                            // A small first piece: the header is needed first.
                            let count = try FileIO.readSome(descriptor, into: buffer + filled,
                                                            count: min(filled == 0 ? 1 << 16 : piece, capacity - filled), path: path)
                            if count == 0 { break }
                            filled += count
                            progress.advance(to: filled)
                        }
                        progress.finish(error: nil)
                    } catch {
                        progress.finish(error: error)
                    }
                }
                // The header and nonce first.
                let startLength = 14 + CacheFileFormat.maximumHeaderLength + OpenSSL.nonceByteCount
                var state = progress.state
                while state.filled < startLength && !state.finished { state = progress.wait(beyond: state.filled) }
                let start: CacheFileFormat.Start, decryptor: GCMDecryptor
                do throws(TokenCacheError) {
                    if let error = state.error { throw error }
                    guard state.filled >= startLength else {  // shorter than it was: read the plain way
                        progress.waitUntilFinished()
                        return nil
                    }
                    start = try CacheFileFormat.parseStart(Data(bytes: base, count: startLength), path: path)
                    decryptor = try GCMDecryptor(key: try key(start.header), nonce: start.nonce, authenticating: start.associatedData)
                } catch {
                    progress.waitUntilFinished()
                    throw error
                }
                var decrypted = start.sealedOffset
                func wipe() { OpenSSL.cleanse(base + start.sealedOffset, count: max(decrypted - start.sealedOffset, 0)) }
                while true {
                    // The last 16 bytes read may be the tag: they are never decrypted.
                    let end = state.filled - OpenSSL.tagByteCount
                    if end > decrypted {
                        do throws(TokenCacheError) {
                            try decryptor.decrypt(base + decrypted, count: end - decrypted)
                        } catch {
                            progress.waitUntilFinished()
                            wipe()
                            throw error
                        }
                        decrypted = end
                    }
                    if state.finished { break }
                    state = progress.wait(beyond: state.filled)
                }
                if let error = state.error {
                    wipe()
                    throw error
                }
                guard state.filled < capacity else {  // it grew
                    wipe()
                    return nil
                }
                guard state.filled >= start.sealedOffset + OpenSSL.tagByteCount else {
                    wipe()
                    throw CacheFileFormat.damaged(path)
                }
                let tag = UnsafeRawBufferPointer(start: base + state.filled - OpenSSL.tagByteCount, count: OpenSSL.tagByteCount)
                guard decryptor.finish(tag: tag) else {
                    wipe()
                    throw CacheFileFormat.damaged(path)
                }
                return (start.header, start.sealedOffset..<decrypted, state.filled)
            }
        }
        guard let (header, plaintext, length) = try outcome.get() else { return nil }
        data.count = length
        return Opened(data: data, header: header, plaintext: plaintext)
    }
}

/// How far the helper thread has read, for the thread decrypting behind it.
private final class ReadProgress: @unchecked Sendable {
    // @unchecked: the state is Locked; the semaphore is thread-safe.
    struct State {
        var filled: Int
        var finished = false
        var error: TokenCacheError?
    }
    private let current: Locked<State>
    private let changed = DispatchSemaphore(value: 0)

    init(filled: Int) { current = Locked(State(filled: filled)) }

    var state: State { current.withLock { $0 } }
    var filled: Int { state.filled }

    func advance(to filled: Int) {
        current.withLock { $0.filled = filled }
        changed.signal()
    }

    func finish(error: TokenCacheError?) {
        current.withLock { $0.finished = true; $0.error = error }
        changed.signal()
    }

    /// Returns once more than `filled` bytes are read, or reading has finished.
    func wait(beyond filled: Int) -> State {
        while true {
            let state = self.state
            if state.finished || state.filled > filled { return state }
            changed.wait()
        }
    }

    func waitUntilFinished() {
        while !state.finished { changed.wait() }
    }
}
