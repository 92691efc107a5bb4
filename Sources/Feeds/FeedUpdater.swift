import Configuration
import Directory
import FeedRecords
import Glibc
import SystemCalls
import TextRules

/// `lookupd update`: every selected feed is checked (FeedCheck); each directory file that a
/// changed feed feeds is rebuilt from all of its feeds, verified and installed
/// (DirectoryInstaller); then the running daemon is asked to reload once.
///
/// Layout of `STATE-DIRECTORY/feeds/`:
///
///     NAME.state            what is installed, what the publisher last served, how the last try went
///     NAME.data             the last download accepted, as downloaded (rebuilds start from it)
///     NAME.data.previous    the one before, for rollback
///     update.lock           one update at a time
///     .work-PID/            downloads and unpacked lists in progress, removed at the end
///
/// Threading: one updater per process, used from one thread.
public final class FeedUpdater {
    public typealias Log = (FeedLogLevel, String) -> Void
    public typealias Reloader = () -> ReloadOutcome

    let config: LookupdConfig
    let store: FeedRecordStore
    let log: Log
    let reloader: Reloader
    let compiler: FeedCompiler

    public init(config: LookupdConfig, log: @escaping Log, reloader: @escaping Reloader) {
        self.config = config
        self.store = FeedRecordStore(stateDirectory: config.stateDirectory)
        self.log = log
        self.reloader = reloader
        self.compiler = FeedCompiler(plan: config.plan)
    }

    func dataPath(_ feed: String) -> String { "\(store.folder)/\(feed).data" }
    func previousDataPath(_ feed: String) -> String { "\(store.folder)/\(feed).data.previous" }

    /// The feeds writing into each directory file, in configuration order (first wins).
    var groups: [(target: String, feeds: [FeedConfig])] {
        var result: [(target: String, feeds: [FeedConfig])] = []
        for feed in config.feeds {
            let target = config.target(of: feed)
            if let i = result.firstIndex(where: { $0.target == target }) { result[i].feeds.append(feed) } else { result.append((target, [feed])) }
        }
        return result
    }

    /// Throws only when nothing could be attempted (no such feed, no state folder, another
    /// update running); a feed that fails is reported in the result.
    public func update(_ options: FeedUpdateOptions) throws(FeedError) -> FeedUpdateResult {
        let selected = try select(options.feeds)
        let session = try Session(folder: store.folder)
        defer { session.finish() }

        var result = FeedUpdateResult()
        for group in groups {
            let chosen = group.feeds.filter { selected.contains($0.name) }
            if chosen.isEmpty { continue }
            // A run killed while writing leaves full-size temporaries beside the target;
            // whatever this run does, they go (writeFileAtomically removes them too, but only
            // when it writes the same file again).
            for name in [group.target, DirectoryInstaller.newPath(group.target), DirectoryInstaller.previousPath(group.target)] {
                AtomicFile.removeStaleTemporaries(folder: FileOperations.folder(of: name), name: FileOperations.fileName(of: name))
            }
            updateGroup(group.target, feeds: group.feeds, chosen: chosen, options: options, session: session, result: &result)
        }
        // Lists installed by an earlier run whose reload the daemon refused (a full state
        // disk, a bad config at the time) are still waiting: without asking again, an
        // unchanged feed would leave the daemon on the old list for good.
        let waiting = config.feeds.filter { selected.contains($0.name) && (store.read($0.name)?.reloadPending ?? 0) > 0 }
        if options.reload && (!result.installed.isEmpty || !waiting.isEmpty) {
            if result.installed.isEmpty {
                log(.notice, "daemon: asking again to load what an earlier run installed (\(waiting.map(\.name).joined(separator: ", ")): that reload was refused)")
            }
            result.reload = reload()
            let installedFeeds = config.feeds.filter { result.installed.contains(config.target(of: $0)) }
            let refused: Bool
            if case .failed = result.reload { refused = true } else { refused = false }
            for feed in installedFeeds + waiting.filter({ w in !installedFeeds.contains { $0.name == w.name } }) {
                guard var record = store.read(feed.name) else { continue }
                record.reloadPending = refused ? (record.reloadPending > 0 ? record.reloadPending : unixTime()) : 0
                do { try store.write(record) } catch { log(.error, "\(feed.name): \(error)") }
            }
        }
        return result
    }

    func select(_ names: [String]) throws(FeedError) -> Set<String> {
        guard !config.feeds.isEmpty else {
            throw FeedError("no feed is configured\(config.path.map { " in \($0)" } ?? ""); add a line such as: feed = spamco https://feeds.example/spam.csv.gz into=/var/lib/lookupd/directories/spam.lkd")
        }
        if names.isEmpty { return Set(config.feeds.map(\.name)) }
        for name in names where !config.feeds.contains(where: { $0.name == name }) {
            throw FeedError("no feed named '\(name)' (configured: \(config.feeds.map(\.name).joined(separator: ", ")))")
        }
        return Set(names)
    }

