import Glibc
import SystemCalls
import TextRules

/// The labels of a directory as the file stores them: the bytes of every
/// label one after the other, and where each one ends. Flat, so a table of
/// millions of labels is two arrays rather than an array per label.
public struct LabelTable: Sendable, Equatable {
    public private(set) var data: [UInt8] = []
    /// `ends[i]` is where label `i` ends in `data` (it starts where `i - 1` ends).
    public private(set) var ends: [UInt32] = []

    public init() {}

    public init(_ labels: [[UInt8]]) {
        for label in labels { append(label) }
    }

    public var count: Int { ends.count }

    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        data.append(contentsOf: bytes)
        ends.append(UInt32(truncatingIfNeeded: data.count))
    }

    public mutating func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { append($0) }
    }

    public mutating func reserve(labels: Int, bytes: Int) {
        ends.reserveCapacity(labels)
        data.reserveCapacity(bytes)
    }

    func start(_ i: Int) -> Int { i == 0 ? 0 : Int(ends[i - 1]) }

    /// Calls `body` with the bytes of label `i`.
    public func withLabel<R>(_ i: Int, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        let start = start(i), end = Int(ends[i])
        return try data.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[start..<end])) }
    }

    /// Why this table cannot go into a file (a label too long, not UTF-8,
    /// out of order); nil when it can.
    func violation() -> String? {
        guard data.count <= Int(UInt32.max) else { return "label data exceeds 4 GiB" }
        return data.withUnsafeBytes { raw -> String? in
            var previous: UnsafeRawBufferPointer? = nil
            for i in 0..<count {
                let label = UnsafeRawBufferPointer(rebasing: raw[start(i)..<Int(ends[i])])
                if let problem = LabelRules.problem(label) { return "label \(i): \(problem)" }
                if let p = previous, !p.lexicographicallyPrecedes(label) { return "labels not strictly ascending at index \(i)" }
                previous = label
            }
            return nil
        }
    }
}

/// What a directory file will hold, known before its entries are handed
/// over: their counts and the labels.
public struct DirectoryPlan: Sendable {
    public var entryCount: Int
    public var prefixCount: Int
    public var labels: LabelTable
    public var directoryVersion: UInt64 = 0
    public var journalID: UInt64 = 0
    public var journalSequence: UInt64 = 0
    /// The numbering plan the numbers were read under (header bytes 152-167).
    public var recordedPlan: RecordedPlan? = nil

    public init(entryCount: Int, prefixCount: Int, labels: LabelTable) {
        self.entryCount = entryCount
        self.prefixCount = prefixCount
        self.labels = labels
    }
}

/// Takes a directory's entries in ascending order and lays them out in the
/// file as they come, holding none of them: what `DirectoryWriter` hands
/// to its caller's closure.
///
/// The exact entries go to their slots: in nodes of eight (`KeyNodes`,
/// version 4) or in Eytzinger order (versions 1 to 3). An in-order walk of
/// either implicit tree visits the slots of each level from left to right,
/// so the sorted entries form one ascending stream of slots per level (10
/// in nodes, about 30 in binary order at 10^9 entries); each level has a
/// small buffer, written out with pwrite when full. Prefix rules and labels are sequential. Every byte of the
/// content passes through a `BlockSealer`, which hashes each 4 KiB block
/// as soon as all its bytes are written, so the checksums need no second
/// read of the file. Memory: a few MiB of buffers and the checksum table
/// (8 bytes per block), whatever the number of entries.
///
/// Threading: one thread.
public final class DirectoryEntrySink {
    private struct Level {
        var first = 0
        var count = 0
        var capacity: Int
        var keys: UnsafeMutablePointer<UInt64>
        var values: UnsafeMutablePointer<UInt32>
    }

