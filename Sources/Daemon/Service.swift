import Answering
import SystemCalls
import Configuration
import Directory
import Glibc
import Replication
import SIP
import Synchronization

/// `lookupd serve`: loads the configuration, starts the workers, and runs
/// the control loop (signals, control socket, systemd notifications) on the
/// calling thread until SIGTERM or SIGINT.
///
/// Threading: `run()` owns the calling thread. Workers run on their own
/// threads; the control loop is the only writer of the current set.
public final class Service {
    public struct Options: Sendable {
        public var configPath: String
        /// What the status page says it is (`lookupd --version`).
        public var version: String
        public init(configPath: String, version: String = "unknown") {
            self.configPath = configPath
            self.version = version
        }
    }

    private let options: Options
    private let logger: Logger
    private let loader: ServingSetLoader
    private var current: CurrentSet
    private let journals: JournalWatcher
    /// Reloads and journal polling, off the control loop (started by `run`).
    private var reloads: ReloadThread?
    private var reloadThread: pthread_t?
    private let stop = StopFlag()
    private var workers: [Worker] = []
    private var threads: [pthread_t] = []
    private let notifier = SystemdNotifier()
    private var control: ControlServer?
    // Operations (docs/OPERATIONS.md): reload outcomes for the HTTP thread,
    // the log writer, the HTTP listener and its thread.
    private let status = ServiceStatus()
    /// `lookupd stats --summary`'s windows; the control loop's.
    private let verdictWindows = VerdictWindows()
    private var logSink: LogSink?
    private var http: HTTPListener?
    private var httpThread: pthread_t?
    private let httpCounters = HTTPCounters()
    private let httpLatency = LatencyHistogram()
    /// The replication thread, when `replicate` is set (docs/CLUSTER.md):
    /// set here, replaced by the reload thread on a reload, read by the
    /// control loop and the HTTP thread for the stats.
    private let replication = Locked<ReplicationFeed?>(nil)

    /// Loads and verifies everything; throws a message for the operator.
    public init(options: Options) throws(ServiceError) {
        self.options = options
        // Every error of the file at once, as check-config reports them.
        let checked = ConfigParser.check(path: options.configPath)
        guard let config = checked.config else {
            throw ServiceError(checked.errors.map(\.description).joined(separator: "\n"), diagnostics: checked.errors)
        }
        logger = Logger(level: config.logLevel)
        guard !config.listen.isEmpty else {
            throw ServiceError("\(options.configPath): no 'listen' address configured (e.g. listen = udp:127.0.0.1:5060)")
        }
        loader = ServingSetLoader(configPath: options.configPath, stateDirectory: config.stateDirectory)
        do { try loader.prepare() } catch { throw ServiceError("\(error) (set state-directory in \(options.configPath))") }
        let started = monotonicNow()
        let loaded: (set: ServingSet, warnings: [Diagnostic], skipped: [Diagnostic])
        do { loaded = try loader.load(config) } catch { throw ServiceError(error.description) }
        for warning in loaded.warnings { logger.warning("\(warning)") }
        for warning in config.exposureWarnings { logger.warning(warning) }
        if config.plan.isDefault {
            logger.warning("\(options.configPath): no numbering plan named (country = XX): reading numbers under \(config.plan), the built-in default")
        }
        journals = JournalWatcher(logger: logger, store: loader.store)
        if let settings = config.replication {
            let feed = try ReplicationFeed(config: settings, directories: config.directories.map(\.name),
                                           stateDirectory: config.stateDirectory, logger: logger)
            journals.setReplicated(feed.initialLayers)
            replication.withLock { $0 = feed }
        }
        current = CurrentSet(journals.attach(loaded.set))
        logger.notice("loaded \(Service.describe(loaded.set)) in \(Int((monotonicNow() - started) * 1000)) ms")
    }

    static func describe(_ set: ServingSet) -> String {
        let directories = set.screening.directories.map { "\($0.name) (\($0.file.count) numbers, \($0.file.prefixRuleCount) prefixes)" }
        let contacts = set.screening.contacts.map { "\($0.name) (\($0.count))" }
        let plan = set.config.plan
        var numbering = "numbering plan \(plan)\(plan.isDefault ? " (built-in default)" : "")"
        if let attribution = set.screening.attribution { numbering += ", attribution \(attribution.language)" }
        return "\(numbering); directories [\(directories.joined(separator: ", "))], contacts [\(contacts.joined(separator: ", "))]"
    }

