import Directory

/// Which per-callee list belongs to the callee of a call: by the Request-URI user as sent
/// (`1001`), or, for a file stem that is a complete number (`+8613800138000`), by that
/// number however the Request-URI writes it. Shared by `contacts-dir` and `blocks-dir`.
///
/// Threading: immutable, safe to share.
struct CalleeIndex: Sendable {
    private let byStem: [String: Int]
    private let byNumber: [UInt64: Int]

    /// The index of each stem's list is its position in `stems`; a stem seen twice keeps the first.
    /// Returns the positions kept.
    init(stems: [String], normalizer: NumberNormalizer, kept: inout [Int]) {
        var byStem: [String: Int] = [:]
        var byNumber: [UInt64: Int] = [:]
        for (i, stem) in stems.enumerated() where byStem[stem] == nil {
            byStem[stem] = kept.count
            if let n = normalizer.normalize(stem).number, byNumber[n.value] == nil { byNumber[n.value] = kept.count }
            kept.append(i)
        }
        self.byStem = byStem
        self.byNumber = byNumber
    }

    func list(for callee: UnsafeRawBufferPointer, normalizer: NumberNormalizer) -> Int? {
        guard !byStem.isEmpty, !callee.isEmpty else { return nil }
        var user = callee
        if let semicolon = user.firstIndex(of: UInt8(ascii: ";")) { user = UnsafeRawBufferPointer(rebasing: user[..<semicolon]) }
        // Extensions and numbers fit Swift's small-string form (15 bytes):
        // no allocation for the usual keys.
        if let i = byStem[String(decoding: user, as: UTF8.self)] { return i }
        guard !byNumber.isEmpty, let n = normalizer.normalize(bytes: user).number else { return nil }
        return byNumber[n.value]
    }
}

/// One callee's own block list (`blocks-dir/1001.csv`): entries as a directory holds them
/// (block, identify, allow; exact numbers and prefix rules), in sorted arrays on the heap.
/// A per-callee list is small (tens of numbers), so it is held, not mapped, in proportion to
/// the list: about 110 bytes an entry with a label of its own (docs/BENCHMARKS.md).
///
/// Threading: immutable, safe to share.
public struct CalleeBlockList: Sendable {
    /// The file it was read from.
    public let name: String
    private let exactKeys: [UInt64]
    private let exactValues: [UInt32]
    private let prefixKeys: [UInt64]
    private let prefixValues: [UInt32]
    private let labels: [[UInt8]]

    /// `content`: what the compiler made of the file (keys ascending, as it always gives them).
    public init(name: String, content: DirectoryContent) {
        self.name = name
        exactKeys = content.exactKeys
        exactValues = content.exactValues
        prefixKeys = content.prefixKeys
        prefixValues = content.prefixValues
        labels = content.labels
    }

    public var count: Int { exactKeys.count + prefixKeys.count }

    /// Heap bytes of the entries and labels.
    public var bytes: Int { count * 12 + labels.reduce(0) { $0 + $1.count } }

    /// The exact entry, else the longest prefix rule, for `number`.
    func hit(_ number: PhoneNumber, list: Int) -> DirectoryHit? {
        if let i = Self.find(number.value, in: exactKeys) { return hit(exactValues[i], .exact(number), list) }
        let digits = number.digitCount
        for length in stride(from: digits, through: 1, by: -1) where !prefixKeys.isEmpty {
            let prefixDigits = number.value / ScreeningDirectory.powersOfTen[digits - length]
            if let i = Self.find(UInt64(length) << 56 | prefixDigits, in: prefixKeys),
               let prefix = NumberPrefix(digits: prefixDigits, length: length) {
                return hit(prefixValues[i], .prefix(prefix), list)
            }
        }
        return nil
    }

    private func hit(_ value: UInt32, _ match: NumberPattern, _ list: Int) -> DirectoryHit {
        let labelPlusOne = DirectoryFormat.labelPlusOne(value)
        return DirectoryHit(blocked: value & 1 != 0, allowed: DirectoryFormat.allows(value),
                            label: labelPlusOne == 0 ? nil : .calleeBlock(list: list, label: labelPlusOne - 1), match: match, record: nil)
    }

    func withLabel<R>(_ label: UInt32, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        guard Int(label) < labels.count else { return try body(UnsafeRawBufferPointer(start: nil, count: 0)) }
        return try labels[Int(label)].withUnsafeBytes(body)
    }

    private static func find(_ key: UInt64, in keys: [UInt64]) -> Int? {
        var lo = 0, hi = keys.count
        while lo < hi {
            let mid = (lo + hi) >> 1
            if keys[mid] < key { lo = mid + 1 } else if keys[mid] > key { hi = mid } else { return mid }
        }
        return nil
    }
}

/// Block lists per callee (`blocks-dir`): consulted after the contacts and before the
/// directories, as if the callee's list were the highest-priority directory for calls to
/// that callee only.
///
/// Threading: immutable, safe to share.
public struct CalleeBlocks: Sendable {
    public let folder: String?
    public let lists: [CalleeBlockList]
    private let index: CalleeIndex

    public static let none = CalleeBlocks(folder: nil, lists: [], normalizer: NumberNormalizer())

    /// `lists` are (file stem, list) pairs; a stem seen twice keeps the first.
    public init(folder: String?, lists: [(stem: String, list: CalleeBlockList)], normalizer: NumberNormalizer) {
        var kept: [Int] = []
        index = CalleeIndex(stems: lists.map(\.stem), normalizer: normalizer, kept: &kept)
        self.folder = folder
        self.lists = kept.map { lists[$0].list }
    }

    public var isEmpty: Bool { lists.isEmpty }

    /// Heap bytes of every list's entries and labels.
    public var bytes: Int { lists.reduce(0) { $0 + $1.bytes } }

    func list(for callee: UnsafeRawBufferPointer, normalizer: NumberNormalizer) -> Int? {
        index.list(for: callee, normalizer: normalizer)
    }
}
