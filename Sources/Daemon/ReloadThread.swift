import Configuration
import Directory
import Glibc
import Replication
import SystemCalls

/// Builds new serving sets off the control loop: reloads (SIGHUP, `lookupd reload`) and the
/// journal polling that brings `lookupd add` / `remove` / `compact` in. A reload reads files
/// (the config, contacts, a directory copied into the state directory and verified), which
/// takes as long as the files are large; on this thread the control loop meanwhile answers
/// `lookupd stats`, signals and the systemd watchdog, and requests arriving during a reload are
/// answered by the next one.
///
/// Threading: `request`, `takeFinished` and `wake` from the control loop; everything else on
/// the loader's own thread (`run`), which alone touches the loader, the journal watcher and
/// the private directory store once started. It also lays the replication thread's layers
/// over the set (woken by the feed's eventfd) and restarts that thread when a reload
/// changes `replicate` or the directory names.
final class ReloadThread: @unchecked Sendable {
    /// A finished reload's answer for the control client that asked (nil: a signal asked).
    struct Finished {
        var client: Int?
        /// The client asked for the report as JSON (`reload json`).
        var json: Bool
        var report: ReloadReport

        /// The answer the client asked for, one line of JSON or the text.
        var answer: String { json ? String(decoding: report.json(), as: UTF8.self) + "\n" : report.text }
    }

    private struct Queue {
        var requests: [(trigger: String, client: Int?, json: Bool)] = []
        var finished: [Finished] = []
    }

    private let loader: ServingSetLoader
    private let journals: JournalWatcher
    private let current: CurrentSet
    private let status: ServiceStatus
    private let notifier: SystemdNotifier
    private let logger: Logger
    private let stopFlag: StopFlag
    /// The running replication thread; replaced here only (after `run` starts).
    private let replication: Locked<ReplicationFeed?>
    private let configPath: String
    /// What the sockets, workers and files opened at start were made from.
    private let startedConfig: LookupdConfig
    private let queue = Locked(Queue())
    private lazy var damage = DamageWatch(logger: logger)
    /// Posted to wake the loader (a request, or stop).
    private let wakeFD: Int32
    /// Posted by the loader when a reload finished; the control loop watches it.
    let finishedFD: Int32

    init(loader: ServingSetLoader, journals: JournalWatcher, current: CurrentSet, status: ServiceStatus,
         notifier: SystemdNotifier, logger: Logger, stopFlag: StopFlag, replication: Locked<ReplicationFeed?>,
         configPath: String) throws(SystemError) {
        self.loader = loader
        self.journals = journals
        self.current = current
        self.status = status
        self.notifier = notifier
        self.logger = logger
        self.stopFlag = stopFlag
        self.replication = replication
        self.configPath = configPath
        startedConfig = current.get().config
        do {
            wakeFD = try Poll.makeEventCounter()
            finishedFD = try Poll.makeEventCounter()
        } catch {
            throw SystemError("eventfd for the reload thread", error.rawValue)
        }
        // A stop must not wait for gigabytes of a directory to be copied.
        loader.store.cancelled = { [stopFlag] in stopFlag.isSet }
    }

    deinit {
        close(wakeFD)
        close(finishedFD)
    }

    /// Asks for a reload; `client` gets the answer through `takeFinished`.
    func request(_ trigger: String, client: Int?, json: Bool = false) {
        queue.withLock { $0.requests.append((trigger, client, json)) }
        Poll.post(wakeFD)
    }

    /// The answers of the reloads finished since the last call.
    func takeFinished() -> [Finished] {
        Poll.drain(finishedFD)
        return queue.withLock { q in
            defer { q.finished = [] }
            return q.finished
        }
    }

    /// Wakes the loader (after the stop flag is set).
    func wake() { Poll.post(wakeFD) }

    func run() {
        let epfd = (try? Poll.create()) ?? -1
        defer { close(epfd) }
        Poll.add(epfd, wakeFD, Poll.readable)
        var events = [PollEvent](repeating: PollEvent(), count: 2)
        var lastJournalPoll = monotonicNow()
        // The feed whose eventfd is registered: compared by identity, as a
        // new feed's eventfd may reuse the number of the one a reload closed.
        weak var registered: ReplicationFeed? = nil
        while !stopFlag.isSet {
            let feed = replication.withLock { $0 }
            if registered !== feed {
                if let old = registered { Poll.remove(epfd, old.wakeFD) }
                if let feed { Poll.add(epfd, feed.wakeFD, Poll.readable) }
                registered = feed
            }
            _ = Poll.wait(epfd, &events, timeout: Int32(JournalWatcher.interval * 1000))
            Poll.drain(wakeFD)
            if stopFlag.isSet { break }
            // The feed's eventfd brings its layers at once; the timeout only bounds the delay.
            if let feed { applyReplicated(feed) }
            // Every request queued so far is answered by one reload: the files it reads are at
            // least as new as each request.
            let requests = queue.withLock { q in
                defer { q.requests = [] }
                return q.requests
            }
            if !requests.isEmpty {
                var triggers: [String] = []
                for r in requests where !triggers.contains(r.trigger) { triggers.append(r.trigger) }
                let report = reload(trigger: triggers.joined(separator: ", "))
                queue.withLock { q in
                    for r in requests { q.finished.append(Finished(client: r.client, json: r.json, report: report)) }
                }
                Poll.post(finishedFD)
            }
            if monotonicNow() - lastJournalPoll >= JournalWatcher.interval {
                lastJournalPoll = monotonicNow()
                // Damage first: a file marked damaged here is replaced by the poll below as soon
                // as another file is at its path.
                damage.watch(current.get())
                if let updated = journals.poll(current.get(), derive: loader.derive) { current.replace(updated) }
            }
        }
    }

