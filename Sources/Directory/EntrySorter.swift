import Glibc
import SystemCalls

/// One entry read from a source, on its way to be sorted: the key
/// (`DirectoryCompiler.Pending`), where it was read, and its value word
/// with the compiler's label number.
struct SortedRecord {
    var key: UInt64
    /// The global line number (see `EntrySorter.origin`).
    var origin: UInt64
    var value: UInt32
}

/// Sorts the entries of a compile in bounded memory: an external merge sort.
///
/// Entries are collected in a buffer in the order they are read. When it is
/// full, it is sorted (a stable LSD radix sort on the key, so entries with
/// one key stay in reading order) and written as a *run*: a file in a
/// temporary folder beside the output, varint-coded (key deltas, origins
/// relative to the run's first, values: about 10 bytes an entry instead of
/// 16). At the end the runs are merged (a heap over one cursor per run,
/// ties broken by run, which is reading order), so the compiler sees every
/// entry in (key, reading order), exactly as a sort in memory would give
/// it. When everything fits in one buffer, nothing is written.
///
/// Memory: two buffers of 16 bytes per entry (the radix sort's source and
/// target) while sorting, and while merging a read buffer per run sharing
/// that space (1 MiB each at most, 64 KiB at least); `capacity` is chosen
/// by the compiler from its memory budget.
///
/// Origins: each record carries a global line number, the file's base plus
/// the line, kept in 32 bits relative to the first of its run (a run
/// spanning more lines than that is closed early).
///
/// Threading: one thread.
final class EntrySorter {
    /// Key, then origin relative to `runBase` (high 32 bits) and value (low 32).
    private struct Packed {
        var key: UInt64
        var aux: UInt64
    }

    let capacity: Int
    private let folderParent: String?
    private var folder: String? = nil
    @exclusivity(unchecked) private var buffer: UnsafeMutablePointer<Packed>
    private var scratch: UnsafeMutablePointer<Packed>? = nil
    @exclusivity(unchecked) private(set) var count = 0
    @exclusivity(unchecked) private var runBase: UInt64 = 0
    private var runs: [Run] = []
    /// Bytes written to runs so far, for the summary.
    private(set) var spilledBytes = 0
    @exclusivity(unchecked) private(set) var totalRecords = 0

    private struct Run {
        var path: String
        var records: Int
        var base: UInt64
    }

    /// - Parameters:
    ///   - capacity: entries per run.
    ///   - folder: where the temporary folder of runs is made; nil keeps
    ///     everything in memory (the buffer grows).
    init(capacity: Int, folder: String?) {
        self.capacity = max(capacity, 1024)
        self.folderParent = folder
        buffer = .allocate(capacity: folder == nil ? 1024 : self.capacity)
        bufferCapacity = folder == nil ? 1024 : self.capacity
    }

    @exclusivity(unchecked) private var bufferCapacity: Int

    deinit {
        buffer.deallocate()
        scratch?.deallocate()
        removeRuns()
    }

    var spilled: Bool { !runs.isEmpty }
    private(set) var runsWritten = 0
    var temporaryFolder: String? { folder }

    func append(key: UInt64, origin: UInt64, value: UInt32) throws(DirectoryError) {
        if count > 0 {
            let outOfRange = origin &- runBase > UInt64(UInt32.max)
            if folderParent != nil, count == capacity || outOfRange {
                try spill()
            } else if count == bufferCapacity {
                grow()
            }
            // Held in memory only: four billion lines do not fit anyway.
            precondition(count == 0 || origin &- runBase <= UInt64(UInt32.max), "more than 2^32 lines in one sort buffer")
        }
        if count == 0 { runBase = origin }
        buffer[count] = Packed(key: key, aux: (origin &- runBase) << 32 | UInt64(value))
        count += 1
        totalRecords += 1
    }

    private func grow() {
        let grown = UnsafeMutablePointer<Packed>.allocate(capacity: bufferCapacity * 2)
        grown.moveInitialize(from: buffer, count: count)
        buffer.deallocate()
        buffer = grown
        bufferCapacity *= 2
    }

