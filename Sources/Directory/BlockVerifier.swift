import Synchronization

/// Verification on first touch for a mapped version-2 directory file.
///
/// The content is cut into fixed-size blocks, each with an XXH64 in the
/// checksum table; the checksum table is cut into blocks of the same size,
/// each with an XXH64 in the root table; the root table's XXH64 is in the
/// header, which has its own checksum. Opening a file checks the header and
/// the root table (a few KiB even at 10^9 entries). After that, a reader
/// calls `ensure` for the bytes it is about to use: a block not verified
/// yet is hashed (with its table block, the first time one of its blocks
/// is touched) and compared, and its bit is set in an atomic bitmap, so
/// each block costs one hash in the life of the mapping.
///
/// Threading: any number of threads may call every method at once. Two
/// threads touching the same new block may both hash it; both reach the
/// same answer and setting a bit twice is harmless. A bit is set (release)
/// only after its block matched, and read with acquire, so a thread that
/// sees it set also sees the bytes that were checked (they never change:
/// the mapping is read-only and lookupd's tools never rewrite a file in
/// place). A block that fails is never marked: every touch fails again,
/// with the same error, and the first failure stays in `firstDamage` for
/// the daemon to log and count.
public final class BlockVerifier: @unchecked Sendable {
    let path: String
    let base: UnsafeRawPointer
    let layout: DirectoryLayout
    let shift: Int
    /// One bit per data block, then one per block of the checksum table. Read directly by
    /// `DirectoryFile`'s lookups (see `isMarked(_:in:)`), which must not touch this object on
    /// every key they read: its reference count is shared by every worker.
    let bits: UnsafeMutablePointer<Atomic<UInt64>>
    private let wordCount: Int
    /// Data blocks verified so far (approximate under races: a block two
    /// threads verified at once may be counted twice, so it only decides
    /// when to look at the bitmap as a whole).
    private let verified = Atomic<Int>(0)
    private let complete = Atomic<Bool>(false)
    private let firstFailure = Mutex<DirectoryError?>(nil)

    /// Checks the root table against the header (`rootChecksum`), so that
    /// every later check stands on verified ground.
    init(path: String, base: UnsafeRawPointer, layout: DirectoryLayout, rootChecksum: UInt64) throws(DirectoryError) {
        self.path = path
        self.base = base
        self.layout = layout
        self.shift = layout.blockShift
        let rootBytes = UnsafeRawBufferPointer(start: base + layout.rootOffset, count: layout.tableBlockCount * 8)
        guard XXH64.hash(rootBytes) == rootChecksum else {
            throw .damagedBlock(path: path, offset: layout.rootOffset, length: rootBytes.count, sections: "root table")
        }
        wordCount = (layout.blockCount + layout.tableBlockCount + 63) / 64
        bits = .allocate(capacity: max(wordCount, 1))
        for i in 0..<max(wordCount, 1) { (bits + i).initialize(to: Atomic<UInt64>(0)) }
    }

    deinit {
        bits.deinitialize(count: max(wordCount, 1))
        bits.deallocate()
    }

    /// Every data block has been verified.
    public var isComplete: Bool { complete.load(ordering: .acquiring) }

    /// Data blocks in the file, and how many have been verified.
    public var blockCount: Int { layout.blockCount }
    public var verifiedBlockCount: Int {
        let n = layout.blockCount
        var count = 0
        for w in 0..<(n / 64) { count += bits[w].load(ordering: .relaxed).nonzeroBitCount }
        if n % 64 != 0 { count += (bits[n / 64].load(ordering: .relaxed) & ((1 << UInt64(n % 64)) - 1)).nonzeroBitCount }
        return count
    }

    /// The first damage found by any thread, nil while none was.
    public var firstDamage: DirectoryError? { firstFailure.withLock { $0 } }

    /// Makes sure bytes `offset ..< offset + count` of the content (keys to
    /// label data) are verified. Throws for the first block that fails.
    @inline(__always)
    func ensure(_ offset: Int, _ count: Int) throws(DirectoryError) {
        let first = (offset - DirectoryFormat.headerSize) >> shift
        let last = (offset + max(count, 1) - 1 - DirectoryFormat.headerSize) >> shift
        var i = first
        while i <= last {
            if !isMarked(i) { try verifyBlock(i) }
            i += 1
        }
    }

    @inline(__always)
    private func isMarked(_ bit: Int) -> Bool { BlockVerifier.isMarked(bit, in: bits) }

    /// Whether data block `bit` (or table block) is verified, from the bitmap alone.
    @inline(__always)
    static func isMarked(_ bit: Int, in bits: UnsafeMutablePointer<Atomic<UInt64>>) -> Bool {
        bits[bit >> 6].load(ordering: .acquiring) & (1 << UInt64(bit & 63)) != 0
    }

    private func mark(_ bit: Int) {
        bits[bit >> 6].bitwiseOr(1 << UInt64(bit & 63), ordering: .releasing)
    }

    /// Checks data block `i` against the checksum table (checking that
    /// table block first, the first time).
    func verifyBlock(_ i: Int) throws(DirectoryError) {
        let table = i >> (shift - 3)
        let tableBit = layout.blockCount + table
        if !isMarked(tableBit) {
            let range = layout.tableBlock(table)
            let stored = UInt64(littleEndian: base.loadUnaligned(fromByteOffset: layout.rootOffset + table * 8, as: UInt64.self))
            guard XXH64.hash(bytes(range), seed: DirectoryFormat.tableSeedBase &+ UInt64(table)) == stored else {
                throw damaged(range)
            }
            mark(tableBit)
        }
        let range = layout.block(i)
        let stored = UInt64(littleEndian: base.loadUnaligned(fromByteOffset: layout.tableOffset + i * 8, as: UInt64.self))
        guard XXH64.hash(bytes(range), seed: UInt64(i)) == stored else { throw damaged(range) }
        mark(i)
        if verified.add(1, ordering: .relaxed).newValue >= layout.blockCount, verifiedBlockCount == layout.blockCount {
            complete.store(true, ordering: .releasing)
        }
    }

    /// Verifies every block not verified yet, in file order; returns the
    /// damaged ranges (at most `limit` of them, with the total count).
    func verifyAll(limit: Int = 10) -> (damaged: [DirectoryError], total: Int) {
        var found: [DirectoryError] = []
        var total = 0
        for i in 0..<layout.blockCount where !isMarked(i) {
            do { try verifyBlock(i) } catch {
                total += 1
                if found.count < limit { found.append(error) }
            }
        }
        return (found, total)
    }

    private func bytes(_ range: Range<Int>) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: base + range.lowerBound, count: range.count)
    }

    private func damaged(_ range: Range<Int>) -> DirectoryError {
        let error = DirectoryError.damagedBlock(path: path, offset: range.lowerBound, length: range.count, sections: layout.sections(range))
        firstFailure.withLock { if $0 == nil { $0 = error } }
        return error
    }
}
