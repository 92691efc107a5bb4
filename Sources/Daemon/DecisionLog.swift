import Configuration
import Glibc
import Synchronization
import SystemCalls
import TextRules

/// Where the answering threads' log lines go: a bounded buffer per
/// destination (standard error, the decision log file) that a writer
/// thread drains. Submitting copies the bytes under a mutex the writer
/// holds only to swap buffers, so a slow journald, a full disk or an NFS
/// hiccup can never stall a call; when a buffer is full the lines are
/// dropped and counted (lookupd_log_lines_dropped_total) instead.
///
/// Threading: `submit` from any thread; the writer thread owns the file.
public final class LogSink: @unchecked Sendable {
    public struct FileSettings: Sendable {
        public var path: String
        public var maxSize: Int
        public var keep: Int
        public init(path: String, maxSize: Int, keep: Int) {
            self.path = path
            self.maxSize = maxSize
            self.keep = keep
        }
    }

    public struct Statistics: Sendable {
        public var stderrLines: UInt64 = 0
        public var fileLines: UInt64 = 0
        public var stderrDropped: UInt64 = 0
        public var fileDropped: UInt64 = 0
        public var rotations: UInt64 = 0
        public var fileErrors: UInt64 = 0
    }

    private struct Pending {
        var stderr: [UInt8] = []
        var file: [UInt8] = []
        var stats = Statistics()
        var stopping = false
        var recent = RecentLines()
    }

    let settings: FileSettings?
    /// Whether the last blocked and identified calls' lines are kept for the
    /// status page (`recentCalls`): only when there is one (http-listen).
    let keepsRecent: Bool
    private let capacity: Int
    private let stderrFD: Int32
    private let pending = Locked(Pending())
    private var thread: pthread_t?
    /// Set by the writer thread as it exits.
    private let finished = Atomic<Bool>(false)
    // Writer-thread state.
    private var fileFD: Int32 = -1
    private var fileSize = 0
    private var fileIdentity: (UInt64, UInt64) = (0, 0)
    private var lastReopenCheck = 0.0

    /// - Parameter capacity: bytes buffered per destination before lines are dropped.
    public init(file: FileSettings?, capacity: Int = 4 << 20, stderrFD: Int32 = 2, keepRecent: Bool = false) {
        settings = file
        self.capacity = capacity
        self.stderrFD = stderrFD
        keepsRecent = keepRecent
    }

    /// Opens the log file (so a bad path fails the start, not the first call) and starts the writer.
    public func start() throws(SystemError) {
        if settings != nil { try openFile() }
        var t = pthread_t()
        let context = Unmanaged.passRetained(self).toOpaque()
        let rc = pthread_create(&t, nil, { raw in
            let sink = Unmanaged<LogSink>.fromOpaque(raw!).takeRetainedValue()
            sink.runWriter()
            return nil
        }, context)
        guard rc == 0 else { throw SystemError("log writer thread", rc) }
        thread = t
    }

    /// Writes out everything submitted so far and stops the writer. A writer
    /// stuck in write(2) (a journald that stopped reading, a FIFO nobody
    /// drains) is left behind after `patience` seconds so the daemon can
    /// still exit.
    public func stop(patience: Double = 3) {
        guard let thread else { return }
        self.thread = nil
        pending.withLock { $0.stopping = true }
        let deadline = monotonicNow() + patience
        while !finished.load(ordering: .acquiring) && monotonicNow() < deadline {
            var pause = timespec(tv_sec: 0, tv_nsec: 5_000_000)
            nanosleep(&pause, nil)
        }
        if finished.load(ordering: .acquiring) { pthread_join(thread, nil) } else { pthread_detach(thread) }
    }

