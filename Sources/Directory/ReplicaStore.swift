import Glibc
import SystemCalls

/// Reads and writes one replicated layer file (ReplicaFormat).
///
/// Written by the daemon's replication thread only: batches of changes are
/// appended with a checkpoint and synced before they are published, so a
/// crash at any point leaves the layer as of some earlier checkpoint, and
/// the watch resumes from there. Replacing the whole layer (a snapshot from
/// etcd after its history was compacted, or a rewrite that drops superseded
/// records) is atomic: a complete new file renamed over the old one.
///
/// Threading: one thread (the replication thread; a CLI command reads with
/// `read(path:)`).
public final class ReplicaStore {
    public let path: String
    public private(set) var state = ReplicaState()
    /// Whether the file exists: a layer without one has never been fetched.
    public var exists: Bool { fd != nil }
    /// Records in the file, for deciding when to rewrite it.
    public private(set) var records = 0
    private var fd: FileDescriptor?
    private var end = 0
    private var layerID: UInt64 = 0

    /// What `open` or `read` could not use, for the log: bytes after the
    /// last checkpoint (cut off when opened for writing), or a file that is
    /// not a layer this lookupd reads (left to the next replacement).
    public private(set) var problem: String?

    /// A layer is at most this large (4 KiB records for several million keys).
    static let maxSize = 1 << 34

    public init(path: String) {
        self.path = path
    }

    deinit { fd?.close() }

    /// Opens the layer for writing: reads it, and cuts off whatever follows
    /// its last checkpoint. A missing or unusable file leaves an empty state
    /// (the caller fetches a snapshot).
    public func open() throws(ReplicaError) {
        let fd: FileDescriptor
        do { fd = try FileDescriptor.open(path, O_RDWR | O_NONBLOCK | O_NOFOLLOW) } catch {
            guard error == .noSuchFile else { throw .system(path: path, operation: "open", errno: error.rawValue) }
            return
        }
        do throws(ReplicaError) {
            let read = try ReplicaStore.load(fd, path: path)
            if read.end < read.size {
                do { try fd.truncate(to: read.end) } catch { throw .system(path: path, operation: "truncate", errno: error.rawValue) }
                do { try fd.sync() } catch { throw .system(path: path, operation: "fsync", errno: error.rawValue) }
            }
            self.fd = fd
            state = read.state
            end = read.end
            layerID = read.layerID
            records = read.records
            problem = read.problem
        } catch {
            fd.close()
            if case .system = error { throw error }
            problem = error.description
        }
    }

    /// The layer at `path` as it is on disk (nil when there is none), and
    /// what could not be read of it.
    public static func read(path: String) throws(ReplicaError) -> (state: ReplicaState, problem: String?)? {
        let fd: FileDescriptor
        do { (fd, _) = try openRegularFile(path, maxBytes: maxSize, followSymlinks: false) } catch {
            if case .errno(let e) = error.reason, e == .noSuchFile { return nil }
            throw ReplicaError(error)
        }
        defer { fd.close() }
        let read = try load(fd, path: path)
        return (read.state, read.problem)
    }

    private struct Loaded {
        var state: ReplicaState
        var layerID: UInt64
        var end: Int
        var size: Int
        var records: Int
        var problem: String?
    }

    private static func load(_ fd: FileDescriptor, path: String) throws(ReplicaError) -> Loaded {
        let status: FileStatus
        do { status = try fd.status() } catch { throw .system(path: path, operation: "stat", errno: error.rawValue) }
        guard status.isRegular else { throw .unreadable(path: path, reason: "not a regular file") }
        guard status.size <= Int64(maxSize) else { throw .unreadable(path: path, reason: "\(status.size) bytes, more than a layer may hold") }
        var bytes = [UInt8](repeating: 0, count: Int(status.size))
        let got: Int
        do { got = try bytes.withMutableBytes { (raw) throws(Errno) in try fd.readFully(into: raw, at: 0) } } catch {
            throw .system(path: path, operation: "read", errno: error.rawValue)
        }
        let result = bytes.withUnsafeBytes { raw -> Result<Loaded, ReplicaError> in
            let whole = UnsafeRawBufferPointer(rebasing: raw[0..<got])
            let header: ReplicaFormat.Header
            do throws(ReplicaError) { header = try ReplicaFormat.decodeHeader(whole, path: path) } catch { return .failure(error) }
            var state = ReplicaState()
            state.clusterID = header.clusterID
            var records = 0
            let scanned = ReplicaFormat.scan(whole, header: header, into: &state, records: &records)
            guard state.revision != 0 || scanned.end > ReplicaFormat.headerSize else {
                return .failure(.unreadable(path: path, reason: "no complete snapshot (\(scanned.problem ?? "empty"))"))
            }
            let problem = scanned.problem.map { "\(got - scanned.end) bytes after the checkpoint of revision \(state.revision) not used (\($0))" }
            return .success(Loaded(state: state, layerID: header.layerID, end: scanned.end, size: got, records: records, problem: problem))
        }
        return try result.get()
    }

