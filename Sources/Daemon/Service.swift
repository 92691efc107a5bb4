import SystemCalls
import Configuration
import Directory
import Glibc
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
    private var loader: ServingSetLoader
    private var current: CurrentSet
    private var journals: JournalWatcher
    private let stop = StopFlag()
    private var workers: [Worker] = []
    private var threads: [pthread_t] = []
    private let notifier = SystemdNotifier()
    private var control: ControlServer?
    // Operations (docs/OPERATIONS.md): reload outcomes for the HTTP thread,
    // the log writer, the HTTP listener and its thread.
    private let status = ServiceStatus()
    private var logSink: LogSink?
    private var http: HTTPListener?
    private var httpThread: pthread_t?
    private let httpCounters = HTTPCounters()
    private let httpLatency = LatencyHistogram()

    /// Loads and verifies everything; throws a message for the operator.
    public init(options: Options) throws(ServiceError) {
        self.options = options
        let config: LookupdConfig
        do { config = try ConfigParser.load(path: options.configPath) } catch { throw ServiceError(error.description) }
        logger = Logger(level: config.logLevel)
        guard !config.listen.isEmpty else {
            throw ServiceError("\(options.configPath): no 'listen' address configured (e.g. listen = udp:127.0.0.1:5060)")
        }
        loader = ServingSetLoader(configPath: options.configPath, stateDirectory: config.stateDirectory)
        do { try loader.prepare() } catch { throw ServiceError("\(error) (set state-directory in \(options.configPath))") }
        let started = monotonicNow()
        let loaded: (set: ServingSet, warnings: [Diagnostic])
        do { loaded = try loader.load(config) } catch { throw ServiceError(error.description) }
        for warning in loaded.warnings { logger.warning("contacts: \(warning)") }
        journals = JournalWatcher(logger: logger, store: loader.store)
        current = CurrentSet(journals.attach(loaded.set))
        logger.notice("loaded \(Service.describe(loaded.set)) in \(Int((monotonicNow() - started) * 1000)) ms")
    }

    static func describe(_ set: ServingSet) -> String {
        let directories = set.screening.directories.map { "\($0.name) (\($0.file.count) numbers, \($0.file.prefixRuleCount) prefixes)" }
        let contacts = set.screening.contacts.map { "\($0.name) (\($0.count))" }
        return "directories [\(directories.joined(separator: ", "))], contacts [\(contacts.joined(separator: ", "))]"
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
        do {
            for address in config.listen { try ListenSocket.ensureFree(address) }
            for i in 0..<count {
                workers.append(try Worker(index: i, current: current, stopFlag: stop, listen: config.listen, toTagKey: toTagKey,
                                          logSink: sink))
            }
            if let address = config.operations.httpListen {
                let workers = self.workers, current = self.current, status = self.status
                let counters = httpCounters, latency = httpLatency
                let page = StatusPage(version: options.version, workers: workers, status: status, log: sink)
                http = try HTTPListener(address: address, current: current, stopFlag: stop, counters: counters, latency: latency,
                                        page: page) {
                    Service.metricsText(workers: workers, set: current.get(), status: status, log: sink, http: counters, httpLatency: latency)
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
        logger.notice("serving on \(addresses) with \(count) worker\(count == 1 ? "" : "s") (mode \(config.mode.rawValue)); control socket \(config.controlSocket)")
        notifier.send("READY=1\nSTATUS=serving on \(addresses)\nMAINPID=\(getpid())")

        controlLoop(signals: signals)

        notifier.send("STOPPING=1\nSTATUS=stopping")
        stop.set()
        for worker in workers { worker.wake() }
        http?.wake()
        for thread in threads { pthread_join(thread, nil) }
        if let httpThread { pthread_join(httpThread, nil) }
        http = nil
        workers = []
        logger.notice("stopped")
        return 0
    }

    private func controlLoop(signals: SignalDescriptor) {
        let epfd = (try? Poll.create()) ?? -1
        defer { close(epfd) }
        Poll.add(epfd, signals.fd, Poll.readable)
        if let control { Poll.add(epfd, control.fd, Poll.readable) }
        let watchdog = notifier.watchdogInterval.map { $0 / 2 }
        var lastPing = monotonicNow()
        var lastJournalPoll = monotonicNow()
        var events = [PollEvent](repeating: PollEvent(), count: 8)
        while true {
            let timeout = Int32(min(watchdog ?? 1.0, JournalWatcher.interval) * 1000)
            let n = Poll.wait(epfd, &events, timeout: timeout)
            if let watchdog, monotonicNow() - lastPing >= watchdog {
                notifier.send("WATCHDOG=1")
                lastPing = monotonicNow()
            }
            if monotonicNow() - lastJournalPoll >= JournalWatcher.interval {
                lastJournalPoll = monotonicNow()
                if let updated = journals.poll(current.get(), derive: loader.derive) { current.replace(updated) }
            }
            guard n > 0 else { continue }
            for i in 0..<Int(n) {
                let fd = events[i].descriptor
                if fd == signals.fd {
                    for signal in signals.pending() {
                        switch signal {
                        case SIGHUP:
                            _ = reload(trigger: "SIGHUP")
                        case SIGTERM, SIGINT:
                            logger.notice("received \(signal == SIGTERM ? "SIGTERM" : "SIGINT"), stopping")
                            return
                        default:
                            break
                        }
                    }
                } else if let control, fd == control.fd {
                    control.acceptAll { command in handle(command) }
                }
            }
        }
    }

    /// Loads a new set and swaps it in; on failure the old one stays.
    func reload(trigger: String) -> String {
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

    private func handle(_ command: String) -> String {
        switch command {
        case "stats":
            return Service.metricsText(workers: workers, set: current.get(), status: status, log: logSink,
                                       http: http == nil ? nil : httpCounters, httpLatency: http == nil ? nil : httpLatency)
        case "reload":
            return reload(trigger: "control socket") + "\n"
        case "ping":
            return "pong\n"
        default:
            return "error: unknown command '\(command.prefix(40))' (expected stats, reload or ping)\n"
        }
    }

    /// What `lookupd stats` prints and /metrics serves: the same text.
    static func metricsText(workers: [Worker], set: ServingSet, status: ServiceStatus, log: LogSink?,
                            http: HTTPCounters?, httpLatency: LatencyHistogram?) -> String {
        let report = StatsReport(workers: workers, set: set, uptime: monotonicNow() - status.startedAt,
                                 reloads: status.reloads.load(ordering: .relaxed),
                                 failedReloads: status.failedReloads.load(ordering: .relaxed),
                                 lastReloadError: status.lastReloadError)
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
    init(_ description: String) { self.description = description }
}