    /// Queues whole lines; never waits for I/O. `recent`: lines (without
    /// newlines) ending at `ends`, of which the last `RecentLines.capacity`
    /// replace the oldest kept.
    public func submit(stderr: UnsafeRawBufferPointer, file: UnsafeRawBufferPointer, recent: [UInt8] = [], ends: [Int] = []) {
        let hasFile = settings != nil && !file.isEmpty
        pending.withLock { p in
            if !ends.isEmpty {
                recent.withUnsafeBytes { all in
                    let first = max(0, ends.count - RecentLines.capacity)
                    var start = first == 0 ? 0 : ends[first - 1]
                    for end in ends[first...] {
                        p.recent.add(UnsafeRawBufferPointer(rebasing: all[start..<end]))
                        start = end
                    }
                }
            }
            if !stderr.isEmpty {
                if p.stderr.count + stderr.count <= capacity {
                    p.stderr.append(contentsOf: stderr)
                    p.stats.stderrLines += LogSink.lines(stderr)
                } else {
                    p.stats.stderrDropped += LogSink.lines(stderr)
                }
            }
            if hasFile {
                if p.file.count + file.count <= capacity {
                    p.file.append(contentsOf: file)
                    p.stats.fileLines += LogSink.lines(file)
                } else {
                    p.stats.fileDropped += LogSink.lines(file)
                }
            }
        }
    }

    public var statistics: Statistics { pending.withLock { $0.stats } }

    /// The last blocked and identified calls' decision-log lines, newest first.
    var recentCalls: [[UInt8]] { pending.withLock { $0.recent.newestFirst } }

    /// Line ends, found with memchr: a byte-by-byte count cost about 200 instructions per call.
    private static func lines(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        guard var p = bytes.baseAddress else { return 0 }
        let end = p + bytes.count
        var n: UInt64 = 0
        while p < end, let found = memchr(p, 0x0A, end - p) {
            n += 1
            p = UnsafeRawPointer(found) + 1
        }
        return n
    }

    // MARK: - Writer thread

    private func runWriter() {
        defer {
            if fileFD >= 0 { close(fileFD); fileFD = -1 }
            finished.store(true, ordering: .releasing)
        }
        var stderrChunk: [UInt8] = []
        var fileChunk: [UInt8] = []
        stderrChunk.reserveCapacity(1 << 16)
        fileChunk.reserveCapacity(1 << 16)
        while true {
            let stopping = pending.withLock { p in
                // Swap, keeping both sides' capacity: no allocation in steady state.
                swap(&p.stderr, &stderrChunk)
                swap(&p.file, &fileChunk)
                return p.stopping
            }
            if !stderrChunk.isEmpty {
                writeStandardError(stderrChunk)
                stderrChunk.removeAll(keepingCapacity: stderrChunk.capacity <= 8 << 20)
            }
            if !fileChunk.isEmpty {
                writeFile(fileChunk)
                fileChunk.removeAll(keepingCapacity: fileChunk.capacity <= 8 << 20)
            }
            if stopping {
                // Lines submitted between the swap and now are taken on one last round.
                let rest = pending.withLock { p -> ([UInt8], [UInt8]) in
                    defer { p.stderr = []; p.file = [] }
                    return (p.stderr, p.file)
                }
                if !rest.0.isEmpty { writeStandardError(rest.0) }
                if !rest.1.isEmpty { writeFile(rest.1) }
                return
            }
            if settings != nil { checkReplaced() }
            // Polling keeps the submit path free of wake-up syscalls; 20 ms is
            // well below what a reader of a log notices.
            var pause = timespec(tv_sec: 0, tv_nsec: 20_000_000)
            nanosleep(&pause, nil)
        }
    }

    /// Writes `bytes`; the count written before an error stopped it (all of them without one).
    private static func write(_ fd: Int32, _ bytes: ArraySlice<UInt8>) -> Int {
        var offset = 0
        bytes.withUnsafeBytes { raw in
            while offset < raw.count {
                guard let n = try? FileDescriptor(rawValue: fd).write(UnsafeRawBufferPointer(rebasing: raw[offset...])), n > 0 else { return }
                offset += n
            }
        }
        return offset
    }

    /// Lines standard error did not take (journald gone, a full pipe) are counted as dropped.
    private func writeStandardError(_ bytes: [UInt8]) {
        let written = LogSink.write(stderrFD, bytes[...])
        guard written < bytes.count else { return }
        let lost = bytes[written...].withUnsafeBytes { LogSink.lines($0) }
        pending.withLock { $0.stats.stderrDropped += lost }
    }

