import Dispatch

/// Runs `body` for every element at the same time, the calling thread taking a share, and
/// returns the results in element order; the error of the first failing element is rethrown
/// once all have finished.
///
/// For blocking calls whose cost is a round trip to another process (D-Bus calls to the Secret
/// Service): sent together, their waits overlap instead of adding up. One element runs inline.
func concurrentMap<Element: Sendable, Output: Sendable>(
    _ elements: [Element], _ body: @Sendable (Element) throws(TokenCacheError) -> Output
) throws(TokenCacheError) -> [Output] {
    guard elements.count > 1 else { return try elements.map(body) }
    let results = ResultSlots<Output>(count: elements.count)
    DispatchQueue.concurrentPerform(iterations: elements.count) { index in
        results[index] = Result { () throws(TokenCacheError) in try body(elements[index]) }
    }
    return try results.values()
}

/// Runs `first` and `second` at the same time (see ``concurrentMap(_:_:)``); rethrows the
/// first one's error before the second's.
func concurrently<First: Sendable, Second: Sendable>(
    _ first: @Sendable () throws(TokenCacheError) -> First, _ second: @Sendable () throws(TokenCacheError) -> Second
) throws(TokenCacheError) -> (First, Second) {
    let firstResult = ResultSlots<First>(count: 1), secondResult = ResultSlots<Second>(count: 1)
    DispatchQueue.concurrentPerform(iterations: 2) { index in
        if index == 0 {
            firstResult[0] = Result { () throws(TokenCacheError) in try first() }
        } else {
            secondResult[0] = Result { () throws(TokenCacheError) in try second() }
        }
    }
    return (try firstResult.values()[0], try secondResult.values()[0])
}

/// One result slot per concurrent iteration.
private final class ResultSlots<Output>: @unchecked Sendable {
    // @unchecked: each iteration writes its own slot, and concurrentPerform returns only after
    // every iteration has finished, before the slots are read.
    private let slots: UnsafeMutableBufferPointer<Result<Output, TokenCacheError>?>

    init(count: Int) {
        slots = .allocate(capacity: count)
        slots.initialize(repeating: nil)
    }

    deinit {
        _ = slots.deinitialize()
        slots.deallocate()
    }

    subscript(index: Int) -> Result<Output, TokenCacheError>? {
        get { slots[index] }
        set { slots[index] = newValue }
    }

    /// The outputs in order, or the first error.
    func values() throws(TokenCacheError) -> [Output] {
        try slots.map { slot throws(TokenCacheError) in try slot!.get() }
    }
}
