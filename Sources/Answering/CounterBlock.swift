import CIntrinsics

/// A fixed block of single-writer counters: one thread adds (a relaxed load
/// and store, no locked instruction), any thread reads. The same scheme as
/// `WorkerCounters`, for the counters whose number is not a `Counter` case.
///
/// Threading: one writer thread, any number of readers.
public final class CounterBlock: @unchecked Sendable {
    @usableFromInline let slots: UnsafeMutablePointer<UInt64>
    public let count: Int

    public init(count: Int) {
        self.count = count
        // Whole cache lines, so two writers' blocks never share one.
        let padded = (count + 7) & ~7
        slots = .allocate(capacity: padded)
        slots.initialize(repeating: 0, count: padded)
    }

    deinit { slots.deallocate() }

    @inlinable
    public func add(_ index: Int, _ amount: UInt64 = 1) { lookupd_counter_add(slots + index, amount) }

    public func value(_ index: Int) -> UInt64 { lookupd_counter_load(slots + index) }
}