    /// Writes whole lines, rotating first when the next lines would take the
    /// file past its size (a single line longer than that gets a file of its own).
    private func writeFile(_ bytes: [UInt8]) {
        guard let settings else { return }
        if fileFD < 0 {
            do { try openFile() } catch {
                countFileError(dropping: bytes)
                return
            }
        }
        var start = 0
        while start < bytes.count {
            let room = settings.maxSize - fileSize
            // The longest run of whole lines that fits.
            var end = start
            var scan = start
            while scan < bytes.count {
                guard let newline = bytes[scan...].firstIndex(of: 0x0A) else { scan = bytes.count; break }
                if newline + 1 - start > room { break }
                end = newline + 1
                scan = newline + 1
            }
            if end == start {
                if fileSize > 0 {
                    rotate()
                    if fileFD < 0 { countFileError(dropping: Array(bytes[start...])); return }
                    continue
                }
                // An empty file and still no room: this line alone exceeds the limit.
                end = bytes[start...].firstIndex(of: 0x0A).map { $0 + 1 } ?? bytes.count
            }
            let written = LogSink.write(fileFD, bytes[start..<end])
            // A full or failing disk: the lines not written whole are lost, and counted so
            // (lookupd_log_lines_dropped_total), not only the error.
            if written < end - start { countFileError(dropping: Array(bytes[(start + written)..<end])) }
            fileSize += written
            start = end
        }
    }

    private func countFileError(dropping bytes: [UInt8]) {
        let lost = bytes.withUnsafeBytes { LogSink.lines($0) }
        pending.withLock {
            $0.stats.fileErrors += 1
            $0.stats.fileDropped += lost
        }
    }

    private func openFile() throws(SystemError) {
        guard let settings else { return }
        let fd: FileDescriptor
        do { fd = try FileDescriptor.open(settings.path, O_WRONLY | O_APPEND | O_CREAT, permissions: 0o640) } catch {
            throw SystemError("log-file \(settings.path)", error.rawValue)
        }
        let st = try? fd.status()
        fileFD = fd.rawValue
        fileSize = Int(st?.size ?? 0)
        fileIdentity = (st?.device ?? 0, st?.inode ?? 0)
    }

    /// PATH -> PATH.1 -> ... -> PATH.KEEP (the oldest removed), then a fresh PATH.
    private func rotate() {
        guard let settings else { return }
        close(fileFD)
        fileFD = -1
        if settings.keep == 0 {
            FileSystem.removeIfPresent(settings.path)
        } else {
            FileSystem.removeIfPresent("\(settings.path).\(settings.keep)")
            var k = settings.keep - 1
            while k >= 1 {
                // Older files may not exist yet (ENOENT): that is no error.
                try? FileSystem.rename("\(settings.path).\(k)", to: "\(settings.path).\(k + 1)")
                k -= 1
            }
            do { try FileSystem.rename(settings.path, to: "\(settings.path).1") } catch {
                pending.withLock { $0.stats.fileErrors += 1 }
            }
        }
        pending.withLock { $0.stats.rotations += 1 }
        do { try openFile() } catch { fileFD = -1 }
    }

    /// A file moved or deleted by someone else (logrotate, an operator) is
    /// reopened at its path, at most once a second.
    private func checkReplaced() {
        guard let settings else { return }
        let now = monotonicNow()
        guard now - lastReopenCheck >= 1 else { return }
        lastReopenCheck = now
        let st = FileSystem.statusIfPresent(settings.path)
        if st == nil || st!.device != fileIdentity.0 || st!.inode != fileIdentity.1 {
            if fileFD >= 0 { close(fileFD); fileFD = -1 }
            do { try openFile() } catch { pending.withLock { $0.stats.fileErrors += 1 } }
        }
    }
}

/// The last lines kept, in a ring of reused buffers: once full, adding a
/// line copies it over the oldest without allocating.
///
/// Threading: inside `LogSink`'s mutex only.
struct RecentLines {
    static let capacity = 50
    private var slots: [[UInt8]] = []
    private var next = 0

    mutating func add(_ line: UnsafeRawBufferPointer) {
        guard slots.count == RecentLines.capacity else {
            slots.append(Array(line))
            return
        }
        slots[next].removeAll(keepingCapacity: true)
        slots[next].append(contentsOf: line)
        next = next + 1 == RecentLines.capacity ? 0 : next + 1
    }

    var newestFirst: [[UInt8]] {
        guard slots.count == RecentLines.capacity else { return slots.reversed() }
        return (slots[next...] + slots[..<next]).reversed()
    }
}