    // MARK: - Sorting a buffer

    /// Stable LSD radix sort of `buffer[0..<count]` by key, 11 bits a pass;
    /// digits that are the same for every key are skipped (a list of one
    /// country's numbers needs 4 passes).
    private func sortBuffer() {
        let n = count
        guard n > 1 else { return }
        if scratch == nil { scratch = .allocate(capacity: bufferCapacity) }
        let bits = 11, radix = 1 << 11, digits = 6
        let histograms = UnsafeMutablePointer<Int>.allocate(capacity: radix * digits)
        defer { histograms.deallocate() }
        histograms.initialize(repeating: 0, count: radix * digits)
        var src = buffer
        var dst = scratch!
        for i in 0..<n {
            var key = src[i].key
            for d in 0..<digits {
                histograms[d * radix + Int(key & UInt64(radix - 1))] += 1
                key >>= UInt64(bits)
            }
        }
        for d in 0..<digits {
            let h = histograms + d * radix
            // One bucket holding everything: this digit is the same in every key.
            var constant = false
            for b in 0..<radix where h[b] != 0 {
                constant = h[b] == n
                break
            }
            if constant { continue }
            var sum = 0
            for b in 0..<radix {
                let c = h[b]
                h[b] = sum
                sum += c
            }
            let shift = UInt64(d * bits)
            for i in 0..<n {
                let r = src[i]
                let b = Int((r.key >> shift) & UInt64(radix - 1))
                dst[h[b]] = r
                h[b] += 1
            }
            swap(&src, &dst)
        }
        if src != buffer {
            buffer.update(from: src, count: n)
        }
    }

    // MARK: - Runs

    private func makeFolder() throws(DirectoryError) -> String {
        if let folder { return folder }
        let parent = folderParent!
        var template = Array((parent + "/.lookupd-sort-XXXXXX").utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        guard made != nil else {
            throw .system(path: parent, operation: "create a temporary folder for sorting in", errno: errno)
        }
        let path = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        folder = path
        return path
    }

    /// Sorts the buffer and writes it as a run.
    private func spill() throws(DirectoryError) {
        sortBuffer()
        let folder = try makeFolder()
        let path = folder + "/run-\(runs.count)"
        let fd: FileDescriptor
        do { fd = try FileDescriptor.open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, permissions: 0o600) } catch {
            throw .system(path: path, operation: "create", errno: error.rawValue)
        }
        defer { fd.close() }
        var writer = VarintWriter(fd: fd, path: path)
        var previous: UInt64 = 0
        for i in 0..<count {
            let r = buffer[i]
            try writer.put(r.key &- previous)
            previous = r.key
            try writer.put(r.aux >> 32)
            try writer.put(r.aux & 0xFFFF_FFFF)
        }
        try writer.flush()
        spilledBytes += writer.written
        runs.append(Run(path: path, records: count, base: runBase))
        runsWritten += 1
        count = 0
    }

    private func removeRuns() {
        for run in runs { _ = unlink(run.path) }
        runs = []
        if let folder { _ = rmdir(folder) }
        folder = nil
    }

    // MARK: - Reading back in order

