import Glibc

/// Deduplicates labels while a directory is compiled, handing out a small
/// number per distinct label.
///
/// A dictionary keyed by `[UInt8]` would allocate an array per source line,
/// and Swift arrays pay exclusivity checks on every access; at 10^7 lines
/// both dominate compile time. So labels live in one manually managed arena
/// and an open-addressing table of label numbers points into it.
/// Threading: one instance per compiler, one thread.
final class LabelInterner {
    private var arena: UnsafeMutablePointer<UInt8>
    private var arenaCapacity: Int
    private var arenaCount = 0
    private var offsets: UnsafeMutablePointer<UInt32>
    private var offsetsCapacity: Int
    private(set) var count = 0
    private var table: UnsafeMutablePointer<Int32>
    private var tableSize: Int

    init() {
        arenaCapacity = 1 << 16
        arena = .allocate(capacity: arenaCapacity)
        offsetsCapacity = 1 << 12
        offsets = .allocate(capacity: offsetsCapacity)
        offsets[0] = 0
        tableSize = 1 << 12
        table = .allocate(capacity: tableSize)
        table.initialize(repeating: -1, count: tableSize)
    }

    deinit {
        arena.deallocate()
        offsets.deallocate()
        table.deallocate()
    }

    /// The bytes of label `id`; valid until the next `intern`.
    func bytes(_ id: Int) -> UnsafeRawBufferPointer {
        let start = Int(offsets[id])
        return UnsafeRawBufferPointer(start: arena + start, count: Int(offsets[id + 1]) - start)
    }

    func intern(_ label: UnsafeRawBufferPointer) -> UInt32 {
        let hash = LabelInterner.hash(label)
        let mask = tableSize - 1
        var slot = hash & mask
        while true {
            let id = Int(table[slot])
            if id < 0 { break }
            let start = Int(offsets[id])
            if Int(offsets[id + 1]) - start == label.count,
               label.isEmpty || memcmp(arena + start, label.baseAddress!, label.count) == 0 {
                return UInt32(id)
            }
            slot = (slot + 1) & mask
        }
        let id = count
        if arenaCount + label.count > arenaCapacity {
            var capacity = arenaCapacity * 2
            while arenaCount + label.count > capacity { capacity *= 2 }
            let grown = UnsafeMutablePointer<UInt8>.allocate(capacity: capacity)
            grown.update(from: arena, count: arenaCount)
            arena.deallocate()
            arena = grown
            arenaCapacity = capacity
        }
        if let base = label.baseAddress { (arena + arenaCount).update(from: base.assumingMemoryBound(to: UInt8.self), count: label.count) }
        arenaCount += label.count
        if id + 2 > offsetsCapacity {
            let grown = UnsafeMutablePointer<UInt32>.allocate(capacity: offsetsCapacity * 2)
            grown.update(from: offsets, count: id + 1)
            offsets.deallocate()
            offsets = grown
            offsetsCapacity *= 2
        }
        offsets[id + 1] = UInt32(arenaCount)
        table[slot] = Int32(id)
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
        let arena = self.arena, offsets = self.offsets
        ids.sort { a, b in
            let sa = Int(offsets[a]), la = Int(offsets[a + 1]) - sa
            let sb = Int(offsets[b]), lb = Int(offsets[b + 1]) - sb
            let c = memcmp(arena + sa, arena + sb, min(la, lb))
            return c != 0 ? c < 0 : la < lb
        }
        return ids
    }

    private func grow() {
        let newSize = tableSize * 2
        let newTable = UnsafeMutablePointer<Int32>.allocate(capacity: newSize)
        newTable.initialize(repeating: -1, count: newSize)
        let newMask = newSize - 1
        for id in 0..<count {
            var slot = LabelInterner.hash(bytes(id)) & newMask
            while newTable[slot] >= 0 { slot = (slot + 1) & newMask }
            newTable[slot] = Int32(id)
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
