import CCurl
import Configuration
import Directory
import Glibc
import Synchronization
import SystemCalls
import TextFormats

/// What the replication thread reports: counters and state per directory.
public struct ReplicationStats: Sendable {
    public struct Directory: Sendable {
        public var name: String
        /// The layer is complete through this revision.
        public var appliedRevision: UInt64 = 0
        /// The newest change in etcd for this directory, as last asked (0: not known yet).
        public var latestRevision: UInt64 = 0
        /// etcd's revision when last asked.
        public var etcdRevision: UInt64 = 0
        public var entries = 0
        public var changesApplied: UInt64 = 0
        /// Changes not applied (a value or key this lookupd cannot use, a
        /// layer it could not write).
        public var applyErrors: UInt64 = 0
        /// Whole-range snapshots fetched (first start, history compacted).
        public var snapshots: UInt64 = 0
        /// The watch is open and etcd has confirmed it.
        public var watching = false
        /// The layer has caught up with etcd at least once since start.
        public var caughtUp = false

        public init(name: String) { self.name = name }

        /// Revisions of this directory's changes in etcd not applied yet.
        public var lag: UInt64 { latestRevision > appliedRevision ? latestRevision - appliedRevision : 0 }
    }

    public var directories: [Directory] = []
    /// Watches opened again after one ended (member stopped, stalled, error).
    public var reconnects: UInt64 = 0
    /// The member watches and requests go to now.
    public var endpoint = ""

    public init() {}

    public var allCaughtUp: Bool { directories.allSatisfy(\.caughtUp) }
}

/// The daemon's replication thread (docs/CLUSTER.md): for every replicated
/// directory, a watch on its key range in etcd from the revision after the
/// one its layer is complete through; each batch of changes that arrives is
/// written to the layer (ReplicaStore, synced) and only then published to
/// the daemon, which lays it over the directory.
///
/// When etcd no longer has the history the watch needs (compacted), when
/// the layer is missing or unreadable, or when etcd is another cluster, the
/// thread reads the directory's whole range at one revision and replaces
/// the layer with it atomically, then watches from there.
///
/// Every second it also asks etcd for the newest revision in each range:
/// that gives the lag, tells when a (re)started layer has caught up, and
/// catches a watch that went quiet while changes are committed (a member cut
/// off from the others keeps the connection open): after 3 s behind, the
/// watch moves to another member.
///
/// Threading: `init` on the thread that starts the daemon; `run` on the
/// replication thread, which alone uses the stores and libcurl handles from
/// then on; `stop` from any thread. What crosses threads goes through
/// `publish`.
public final class ReplicationEngine: @unchecked Sendable {
    public typealias Log = @Sendable (LogLevel, String) -> Void
    /// Changed layers (by directory name), when the changes in them were
    /// made (each value's `time`, milliseconds since 1970; at most 10,000 a
    /// turn), and the stats, after a batch.
    public typealias Publish = @Sendable (_ states: [(name: String, state: ReplicaState)], _ made: [Int64], _ stats: ReplicationStats) -> Void

    private let config: ReplicationConfig
    private let log: Log
    private let publish: Publish
    private let channels: [Channel]
    private let lock: FileDescriptor
    private let multi: UnsafeMutableRawPointer
    private let stopping = Atomic<Bool>(false)
    private let credentials: EtcdCredentials?
    private var token: String?
    private var authenticating: EtcdTransfer?
    private var authRetryAt = 0.0
    private var endpointIndex = 0
    private var reconnects: UInt64 = 0
    private var transfers: [UnsafeMutableRawPointer: (transfer: EtcdTransfer, channel: Channel?, kind: Kind)] = [:]

    private enum Kind { case watch, probe, snapshot, authenticate }

    /// The layers as read from disk, to serve before the thread starts.
    public let initialStates: [(name: String, state: ReplicaState)]