    /// Calls `body` with every record in (key, reading) order, then frees
    /// everything (buffers and runs).
    func drain(_ body: (SortedRecord) throws(DirectoryError) -> Void) throws(DirectoryError) {
        defer { removeRuns() }
        if runs.isEmpty {
            sortBuffer()
            scratch?.deallocate()
            scratch = nil
            for i in 0..<count {
                let r = buffer[i]
                try body(SortedRecord(key: r.key, origin: runBase + (r.aux >> 32), value: UInt32(truncatingIfNeeded: r.aux)))
            }
            count = 0
            return
        }
        if count > 0 { try spill() }
        // The buffers are not needed while merging.
        buffer.deallocate()
        buffer = .allocate(capacity: 1)
        bufferCapacity = 1
        scratch?.deallocate()
        scratch = nil
        // The read buffers share what the sort buffers held (1 MiB each at
        // most, 64 KiB at least): many runs of a small budget stay within it.
        let bufferSize = min(1 << 20, max(64 << 10, capacity * MemoryLayout<Packed>.stride * 2 / runs.count))
        var cursors: [RunCursor] = []
        for run in runs { cursors.append(try RunCursor(run.path, records: run.records, base: run.base, bufferSize: bufferSize)) }
        defer { for c in cursors { c.close() } }
        // A binary heap of run numbers ordered by (current key, run number).
        var heap: [Int] = []
        for i in cursors.indices where try cursors[i].advance() { heap.append(i) }
        func less(_ a: Int, _ b: Int) -> Bool {
            let ka = cursors[a].current.key, kb = cursors[b].current.key
            return ka != kb ? ka < kb : a < b
        }
        func siftDown(_ start: Int) {
            var i = start
            while true {
                let l = 2 * i + 1
                if l >= heap.count { return }
                var m = l
                if l + 1 < heap.count, less(heap[l + 1], heap[l]) { m = l + 1 }
                if !less(heap[m], heap[i]) { return }
                heap.swapAt(i, m)
                i = m
            }
        }
        for i in stride(from: heap.count / 2 - 1, through: 0, by: -1) { siftDown(i) }
        while let top = heap.first {
            try body(cursors[top].current)
            if try cursors[top].advance() {
                siftDown(0)
            } else {
                heap[0] = heap[heap.count - 1]
                heap.removeLast()
                if !heap.isEmpty { siftDown(0) }
            }
        }
    }
}

/// Buffered varint (LEB128) output to a file.
struct VarintWriter {
    let fd: FileDescriptor
    let path: String
    private var buffer: UnsafeMutablePointer<UInt8>
    private var used = 0
    private(set) var written = 0
    static let size = 1 << 20

    init(fd: FileDescriptor, path: String) {
        self.fd = fd
        self.path = path
        buffer = .allocate(capacity: VarintWriter.size)
    }

    @inline(__always)
    mutating func put(_ value: UInt64) throws(DirectoryError) {
        if used > VarintWriter.size - 10 { try flush() }
        var v = value
        while v >= 0x80 {
            buffer[used] = UInt8(truncatingIfNeeded: v) | 0x80
            used += 1
            v >>= 7
        }
        buffer[used] = UInt8(v)
        used += 1
    }

    mutating func flush() throws(DirectoryError) {
        guard used > 0 else { return }
        do { try fd.writeAll(UnsafeRawBufferPointer(start: buffer, count: used)) } catch {
            throw .system(path: path, operation: "write", errno: error.rawValue)
        }
        written += used
        used = 0
    }

    /// Flushes and frees the buffer.
    mutating func close() throws(DirectoryError) {
        try flush()
        buffer.deallocate()
        buffer = .allocate(capacity: 1)
    }
}

/// Buffered varint input from a file.
final class VarintReader {
    let fd: FileDescriptor
    let path: String
    private let buffer: UnsafeMutablePointer<UInt8>
    private let size: Int
    @exclusivity(unchecked) private var start = 0
    @exclusivity(unchecked) private var end = 0
    @exclusivity(unchecked) private var atEnd = false

    init(_ path: String, bufferSize: Int = 1 << 20) throws(DirectoryError) {
        do { fd = try FileDescriptor.open(path, O_RDONLY | O_CLOEXEC) } catch {
            throw .system(path: path, operation: "open", errno: error.rawValue)
        }
        self.path = path
        size = max(bufferSize, 64)
        buffer = .allocate(capacity: size)
        // Read once, front to back: no use keeping what was read.
        _ = posix_fadvise(fd.rawValue, 0, 0, POSIX_FADV_SEQUENTIAL)
    }

    deinit {
        buffer.deallocate()
    }

    func close() { fd.close() }