    private let layout: DirectoryLayout
    private let plan: DirectoryPlan
    private let sealer: BlockSealer
    private let path: String
    @exclusivity(unchecked) private var levels: [Level] = []
    /// The slot the next exact entry goes to (0 when all are placed), in binary order.
    @exclusivity(unchecked) private var slot = 0
    /// Version 4: where the next exact entry goes.
    @exclusivity(unchecked) private var cursor: KeyNodes.InOrder
    @exclusivity(unchecked) private(set) var exactCount = 0
    @exclusivity(unchecked) private(set) var prefixCount = 0
    @exclusivity(unchecked) private var lastKey: UInt64 = 0
    @exclusivity(unchecked) private var lastPrefix: UInt64 = 0
    @exclusivity(unchecked) private(set) var blocked: UInt64 = 0
    /// Allow entries written: the file is then version 3.
    @exclusivity(unchecked) private(set) var allowing: UInt64 = 0
    @exclusivity(unchecked) private(set) var identified: UInt64 = 0
    @exclusivity(unchecked) private(set) var prefixMask: UInt32 = 0
    private var prefixBuffer: UnsafeMutableRawPointer
    @exclusivity(unchecked) private var prefixBuffered = 0
    private static let prefixBufferRecords = 4096
    /// Slots buffered per level before a write: 128 KiB of keys.
    private static let levelCapacity = 16384
    private let progress: DirectoryWriter.Progress?
    private let progressStep: Int

    init(layout: DirectoryLayout, plan: DirectoryPlan, sealer: BlockSealer, path: String, progress: DirectoryWriter.Progress?) {
        self.layout = layout
        self.plan = plan
        self.sealer = sealer
        self.path = path
        self.progress = progress
        let total = plan.entryCount + plan.prefixCount
        progressStep = max(1, total / 100)
        let n = plan.entryCount
        cursor = KeyNodes.InOrder(nodeCount: layout.nodes ? layout.slotCount / 8 : 0)
        if layout.nodes {
            var width = 8
            for start in KeyNodes.levelStarts(nodeCount: layout.slotCount / 8) {
                let capacity = min(width, DirectoryEntrySink.levelCapacity)
                levels.append(Level(first: 8 * start, capacity: capacity, keys: .allocate(capacity: capacity), values: .allocate(capacity: capacity)))
                width = width > DirectoryEntrySink.levelCapacity ? width : width * 9
            }
        } else if n > 0 {
            let depth = Int.bitWidth - n.leadingZeroBitCount
            for level in 0..<depth {
                let capacity = min(1 << level, DirectoryEntrySink.levelCapacity)
                levels.append(Level(capacity: capacity, keys: .allocate(capacity: capacity), values: .allocate(capacity: capacity)))
            }
            // Leftmost leaf first.
            var k = 1
            while 2 * k <= n { k *= 2 }
            slot = k
            for level in levels.indices { levels[level].first = 1 << level }
        }
        prefixBuffer = .allocate(byteCount: DirectoryEntrySink.prefixBufferRecords * 16, alignment: 8)
    }

    deinit {
        for level in levels {
            level.keys.deallocate()
            level.values.deallocate()
        }
        prefixBuffer.deallocate()
    }

    private func refuse(_ reason: String) -> DirectoryError {
        .corrupt(path: path, reason: "refusing to write: \(reason)")
    }

    private func checkValue(_ value: UInt32) throws(DirectoryError) {
        if value == 0 { throw refuse("an entry neither blocks nor identifies") }
        let labelPlusOne = DirectoryFormat.labelPlusOne(value)
        if Int(labelPlusOne) > plan.labels.count { throw refuse("an entry refers to a missing label") }
        if value & 1 != 0 { blocked += 1 }
        if labelPlusOne != 0 { identified += 1 }
        if DirectoryFormat.allows(value) {
            if value & 1 != 0 { throw refuse("an entry both blocks and allows") }
            allowing += 1
        }
    }

    private func reportProgress() {
        guard let progress else { return }
        let done = exactCount + prefixCount
        if done % progressStep == 0 { progress(Double(done) / Double(max(1, plan.entryCount + plan.prefixCount))) }
    }

    /// The next exact entry: a number above the one before.
    public func exact(_ key: UInt64, _ value: UInt32) throws(DirectoryError) {
        guard exactCount < plan.entryCount else { throw refuse("more than the \(plan.entryCount) numbers announced") }
        guard PhoneNumber(value: key) != nil else { throw refuse("+\(key) is not an E.164 number") }
        guard exactCount == 0 || key > lastKey else { throw refuse("exact keys not strictly ascending at index \(exactCount)") }
        try checkValue(value)
        lastKey = key
        exactCount += 1
        if layout.nodes {
            try place(key, value, level: cursor.depth)
            cursor.advance()
            reportProgress()
            return
        }
        let k = slot
        try place(key, value, level: Int.bitWidth - 1 - k.leadingZeroBitCount)
        // The in-order successor of k.
        let n = plan.entryCount
        if 2 * k + 1 <= n {
            var next = 2 * k + 1
            while 2 * next <= n { next *= 2 }
            slot = next
        } else {
            var next = k
            while next & 1 == 1 { next >>= 1 }
            slot = next >> 1
        }
        reportProgress()
    }