    /// Locks the state directory's layers and reads them. Throws when they
    /// cannot be used at all (another daemon holds them, the folder cannot
    /// be created) or the token file cannot be read.
    public init(config: ReplicationConfig, directories: [String], stateDirectory: String, log: @escaping Log,
                publish: @escaping Publish) throws(ReplicationStartError) {
        self.config = config
        self.log = log
        self.publish = publish
        do { credentials = try config.tokenFile.map { path throws(EtcdFailure) in try EtcdCredentials.read(path) } } catch {
            throw ReplicationStartError(description: "replicate: \(error)")
        }
        guard EtcdTransfer.initialized, let multi = ccurl_multi_init() else { throw ReplicationStartError(description: String(cString: ccurl_problem())) }
        let folder = ReplicaFormat.folder(stateDirectory: stateDirectory)
        do { lock = try ReplicaStore.lockFolder(folder) } catch {
            ccurl_multi_cleanup(multi)
            throw ReplicationStartError(description: error.description)
        }
        self.multi = multi
        var channels: [Channel] = []
        for name in directories {
            let store = ReplicaStore(path: ReplicaFormat.path(stateDirectory: stateDirectory, directory: name))
            do { try store.open() } catch {
                // The layer is a cache: start without it and fetch it.
                log(.error, "replicated layer of \(name): \(error); fetching it from etcd again")
            }
            if let problem = store.problem { log(.warning, "replicated layer of \(name): \(problem); fetching the rest from etcd") }
            channels.append(Channel(name: name, store: store, prefix: Array(config.keyPrefix(directory: name).utf8)))
        }
        self.channels = channels
        initialStates = channels.map { ($0.name, $0.store.state) }
    }

    deinit {
        for (handle, _) in transfers { ccurl_multi_remove_handle(multi, handle) }
        transfers = [:]
        ccurl_multi_cleanup(multi)
        if !released { lock.close() }
    }

    private var released = false

    /// Whether the token file still holds the user and password this
    /// engine was started with (a reload restarts it otherwise).
    public func credentialsUnchanged() -> Bool {
        guard let path = config.tokenFile else { return credentials == nil }
        guard let now = try? EtcdCredentials.read(path) else { return false }
        return now.user == credentials?.user && now.password == credentials?.password
    }

    /// Makes `run` return soon; from any thread.
    public func stop() {
        stopping.store(true, ordering: .releasing)
        ccurl_multi_wakeup(multi)
    }

    /// The thread's body: runs until `stop`.
    public func run() {
        var lastStats: [UInt64] = []
        while !stopping.load(ordering: .acquiring) {
            let now = monotonicSeconds()
            schedule(now)
            var running: Int32 = 0
            ccurl_multi_perform(multi, &running)
            finishTransfers()
            var changed: [(name: String, state: ReplicaState)] = []
            var made: [Int64] = []
            for channel in channels {
                process(channel)
                if flush(channel, made: &made) { changed.append((channel.name, channel.store.state)) }
            }
            // Published when something an operator sees changed, not every turn.
            var summary: [UInt64] = [reconnects, UInt64(endpointIndex)]
            for c in channels {
                summary += [c.latest, c.etcdRevision, c.applyErrors, c.snapshots, c.created && c.watch != nil ? 1 : 0, c.caughtUp ? 1 : 0]
            }
            if !changed.isEmpty || summary != lastStats {
                publish(changed, made, stats())
                lastStats = summary
            }
            // In force first, on disk next: a sync stalled by a busy disk
            // does not hold the change back.
            for channel in channels where channel.store.unsynced { sync(channel) }
            ccurl_multi_poll(multi, nil, 0, pollTimeout(monotonicSeconds()), nil)
        }
        // Stopped: close the connections and let a successor (a reload)
        // take the layers at once, whoever still holds this object.
        for (handle, _) in transfers { ccurl_multi_remove_handle(multi, handle) }
        transfers = [:]
        for channel in channels { channel.watch = nil; channel.probe = nil; channel.snapshot = nil }
        lock.close()
        released = true
    }

    /// Milliseconds until something is due (a retry, a probe); at most 100.
    private func pollTimeout(_ now: Double) -> Int32 {
        var due = now + 0.1
        if credentials != nil, token == nil {
            if authenticating == nil { due = min(due, authRetryAt) }
        } else {
            for channel in channels {
                if channel.watch == nil, channel.snapshot?.transfer == nil { due = min(due, channel.retryAt) }
                if channel.watch != nil, channel.probe == nil { due = min(due, channel.lastProbe + 1.0) }
            }
        }
        return Int32(max(0, min(100, (due - now) * 1000)))
    }