    private func refill() throws(DirectoryError) {
        if start < end { buffer.update(from: buffer + start, count: end - start) }
        end -= start
        start = 0
        let n: Int
        do { n = try fd.read(into: UnsafeMutableRawBufferPointer(start: buffer + end, count: size - end)) } catch {
            throw .system(path: path, operation: "read", errno: error.rawValue)
        }
        if n == 0 { atEnd = true }
        end += n
    }

    @inline(__always)
    func get() throws(DirectoryError) -> UInt64 {
        if end - start < 10, !atEnd { try refill() }
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            guard start < end, shift < 64 else { throw .corrupt(path: path, reason: "temporary file ends in the middle of a record") }
            let b = buffer[start]
            start += 1
            value |= UInt64(b & 0x7F) << shift
            if b < 0x80 { return value }
            shift += 7
        }
    }
}

/// One run being merged.
final class RunCursor {
    private let reader: VarintReader
    @exclusivity(unchecked) private var remaining: Int
    private let base: UInt64
    @exclusivity(unchecked) private(set) var current = SortedRecord(key: 0, origin: 0, value: 0)

    init(_ path: String, records: Int, base: UInt64, bufferSize: Int) throws(DirectoryError) {
        reader = try VarintReader(path, bufferSize: bufferSize)
        remaining = records
        self.base = base
    }

    func close() { reader.close() }

    /// Moves to the next record; false at the end of the run.
    @inline(__always)
    func advance() throws(DirectoryError) -> Bool {
        guard remaining > 0 else { return false }
        remaining -= 1
        let key = current.key &+ (try reader.get())
        let origin = base + (try reader.get())
        let value = UInt32(truncatingIfNeeded: try reader.get())
        current = SortedRecord(key: key, origin: origin, value: value)
        return true
    }
}

/// The entries a compile keeps, in order, between resolving duplicates
/// (which tells how many there are) and writing the file (which must know
/// that first): in memory when the input fit in memory, otherwise a
/// varint-coded file in the temporary folder.
final class KeptSpool {
    private let folder: String?
    private var path: String? = nil
    @exclusivity(unchecked) private var writer: VarintWriter? = nil
    @exclusivity(unchecked) private var keys: [UInt64] = []
    @exclusivity(unchecked) private var values: [UInt32] = []
    @exclusivity(unchecked) private var previous: UInt64 = 0
    @exclusivity(unchecked) private(set) var count = 0
    /// Exact entries come first (their keys have bit 63 clear).
    @exclusivity(unchecked) private(set) var exactCount = 0
    private(set) var bytes = 0

    /// `folder` nil: in memory.
    init(folder: String?) {
        self.folder = folder
    }

    func append(_ key: UInt64, _ value: UInt32) throws(DirectoryError) {
        count += 1
        if key >> 63 == 0 { exactCount += 1 }
        guard let folder else {
            keys.append(key)
            values.append(value)
            return
        }
        if writer == nil {
            var template = Array((folder + "/.lookupd-kept-XXXXXX").utf8CString)
            let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
            guard fd >= 0 else { throw .system(path: folder, operation: "create a temporary file in", errno: errno) }
            let name = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
            path = name
            writer = VarintWriter(fd: FileDescriptor(rawValue: fd), path: name)
        }
        try writer!.put(key &- previous)
        try writer!.put(UInt64(value))
        previous = key
    }

    /// Hands every entry over again, in order.
    func replay(_ body: (UInt64, UInt32) throws(DirectoryError) -> Void) throws(DirectoryError) {
        guard var writer, let path else {
            for i in keys.indices { try body(keys[i], values[i]) }
            return
        }
        try writer.close()
        bytes = writer.written
        writer.fd.close()
        self.writer = nil
        let reader = try VarintReader(path)
        defer { reader.close() }
        var key: UInt64 = 0
        for _ in 0..<count {
            key &+= try reader.get()
            try body(key, UInt32(truncatingIfNeeded: try reader.get()))
        }
    }

    func remove() {
        if var writer {
            try? writer.close()
            writer.fd.close()
            self.writer = nil
        }
        if let path { _ = unlink(path) }
        path = nil
    }
}
