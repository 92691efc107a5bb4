import Answering
import Synchronization
import SystemCalls

/// The serving set in force, swapped whole on reload.
///
/// Workers read `generation` (one acquiring atomic load) after each receive and take
/// the lock only when it changed, so a reload costs the hot path nothing
/// until it happens; a worker keeps its reference to the old set until it
/// has finished the batch in hand.
///
/// Threading: any thread; the reload thread replaces, workers and the HTTP thread read.
public final class CurrentSet: Sendable {
    private let box: Locked<ServingSet>
    private let published: Atomic<UInt64>

    init(_ set: ServingSet) {
        box = Locked(set)
        published = Atomic(set.generation)
    }

    var generation: UInt64 { published.load(ordering: .acquiring) }

    func get() -> ServingSet { box.withLock { $0 } }

    func replace(_ set: ServingSet) {
        box.withLock { $0 = set }
        published.store(set.generation, ordering: .releasing)
    }
}

/// Set once to ask every thread to stop.
///
/// Threading: any thread (a relaxed atomic).
final class StopFlag: Sendable {
    private let flag = Atomic<Bool>(false)
    var isSet: Bool { flag.load(ordering: .relaxed) }
    func set() { flag.store(true, ordering: .relaxed) }
}
