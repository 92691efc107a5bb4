import Glibc
import SystemCalls

/// Follows a journal as it grows: each `poll` reads only the bytes added
/// since the last one, and starts over when the file was replaced
/// (compaction renames a new journal in) or removed.
///
/// A torn last record (an append cut short by a crash) is left unread and
/// reported once; when the next `lookupd add` truncates it and appends, the
/// follower reads on from the same offset.
///
/// Threading: one thread at a time (the daemon's control loop, a CLI command).
public final class JournalFollower {
    public let path: String
    public private(set) var state = JournalState()
    /// Bytes after the last good record, if any.
    public private(set) var tail: JournalTail?

    private struct Identity: Equatable {
        var device: UInt64, inode: UInt64, size: Int64
        var mtime: Int, mtimeNanos: Int, ctime: Int, ctimeNanos: Int
    }

    private var identity: Identity?
    /// Offset just past the last good record.
    private var end = 0
    private var reportedTail: JournalTail?

    public init(path: String) {
        self.path = path
    }

    /// What a poll found.
    public struct Update: Sendable {
        /// New records were read, or the journal was replaced or removed.
        public var changed = false
        /// The state was rebuilt from the start of a new (or no) journal.
        public var reset = false
        /// A tail not reported before.
        public var newTail: JournalTail?
    }

    /// Reads what changed since the last poll. Throws for a journal whose
    /// header is unreadable or that is damaged beyond a torn record; the
    /// state read so far stays as it was.
    @discardableResult
    public func poll() throws(JournalError) -> Update {
        // Non-blocking, regular files only, size-bounded: a FIFO, a device or a huge file
        // put in the journal's place must not hang the daemon or fill its memory.
        let fd: FileDescriptor
        let st: FileStatus
        do { (fd, st) = try openRegularFile(path, maxBytes: JournalFormat.maxFileSize) } catch {
            if error.reason == .errno(.noSuchFile) { return noJournal() }
            throw JournalError(error)
        }
        defer { fd.close() }
        if Int(st.size) < JournalFormat.headerSize {
            // A journal being created (its header not written yet) holds no
            // records; anything else this short is not a journal.
            var head = [UInt8](repeating: 0, count: min(Int(st.size), JournalFormat.magic.count))
            let got = try read(fd, into: &head, at: 0)
            guard head.prefix(got).elementsEqual(JournalFormat.magic.prefix(got)) else { throw .notAJournal(path: path) }
            return noJournal()
        }
        let now = Identity(device: st.device, inode: st.inode, size: st.size,
                           mtime: st.modified.tv_sec, mtimeNanos: st.modified.tv_nsec,
                           ctime: st.changed.tv_sec, ctimeNanos: st.changed.tv_nsec)
        // With a tail pending, look again every time: truncate-and-append can
        // leave size and (coarse) timestamps as they were.
        if now == identity && tail == nil { return Update() }
        let size = Int(st.size)

        if let known = identity, known.device == now.device, known.inode == now.inode, size >= end, state.journalID != 0 {
            // Same file: check it still has the header we read, then read on.
            var head = [UInt8](repeating: 0, count: JournalFormat.headerSize)
            let got = try read(fd, into: &head, at: 0)
            if got == JournalFormat.headerSize,
               let header = try? JournalFormat.decodeHeader(head[...], path: path),
               header.journalID == state.journalID, header.baseSequence == state.baseSequence, header.version == state.version {
                let update = try readRecords(fd, from: end, size: size)
                identity = now
                return update
            }
        }
        // A new file, or one rewritten in place: read it all.
        let bytes = try readAll(fd, size: size)
        let header = try JournalFormat.decodeHeader(bytes[...], path: path)
        var fresh = JournalState()
        fresh.journalID = header.journalID
        fresh.baseSequence = header.baseSequence
        fresh.lastSequence = header.baseSequence
        fresh.version = header.version
        let scanned = bytes.withUnsafeBytes { raw in
            JournalFormat.scan(UnsafeRawBufferPointer(rebasing: raw[JournalFormat.headerSize...]), base: JournalFormat.headerSize,
                               journalID: header.journalID, after: header.baseSequence, version: header.version) { fresh.apply($0) }
        }
        let newTail = try classifyTail(scanned, bytes[min(scanned.end, bytes.count)...], version: header.version)
        state = fresh
        end = scanned.end
        identity = now
        tail = newTail
        var update = Update(changed: true, reset: true)
        update.newTail = reportTail(newTail)
        return update
    }

