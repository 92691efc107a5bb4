import CIntrinsics
import Glibc

/// Deduplicates labels while a directory is compiled, handing out a small
/// number per distinct label.
///
/// A dictionary keyed by `[UInt8]` would allocate an array per source line,
/// and Swift arrays pay exclusivity checks on every access; at 10^7 lines
/// both dominate compile time. So labels live in one manually managed arena
/// and an open-addressing table points into it.
///
/// The lookup is one cache miss in the table and one in the arena: a slot
/// holds 32 bits of the hash beside the record's offset, and a record holds
/// its number and length before its bytes, so a probe that does not match
/// touches nothing else. With 10^5 labels these structures do not stay in
/// the cache next to a stream of entries, and three dependent misses a line
/// (table, offsets, arena) were a third of the compile's time; `prefetch`
/// and `prefetchRecord` let the compiler start both misses lines ahead of
/// the `intern` that needs them (`DirectoryCompiler.Pending`).
/// Threading: one instance per compiler, one thread.
final class LabelInterner {
    /// Records: label number (UInt32), length (UInt32), bytes.
    private var arena: UnsafeMutablePointer<UInt8>
    private var arenaCapacity: Int
    private var arenaCount = 0
    /// The record of each label number, for `bytes`.
    private var offsets: UnsafeMutablePointer<UInt32>
    private var offsetsCapacity: Int
    private(set) var count = 0
    /// The high 32 bits of the hash, then the record's offset; `empty` when free.
    private var table: UnsafeMutablePointer<UInt64>
    private var tableSize: Int
    private static let empty = UInt64.max
    private static let header = 8

    init() {
        arenaCapacity = 1 << 16
        arena = .allocate(capacity: arenaCapacity)
        offsetsCapacity = 1 << 12
        offsets = .allocate(capacity: offsetsCapacity)
        tableSize = 1 << 12
        table = .allocate(capacity: tableSize)
        table.initialize(repeating: LabelInterner.empty, count: tableSize)
    }

    deinit {
        arena.deallocate()
        offsets.deallocate()
        table.deallocate()
    }

    private func record(_ offset: Int) -> (id: Int, bytes: UnsafeRawBufferPointer) {
        let raw = UnsafeRawPointer(arena + offset)
        let id = Int(raw.loadUnaligned(as: UInt32.self))
        let length = Int(raw.loadUnaligned(fromByteOffset: 4, as: UInt32.self))
        return (id, UnsafeRawBufferPointer(start: raw + LabelInterner.header, count: length))
    }

    /// The bytes of label `id`; valid until the next `intern`.
    func bytes(_ id: Int) -> UnsafeRawBufferPointer { record(Int(offsets[id])).bytes }

    /// Starts loading the table slot of a label of this `hash` into the cache.
    @inline(__always)
    func prefetch(hash: Int) {
        lookupd_prefetch(table + (hash & (tableSize - 1)))
    }

    /// Starts loading the record the slot of `hash` points to (the label
    /// most likely to be the one), once that slot is in the cache.
    @inline(__always)
    func prefetchRecord(hash: Int) {
        let entry = table[hash & (tableSize - 1)]
        if entry != LabelInterner.empty { lookupd_prefetch(arena + Int(truncatingIfNeeded: entry & 0xFFFF_FFFF)) }
    }

    func intern(_ label: UnsafeRawBufferPointer) -> UInt32 { intern(label, hash: LabelInterner.hash(label)) }

    /// `hash` is `LabelInterner.hash(label)`.
    func intern(_ label: UnsafeRawBufferPointer, hash: Int) -> UInt32 {
        let mask = tableSize - 1
        let tag = UInt64(UInt(bitPattern: hash)) >> 32
        var slot = hash & mask
        while true {
            let entry = table[slot]
            if entry == LabelInterner.empty { break }
            if entry >> 32 == tag {
                let found = record(Int(truncatingIfNeeded: entry & 0xFFFF_FFFF))
                if memcmpEqual(found.bytes, label) { return UInt32(found.id) }
            }
            slot = (slot + 1) & mask
        }
        let id = count
        let needed = LabelInterner.header + label.count
        if arenaCount + needed > arenaCapacity {
            var capacity = arenaCapacity * 2
            while arenaCount + needed > capacity { capacity *= 2 }
            let grown = UnsafeMutablePointer<UInt8>.allocate(capacity: capacity)
            grown.update(from: arena, count: arenaCount)
            arena.deallocate()
            arena = grown
            arenaCapacity = capacity
        }
        let offset = arenaCount
        let raw = UnsafeMutableRawPointer(arena + offset)
        raw.storeBytes(of: UInt32(id), toByteOffset: 0, as: UInt32.self)
        raw.storeBytes(of: UInt32(label.count), toByteOffset: 4, as: UInt32.self)
        if let base = label.baseAddress { (raw + LabelInterner.header).copyMemory(from: base, byteCount: label.count) }
        arenaCount += needed
        if id + 1 > offsetsCapacity {
            let grown = UnsafeMutablePointer<UInt32>.allocate(capacity: offsetsCapacity * 2)
            grown.update(from: offsets, count: id)
            offsets.deallocate()
            offsets = grown
            offsetsCapacity *= 2
        }
        offsets[id] = UInt32(offset)
        table[slot] = tag << 32 | UInt64(offset)
        count += 1
        if count * 2 > tableSize { grow() }
        return UInt32(id)
    }

    /// A quick multiplicative hash for short labels (XXH64's set-up costs
    /// more than hashing a 20-byte label).
    static func hash(_ bytes: UnsafeRawBufferPointer) -> Int {
        var h: UInt64 = 0x9E37_79B9_7F4A_7C15 ^ UInt64(bytes.count)
        var i = 0
        let n = bytes.count
        while i + 8 <= n {
            h = (h ^ bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self)) &* 0xFF51_AFD7_ED55_8CCD
            h ^= h >> 32
            i += 8
        }
        var tail: UInt64 = 0
        var shift: UInt64 = 0
        while i < n { tail |= UInt64(bytes[i]) << shift; shift += 8; i += 1 }
        h = (h ^ tail) &* 0xC4CE_B9FE_1A85_EC53
        h ^= h >> 29
        return Int(truncatingIfNeeded: h)
    }

    /// Label numbers in ascending bytewise order of their labels.
    func sortedIDs(_ ids: [Int]) -> [Int] {
        var ids = ids
        ids.sort { a, b in
            let la = bytes(a), lb = bytes(b)
            let c = memcmp(la.baseAddress!, lb.baseAddress!, min(la.count, lb.count))
            return c != 0 ? c < 0 : la.count < lb.count
        }
        return ids
    }

    private func grow() {
        let newSize = tableSize * 2
        let newTable = UnsafeMutablePointer<UInt64>.allocate(capacity: newSize)
        newTable.initialize(repeating: LabelInterner.empty, count: newSize)
        let newMask = newSize - 1
        for id in 0..<count {
            let offset = Int(offsets[id])
            let hash = LabelInterner.hash(record(offset).bytes)
            var slot = hash & newMask
            while newTable[slot] != LabelInterner.empty { slot = (slot + 1) & newMask }
            newTable[slot] = (UInt64(UInt(bitPattern: hash)) >> 32) << 32 | UInt64(offset)
        }
        table.deallocate()
        table = newTable
        tableSize = newSize
    }
}

func memcmpEqual(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
    guard a.count == b.count else { return false }
    if a.isEmpty { return true }
    return memcmp(a.baseAddress!, b.baseAddress!, a.count) == 0
}