    /// Loads a new set and swaps it in; on failure the old one stays.
    private func reload(trigger: String) -> ReloadReport {
        notifier.reloading()
        let started = monotonicNow()
        defer { notifier.send("READY=1\nSTATUS=serving") }
        do throws(LoadFailure) {
            let loaded = try loader.load()
            let old = current.get()
            for warning in loaded.warnings { logger.warning("\(warning)") }
            do { try reconfigureReplication(loaded.set.config) } catch {
                throw LoadFailure.config(Diagnostic(file: configPath, line: 0, message: error.description))
            }
            if loaded.set.config.exposureWarnings != old.config.exposureWarnings {
                for warning in loaded.set.config.exposureWarnings { logger.warning(warning) }
            }
            current.replace(journals.attach(loaded.set))
            status.reloaded()
            let report = ReloadReport(trigger: trigger, started: startedConfig, old: old, new: loaded.set, warnings: loaded.warnings,
                                      skipped: loaded.skipped, milliseconds: Int((monotonicNow() - started) * 1000))
            if !report.needsRestart.isEmpty {
                logger.warning("reload: \(report.needsRestart.joined(separator: ", ")) changed; that takes effect on restart")
            }
            logger.notice("reloaded (\(trigger)) generation \(loaded.set.generation) in \(report.milliseconds) ms: \(Service.describe(loaded.set))")
            return report
        } catch {
            status.reloadFailed(error.description)
            let report = ReloadReport(trigger: trigger, failedWith: error.description, serving: current.generation,
                                      milliseconds: Int((monotonicNow() - started) * 1000))
            logger.error(String(report.text.dropFirst("error: ".count).dropLast()))
            return report
        }
    }

    // MARK: - Replication

    /// Waits (at most `wait` seconds) for the replication thread to catch
    /// up with etcd before the first call is answered, then lays what it
    /// has over the set. Past the wait, the node serves its local layers
    /// (complete through an older revision) and catches up in the background.
    /// Called by the service before `run` starts.
    func catchUp(_ feed: ReplicationFeed, wait: Double) {
        notifier.send("STATUS=catching up with etcd")
        let started = monotonicNow()
        let caughtUp = feed.waitForCatchUp(wait)
        applyReplicated(feed)
        let revisions = feed.stats.directories.map { $0.appliedRevision == 0 ? "\($0.name): none yet" : "\($0.name) at revision \($0.appliedRevision)" }
            .joined(separator: ", ")
        if caughtUp {
            logger.notice("replication: caught up with etcd in \(Int((monotonicNow() - started) * 1000)) ms: \(revisions)")
        } else {
            logger.warning("replication: not caught up with etcd after \(wait) s (start-wait); answering from the local replicated layers (\(revisions)) and catching up in the background")
        }
    }

    private func applyReplicated(_ feed: ReplicationFeed) {
        let (layers, made) = feed.take()
        guard !layers.isEmpty else { return }
        if let updated = journals.applyReplicated(layers, to: current.get(), derive: loader.derive) { current.replace(updated) }
        feed.inForce(made)
    }

    /// After a reload: starts, stops or restarts the replication thread
    /// when `replicate` or the directory names changed. Throws (the reload
    /// fails, the old set stays) when the new thread cannot start.
    private func reconfigureReplication(_ config: LookupdConfig) throws(ServiceError) {
        let names = config.directories.map(\.name)
        let running = replication.withLock { $0 }
        if let feed = running, feed.config == config.replication, feed.directories == names, feed.credentialsUnchanged { return }
        if let settings = config.replication {
            // What can be checked before the running thread is stopped.
            do { _ = try EtcdClient(settings) } catch { throw ServiceError("replicate: \(error)") }
        }
        running?.stop()
        replication.withLock { $0 = nil }
        journals.setReplicated([:])
        guard let settings = config.replication else {
            logger.notice("replication: off (replicate removed from the configuration)")
            return
        }
        let feed = try ReplicationFeed(config: settings, directories: names, stateDirectory: config.stateDirectory, logger: logger)
        journals.setReplicated(feed.initialLayers)
        try feed.start()
        replication.withLock { $0 = feed }
        logger.notice("replication: restarted for directories \(names.joined(separator: ", "))")
    }
}