    /// No journal (removed, or not written yet): nothing on top of the directory.
    private func noJournal() -> Update {
        var update = Update()
        if identity != nil || state.journalID != 0 {
            state = JournalState()
            identity = nil
            end = 0
            tail = nil
            reportedTail = nil
            update.changed = true
            update.reset = true
        }
        return update
    }

    private func readRecords(_ fd: FileDescriptor, from offset: Int, size: Int) throws(JournalError) -> Update {
        var update = Update()
        guard size > offset else {
            update.newTail = reportTail(nil)
            tail = nil
            return update
        }
        var bytes = [UInt8](repeating: 0, count: size - offset)
        let got = try read(fd, into: &bytes, at: offset)
        var added = state
        let scanned = bytes.withUnsafeBytes { raw in
            JournalFormat.scan(UnsafeRawBufferPointer(rebasing: raw[0..<got]), base: offset,
                               journalID: state.journalID, after: state.lastSequence, version: state.version) { added.apply($0) }
        }
        let newTail = try classifyTail(scanned, bytes[min(scanned.end - offset, got)..<got], version: state.version)
        update.changed = scanned.end > offset
        state = added
        end = scanned.end
        tail = newTail
        update.newTail = reportTail(newTail)
        return update
    }

    private func readAll(_ fd: FileDescriptor, size: Int) throws(JournalError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: size)
        let got = try read(fd, into: &bytes, at: 0)
        return Array(bytes.prefix(got))
    }

    /// Fills `bytes` from `offset` (fewer at the end of the file): the count read.
    private func read(_ fd: FileDescriptor, into bytes: inout [UInt8], at offset: Int) throws(JournalError) -> Int {
        do { return try bytes.withMutableBytes { (raw) throws(Errno) in try fd.readFully(into: raw, at: offset) } } catch {
            throw .system(path: path, operation: "read", errno: error.rawValue)
        }
    }

    private func classifyTail(_ scanned: JournalFormat.ScanEnd, _ rest: ArraySlice<UInt8>, version: UInt32) throws(JournalError) -> JournalTail? {
        guard !rest.isEmpty else { return nil }
        let tail = rest.withUnsafeBytes {
            JournalFormat.tail($0, offset: scanned.end, reason: scanned.problem ?? "unreadable", version: version, batchPrefix: scanned.batchPrefix)
        }
        if !tail.isTorn {
            throw .damaged(path: path, offset: tail.offset, bytes: tail.length, reason: tail.reason)
        }
        return tail
    }

    /// The tail if it was not reported before; remembers it.
    private func reportTail(_ tail: JournalTail?) -> JournalTail? {
        guard let tail else { reportedTail = nil; return nil }
        if let reported = reportedTail, reported.offset == tail.offset, reported.length == tail.length { return nil }
        reportedTail = tail
        return tail
    }

    /// The whole journal at `path` read once: its state and its tail (nil
    /// state when there is no journal).
    public static func read(path: String) throws(JournalError) -> (state: JournalState, tail: JournalTail?)? {
        let follower = JournalFollower(path: path)
        try follower.poll()
        guard follower.identity != nil else { return nil }
        return (follower.state, follower.tail)
    }
}

/// A journal held under an exclusive `flock`, for appending (`lookupd add`,
/// `remove`) and rewriting (`lookupd compact`). Concurrent commands queue
/// on the lock, so their records never interleave. Closing (deinit)
/// releases it.
///
/// Opening repairs a torn last record, under the lock, by truncating it:
/// the next append must start where the last good record ended.
public final class LockedJournal {
    public let path: String
    private let fd: FileDescriptor
    public private(set) var state: JournalState
    /// A torn record found and cut off when the journal was opened.
    public private(set) var discardedTail: JournalTail?
    /// Offset of the next record.
    private var end: Int
    private var replaced = false

