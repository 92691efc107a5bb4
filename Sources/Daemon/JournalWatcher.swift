import Answering
import Configuration
import Directory
import Glibc
import Screening
import SystemCalls

/// Brings `lookupd add` / `remove` / `compact` into the running daemon
/// without a reload: polled from the control loop, it reads only what each
/// journal gained, builds a new immutable overlay for that directory and
/// hands back a new set to swap in (workers pick it up at their next batch,
/// never waiting).
///
/// A directory file replaced on disk is picked up the same way when it is
/// a compaction of the journal being followed (its header names that
/// journal); any other change to a directory file waits for a reload, as
/// before.
///
/// Threading: the control loop's thread only.
final class JournalWatcher {
    /// How often the control loop polls: well inside the one second an
    /// addition may take to reach the answers.
    static let interval = 0.1

    private struct Tracked {
        var follower: JournalFollower
        var config: DirectoryConfig
        /// The directory file behind the copy in use.
        var loaded: DirectoryStore.Identity?
        /// A changed file already judged (and logged): not looked at again.
        var judged: DirectoryStore.Identity?
        /// The last journal error logged, so that one problem is logged once.
        var lastError: String?
    }

    private let logger: Logger
    private let store: DirectoryStore
    private var tracked: [Tracked] = []
    /// The wall clock expiring records are judged by (seconds since 1970,
    /// UTC); a test sets its own.
    private let clock: () -> Int64
    /// The replicated layers in force, by directory name (docs/CLUSTER.md):
    /// laid over every set this watcher attaches.
    private var replicated: [String: ReplicaState] = [:]

    init(logger: Logger, store: DirectoryStore, clock: @escaping () -> Int64 = wallClockSeconds) {
        self.logger = logger
        self.store = store
        self.clock = clock
    }

    /// Starts following the journals of a freshly loaded set (not yet
    /// published) and returns it with each journal laid over its
    /// directory, keeping its generation.
    func attach(_ set: ServingSet) -> ServingSet {
        tracked = []
        var screening = set.screening
        for (i, config) in set.config.directories.enumerated() {
            var entry = Tracked(follower: JournalFollower(path: JournalFormat.path(forDirectory: config.path)), config: config,
                                loaded: store.loadedIdentity(config.path))
            if let directory = poll(&entry, index: i, screening.directories[i], forced: true) {
                screening = screening.replacing(directory: i, with: directory)
            }
            if let layer = replicated[config.name] {
                screening = screening.replacing(directory: i, with: screening.directories[i].with(replicated: layer))
            }
            tracked.append(entry)
        }
        return screening === set.screening ? set : set.with(screening: screening, generation: set.generation)
    }

    /// Replaces every replicated layer (replication started, stopped or
    /// reconfigured); the next `attach` lays them over.
    func setReplicated(_ layers: [String: ReplicaState]) {
        replicated = layers
    }

    /// The set with the replication thread's new layers laid over their
    /// directories, as the next generation; nil when none applies to it.
    func applyReplicated(_ layers: [String: ReplicaState], to set: ServingSet, derive: (ServingSet, ScreeningSet) -> ServingSet) -> ServingSet? {
        var screening = set.screening
        for (name, layer) in layers {
            replicated[name] = layer
            if let i = screening.directories.firstIndex(where: { $0.name == name }) {
                screening = screening.replacing(directory: i, with: screening.directories[i].with(replicated: layer))
            }
        }
        guard screening !== set.screening else { return nil }
        let next = derive(set, screening)
        // Debug: at a thousand changes a second this would be most of the log
        // (and not even built at other levels).
        if logger.level >= .debug {
            logger.log(.debug, "replicated changes in force as generation \(next.generation): "
                        + layers.keys.sorted().map { "\($0) through revision \(layers[$0]!.revision)" }.joined(separator: ", "))
        }
        return next
    }