    private func updateGroup(_ target: String, feeds: [FeedConfig], chosen: [FeedConfig], options: FeedUpdateOptions,
                             session: Session, result: inout FeedUpdateResult) {
        var records: [String: FeedRecord] = [:]
        for feed in feeds {
            var record = store.read(feed.name) ?? FeedRecord(feed: feed.name)
            // State written before validators named their URL: they came
            // from the URL the feed had then.
            if record.validatorsURL.isEmpty, !record.etag.isEmpty || !record.lastModified.isEmpty { record.validatorsURL = record.url }
            record.url = feed.url
            record.into = target
            records[feed.name] = record
        }
        var staged: [String: StagedFeed] = [:]
        var failed: [String: FeedError] = [:]
        let now = unixTime()
        for feed in chosen {
            let work: String
            do { work = try session.folder(for: feed.name) } catch {
                failed[feed.name] = error
                continue
            }
            var record = records[feed.name]!
            record.checked = now
            let check = FeedCheck(feed: feed, work: work, hasData: FileOperations.isRegularFile(dataPath(feed.name)),
                                  options: options, compiler: compiler, log: log)
            switch check.run(&record) {
            case .unchanged(let reason):
                record.error = ""
                log(.info, "\(feed.name): \(reason); \(record.entries) entries, version \(record.version.isEmpty ? "-" : record.version)")
                result.unchanged.append(feed.name)
            case .changed(let s):
                staged[feed.name] = s
                log(.info, "\(feed.name): downloaded \(s.size) bytes (sha256 \(s.sha256.prefix(12))...), \(s.entries) entries, version \(s.version)")
            case .failed(let error):
                failed[feed.name] = error
            }
            records[feed.name] = record
        }

        let targetMissing = !FileOperations.isRegularFile(target)
        let rebuild = !staged.isEmpty || options.force || targetMissing
        var installError: FeedError? = nil
        if rebuild {
            do {
                if let commitErrors = try install(target, feeds: feeds, staged: staged, records: &records, session: session, now: now) {
                    result.installed.append(target)
                    failed.merge(commitErrors) { first, _ in first }
                }
            } catch {
                installError = error
            }
        }
        // An install that fails is the failure of the feeds that wanted it: the new ones, or
        // (a forced rebuild, a deleted target) the ones asked for.
        let blamed = Set(staged.isEmpty ? chosen.map(\.name) : Array(staged.keys))
        for feed in feeds {
            guard var record = records[feed.name] else { continue }
            let error = failed[feed.name] ?? (blamed.contains(feed.name) ? installError : nil)
            if let error {
                record.error = error.message
                record.failed = now
                result.failed.append(feed.name)
                let consequence: String
                if !result.installed.contains(target) {
                    consequence = "\(target) keeps its current list"
                } else if FileOperations.isRegularFile(dataPath(feed.name)) {
                    consequence = "\(target) was rebuilt with its last verified list"
                } else {
                    consequence = "\(target) was built without it"
                }
                log(.error, "\(feed.name): \(error.message); \(consequence)")
            } else if chosen.contains(where: { $0.name == feed.name }) {
                record.error = ""
            }
            do { try store.write(record) } catch {
                log(.error, "\(feed.name): \(error)")
                if !result.failed.contains(feed.name) { result.failed.append(feed.name) }
            }
        }
    }

