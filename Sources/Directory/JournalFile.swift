import Glibc

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
        // O_NONBLOCK: a FIFO put in the journal's place must not hang the daemon.
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        if fd < 0 {
            guard errno == ENOENT else { throw .system(path: path, operation: "open", errno: errno) }
            return noJournal()
        }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw .system(path: path, operation: "stat", errno: errno) }
        guard (st.st_mode & S_IFMT) == S_IFREG else { throw .invalid("\(path): not a regular file") }
        if Int(st.st_size) < JournalFormat.headerSize {
            // A journal being created (its header not written yet) holds no
            // records; anything else this short is not a journal.
            var head = [UInt8](repeating: 0, count: min(Int(st.st_size), JournalFormat.magic.count))
            let got = head.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
            guard got >= 0, head.prefix(got).elementsEqual(JournalFormat.magic.prefix(got)) else { throw .notAJournal(path: path) }
            return noJournal()
        }
        let now = Identity(device: UInt64(st.st_dev), inode: UInt64(st.st_ino), size: Int64(st.st_size),
                           mtime: st.st_mtim.tv_sec, mtimeNanos: st.st_mtim.tv_nsec,
                           ctime: st.st_ctim.tv_sec, ctimeNanos: st.st_ctim.tv_nsec)
        // With a tail pending, look again every time: truncate-and-append can
        // leave size and (coarse) timestamps as they were.
        if now == identity && tail == nil { return Update() }
        let size = Int(st.st_size)

        if let known = identity, known.device == now.device, known.inode == now.inode, size >= end, state.journalID != 0 {
            // Same file: check it still has the header we read, then read on.
            var head = [UInt8](repeating: 0, count: JournalFormat.headerSize)
            let got = head.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
            if got == JournalFormat.headerSize,
               let header = try? JournalFormat.decodeHeader(head[...], path: path),
               header.journalID == state.journalID, header.baseSequence == state.baseSequence {
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
        let scanned = bytes.withUnsafeBytes { raw in
            JournalFormat.scan(UnsafeRawBufferPointer(rebasing: raw[JournalFormat.headerSize...]), base: JournalFormat.headerSize,
                               journalID: header.journalID, after: header.baseSequence) { fresh.apply($0) }
        }
        let newTail = try classifyTail(scanned, bytes[min(scanned.end, bytes.count)...])
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

    private func readRecords(_ fd: Int32, from offset: Int, size: Int) throws(JournalError) -> Update {
        var update = Update()
        guard size > offset else {
            update.newTail = reportTail(nil)
            tail = nil
            return update
        }
        var bytes = [UInt8](repeating: 0, count: size - offset)
        var got = 0
        while got < bytes.count {
            let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + got, $0.count - got, off_t(offset + got)) }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { throw .system(path: path, operation: "read", errno: errno) }
            if n == 0 { break }
            got += n
        }
        var added = state
        let scanned = bytes.withUnsafeBytes { raw in
            JournalFormat.scan(UnsafeRawBufferPointer(rebasing: raw[0..<got]), base: offset,
                               journalID: state.journalID, after: state.lastSequence) { added.apply($0) }
        }
        let newTail = try classifyTail(scanned, bytes[min(scanned.end - offset, got)..<got])
        update.changed = scanned.end > offset
        state = added
        end = scanned.end
        tail = newTail
        update.newTail = reportTail(newTail)
        return update
    }

    private func readAll(_ fd: Int32, size: Int) throws(JournalError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: size)
        var got = 0
        while got < size {
            let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + got, $0.count - got, off_t(got)) }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { throw .system(path: path, operation: "read", errno: errno) }
            if n == 0 { break }
            got += n
        }
        return Array(bytes.prefix(got))
    }

    private func classifyTail(_ scanned: JournalFormat.ScanEnd, _ rest: ArraySlice<UInt8>) throws(JournalError) -> JournalTail? {
        guard !rest.isEmpty else { return nil }
        let tail = rest.withUnsafeBytes { JournalFormat.tail($0, offset: scanned.end, reason: scanned.problem ?? "unreadable") }
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
    private let fd: Int32
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
            let fd = Glibc.open(path, O_RDWR | O_CLOEXEC | O_NONBLOCK | (create ? O_CREAT : 0), 0o644)
            if fd < 0 {
                if errno == ENOENT && !create { return nil }
                throw .system(path: path, operation: create ? "open or create" : "open", errno: errno)
            }
            while flock(fd, LOCK_EX) != 0 {
                if errno == EINTR { continue }
                let e = errno
                close(fd)
                throw .system(path: path, operation: "lock", errno: e)
            }
            // Compaction renames a new journal over the path while others
            // wait for the lock on the old one: whoever then gets the old
            // one must start again on the new one, or its record is lost.
            var held = stat(), named = stat()
            guard fstat(fd, &held) == 0 else {
                let e = errno
                close(fd)
                throw .system(path: path, operation: "stat", errno: e)
            }
            guard (held.st_mode & S_IFMT) == S_IFREG else {
                close(fd)
                throw .invalid("\(path): not a regular file")
            }
            if stat(path, &named) != 0 {
                let e = errno
                close(fd)
                guard e == ENOENT else { throw .system(path: path, operation: "stat", errno: e) }
                if !create { return nil }
                continue
            }
            if named.st_ino != held.st_ino || named.st_dev != held.st_dev {
                close(fd)
                continue
            }
            do {
                return try LockedJournal(path: path, fd: fd, size: Int(held.st_size))
            } catch {
                close(fd)
                throw error
            }
        }
    }

    private init(path: String, fd: Int32, size: Int) throws(JournalError) {
        self.path = path
        self.fd = fd
        var state = JournalState()
        if size < JournalFormat.headerSize {
            // Records are only written after a complete, synced header, so
            // a shorter file holds none: (re)initialize it, unless it is
            // not the start of a journal at all.
            var head = [UInt8](repeating: 0, count: min(size, JournalFormat.magic.count))
            let got = head.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
            guard got == head.count, head.elementsEqual(JournalFormat.magic.prefix(head.count)) else { throw .notAJournal(path: path) }
            var id: UInt64 = 0
            while id == 0 { id = UInt64.random(in: 1...UInt64.max) }
            try LockedJournal.writeAll(fd, JournalFormat.encodeHeader(journalID: id, baseSequence: 0), at: 0, path: path)
            guard ftruncate(fd, off_t(JournalFormat.headerSize)) == 0 else { throw .system(path: path, operation: "truncate", errno: errno) }
            guard fsync(fd) == 0 else { throw .system(path: path, operation: "fsync", errno: errno) }
            try LockedJournal.syncFolder(of: path)
            state.journalID = id
            self.state = state
            self.end = JournalFormat.headerSize
            return
        }
        var bytes = [UInt8](repeating: 0, count: size)
        var got = 0
        while got < size {
            let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + got, $0.count - got, off_t(got)) }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { throw .system(path: path, operation: "read", errno: errno) }
            if n == 0 { break }
            got += n
        }
        let header = try JournalFormat.decodeHeader(bytes[0..<got], path: path)
        state.journalID = header.journalID
        state.baseSequence = header.baseSequence
        state.lastSequence = header.baseSequence
        let scanned = bytes.withUnsafeBytes { raw in
            JournalFormat.scan(UnsafeRawBufferPointer(rebasing: raw[JournalFormat.headerSize..<got]), base: JournalFormat.headerSize,
                               journalID: header.journalID, after: header.baseSequence) { state.apply($0) }
        }
        if scanned.end < got {
            let tail = bytes.withUnsafeBytes { raw in
                JournalFormat.tail(UnsafeRawBufferPointer(rebasing: raw[scanned.end..<got]), offset: scanned.end, reason: scanned.problem ?? "unreadable")
            }
            guard tail.isTorn else { throw .damaged(path: path, offset: tail.offset, bytes: tail.length, reason: tail.reason) }
            guard ftruncate(fd, off_t(scanned.end)) == 0 else { throw .system(path: path, operation: "truncate", errno: errno) }
            guard fsync(fd) == 0 else { throw .system(path: path, operation: "fsync", errno: errno) }
            discardedTail = tail
        }
        self.state = state
        self.end = scanned.end
    }

    deinit { close(fd) }

    /// Appends one record and syncs it to disk before returning: once this
    /// returns, the record survives a crash.
    public func append(key: UInt64, _ operation: JournalOperation) throws(JournalError) -> JournalRecord {
        precondition(!replaced, "append to a journal that was replaced")
        let record = JournalRecord(sequence: state.lastSequence + 1, key: key, operation: operation)
        let bytes = JournalFormat.encode(record, journalID: state.journalID)
        try LockedJournal.writeAll(fd, bytes, at: end, path: path)
        guard fsync(fd) == 0 else { throw .system(path: path, operation: "fsync", errno: errno) }
        end += bytes.count
        state.apply(record)
        return record
    }

    /// Replaces the journal with an empty one with the same id whose first
    /// record will be `baseSequence` + 1, atomically: a temporary file,
    /// synced, renamed over the journal, and the folder synced. Only for
    /// after every record is merged (`baseSequence` ≥ the last record). The
    /// lock stays held on the old file until this object goes; commands
    /// waiting for it then find the new one.
    public func replace(baseSequence: UInt64) throws(JournalError) {
        guard baseSequence >= state.lastSequence else {
            throw .invalid("\(path): cannot start the journal after \(baseSequence): record \(state.lastSequence) is not merged")
        }
        let bytes = JournalFormat.encodeHeader(journalID: state.journalID, baseSequence: baseSequence)
        var kept = JournalState()
        kept.journalID = state.journalID
        kept.baseSequence = baseSequence
        kept.lastSequence = baseSequence
        let (folder, name) = DirectoryWriter.splitPath(path)
        let temporary = folder + "/." + name + ".tmp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let out = Glibc.open(temporary, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard out >= 0 else { throw .system(path: temporary, operation: "create", errno: errno) }
        var committed = false
        defer {
            close(out)
            if !committed { unlink(temporary) }
        }
        try LockedJournal.writeAll(out, bytes, at: 0, path: temporary)
        guard fsync(out) == 0 else { throw .system(path: temporary, operation: "fsync", errno: errno) }
        guard rename(temporary, path) == 0 else { throw .system(path: path, operation: "rename \(temporary) to", errno: errno) }
        committed = true
        replaced = true
        try LockedJournal.syncFolder(of: path)
        state = kept
    }

    static func writeAll(_ fd: Int32, _ bytes: [UInt8], at offset: Int, path: String) throws(JournalError) {
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress! + done, $0.count - done, off_t(offset + done)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw .system(path: path, operation: "write", errno: n < 0 ? errno : EIO) }
            done += n
        }
    }

    static func syncFolder(of path: String) throws(JournalError) {
        let folder = DirectoryWriter.splitPath(path).folder
        let fd = Glibc.open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw .system(path: folder, operation: "fsync", errno: errno) }
    }
}
