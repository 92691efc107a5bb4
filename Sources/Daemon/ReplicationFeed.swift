import Configuration
import Directory
import Glibc
import Replication
import SystemCalls

/// Runs the replication thread (ReplicationEngine) and hands what it
/// publishes to the reload thread: the newest layer of each directory it
/// changed, and its stats. The thread writes a layer to disk before it
/// publishes it; the reload thread (which owns the journal watcher) lays it
/// over the directory in a new set as soon as the eventfd wakes it.
///
/// Threading: created and started by the service before the reload thread
/// runs, then drained, replaced and stopped by the reload thread (the last
/// one stopped by the service after that thread is joined); `publish` runs
/// on the replication thread; `stats` is read by the control loop and the
/// HTTP thread.
final class ReplicationFeed {
    let config: ReplicationConfig
    let directories: [String]
    /// Readable when layers are waiting to be taken.
    let wakeFD: Int32
    private let engine: ReplicationEngine
    private var thread: pthread_t?
    private let mailbox: Locked<Mailbox>

    private struct Mailbox {
        var layers: [String: ReplicaState] = [:]
        /// When the changes in `layers` were made (milliseconds since 1970).
        var made: [Int64] = []
        var stats: ReplicationStats
    }

    /// From when a change was made on its node to when it was in force here.
    let delays = Locked(DelayHistogram())

    /// The layers as they are on disk.
    let initialLayers: [String: ReplicaState]

    init(config: ReplicationConfig, directories: [String], stateDirectory: String, logger: Logger) throws(ServiceError) {
        self.config = config
        self.directories = directories
        let wakeFD: Int32
        do { wakeFD = try Poll.makeEventCounter() } catch { throw ServiceError("eventfd for replication: \(error)") }
        self.wakeFD = wakeFD
        var initial = ReplicationStats()
        initial.directories = directories.map { ReplicationStats.Directory(name: $0) }
        let mailbox = Locked(Mailbox(stats: initial))
        self.mailbox = mailbox
        do throws(ReplicationStartError) {
            engine = try ReplicationEngine(config: config, directories: directories, stateDirectory: stateDirectory,
                                           log: { level, text in logger.log(level, "replication: " + text) },
                                           publish: { states, made, stats in
                                               mailbox.withLock { box in
                                                   for (name, state) in states { box.layers[name] = state }
                                                   if box.made.count < 100_000 { box.made += made }
                                                   box.stats = stats
                                               }
                                               Poll.post(wakeFD)
                                           })
        } catch {
            close(wakeFD)
            throw ServiceError(error.description)
        }
        var layers: [String: ReplicaState] = [:]
        for (name, state) in engine.initialStates { layers[name] = state }
        initialLayers = layers
        mailbox.withLock { box in
            for i in box.stats.directories.indices {
                let state = layers[box.stats.directories[i].name] ?? ReplicaState()
                box.stats.directories[i].appliedRevision = state.revision
                box.stats.directories[i].entries = state.count
            }
        }
    }

    deinit { close(wakeFD) }

    func start() throws(ServiceError) {
        var thread = pthread_t()
        let rc = pthread_create(&thread, nil, { raw in
            let engine = Unmanaged<ReplicationEngine>.fromOpaque(raw!).takeRetainedValue()
            engine.run()
            return nil
        }, Unmanaged.passRetained(engine).toOpaque())
        guard rc == 0 else { throw ServiceError("cannot start the replication thread: \(String(cString: strerror(rc)))") }
        self.thread = thread
    }

    /// Waits until every directory has caught up with etcd, at most `seconds`.
    func waitForCatchUp(_ seconds: Double) -> Bool {
        let deadline = monotonicNow() + seconds
        while monotonicNow() < deadline {
            if stats.allCaughtUp { return true }
            usleep(10_000)
        }
        return stats.allCaughtUp
    }

    /// The layers published since the last call (empty when none), and
    /// when the changes in them were made.
    func take() -> (layers: [String: ReplicaState], made: [Int64]) {
        Poll.drain(wakeFD)
        return mailbox.withLock { box in
            let taken = (box.layers, box.made)
            box.layers = [:]
            box.made = []
            return taken
        }
    }

    /// Counts the delays of changes made at `made` that are in force now.
    func inForce(_ made: [Int64]) {
        guard !made.isEmpty else { return }
        let now = ReplicatedValue.now()
        delays.withLock { histogram in
            // Clocks out of step can put a change in the future: count it as 0.
            for time in made { histogram.observe(Double(max(0, now - time)) / 1000) }
        }
    }

    var stats: ReplicationStats { mailbox.withLock { $0.stats } }

    /// What `lookupd stats` and /metrics show of replication.
    struct Report {
        var stats: ReplicationStats
        var delays: DelayHistogram
    }

    var report: Report { Report(stats: stats, delays: delays.withLock { $0 }) }

    /// Whether the token file still says what the thread was started with.
    var credentialsUnchanged: Bool { engine.credentialsUnchanged() }

    /// Stops the thread and waits for it.
    func stop() {
        engine.stop()
        if let thread { pthread_join(thread, nil) }
        thread = nil
    }
}

/// Seconds, in the buckets of `lookupd_replication_delay_seconds`.
struct DelayHistogram {
    static let bounds: [Double] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]
    /// Per bound (not cumulative), then one for above the last.
    private(set) var counts = [UInt64](repeating: 0, count: bounds.count + 1)
    private(set) var sum = 0.0
    private(set) var count: UInt64 = 0

    mutating func observe(_ seconds: Double) {
        let bucket = DelayHistogram.bounds.firstIndex { seconds <= $0 } ?? DelayHistogram.bounds.count
        counts[bucket] += 1
        sum += seconds
        count += 1
    }
}