    /// Runs until SIGTERM/SIGINT. Returns the exit status.
    public func run() throws(ServiceError) -> Int32 {
        let config = current.get().config
        raiseFileLimit()
        // The daemon never execs anything; with this (the unit also sets
        // NoNewPrivileges=) nothing running in it could gain privileges.
        ProcessSettings.forbidNewPrivileges()

        // Workers inherit this mask, so only the control loop sees the signals.
        let signals: SignalDescriptor
        do { signals = try SignalDescriptor(blocking: [SIGHUP, SIGTERM, SIGINT, SIGUSR1]) } catch {
            throw ServiceError("signalfd: \(error)")
        }
        defer { signals.close() }

        do {
            control = try ControlServer(path: config.controlSocket)
        } catch {
            throw ServiceError(error.description)
        }
        defer { control?.shutdown() }

        let count = config.workers ?? max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
        // Same key in every worker: a retransmission may land on another
        // worker and must get a byte-identical answer.
        let toTagKey = UInt64.random(in: 1...UInt64.max)
        // With http-listen, the status page lists the last blocked and identified calls from the log's queue.
        let sink = LogSink(file: config.operations.logFile.map {
            LogSink.FileSettings(path: $0, maxSize: config.operations.logFileMaxSize, keep: config.operations.logFileKeep)
        }, keepRecent: config.operations.httpListen != nil)
        do { try sink.start() } catch { throw ServiceError(error.description) }
        logSink = sink
        defer { sink.stop() }
        // After the reload thread is joined: it may have replaced the feed.
        defer { replication.withLock { $0 }?.stop() }
        do {
            for address in config.listen { try ListenSocket.ensureFree(address) }
            for i in 0..<count {
                workers.append(try Worker(index: i, current: current, stopFlag: stop, listen: config.listen, toTagKey: toTagKey,
                                          logSink: sink))
            }
            if config.udpSteering == .spread, count > 1 { try workers[0].spreadUDP(over: count, listen: config.listen) }
            if let address = config.operations.httpListen {
                let workers = self.workers, current = self.current, status = self.status
                let counters = httpCounters, latency = httpLatency
                let page = StatusPage(version: options.version, workers: workers, status: status, log: sink)
                let replication = self.replication
                http = try HTTPListener(address: address, current: current, stopFlag: stop, counters: counters, latency: latency,
                                        page: page, logger: logger, logSink: sink) {
                    Service.metricsText(workers: workers, set: current.get(), status: status, log: sink, http: counters, httpLatency: latency,
                                        replication: replication.withLock { $0 }?.report)
                }
            }
        } catch {
            workers = []
            throw ServiceError(error.description)
        }
        if let http {
            var thread = pthread_t()
            let rc = pthread_create(&thread, nil, { raw in
                let listener = Unmanaged<HTTPListener>.fromOpaque(raw!).takeRetainedValue()
                listener.run()
                return nil
            }, Unmanaged.passRetained(http).toOpaque())
            guard rc == 0 else { throw ServiceError("cannot start the HTTP thread: \(String(cString: strerror(rc)))") }
            httpThread = thread
        }
        do {
            let reloader = try ReloadThread(loader: loader, journals: journals, current: current, status: status,
                                            notifier: notifier, logger: logger, stopFlag: stop, replication: replication,
                                            configPath: options.configPath)
            // Before the first call is answered, and before the reload
            // thread takes over the journal watcher.
            if let feed = replication.withLock({ $0 }) {
                try feed.start()
                reloader.catchUp(feed, wait: config.replication?.startWait ?? 0)
            }
            var thread = pthread_t()
            let rc = pthread_create(&thread, nil, { raw in
                let reloader = Unmanaged<ReloadThread>.fromOpaque(raw!).takeRetainedValue()
                reloader.run()
                return nil
            }, Unmanaged.passRetained(reloader).toOpaque())
            guard rc == 0 else { throw ServiceError("cannot start the reload thread: \(String(cString: strerror(rc)))") }
            reloads = reloader
            reloadThread = thread
        } catch let error as ServiceError {
            throw error
        } catch {
            throw ServiceError("\(error)")
        }
        for worker in workers {
            var thread = pthread_t()
            let context = Unmanaged.passRetained(worker).toOpaque()
            let rc = pthread_create(&thread, nil, { raw in
                let worker = Unmanaged<Worker>.fromOpaque(raw!).takeRetainedValue()
                worker.run()
                return nil
            }, context)
            guard rc == 0 else { throw ServiceError("cannot start worker thread: \(String(cString: strerror(rc)))") }
            threads.append(thread)
        }
        let addresses = config.listen.map(\.description).joined(separator: ", ")
        if let address = config.operations.httpListen, let http {
            logger.notice("HTTP metrics and lookups on \(address.host.isIPv4 ? address.host.description : "[\(address.host)]"):\(http.boundPort)")
        }
        logger.notice("serving on \(addresses) with \(count) worker\(count == 1 ? "" : "s") (mode \(config.mode.rawValue), udp-steering \(config.udpSteering.rawValue)); control socket \(config.controlSocket)")
        notifier.send("READY=1\nSTATUS=serving on \(addresses)\nMAINPID=\(getpid())")

        controlLoop(signals: signals)

        notifier.send("STOPPING=1\nSTATUS=stopping")
        stop.set()
        for worker in workers { worker.wake() }
        http?.wake()
        reloads?.wake()
        for thread in threads { pthread_join(thread, nil) }
        if let httpThread { pthread_join(httpThread, nil) }
        if let reloadThread { pthread_join(reloadThread, nil) }
        http = nil
        workers = []
        logger.notice("stopped")
        return 0
    }

