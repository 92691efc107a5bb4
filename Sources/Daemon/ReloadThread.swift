import Configuration
import Directory
import Glibc
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
/// the private directory store once started.
final class ReloadThread: @unchecked Sendable {
    /// A finished reload's answer for the control client that asked (nil: a signal asked).
    struct Finished {
        var client: Int?
        var answer: String
    }

    private struct Queue {
        var requests: [(trigger: String, client: Int?)] = []
        var finished: [Finished] = []
    }

    private let loader: ServingSetLoader
    private let journals: JournalWatcher
    private let current: CurrentSet
    private let status: ServiceStatus
    private let notifier: SystemdNotifier
    private let logger: Logger
    private let stopFlag: StopFlag
    private let queue = Locked(Queue())
    /// Posted to wake the loader (a request, or stop).
    private let wakeFD: Int32
    /// Posted by the loader when a reload finished; the control loop watches it.
    let finishedFD: Int32

    init(loader: ServingSetLoader, journals: JournalWatcher, current: CurrentSet, status: ServiceStatus,
         notifier: SystemdNotifier, logger: Logger, stopFlag: StopFlag) throws(SystemError) {
        self.loader = loader
        self.journals = journals
        self.current = current
        self.status = status
        self.notifier = notifier
        self.logger = logger
        self.stopFlag = stopFlag
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
    func request(_ trigger: String, client: Int?) {
        queue.withLock { $0.requests.append((trigger, client)) }
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
        var events = [PollEvent](repeating: PollEvent(), count: 1)
        var lastJournalPoll = monotonicNow()
        while !stopFlag.isSet {
            _ = Poll.wait(epfd, &events, timeout: Int32(JournalWatcher.interval * 1000))
            Poll.drain(wakeFD)
            if stopFlag.isSet { break }
            // Every request queued so far is answered by one reload: the files it reads are at
            // least as new as each request.
            let requests = queue.withLock { q in
                defer { q.requests = [] }
                return q.requests
            }
            if !requests.isEmpty {
                var triggers: [String] = []
                for r in requests where !triggers.contains(r.trigger) { triggers.append(r.trigger) }
                let answer = reload(trigger: triggers.joined(separator: ", "))
                queue.withLock { q in
                    for r in requests { q.finished.append(Finished(client: r.client, answer: answer)) }
                }
                Poll.post(finishedFD)
            }
            if monotonicNow() - lastJournalPoll >= JournalWatcher.interval {
                lastJournalPoll = monotonicNow()
                if let updated = journals.poll(current.get(), derive: loader.derive) { current.replace(updated) }
            }
        }
    }

    /// Loads a new set and swaps it in; on failure the old one stays.
    private func reload(trigger: String) -> String {
        notifier.reloading()
        let started = monotonicNow()
        defer { notifier.send("READY=1\nSTATUS=serving") }
        do {
            let loaded = try loader.load()
            let old = current.get().config
            if loaded.set.config.listen != old.listen || loaded.set.config.workers != old.workers
                || loaded.set.config.controlSocket != old.controlSocket || loaded.set.config.maxMessageSize != old.maxMessageSize
                || loaded.set.config.stateDirectory != old.stateDirectory
                || loaded.set.config.operations.httpListen != old.operations.httpListen
                || loaded.set.config.operations.logFile != old.operations.logFile
                || loaded.set.config.operations.logFileMaxSize != old.operations.logFileMaxSize
                || loaded.set.config.operations.logFileKeep != old.operations.logFileKeep
                || loaded.set.config.mode != old.mode || loaded.set.config.proxy.upstream != old.proxy.upstream {
                logger.warning("reload: listen, workers, control-socket, state-directory, max-message-size, http-listen, log-file, mode and upstream changes take effect on restart")
            }
            for warning in loaded.warnings { logger.warning("contacts: \(warning)") }
            if loaded.set.config.exposureWarnings != old.exposureWarnings {
                for warning in loaded.set.config.exposureWarnings { logger.warning(warning) }
            }
            current.replace(journals.attach(loaded.set))
            status.reloaded()
            let message = "reloaded (\(trigger)) generation \(loaded.set.generation) in \(Int((monotonicNow() - started) * 1000)) ms: \(Service.describe(loaded.set))"
            logger.notice(message)
            return message
        } catch {
            status.reloadFailed(error.description)
            let message = "reload (\(trigger)) failed, still serving generation \(current.generation): \(error)"
            logger.error(message)
            return "error: " + message
        }
    }
}