    /// Appends a slot to its level's stream; the levels' slots come in ascending order.
    @inline(__always)
    private func place(_ key: UInt64, _ value: UInt32, level: Int) throws(DirectoryError) {
        var l = levels[level]
        l.keys[l.count] = key.littleEndian
        l.values[l.count] = value.littleEndian
        l.count += 1
        levels[level] = l
        if l.count == l.capacity { try flush(level) }
    }

    /// The next prefix rule (key: digit count << 56 | digits), after every exact entry.
    public func prefix(_ key: UInt64, _ value: UInt32) throws(DirectoryError) {
        guard exactCount == plan.entryCount else { throw refuse("a prefix rule before the last of the \(plan.entryCount) numbers") }
        guard prefixCount < plan.prefixCount else { throw refuse("more than the \(plan.prefixCount) prefix rules announced") }
        guard NumberPrefix(digits: key & ((1 << 56) - 1), length: Int(key >> 56)) != nil else {
            throw refuse("prefix key \(prefixCount) is not a valid prefix")
        }
        guard prefixCount == 0 || key > lastPrefix else { throw refuse("prefix keys not strictly ascending at index \(prefixCount)") }
        try checkValue(value)
        lastPrefix = key
        prefixMask |= 1 << UInt32(key >> 56)
        let record = prefixBuffer + prefixBuffered * 16
        record.storeBytes(of: key.littleEndian, as: UInt64.self)
        record.storeBytes(of: value.littleEndian, toByteOffset: 8, as: UInt32.self)
        record.storeBytes(of: UInt32(0), toByteOffset: 12, as: UInt32.self)
        prefixBuffered += 1
        prefixCount += 1
        if prefixBuffered == DirectoryEntrySink.prefixBufferRecords { try flushPrefixes() }
        reportProgress()
    }

    private func flush(_ level: Int) throws(DirectoryError) {
        let l = levels[level]
        guard l.count > 0 else { return }
        try write(UnsafeRawBufferPointer(start: l.keys, count: l.count * 8), at: layout.keysOffset + 8 * l.first)
        try write(UnsafeRawBufferPointer(start: l.values, count: l.count * 4), at: layout.valuesOffset + 4 * l.first)
        levels[level].first += l.count
        levels[level].count = 0
    }

    private func flushPrefixes() throws(DirectoryError) {
        guard prefixBuffered > 0 else { return }
        try write(UnsafeRawBufferPointer(start: prefixBuffer, count: prefixBuffered * 16),
                  at: layout.prefixesOffset + (prefixCount - prefixBuffered) * 16)
        prefixBuffered = 0
    }

    private func write(_ bytes: UnsafeRawBufferPointer, at offset: Int) throws(DirectoryError) {
        do { try sealer.write(bytes, at: offset) } catch {
            throw .system(path: path, operation: "write", errno: error.rawValue)
        }
    }

    private func zeros(from start: Int, to end: Int) throws(DirectoryError) {
        guard end > start else { return }
        let zero = [UInt8](repeating: 0, count: end - start)
        try zero.withBytes { (raw) throws(DirectoryError) in try write(raw, at: start) }
    }

    /// Writes what is not an entry: slot 0 (binary order), the labels, the padding.
    func writeFixedParts() throws(DirectoryError) {
        if !layout.nodes {
            try zeros(from: layout.keysOffset, to: layout.keysOffset + 8)
            try zeros(from: layout.valuesOffset, to: layout.valuesOffset + 4)
        }
        try zeros(from: layout.valuesOffset + 4 * layout.slotCount, to: layout.prefixesOffset)
        var index = [UInt32](repeating: 0, count: plan.labels.count + 1)
        for (i, end) in plan.labels.ends.enumerated() { index[i + 1] = end.littleEndian }
        let indexWritten: Result<Void, DirectoryError> = index.withUnsafeBytes { raw in
            Result { () throws(DirectoryError) in try write(raw, at: layout.labelIndexOffset) }
        }
        try indexWritten.get()
        try plan.labels.data.withBytes { (raw) throws(DirectoryError) in
            if raw.count > 0 { try write(raw, at: layout.labelDataOffset) }
        }
        try zeros(from: layout.labelDataOffset + plan.labels.data.count, to: layout.contentEnd)
    }