    /// Takes the lock on the journal at `path`, creating the journal when
    /// `create` is set; nil when there is none and `create` is not set.
    public static func open(path: String, create: Bool) throws(JournalError) -> LockedJournal? {
        while true {
            let fd: FileDescriptor
            do { fd = try FileDescriptor.open(path, O_RDWR | O_NONBLOCK | (create ? O_CREAT : 0), permissions: 0o644) } catch {
                if error == .noSuchFile && !create { return nil }
                throw .system(path: path, operation: create ? "open or create" : "open", errno: error.rawValue)
            }
            // Compaction renames a new journal over the path while others
            // wait for the lock on the old one: whoever then gets the old
            // one must start again on the new one, or its record is lost.
            let held: FileStatus
            do {
                try fd.lockExclusively()
                held = try fd.status()
            } catch {
                fd.close()
                throw .system(path: path, operation: "lock", errno: error.rawValue)
            }
            guard held.isRegular, held.size <= Int64(JournalFormat.maxFileSize) else {
                fd.close()
                throw .invalid(held.isRegular ? "\(path): larger than \(JournalFormat.maxFileSize) bytes" : "\(path): not a regular file")
            }
            let named: FileStatus
            do { named = try FileSystem.status(path) } catch {
                fd.close()
                guard error == .noSuchFile else { throw .system(path: path, operation: "stat", errno: error.rawValue) }
                if !create { return nil }
                continue
            }
            if named.inode != held.inode || named.device != held.device {
                fd.close()
                continue
            }
            do {
                return try LockedJournal(path: path, fd: fd, size: Int(held.size))
            } catch {
                fd.close()
                throw error
            }
        }
    }

    private init(path: String, fd: FileDescriptor, size: Int) throws(JournalError) {
        self.path = path
        self.fd = fd
        var state = JournalState()
        if size < JournalFormat.headerSize {
            // Records are only written after a complete, synced header, so
            // a shorter file holds none: (re)initialize it, unless it is
            // not the start of a journal at all.
            var head = [UInt8](repeating: 0, count: min(size, JournalFormat.magic.count))
            let got = try LockedJournal.read(fd, into: &head, path: path)
            guard got == head.count, head.elementsEqual(JournalFormat.magic.prefix(head.count)) else { throw .notAJournal(path: path) }
            var id: UInt64 = 0
            while id == 0 { id = UInt64.random(in: 1...UInt64.max) }
            try LockedJournal.writeAll(fd, JournalFormat.encodeHeader(journalID: id, baseSequence: 0), at: 0, path: path)
            try LockedJournal.truncate(fd, to: JournalFormat.headerSize, path: path)
            try LockedJournal.sync(fd, path: path)
            try LockedJournal.syncFolder(of: path)
            state.journalID = id
            self.state = state
            self.end = JournalFormat.headerSize
            return
        }
        var bytes = [UInt8](repeating: 0, count: size)
        let got = try LockedJournal.read(fd, into: &bytes, path: path)
        let header = try JournalFormat.decodeHeader(bytes[0..<got], path: path)
        state.journalID = header.journalID
        state.baseSequence = header.baseSequence
        state.lastSequence = header.baseSequence
        state.version = header.version
        let scanned = bytes.withUnsafeBytes { raw in
            JournalFormat.scan(UnsafeRawBufferPointer(rebasing: raw[JournalFormat.headerSize..<got]), base: JournalFormat.headerSize,
                               journalID: header.journalID, after: header.baseSequence, version: header.version) { state.apply($0) }
        }
        if scanned.end < got {
            let tail = bytes.withUnsafeBytes { raw in
                JournalFormat.tail(UnsafeRawBufferPointer(rebasing: raw[scanned.end..<got]), offset: scanned.end,
                                   reason: scanned.problem ?? "unreadable", version: header.version, batchPrefix: scanned.batchPrefix)
            }
            guard tail.isTorn else { throw .damaged(path: path, offset: tail.offset, bytes: tail.length, reason: tail.reason) }
            try LockedJournal.truncate(fd, to: scanned.end, path: path)
            try LockedJournal.sync(fd, path: path)
            discardedTail = tail
        }
        self.state = state
        self.end = scanned.end
    }

    deinit { fd.close() }

    /// Appends one record and syncs it to disk before returning: once this
    /// returns, the record survives a crash. An older version's journal is
    /// first rewritten as the current version (`rewrite`), since versions do
    /// not mix in one file.
    public func append(key: UInt64, _ operation: JournalOperation, time: Int64 = Int64(Glibc.time(nil)),
                       expires: Int64 = 0) throws(JournalError) -> JournalRecord {
        try append([(key, operation, expires)], time: time)[0]
    }