    /// Signals, the control socket and the watchdog. Nothing here waits: a reload runs on the
    /// reload thread and its answer is delivered when it is done, and a control client is
    /// served as its bytes come (`ControlServer`), so `lookupd stats`, SIGTERM and the
    /// watchdog are answered whatever a reload or a client is doing.
    private func controlLoop(signals: SignalDescriptor) {
        let epfd = (try? Poll.create()) ?? -1
        defer { close(epfd) }
        Poll.add(epfd, signals.fd, Poll.readable)
        if let control { Poll.add(epfd, control.fd, Poll.readable) }
        if let reloads { Poll.add(epfd, reloads.finishedFD, Poll.readable) }
        let watchdog = notifier.watchdogInterval.map { $0 / 2 }
        var lastPing = monotonicNow()
        var events = [PollEvent](repeating: PollEvent(), count: 16)
        while true {
            let timeout = Int32(min(watchdog ?? 1.0, 0.25) * 1000)
            let n = Poll.wait(epfd, &events, timeout: timeout)
            verdictWindows.sample(Worker.verdictTotals(workers), at: Int(monotonicNow()))
            if let watchdog, monotonicNow() - lastPing >= watchdog {
                notifier.send("WATCHDOG=1")
                lastPing = monotonicNow()
            }
            for i in 0..<n {
                let fd = events[i].descriptor
                if fd == signals.fd {
                    for signal in signals.pending() {
                        switch signal {
                        case SIGHUP:
                            reloads?.request("SIGHUP", client: nil)
                        case SIGTERM, SIGINT:
                            logger.notice("received \(signal == SIGTERM ? "SIGTERM" : "SIGINT"), stopping")
                            return
                        default:
                            break
                        }
                    }
                } else if let reloads, fd == reloads.finishedFD {
                    for done in reloads.takeFinished() {
                        if let client = done.client { control?.answer(id: client, done.answer, epfd: epfd) }
                    }
                } else if let control, fd == control.fd {
                    control.acceptAll(epfd: epfd)
                } else if let control, control.owns(fd) {
                    control.serve(fd, epfd: epfd) { command, client in handle(command, client: client) }
                }
            }
            control?.sweep(epfd: epfd, now: monotonicNow()) { command, client in handle(command, client: client) }
        }
    }

    /// The answer to a control command, or nil when it comes later (a reload).
    private func handle(_ command: String, client: Int) -> String? {
        switch command {
        case "stats":
            return metricsNow()
        case "stats json":
            return String(decoding: StatsJSON.json(fromExposition: metricsNow()), as: UTF8.self) + "\n"
        case "stats summary":
            let now = Int(monotonicNow())
            return String(decoding: StatsSummary.json(totals: Worker.verdictTotals(workers), windows: verdictWindows, now: now,
                                                      uptime: Int(monotonicNow() - status.startedAt), generation: current.generation),
                          as: UTF8.self) + "\n"
        case "reload", "reload json":
            guard let reloads else { return "error: no reload thread\n" }
            reloads.request("control socket", client: client, json: command == "reload json")
            return nil
        case "ping":
            return "pong\n"
        default:
            return "error: unknown command '\(command.prefix(40))' (expected stats, stats json, stats summary, reload, reload json or ping)\n"
        }
    }

    private func metricsNow() -> String {
        Service.metricsText(workers: workers, set: current.get(), status: status, log: logSink,
                            http: http == nil ? nil : httpCounters, httpLatency: http == nil ? nil : httpLatency,
                            replication: replication.withLock { $0 }?.report)
    }

    /// What `lookupd stats` prints and /metrics serves: the same text.
    static func metricsText(workers: [Worker], set: ServingSet, status: ServiceStatus, log: LogSink?,
                            http: HTTPCounters?, httpLatency: LatencyHistogram?, replication: ReplicationFeed.Report? = nil) -> String {
        let report = StatsReport(workers: workers, set: set, uptime: monotonicNow() - status.startedAt,
                                 reloads: status.reloads.load(ordering: .relaxed),
                                 failedReloads: status.failedReloads.load(ordering: .relaxed),
                                 lastReloadError: status.lastReloadError, replication: replication)
        let operations = OperationsMetrics(workers: workers, set: set, http: http, httpLatency: httpLatency, log: log)
        return report.text(appending: operations.text())
    }

    /// 10,000 concurrent TCP peers need more descriptors than the usual
    /// soft limit of 1024: take the hard limit.
    private func raiseFileLimit() {
        var limit = rlimit()
        if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max {
            limit.rlim_cur = limit.rlim_max
            setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
    }
}

public struct ServiceError: Error, CustomStringConvertible {
    public var description: String
    /// The configuration's errors (FILE:LINE each) when that is why it cannot start.
    public var diagnostics: [Diagnostic] = []
    init(_ description: String, diagnostics: [Diagnostic] = []) {
        self.description = description
        self.diagnostics = diagnostics
    }
}