    /// Written since the last `sync`.
    public private(set) var unsynced = false

    /// Appends a batch of changes in revision order and a checkpoint at
    /// `revision`; only then does `state` change. With `sync`, it is on disk
    /// when this returns; without, `sync()` makes it so (the daemon puts a
    /// batch in force first: etcd keeps it meanwhile, and a crash before the
    /// sync leaves an earlier checkpoint on disk, from which the watch
    /// resumes). A layer that has grown to more than twice its entries is
    /// rewritten.
    public func append(_ changes: [ReplicaChange], through revision: UInt64, sync: Bool = true) throws(ReplicaError) {
        guard let fd else { preconditionFailure("append to a replicated layer that was never written") }
        guard revision > state.revision else { return }
        var bytes: [UInt8] = []
        for change in changes {
            bytes += ReplicaFormat.encode(key: change.key, revision: change.revision, entry: change.entry, layerID: layerID)
        }
        bytes += ReplicaFormat.encodeCheckpoint(revision, layerID: layerID)
        do { try fd.writeAll(bytes, at: end) } catch { throw .system(path: path, operation: "write", errno: error.rawValue) }
        unsynced = true
        if sync { try self.sync() }
        end += bytes.count
        records += changes.count
        for change in changes { state.apply(change) }
        state.revision = revision
        if records > 2 * state.count + 4096 {
            try replace(entries: state.entries, clusterID: state.clusterID, revision: state.revision)
        }
    }

    /// Makes what was appended durable. After a failure the file's content
    /// is unknown: the caller rewrites it from `state` (`rewrite`).
    public func sync() throws(ReplicaError) {
        guard unsynced, let fd else { return }
        do { try fd.sync() } catch { throw .system(path: path, operation: "fsync", errno: error.rawValue) }
        unsynced = false
    }

    /// Writes the whole layer again from `state` (after a failed sync).
    public func rewrite() throws(ReplicaError) {
        try replace(entries: state.entries, clusterID: state.clusterID, revision: state.revision)
    }

    /// Replaces the whole layer, atomically, with etcd's range as of
    /// `revision` (writeFileAtomically: a new file beside it, synced,
    /// renamed over it).
    public func replace(entries: [UInt64: ReplicaEntry], clusterID: UInt64, revision: UInt64) throws(ReplicaError) {
        var id: UInt64 = 0
        while id == 0 { id = UInt64.random(in: 1...UInt64.max) }
        var bytes = ReplicaFormat.encodeHeader(layerID: id, clusterID: clusterID, revision: revision)
        for key in entries.keys.sorted() {
            bytes += ReplicaFormat.encode(key: key, revision: entries[key]!.revision, entry: entries[key], layerID: id)
        }
        bytes += ReplicaFormat.encodeCheckpoint(revision, layerID: id)
        do { try writeFileAtomically(path, contents: bytes, permissions: 0o640) } catch { throw ReplicaError(error) }
        let reopened: FileDescriptor
        do { reopened = try FileDescriptor.open(path, O_RDWR | O_NOFOLLOW) } catch { throw .system(path: path, operation: "open", errno: error.rawValue) }
        fd?.close()
        fd = reopened
        layerID = id
        end = bytes.count
        records = entries.count
        state = ReplicaState(clusterID: clusterID, revision: revision, entries: entries)
        problem = nil
        unsynced = false
    }

    /// Creates the folder of the replicated layers if need be and takes an
    /// exclusive lock on it for this process (released when the descriptor
    /// is closed): two daemons writing the same layers would undo each other.
    public static func lockFolder(_ folder: String) throws(ReplicaError) -> FileDescriptor {
        do { try FileSystem.makeFolder(folder, permissions: 0o750) } catch {
            guard error == .fileExists else { throw .system(path: folder, operation: "create", errno: error.rawValue) }
        }
        let fd: FileDescriptor
        do { fd = try FileDescriptor.open(folder, O_RDONLY | O_DIRECTORY) } catch { throw .system(path: folder, operation: "open", errno: error.rawValue) }
        do { try fd.lockExclusively(wait: false) } catch {
            fd.close()
            if error == .wouldBlock { throw .busy(path: folder) }
            throw .system(path: folder, operation: "lock", errno: error.rawValue)
        }
        return fd
    }
}

extension ReplicaError {
    /// A failed step of the system-call layer, in this module's words.
    init(_ error: SystemCallError) {
        switch error.reason {
        case .errno(let e): self = .system(path: error.path, operation: error.operation, errno: e.rawValue)
        case .notRegularFile, .tooLarge: self = .unreadable(path: error.path, reason: error.description)
        }
    }
}