    /// Writes out what is buffered; throws when fewer entries came than announced.
    func finish() throws(DirectoryError) {
        guard exactCount == plan.entryCount else { throw refuse("\(exactCount) of the \(plan.entryCount) numbers announced") }
        guard prefixCount == plan.prefixCount else { throw refuse("\(prefixCount) of the \(plan.prefixCount) prefix rules announced") }
        // The last node's slots after the last number (at most seven).
        while layout.nodes && !cursor.isDone {
            try place(DirectoryFormat.paddingKey, 0, level: cursor.depth)
            cursor.advance()
        }
        for level in levels.indices { try flush(level) }
        try flushPrefixes()
    }
}

/// Computes the block checksums of a version-2 file while it is written:
/// every content byte is written exactly once, through `write`; a block
/// wholly inside one write is hashed from the caller's buffer, the edges
/// of writes are gathered in a buffer of their block until it is whole.
final class BlockSealer {
    private let fd: FileDescriptor
    private let layout: DirectoryLayout
    private let sums: UnsafeMutablePointer<UInt64>
    private var partial: [Int: (bytes: UnsafeMutableRawPointer, filled: Int)] = [:]
    private(set) var sealedCount = 0

    init(fd: FileDescriptor, layout: DirectoryLayout) {
        self.fd = fd
        self.layout = layout
        sums = .allocate(capacity: max(1, layout.blockCount))
    }

    deinit {
        sums.deallocate()
        for (_, p) in partial { p.bytes.deallocate() }
    }

    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int) throws(Errno) {
        try fd.writeAll(bytes, at: offset)
        guard layout.blockShift > 0 else { return }
        var position = offset
        let end = offset + bytes.count
        while position < end {
            let i = (position - DirectoryFormat.headerSize) >> layout.blockShift
            let block = layout.block(i)
            let upto = min(end, block.upperBound)
            let piece = UnsafeRawBufferPointer(rebasing: bytes[(position - offset)..<(upto - offset)])
            if position == block.lowerBound, upto == block.upperBound {
                seal(i, piece)
            } else {
                var p = partial[i] ?? (UnsafeMutableRawPointer.allocate(byteCount: block.count, alignment: 8), 0)
                (p.bytes + (position - block.lowerBound)).copyMemory(from: piece.baseAddress!, byteCount: piece.count)
                p.filled += piece.count
                precondition(p.filled <= block.count, "a byte of block \(i) was written twice")
                if p.filled == block.count {
                    seal(i, UnsafeRawBufferPointer(start: p.bytes, count: block.count))
                    p.bytes.deallocate()
                    partial[i] = nil
                } else {
                    partial[i] = p
                }
            }
            position = upto
        }
    }

    private func seal(_ i: Int, _ bytes: UnsafeRawBufferPointer) {
        sums[i] = XXH64.hash(bytes, seed: UInt64(i)).littleEndian
        sealedCount += 1
    }

    /// Writes the checksum table and the root table; returns the root checksum.
    func finish() throws(Errno) -> UInt64 {
        precondition(partial.isEmpty && sealedCount == layout.blockCount,
                     "\(layout.blockCount - sealedCount) blocks were not written whole")
        let table = UnsafeRawBufferPointer(start: sums, count: layout.blockCount * 8)
        try fd.writeAll(table, at: layout.tableOffset)
        var root = [UInt64](repeating: 0, count: layout.tableBlockCount)
        for j in 0..<layout.tableBlockCount {
            let range = layout.tableBlock(j)
            let bytes = UnsafeRawBufferPointer(rebasing: table[(range.lowerBound - layout.tableOffset)..<(range.upperBound - layout.tableOffset)])
            root[j] = XXH64.hash(bytes, seed: DirectoryFormat.tableSeedBase &+ UInt64(j)).littleEndian
        }
        let rootWritten: Result<Void, Errno> = root.withUnsafeBytes { raw in
            Result { () throws(Errno) in try fd.writeAll(raw, at: layout.rootOffset) }
        }
        try rootWritten.get()
        return root.withUnsafeBytes { XXH64.hash($0) }
    }
}