    /// Looks at every journal and directory file; a new set when something
    /// changed, else nil.
    func poll(_ set: ServingSet, derive: (ServingSet, ScreeningSet) -> ServingSet) -> ServingSet? {
        guard tracked.count == set.screening.directories.count else { return nil }
        var screening = set.screening
        for i in tracked.indices {
            if let directory = poll(&tracked[i], index: i, screening.directories[i], forced: false) {
                screening = screening.replacing(directory: i, with: directory)
            }
        }
        guard screening !== set.screening else { return nil }
        let next = derive(set, screening)
        logger.info("journal changes in force as generation \(next.generation): "
                    + next.screening.directories.map { "\($0.name) +\($0.overlay.count) through record \($0.overlay.lastSequence)" }.joined(separator: ", "))
        return next
    }

    /// The directory with its new overlay (and file), or nil when nothing changed.
    private func poll(_ entry: inout Tracked, index: Int, _ directory: ScreeningDirectory, forced: Bool) -> ScreeningDirectory? {
        var changed = forced
        do {
            let update = try entry.follower.poll()
            changed = changed || update.changed
            if let tail = update.newTail {
                logger.warning("journal \(entry.follower.path): torn last record ignored (\(tail)); the next lookupd add removes it")
            }
            entry.lastError = nil
        } catch {
            if entry.lastError != error.description {
                logger.error("journal \(entry.follower.path): \(error); keeping the records read before")
                entry.lastError = error.description
            }
            if !forced { return nil }
        }
        var file = directory.file
        if let replacement = compactedFile(&entry, current: directory.file) {
            file = replacement
            changed = true
        }
        // An expiring record that ended takes its change out of force: the
        // overlay is built anew without it (polled every 100 ms, so within a second).
        let now = clock()
        let expired = directory.overlay.hasExpired(at: now)
        guard changed || expired else { return nil }
        let overlay = DirectoryOverlay(journal: entry.follower.state, base: file.header, now: now)
        if !forced, !expired, file === directory.file, overlay.journalID == directory.overlay.journalID,
           overlay.lastSequence == directory.overlay.lastSequence, overlay.mergedThrough == directory.overlay.mergedThrough {
            return nil
        }
        if expired {
            logger.info("\(entry.config.name): expiring journal changes ended; \(overlay.count) journal change\(overlay.count == 1 ? "" : "s") in force")
        }
        return directory.with(file: file, overlay: overlay)
    }

    /// The new file when the configured one was replaced by a compaction of
    /// the journal being followed, verified through a private copy.
    private func compactedFile(_ entry: inout Tracked, current: DirectoryFile) -> DirectoryFile? {
        let path = entry.config.path
        guard let now = DirectoryStore.currentIdentity(path), now != entry.loaded, now != entry.judged else { return nil }
        entry.judged = now
        let header: DirectoryHeader
        do { header = try DirectoryFile.readHeader(path: path) } catch {
            // The file served may be that same damaged inode (cut in place): then nothing is
            // served from it, and saying otherwise would contradict DamageWatch's line.
            logger.warning(current.isDamaged
                ? "\(path) changed on disk and cannot be read (\(error)); nothing is answered from it until an intact file is installed"
                : "\(path) changed on disk and cannot be read (\(error)); still serving the file loaded before")
            return nil
        }
        let journalID = entry.follower.state.journalID
        let isCompaction = header.journalID != 0 && header.journalID == journalID
            && (current.header.journalID != journalID || header.journalSequence >= current.header.journalSequence)
        // The file served was truncated or rewritten in place (DamageWatch): nothing is answered
        // from it, so any file that opens is better; waiting for a reload would only prolong that.
        let replacesDamaged = current.isDamaged
        guard isCompaction || replacesDamaged else {
            logger.notice("\(path) changed on disk; it takes effect on the next reload (lookupd reload or SIGHUP)")
            return nil
        }
        do {
            let file = try store.open(entry.config)
            entry.loaded = store.loadedIdentity(path)
            if replacesDamaged && !isCompaction {
                logger.notice("\(path): new file in force in place of the damaged one (\(file.count) numbers, \(file.prefixRuleCount) prefix rules)")
                return file
            }
            logger.notice("\(path): compacted file in force (journal records through \(file.header.journalSequence) merged, \(file.count) numbers, \(file.prefixRuleCount) prefix rules)")
            return file
        } catch {
            logger.error("\(path): compacted file refused: \(error); still serving the file loaded before")
            return nil
        }
    }
}
