/// Deduplicates labels while a directory is compiled, handing out a small
/// number per distinct label.
///
/// A dictionary keyed by `[UInt8]` would allocate an array per source line;
/// at 10^7 lines that dominates compile time, so labels live in one arena and
/// an open-addressing table points into it.
struct LabelInterner {
    private(set) var arena: [UInt8] = []
    private(set) var offsets: [UInt32] = [0]
    private var table: [Int32]
    private var mask: Int

    init() {
        table = [Int32](repeating: -1, count: 1024)
        mask = 1023
    }

    var count: Int { offsets.count - 1 }

    func bytes(_ id: Int) -> ArraySlice<UInt8> {
        arena[Int(offsets[id])..<Int(offsets[id + 1])]
    }

    mutating func intern(_ label: UnsafeRawBufferPointer) -> UInt32 {
        let hash = Int(truncatingIfNeeded: XXH64.hash(label))
        var slot = hash & mask
        while true {
            let id = Int(table[slot])
            if id < 0 { break }
            let start = Int(offsets[id]), end = Int(offsets[id + 1])
            if end - start == label.count {
                let same = arena.withUnsafeBytes { a in
                    memcmpEqual(UnsafeRawBufferPointer(rebasing: a[start..<end]), label)
                }
                if same { return UInt32(id) }
            }
            slot = (slot + 1) & mask
        }
        let id = count
        arena.append(contentsOf: label)
        offsets.append(UInt32(arena.count))
        table[slot] = Int32(id)
        if count * 2 > table.count { grow() }
        return UInt32(id)
    }

    private mutating func grow() {
        let newSize = table.count * 2
        var newTable = [Int32](repeating: -1, count: newSize)
        let newMask = newSize - 1
        for id in 0..<count {
            let hash = arena.withUnsafeBytes { a in
                Int(truncatingIfNeeded: XXH64.hash(UnsafeRawBufferPointer(rebasing: a[Int(offsets[id])..<Int(offsets[id + 1])])))
            }
            var slot = hash & newMask
            while newTable[slot] >= 0 { slot = (slot + 1) & newMask }
            newTable[slot] = Int32(id)
        }
        table = newTable
        mask = newMask
    }
}

func memcmpEqual(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
    guard a.count == b.count else { return false }
    if a.isEmpty { return true }
    return memcmp(a.baseAddress!, b.baseAddress!, a.count) == 0
}

import Glibc