    // MARK: - Scheduling

    private var endpoint: String { config.endpoints[endpointIndex % config.endpoints.count] }

    /// Moves to the next member after `failed` did not answer (unless another transfer already moved on).
    private func rotate(from failed: String) {
        if failed == endpoint { endpointIndex = (endpointIndex + 1) % config.endpoints.count }
    }

    private func schedule(_ now: Double) {
        if credentials != nil, token == nil {
            if authenticating == nil, now >= authRetryAt { startAuthentication() }
            return
        }
        for channel in channels {
            if channel.watch == nil, channel.snapshot?.transfer == nil, now >= channel.retryAt {
                if channel.snapshot != nil || channel.needsSnapshot || !channel.store.exists { startSnapshot(channel) } else { startWatch(channel) }
            }
            if channel.watch != nil, channel.probe == nil, now - channel.lastProbe >= 1.0 {
                startProbe(channel, now)
            }
            // etcd does not confirm a watch it will not serve (no permission): give up on it.
            if channel.watch != nil, !channel.created, now - channel.watchStarted > 10 {
                dropWatch(channel)
                retryLater(channel, "etcd at \(endpoint) did not confirm the watch within 10 s")
            }
        }
    }

    private func add(_ transfer: EtcdTransfer, _ channel: Channel?, _ kind: Kind) {
        transfers[transfer.handle] = (transfer, channel, kind)
        ccurl_multi_add_handle(multi, transfer.handle)
    }

    private func remove(_ transfer: EtcdTransfer) {
        ccurl_multi_remove_handle(multi, transfer.handle)
        transfers[transfer.handle] = nil
    }

    private func startAuthentication() {
        guard let credentials else { return }
        let body = JSONValue.object([("name", .string(credentials.user)), ("password", .string(credentials.password))]).description
        guard let transfer = EtcdTransfer(endpoint: endpoint, path: "/v3/auth/authenticate", json: body, token: nil, timeout: 3) else { return }
        authenticating = transfer
        add(transfer, nil, .authenticate)
    }

    private func startWatch(_ channel: Channel) {
        let create = JSONValue.object([
            ("key", .string(Base64.encode(channel.prefix))), ("range_end", .string(Base64.encode(channel.rangeEnd))),
            ("start_revision", .string(String(channel.store.state.revision + 1))), ("progress_notify", .bool(true)),
        ])
        let body = JSONValue.object([("create_request", create)]).description
        guard let transfer = EtcdTransfer(endpoint: endpoint, path: "/v3/watch", json: body, token: token, timeout: 0) else { return }
        channel.buffer = []
        channel.created = false
        channel.behind = nil
        transfer.stream = { [unowned channel] bytes in
            // A line longer than this is not etcd's: drop the watch.
            guard channel.buffer.count + bytes.count <= 256 << 20 else { return false }
            channel.buffer.append(contentsOf: bytes)
            return true
        }
        if channel.everWatched { reconnects += 1 }
        channel.everWatched = true
        channel.watchStarted = monotonicSeconds()
        channel.watch = transfer
        add(transfer, channel, .watch)
    }

    private func startProbe(_ channel: Channel, _ now: Double) {
        let body = JSONValue.object([
            ("key", .string(Base64.encode(channel.prefix))), ("range_end", .string(Base64.encode(channel.rangeEnd))),
            ("limit", .string("1")), ("sort_order", .string("DESCEND")), ("sort_target", .string("MOD")), ("keys_only", .bool(true)),
        ]).description
        guard let transfer = EtcdTransfer(endpoint: endpoint, path: "/v3/kv/range", json: body, token: token, timeout: 2) else { return }
        channel.lastProbe = now
        channel.probe = transfer
        add(transfer, channel, .probe)
    }

