import Glibc

/// A value shared between threads, guarded by a pthread mutex.
///
/// Why not `Synchronization.Mutex`: on Linux it waits on raw futexes, which
/// ThreadSanitizer cannot see, so under `scripts/sanitize thread` every
/// access it guards is reported as a race (seen in the decision log's
/// queue). pthread_mutex is intercepted by TSan, and uncontended it costs
/// the same two atomic operations.
///
/// Threading: `withLock` from any thread; never re-entered from inside `body`.
public final class Locked<Value>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value

    public init(_ value: Value) {
        self.value = value
        // Allocated, not a stored pthread_mutex_t: a mutex must not move, and
        // `&storedProperty` is not guaranteed to be its stable address.
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    public func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