    /// Rebuilds `target` from every feed's newest sound list, installs it, and moves the
    /// staged downloads into place. Returns nil when no feed has a list yet, else the feeds
    /// whose download could not be stored after the install (they are fetched again next time).
    private func install(_ target: String, feeds: [FeedConfig], staged: [String: StagedFeed], records: inout [String: FeedRecord],
                         session: Session, now: Int64) throws(FeedError) -> [String: FeedError]? {
        var sources: [SourceFile] = []
        var contributors: [FeedConfig] = []
        for feed in feeds {
            if let s = staged[feed.name] {
                sources += s.sources
                contributors.append(feed)
            } else if FileOperations.isRegularFile(dataPath(feed.name)) {
                let work = try session.folder(for: feed.name + "+cached")  // "+" is not allowed in feed names
                do {
                    sources += try FeedUnpacker.unpack(dataPath(feed.name), feed: feed, into: work).sources
                } catch {
                    throw FeedError("cannot read \(feed.name)'s last download \(dataPath(feed.name)): \(error)")
                }
                contributors.append(feed)
            } else if feeds.count > 1 {
                log(.warning, "\(feed.name): no verified download yet; \(target) is built without it")
            }
        }
        guard !contributors.isEmpty else { return nil }
        let versions = contributors.map { staged[$0.name]?.version ?? records[$0.name]?.version ?? "" }
        let version: UInt64
        if contributors.count == 1, let numeric = UInt64(versions[0]) {
            version = numeric
        } else {
            version = UInt64(FeedClock.stamp(now))!
        }
        // The installed file's key order is kept, as compaction keeps it: a fleet that
        // compiled it with --file-format 2 for older readers must not lose that at an update.
        // A target that cannot be read (damaged, or from a newer lookupd) gives no order to keep:
        // it is rebuilt in today's format, and said so, since older readers refuse that.
        let fileFormat: UInt32
        if !FileOperations.exists(target) {
            fileFormat = DirectoryFormat.version
        } else {
            do throws(DirectoryError) {
                fileFormat = DirectoryFormat.rewriteVersion(keeping: try DirectoryFile(path: target).header.formatVersion)
            } catch {
                fileFormat = DirectoryFormat.version
                log(.warning, "\(error); rebuilt in directory format \(fileFormat), since the installed file gives no format to keep (a lookupd that reads only format 2 refuses it)")
            }
        }
        let installed = try DirectoryInstaller.install(at: target) { (staged) throws(FeedError) in
            let written = try compiler.build(sources, version: version, fileFormat: fileFormat, to: staged)
            if let warning = written.backslashWarning { log(.warning, "\(target): \(warning)") }
            return (written.exactEntries, written.prefixRules)
        }

        // The new file is in force from here on: a feed whose download cannot be stored keeps
        // its old validators, so the next run fetches and stores it again.
        var commitErrors: [String: FeedError] = [:]
        for feed in feeds {
            guard var record = records[feed.name] else { continue }
            let data = dataPath(feed.name)
            if let s = staged[feed.name] {
                do {
                    if FileOperations.isRegularFile(data) { try FileOperations.preserve(data, as: previousDataPath(feed.name)) }
                    try FileOperations.move(s.download, to: data)
                } catch {
                    commitErrors[feed.name] = FeedError("installed, but its download could not be stored: \(error)")
                    continue
                }
                record.shiftToPrevious()
                record.version = s.version
                record.entries = s.entries
                record.updated = now
                record.sha256 = s.sha256
                record.size = s.size
                record.etag = s.validators.etag
                record.lastModified = s.validators.lastModified
                record.validatorsURL = feed.url
                if let m = s.manifestValidators {
                    record.manifestETag = m.etag
                    record.manifestLastModified = m.lastModified
                    record.manifestValidatorsURL = feed.manifest ?? ""
                }
                record.fetchedSHA256 = s.sha256
                record.fetchedVersion = s.version
            } else if FileOperations.isRegularFile(data) {
                // Its list is in both the new file and the one kept as previous.
                do { try FileOperations.preserve(data, as: previousDataPath(feed.name)) } catch {
                    commitErrors[feed.name] = FeedError("installed, but its previous download could not be kept: \(error)")
                    continue
                }
                record.shiftToPrevious()
            }
            records[feed.name] = record
        }
        do { try FileOperations.syncFolder(store.folder) } catch {
            for feed in feeds where commitErrors[feed.name] == nil && staged[feed.name] != nil {
                commitErrors[feed.name] = FeedError("installed, but \(error)")
            }
        }
        let names = contributors.map(\.name).joined(separator: ", ")
        log(.notice, "\(target): installed \(installed.numbers) numbers and \(installed.prefixRules) prefix rules from \(names) (directory version \(version))"
            + (installed.keptPrevious ? "; the previous list is kept as \(DirectoryInstaller.previousPath(target))" : ""))
        return commitErrors
    }

    func reload() -> ReloadOutcome {
        let outcome = reloader()
        switch outcome {
        case .reloaded(let answer): log(.notice, "daemon: \(answer.trimmingNewlines())")
        case .noDaemon(let why): log(.notice, "daemon: not running (\(why)); it reads the new lists when it starts")
        case .failed(let why): log(.error, "daemon: reload failed: \(why.trimmingNewlines()); it keeps serving the lists it had")
        }
        return outcome
    }
}

/// The folder of one run: the lock, and a private work folder removed at the end (also
/// those left by runs that crashed, which the lock proves are gone).
final class Session {
    let folder: String
    let work: String
    private let lock: FeedLock

    init(folder: String) throws(FeedError) {
        self.folder = folder
        try FileOperations.makeFolders(folder)
        lock = try FeedLock(folder: folder)
        for name in FileOperations.list(folder) where name.hasPrefix(".work-") {
            FileOperations.removeTree(folder + "/" + name)
        }
        work = "\(folder)/.work-\(getpid())"
        try FileOperations.makeFolders(work)
    }

    /// A fresh folder for one feed's files.
    func folder(for name: String) throws(FeedError) -> String {
        let path = work + "/" + name
        FileOperations.removeTree(path)
        try FileOperations.makeFolders(path)
        return path
    }

    func finish() {
        FileOperations.removeTree(work)
        lock.release()
    }
}

extension String {
    func trimmingNewlines() -> String {
        var s = Substring(self)
        while let l = s.last, l == "\n" || l == "\r" || l == "\r\n" { s.removeLast() }
        return String(s.map { $0 == "\n" || $0 == "\r\n" ? " " : $0 })
    }
}