    private func startSnapshot(_ channel: Channel) {
        let snapshot = channel.snapshot ?? Snapshot()
        var members: [(key: String, value: JSONValue)] = [
            ("key", .string(Base64.encode(snapshot.next ?? channel.prefix))), ("range_end", .string(Base64.encode(channel.rangeEnd))),
            ("limit", .string("1000")),
        ]
        if snapshot.revision != 0 { members.append(("revision", .string(String(snapshot.revision)))) }
        guard let transfer = EtcdTransfer(endpoint: endpoint, path: "/v3/kv/range", json: JSONValue.object(members).description,
                                          token: token, timeout: 10) else { return }
        if snapshot.revision == 0, channel.failures == 0 {
            log(.notice, "\(channel.name): reading the whole replicated range from etcd (\(channel.needsSnapshot ? "history compacted, layer unusable or another cluster" : "no local layer yet"))")
        }
        snapshot.transfer = transfer
        channel.snapshot = snapshot
        add(transfer, channel, .snapshot)
    }

    /// Not a member without a quorum: etcd refuses this client (no or
    /// wrong credentials, no permission on the prefix).
    private func refusedRead(_ channel: Channel, _ endpoint: String, _ message: String) {
        retryLater(channel, "etcd at \(endpoint) refused to read the range: \(message) (check replicate's token-file and the etcd user's permissions)",
                   level: .error)
    }

    /// After a failure: try again later, a little later each time (at most 5 s).
    private func retryLater(_ channel: Channel, _ why: String?, level: LogLevel? = nil) {
        channel.failures += 1
        let delay = min(5.0, 0.1 * Double(1 << min(channel.failures - 1, 6))) * Double.random(in: 0.8...1.2)
        channel.retryAt = monotonicSeconds() + delay
        // Once per kind of problem (curl's texts carry times: not compared).
        let kind = why.map { String($0.filter { !$0.isNumber }) }
        if let why, kind != channel.lastProblem || channel.failures == 1 {
            log(level ?? (channel.failures > 3 ? .warning : .notice), "\(channel.name): \(why); trying again in \(Int(delay * 1000)) ms")
        }
        channel.lastProblem = kind
    }

    private func dropWatch(_ channel: Channel) {
        if let watch = channel.watch { remove(watch) }
        if let probe = channel.probe { remove(probe) }
        channel.watch = nil
        channel.probe = nil
        channel.created = false
        channel.buffer = []
    }

    // MARK: - Completions

    private func finishTransfers() {
        var left: Int32 = 0
        while let message = ccurl_multi_info_read(multi, &left) {
            guard message.pointee.msg == CURLMSG_DONE, let handle = message.pointee.easy_handle,
                  let entry = transfers[handle] else { continue }
            let code = message.pointee.data.result
            remove(entry.transfer)
            let reply = entry.transfer.finish(code)
            switch entry.kind {
            case .authenticate: authenticated(reply)
            case .watch: if let channel = entry.channel { watchEnded(channel, entry.transfer, reply) }
            case .probe: if let channel = entry.channel { probed(channel, reply) }
            case .snapshot: if let channel = entry.channel { snapshotPage(channel, reply) }
            }
        }
    }