    /// Appends several records as one batch, with one write and one fsync:
    /// readers apply the batch whole once its last record is there, and a
    /// batch a crash cut short is a torn tail, cut off by the next writer,
    /// so it is in force entirely or not at all.
    public func append(_ changes: [(key: UInt64, operation: JournalOperation, expires: Int64)],
                       time: Int64 = Int64(Glibc.time(nil))) throws(JournalError) -> [JournalRecord] {
        precondition(!replaced, "append to a journal that was replaced")
        if state.version < JournalFormat.version {
            let upgraded = try rewrite(at: time)
            return try upgraded.append(changes, time: time)
        }
        var records: [JournalRecord] = []
        var bytes: [UInt8] = []
        var sequence = state.lastSequence
        for (i, change) in changes.enumerated() {
            if case .remove = change.operation, change.expires != 0 { throw .invalid("a removal cannot expire") }
            sequence += 1
            let record = JournalRecord(sequence: sequence, key: change.key, operation: change.operation, time: time, expires: change.expires)
            // One batch: readers apply all of it or, after a crash cut it short, none of it.
            bytes += JournalFormat.encode(record, journalID: state.journalID, continued: i < changes.count - 1)
            records.append(record)
        }
        guard !records.isEmpty else { return [] }
        try LockedJournal.writeAll(fd, bytes, at: end, path: path)
        try LockedJournal.sync(fd, path: path)
        end += bytes.count
        for record in records { state.apply(record) }
        return records
    }

    /// Replaces the journal, atomically (`writeFileAtomically`), by a
    /// current-version journal with the same id and base sequence holding
    /// only the records that still decide something at `now`
    /// (`JournalState.kept`: superseded records and ended expiring ones go),
    /// in sequence order. Returns the new journal, locked: the lock on this
    /// one stays held until this object goes, so commands waiting for it
    /// find the new file when they get it, and wait for the new lock.
    @discardableResult
    public func rewrite(at now: Int64 = Int64(Glibc.time(nil))) throws(JournalError) -> LockedJournal {
        var bytes = JournalFormat.encodeHeader(journalID: state.journalID, baseSequence: state.baseSequence)
        var kept = JournalState()
        kept.journalID = state.journalID
        kept.baseSequence = state.baseSequence
        kept.lastSequence = state.baseSequence
        for record in state.kept(at: now) {
            bytes += JournalFormat.encode(record, journalID: state.journalID)
            kept.apply(record)
        }
        var locked: FileDescriptor? = nil
        do {
            try writeFileAtomically(path) { (fd, temporary) throws(SystemCallError) in
                do throws(Errno) { try fd.writeAll(bytes) } catch {
                    throw SystemCallError(path: temporary, operation: "write", errno: error)
                }
                // Locked before it is renamed in: nobody can slip a record in
                // between the rename and our next append.
                do throws(Errno) {
                    let second = try FileDescriptor.open(temporary, O_RDWR)
                    do throws(Errno) { try second.lockExclusively() } catch {
                        second.close()
                        throw error
                    }
                    locked = second
                } catch {
                    throw SystemCallError(path: temporary, operation: "lock", errno: error)
                }
            }
        } catch {
            // The rename happened when only the folder's fsync failed: the old file is gone.
            if let locked {
                if FileSystem.statusIfPresent(path)?.inode == (try? locked.status())?.inode { replaced = true }
                locked.close()
            }
            throw JournalError(error)
        }
        replaced = true
        return LockedJournal(path: path, fd: locked!, state: kept, end: bytes.count)
    }

    private init(path: String, fd: FileDescriptor, state: JournalState, end: Int) {
        self.path = path
        self.fd = fd
        self.state = state
        self.end = end
    }

    static func writeAll(_ fd: FileDescriptor, _ bytes: [UInt8], at offset: Int, path: String) throws(JournalError) {
        do { try fd.writeAll(bytes, at: offset) } catch { throw .system(path: path, operation: "write", errno: error.rawValue) }
    }

    private static func read(_ fd: FileDescriptor, into bytes: inout [UInt8], path: String) throws(JournalError) -> Int {
        do { return try bytes.withMutableBytes { (raw) throws(Errno) in try fd.readFully(into: raw, at: 0) } } catch {
            throw .system(path: path, operation: "read", errno: error.rawValue)
        }
    }

    private static func truncate(_ fd: FileDescriptor, to size: Int, path: String) throws(JournalError) {
        do { try fd.truncate(to: size) } catch { throw .system(path: path, operation: "truncate", errno: error.rawValue) }
    }

    private static func sync(_ fd: FileDescriptor, path: String) throws(JournalError) {
        do { try fd.sync() } catch { throw .system(path: path, operation: "fsync", errno: error.rawValue) }
    }

    static func syncFolder(of path: String) throws(JournalError) {
        let folder = FileSystem.folder(of: path)
        do { try FileSystem.syncFolder(folder) } catch { throw .system(path: folder, operation: "fsync", errno: error.rawValue) }
    }
}