    private func authenticated(_ reply: EtcdReply) {
        authenticating = nil
        switch reply {
        case .ok(let answer):
            token = answer["token"]?.stringValue
            if token == nil { authRetryAt = monotonicSeconds() + 1 }
        case .failed(let endpoint, let status, let code, let message):
            if code == GRPCCode.unavailable || status >= 500 { rotate(from: endpoint) }
            log(.error, "etcd authentication at \(endpoint) failed: \(message)\(code == GRPCCode.invalidArgument ? " (check the token file's USER:PASSWORD)" : "")")
            authRetryAt = monotonicSeconds() + 2
        case .transport(let endpoint, let text, _, _):
            rotate(from: endpoint)
            log(.notice, "etcd authentication at \(endpoint): \(text)")
            authRetryAt = monotonicSeconds() + 0.5
        }
    }

    /// Whether a failed reply says the token is no longer valid.
    private func tokenExpired(_ reply: EtcdReply) -> Bool {
        guard credentials != nil, case .failed(_, _, let code, _) = reply, code == GRPCCode.unauthenticated else { return false }
        token = nil
        return true
    }

    private func watchEnded(_ channel: Channel, _ transfer: EtcdTransfer, _ reply: EtcdReply) {
        guard channel.watch === transfer else { return }
        // What arrived before the end is kept; this turn's flush writes and publishes it.
        process(channel)
        let wasCreated = channel.created
        dropWatch(channel)
        if tokenExpired(reply) { return retryLater(channel, "etcd token expired; authenticating again") }
        switch reply {
        case .ok, .failed(_, 200, _, _):
            retryLater(channel, wasCreated ? "etcd closed the watch at \(transfer.endpoint)" : "etcd ended the watch at \(transfer.endpoint) before confirming it")
        case .failed(let endpoint, let status, _, let message):
            rotate(from: endpoint)
            retryLater(channel, "watch at \(endpoint) refused: HTTP \(status) \(message)")
        case .transport(let endpoint, let text, _, _):
            rotate(from: endpoint)
            retryLater(channel, "watch at \(endpoint) ended: \(text)")
        }
    }

    private func probed(_ channel: Channel, _ reply: EtcdReply) {
        channel.probe = nil
        switch reply {
        case .ok(let answer):
            channel.probeFailures = 0
            channel.etcdRevision = answer["header"]?["revision"]?.etcdInt ?? channel.etcdRevision
            channel.latest = answer["kvs"]?[0]?["mod_revision"]?.etcdInt ?? 0
            guard channel.created else { return }
            let applied = channel.store.state.revision
            if applied >= channel.latest {
                channel.behind = nil
                if !channel.caughtUp {
                    channel.caughtUp = true
                    log(.notice, "\(channel.name): caught up with etcd at revision \(applied) (\(channel.store.state.count) replicated entries)")
                }
            } else if let behind = channel.behind, applied < behind.target {
                if monotonicSeconds() - behind.since > 3 {
                    log(.warning, "\(channel.name): the watch at \(endpoint) delivered nothing while etcd holds changes through revision \(behind.target) (applied \(applied)); moving to another member")
                    rotate(from: endpoint)
                    dropWatch(channel)
                    channel.retryAt = 0
                }
            } else {
                channel.behind = (monotonicSeconds(), channel.latest)
            }
        case .failed(let endpoint, let status, let code, let message) where code != GRPCCode.unavailable && status < 500:
            if tokenExpired(reply) { return }
            dropWatch(channel)
            refusedRead(channel, endpoint, message)
        case .failed, .transport:
            if tokenExpired(reply) { return }
            channel.probeFailures += 1
            if channel.probeFailures >= 2 {
                var detail = ""
                if case .failed(_, _, _, let m) = reply { detail = m } else if case .transport(_, let t, _, _) = reply { detail = t }
                log(.warning, "\(channel.name): etcd at \(endpoint) does not answer with a quorum (\(detail)); moving the watch to another member")
                rotate(from: endpoint)
                dropWatch(channel)
                channel.probeFailures = 0
                channel.retryAt = 0
            }
        }
    }

    private func snapshotPage(_ channel: Channel, _ reply: EtcdReply) {
        guard let snapshot = channel.snapshot else { return }
        snapshot.transfer = nil
        switch reply {
        case .ok(let answer):
            let header = answer["header"]
            if snapshot.revision == 0 {
                snapshot.revision = header?["revision"]?.etcdInt ?? 0
                snapshot.clusterID = header?["cluster_id"]?.etcdInt ?? 0
            }
            var lastKey: [UInt8]? = nil
            for kv in answer["kvs"]?.arrayValue ?? [] {
                guard let key = kv["key"]?.etcdBytes else { continue }
                lastKey = key
                let revision = kv["mod_revision"]?.etcdInt ?? 0
                guard let pattern = ReplicatedKeys.pattern(key, directoryPrefix: channel.prefix) else {
                    badKey(channel, key, revision)
                    continue
                }
                let (entry, problem) = ReplicatedValue.entry(kv["value"]?.etcdBytes ?? [], revision: revision)
                if let problem { refused(channel, pattern, revision, problem) }
                snapshot.entries[JournalRecord.key(pattern)] = channel.shared(entry)
            }
            if answer["more"]?.boolValue == true, let lastKey {
                snapshot.next = lastKey + [0]
                startSnapshot(channel)
                return
            }
            channel.snapshot = nil
            guard snapshot.revision > 0 else { return retryLater(channel, "etcd answered the snapshot without a revision") }
            do {
                try channel.store.replace(entries: snapshot.entries, clusterID: snapshot.clusterID, revision: snapshot.revision)
            } catch {
                channel.applyErrors += 1
                return retryLater(channel, "cannot write the replicated layer: \(error)")
            }
            channel.snapshots += 1
            channel.needsSnapshot = false
            channel.published = false
            channel.failures = 0
            log(.notice, "\(channel.name): replicated layer replaced by etcd's range at revision \(snapshot.revision) (\(snapshot.entries.count) entries)")
            startWatch(channel)
        case .failed(let endpoint, let status, let code, let message):
            if tokenExpired(reply) { channel.snapshot = nil; return }
            // The revision read at was compacted meanwhile: start over.
            if code == GRPCCode.outOfRange {
                channel.snapshot = nil
                retryLater(channel, "the revision of the snapshot being read was compacted; reading again")
            } else if code == GRPCCode.unavailable || status >= 500 {
                rotate(from: endpoint)
                retryLater(channel, "snapshot read at \(endpoint) failed: \(message)")
            } else {
                refusedRead(channel, endpoint, message)
            }
        case .transport(let endpoint, let text, _, _):
            rotate(from: endpoint)
            retryLater(channel, "snapshot read at \(endpoint) failed: \(text)")
        }
    }

    // MARK: - Watch messages

    /// The complete lines received on the channel's watch.
    private func process(_ channel: Channel) {
        guard !channel.buffer.isEmpty else { return }
        var start = 0
        let bytes = channel.buffer
        var index = 0
        while index < bytes.count {
            if bytes[index] == 0x0A {
                if index > start {
                    if !message(channel, Array(bytes[start..<index])) {
                        channel.buffer = []
                        return
                    }
                }
                start = index + 1
            }
            index += 1
        }
        channel.buffer = start == 0 ? bytes : Array(bytes[start...])
    }

    /// One watch message; false when the watch was dropped.
    private func message(_ channel: Channel, _ line: [UInt8]) -> Bool {
        let json = try? JSONValue.parse(line, maxDepth: 16)
        guard let json, let result = json["result"] else {
            // A stream error: {"error":{"grpc_code":N,"message":"..."}}.
            let error = json?["error"]
            let text = error?["message"]?.stringValue ?? error?.stringValue ?? String(decoding: line.prefix(120), as: UTF8.self)
            if error?["grpc_code"]?.int64Value == Int64(GRPCCode.unauthenticated), credentials != nil { token = nil }
            dropWatch(channel)
            retryLater(channel, "watch at \(endpoint): \(DirectoryCompiler.printable(text, limit: 200))")
            return false
        }
        let header = result["header"]
        let cluster = header?["cluster_id"]?.etcdInt ?? 0
        let applied = channel.store.state.revision
        if cluster != 0, channel.store.state.clusterID != 0, cluster != channel.store.state.clusterID {
            log(.warning, "\(channel.name): etcd at \(endpoint) is another cluster (id \(cluster), the layer comes from \(channel.store.state.clusterID)); reading the whole range again")
            return resnapshot(channel)
        }
        if result["canceled"]?.boolValue == true {
            let compacted = result["compact_revision"]?.etcdInt ?? 0
            if compacted > 0 {
                log(.notice, "\(channel.name): etcd compacted its history through revision \(compacted), past revision \(applied + 1) this node needs; reading the whole range")
                return resnapshot(channel)
            }
            dropWatch(channel)
            retryLater(channel, "etcd canceled the watch: \(DirectoryCompiler.printable(result["cancel_reason"]?.stringValue ?? "no reason given", limit: 200))")
            return false
        }
        let revision = header?["revision"]?.etcdInt ?? 0
        if result["created"]?.boolValue == true {
            if revision < applied {
                log(.warning, "\(channel.name): etcd is at revision \(revision), behind this node's \(applied) (restored from a backup?); reading the whole range again")
                return resnapshot(channel)
            }
            channel.created = true
            channel.failures = 0
            channel.lastProblem = nil
            channel.lastProbe = 0
            log(.info, "\(channel.name): watching etcd at \(endpoint) from revision \(applied + 1)")
            return true
        }
        let events = result["events"]?.arrayValue ?? []
        if events.isEmpty {
            // A progress notification: every change through `revision` was sent.
            if revision > max(channel.pendingThrough, applied) { channel.pendingThrough = revision }
            return true
        }
        for event in events {
            guard let kv = event["kv"] else { continue }
            let modRevision = kv["mod_revision"]?.etcdInt ?? 0
            guard modRevision > applied else { continue }
            // Events come in revision order, whole revisions at a time: the
            // last one's revision is how far the layer is complete.
            channel.pendingThrough = max(channel.pendingThrough, modRevision)
            guard let key = kv["key"]?.etcdBytes, let pattern = ReplicatedKeys.pattern(key, directoryPrefix: channel.prefix) else {
                badKey(channel, kv["key"]?.etcdBytes ?? [], modRevision)
                continue
            }
            if event["type"]?.stringValue == "DELETE" {
                channel.pending.append(ReplicaChange(key: JournalRecord.key(pattern), revision: modRevision, entry: nil))
            } else {
                let (entry, problem) = ReplicatedValue.entry(kv["value"]?.etcdBytes ?? [], revision: modRevision)
                if let problem { refused(channel, pattern, modRevision, problem) }
                channel.pending.append(ReplicaChange(key: JournalRecord.key(pattern), revision: modRevision, entry: channel.shared(entry)))
            }
        }
        return true
    }

    private func resnapshot(_ channel: Channel) -> Bool {
        dropWatch(channel)
        channel.pending = []
        channel.pendingThrough = 0
        channel.needsSnapshot = true
        channel.retryAt = 0
        return false
    }

    private func badKey(_ channel: Channel, _ key: [UInt8], _ revision: UInt64) {
        channel.applyErrors += 1
        logProblem(channel, "\(channel.name): etcd key '\(DirectoryCompiler.printable(String(decoding: key, as: UTF8.self)))' (revision \(revision)) names no number or prefix rule (expected \(config.keyPrefix(directory: channel.name))+E164 or +DIGITS*); ignored")
    }

    private func refused(_ channel: Channel, _ pattern: NumberPattern, _ revision: UInt64, _ problem: ReplicatedValue.ValueProblem) {
        channel.applyErrors += 1
        logProblem(channel, "\(channel.name): change of \(pattern) at revision \(revision) not applied on this node: \(problem); \(pattern) is screened as if etcd held nothing for it")
    }

    /// A change not applied, logged: at most 10 a minute per directory, so
    /// that a writer filling etcd with what this lookupd cannot use does not
    /// fill the log too (the counter counts every one).
    private func logProblem(_ channel: Channel, _ text: String) {
        let now = monotonicSeconds()
        if now - channel.problemWindow >= 60 {
            if channel.suppressed > 0 {
                log(.warning, "\(channel.name): \(channel.suppressed) more changes not applied in the last minute (lookupd_replication_apply_errors_total)")
            }
            channel.problemWindow = now
            channel.problemsLogged = 0
            channel.suppressed = 0
        }
        if channel.problemsLogged < 10 {
            channel.problemsLogged += 1
            log(.warning, text)
        } else {
            channel.suppressed += 1
        }
    }

    /// After a failed sync the file's content is unknown: write it again
    /// from memory (the state in force is fine). Until that works, the
    /// layer on disk is older than the one in force; a restart fetches the
    /// difference from etcd again.
    private func sync(_ channel: Channel) {
        do throws(ReplicaError) {
            do { try channel.store.sync() } catch {
                channel.applyErrors += 1
                log(.error, "\(channel.name): \(error); writing the replicated layer again")
                try channel.store.rewrite()
            }
        } catch {
            log(.error, "\(channel.name): cannot write the replicated layer: \(error); the layer in force is unchanged, the one on disk older")
        }
    }

    /// Writes the changes received so far to the layer (not synced yet);
    /// true when the layer changed. `made` gets the changes' times.
    private func flush(_ channel: Channel, made: inout [Int64]) -> Bool {
        defer {
            channel.pending = []
            channel.pendingThrough = 0
        }
        guard channel.pendingThrough > channel.store.state.revision else {
            if !channel.published, channel.store.exists {
                channel.published = true
                return true
            }
            return false
        }
        do {
            try channel.store.append(channel.pending, through: channel.pendingThrough, sync: false)
        } catch {
            channel.applyErrors += 1
            dropWatch(channel)
            retryLater(channel, "cannot write the replicated layer: \(error); the watch starts again from revision \(channel.store.state.revision + 1)")
            return false
        }
        channel.changesApplied += UInt64(channel.pending.count)
        for change in channel.pending where made.count < 10_000 {
            if let time = change.entry?.time, time > 0 { made.append(time) }
        }
        channel.published = true
        return true
    }

    private func stats() -> ReplicationStats {
        var stats = ReplicationStats()
        stats.reconnects = reconnects
        stats.endpoint = endpoint
        stats.directories = channels.map { c in
            var d = ReplicationStats.Directory(name: c.name)
            d.appliedRevision = c.store.state.revision
            d.latestRevision = c.latest
            d.etcdRevision = c.etcdRevision
            d.entries = c.store.state.count
            d.changesApplied = c.changesApplied
            d.applyErrors = c.applyErrors
            d.snapshots = c.snapshots
            d.watching = c.created && c.watch != nil
            d.caughtUp = c.caughtUp
            return d
        }
        return stats
    }
}

/// One replicated directory's watch and layer.
private final class Channel {
    let name: String
    let store: ReplicaStore
    let prefix: [UInt8]
    let rangeEnd: [UInt8]
    var watch: EtcdTransfer?
    var probe: EtcdTransfer?
    var snapshot: Snapshot?
    /// Bytes received on the watch not yet read as messages.
    var buffer: [UInt8] = []
    var created = false
    var everWatched = false
    var watchStarted = 0.0
    var needsSnapshot = false
    var retryAt = 0.0
    var failures = 0
    var lastProblem: String?
    var lastProbe = 0.0
    var probeFailures = 0
    /// Since when the layer has been behind a revision the probe saw.
    var behind: (since: Double, target: UInt64)?
    var latest: UInt64 = 0
    var etcdRevision: UInt64 = 0
    var pending: [ReplicaChange] = []
    var pendingThrough: UInt64 = 0
    /// The current layer was handed to the daemon.
    var published = true
    var caughtUp = false
    var changesApplied: UInt64 = 0
    var applyErrors: UInt64 = 0
    var snapshots: UInt64 = 0
    var problemWindow = 0.0
    var problemsLogged = 0
    var suppressed = 0

    /// Labels and origins seen, so that entries saying the same share one
    /// copy (a layer of 100,000 blocks labelled "Fraud" from three nodes
    /// holds a handful of arrays, not 200,000).
    private var interned: [[UInt8]: [UInt8]] = [:]

    func shared(_ entry: ReplicaEntry) -> ReplicaEntry {
        if interned.count > 100_000 { interned = [:] }
        func one(_ bytes: [UInt8]) -> [UInt8] {
            if let known = interned[bytes] { return known }
            interned[bytes] = bytes
            return bytes
        }
        var entry = entry
        entry.origin = one(entry.origin)
        if case .add(let blocked, let label?, let allowed) = entry.action { entry.action = .add(blocked: blocked, label: one(label), allowed: allowed) }
        return entry
    }

    init(name: String, store: ReplicaStore, prefix: [UInt8]) {
        self.name = name
        self.store = store
        self.prefix = prefix
        rangeEnd = ReplicatedKeys.rangeEnd(prefix)
    }
}

/// A whole-range read in progress, page by page at one revision.
private final class Snapshot {
    var entries: [UInt64: ReplicaEntry] = [:]
    var revision: UInt64 = 0
    var clusterID: UInt64 = 0
    /// Where the next page starts (nil: the start of the range).
    var next: [UInt8]?
    var transfer: EtcdTransfer?
}

public struct ReplicationStartError: Error, Sendable, CustomStringConvertible {
    public var description: String
}
