import CIntrinsics
import Glibc
import TextRules

/// Constants and layout of the directory file, format versions 1 to 4.
/// docs/FORMAT.md is the byte-by-byte specification; keep the two in step.
public enum DirectoryFormat {
    /// "\x89LKD\r\n\x1a\n": a non-ASCII first byte so text tools do not take
    /// the file for text, and CR LF / ^Z / LF to catch newline translation
    /// (the PNG trick).
    public static let magic: [UInt8] = [0x89, 0x4C, 0x4B, 0x44, 0x0D, 0x0A, 0x1A, 0x0A]
    /// The version this lookupd writes: 2 adds a checksum per block, so a
    /// reader can verify what it touches instead of the whole file; 4 stores
    /// the numbers in nodes of eight (`KeyNodes`), so a search reads a third
    /// of the cache lines and pages it read in the binary (Eytzinger) order.
    public static let version: UInt32 = 4
    /// Versions this lookupd reads. Version 1 has one checksum over the
    /// whole content, so a reader verifies a version-1 file completely
    /// before answering from it.
    /// Version 3 is version 2 with allow entries (value bit 31): written
    /// only when a file holds one, so that a lookupd that predates them
    /// refuses the file instead of reading an allow as a huge label number.
    /// Version 4 is version 3 with the numbers in nodes of eight.
    public static let readableVersions: ClosedRange<UInt32> = 1...4
    /// The binary-order version of a file that holds allow entries.
    public static let allowVersion: UInt32 = 3
    /// The first version whose numbers are in nodes of eight (it may hold allow entries).
    public static let nodesVersion: UInt32 = 4

    /// The version to write when a file of `version` is rewritten (compaction, a feed's
    /// update): the same key order, because a fleet whose lookupd reads only binary order
    /// compiled the file so (`--file-format 2`), and a rewrite must not take it away from it.
    /// The writer raises 2 to 3 itself when the file holds allow entries.
    public static func rewriteVersion(keeping version: UInt32) -> UInt32 {
        version >= nodesVersion ? nodesVersion : 2
    }
    public static let headerSize = 256
    /// Bytes of the header covered by the header checksum (all but the checksum itself).
    static let headerChecksummed = 248
    /// log2 of the checksum block size written: 4 KiB, chosen by measurement
    /// (docs/BENCHMARKS.md, "Directory: block checksums"): a lookup in a
    /// 10^8-entry file first-touches about 20 blocks, 80 KiB of hashing,
    /// and the checksums cost 0.2 % of the file.
    public static let defaultBlockShift: UInt32 = 12
    /// Block sizes a reader accepts: 512 bytes to 1 MiB.
    public static let blockShiftRange: ClosedRange<UInt32> = 9...20
    /// Longest label, in UTF-8 bytes. SIP display names travel in every
    /// answer; 255 keeps them within one UDP datagram with room to spare.
    public static let maxLabelBytes = LabelRules.maxBytes
    /// Flag bit 0 (versions 1 to 3): exact keys are stored in Eytzinger (breadth-first) order.
    static let flagEytzinger: UInt32 = 1
    /// Flag bit 1 (version 4): exact keys are stored in nodes of eight (`KeyNodes`).
    static let flagNodes: UInt32 = 2
    /// The flags word a file of `version` must have: the one key order it allows.
    static func flags(version: UInt32) -> UInt32 { version >= nodesVersion ? flagNodes : flagEytzinger }
    /// Key of a padding slot of the last nodes (version 4): above every number, so a search
    /// never stops on one and an in-order walk meets them only after the last number.
    static let paddingKey: UInt64 = .max
    /// Most labels a file can hold: the value word keeps the label number in 30 bits
    /// (bit 31 is the allow bit).
    public static let maxLabels = (1 << 30) - 2
    /// Value bit 31: the entry allows the number (lower-priority directories do not block
    /// it). Never together with the block bit.
    public static let allowBit: UInt32 = 1 << 31
    /// Seed of the checksum of block j of the checksum table (data block i
    /// is seeded with i): a block moved to another place never validates.
    static let tableSeedBase: UInt64 = 1 << 63

    /// Value word of an entry: bit 0 = blocks; bits 1...30 = label number + 1 (0 = no
    /// label); bit 31 = allows (not with bit 0).
    @inlinable
    public static func encodeValue(blocked: Bool, label: UInt32?, allowed: Bool = false) -> UInt32 {
        (blocked ? 1 : 0) | ((label.map { $0 + 1 } ?? 0) << 1) | (allowed ? allowBit : 0)
    }

    /// The label number + 1 of a value word (0: no label).
    @inlinable
    public static func labelPlusOne(_ value: UInt32) -> UInt32 { (value & ~allowBit) >> 1 }

    @inlinable
    public static func allows(_ value: UInt32) -> Bool { value & allowBit != 0 }

    /// Prefix key: digit count in the top byte, the prefix digits below.
    @inlinable
    public static func prefixKey(_ prefix: NumberPrefix) -> UInt64 {
        UInt64(prefix.length) << 56 | prefix.digits
    }
}

/// Byte offsets of every section for given counts. The writer lays a file out
/// with it and the reader requires a file to match it exactly, so no offset in
/// a header can point anywhere unexpected.
struct DirectoryLayout: Equatable {
    var keysOffset: Int
    var valuesOffset: Int
    var prefixesOffset: Int
    var labelIndexOffset: Int
    var labelDataOffset: Int
    /// End of the label data, padded: the end of what the block checksums
    /// cover (version 2), or of the file (version 1).
    var contentEnd: Int
    /// Version 2: log2 of the block size; 0 for version 1.
    var blockShift: Int
    /// Version 2: data blocks, i.e. entries of the checksum table.
    var blockCount: Int
    /// Version 2: the checksum table (one XXH64 per data block).
    var tableOffset: Int
    /// Version 2: blocks of the checksum table, i.e. entries of the root table.
    var tableBlockCount: Int
    /// Version 2: the root table (one XXH64 per block of the checksum table).
    var rootOffset: Int
    var fileSize: Int

    static func align8(_ x: Int) -> Int { (x + 7) & ~7 }

    /// Key and value slots: n + 1 in binary order (slot 0 unused), n rounded up to a
    /// multiple of 8 in nodes of eight.
    var slotCount: Int
    /// Version 4: the numbers are in nodes of eight.
    var nodes: Bool

    /// nil when the counts cannot describe a file on this machine (overflow).
    /// `blockShift` nil lays out a version-1 file; `nodes` a version-4 one.
    init?(entryCount n: UInt64, prefixCount p: UInt64, labelCount m: UInt64, labelDataSize d: UInt64, blockShift: UInt32?,
          nodes: Bool = false) {
        let limit: UInt64 = 1 << 52
        guard n < limit / 8, p < limit / 16, m < limit / 4, d < limit else { return nil }
        let n = Int(n), p = Int(p), m = Int(m), d = Int(d)
        self.nodes = nodes
        slotCount = nodes ? (n + 7) & ~7 : n + 1
        keysOffset = DirectoryFormat.headerSize
        valuesOffset = keysOffset + slotCount * 8
        prefixesOffset = DirectoryLayout.align8(valuesOffset + slotCount * 4)
        labelIndexOffset = prefixesOffset + p * 16
        labelDataOffset = labelIndexOffset + (m + 1) * 4
        contentEnd = DirectoryLayout.align8(labelDataOffset + d)
        guard let shift = blockShift else {
            self.blockShift = 0
            blockCount = 0
            tableOffset = contentEnd
            tableBlockCount = 0
            rootOffset = contentEnd
            fileSize = contentEnd
            return
        }
        guard DirectoryFormat.blockShiftRange.contains(shift) else { return nil }
        let size = 1 << Int(shift)
        self.blockShift = Int(shift)
        blockCount = (contentEnd - DirectoryFormat.headerSize + size - 1) >> Int(shift)
        tableOffset = contentEnd
        tableBlockCount = (blockCount * 8 + size - 1) >> Int(shift)
        rootOffset = tableOffset + blockCount * 8
        fileSize = rootOffset + tableBlockCount * 8
    }

    /// Version 2: the file bytes data block `i` covers.
    func block(_ i: Int) -> Range<Int> {
        let start = DirectoryFormat.headerSize + i << blockShift
        return start..<min(start + 1 << blockShift, contentEnd)
    }

    /// Version 2: the file bytes block `j` of the checksum table covers.
    func tableBlock(_ j: Int) -> Range<Int> {
        let start = tableOffset + j << blockShift
        return start..<min(start + 1 << blockShift, rootOffset)
    }

    /// The sections a byte range overlaps, for messages.
    func sections(_ range: Range<Int>) -> String {
        var names: [String] = []
        let parts: [(String, Range<Int>)] = [
            ("keys", keysOffset..<valuesOffset), ("values", valuesOffset..<prefixesOffset),
            ("prefix rules", prefixesOffset..<labelIndexOffset), ("label index", labelIndexOffset..<labelDataOffset),
            ("label data", labelDataOffset..<contentEnd), ("checksum table", tableOffset..<rootOffset),
            ("root table", rootOffset..<fileSize),
        ]
        for (name, section) in parts where section.overlaps(range) { names.append(name) }
        return names.joined(separator: ", ")
    }
}

/// Everything the header of a directory file says.
public struct DirectoryHeader: Equatable, Sendable {
    public var formatVersion: UInt32 = DirectoryFormat.version
    public var fileSize: UInt64 = 0
    /// Set by the operator at compile time (`--version`); 0 when unset.
    public var directoryVersion: UInt64 = 0
    public var entryCount: UInt64 = 0
    public var prefixCount: UInt64 = 0
    public var labelCount: UInt64 = 0
    public var blockedCount: UInt64 = 0
    public var identifiedCount: UInt64 = 0
    public var keysOffset: UInt64 = 0
    public var valuesOffset: UInt64 = 0
    public var prefixesOffset: UInt64 = 0
    public var labelIndexOffset: UInt64 = 0
    public var labelDataOffset: UInt64 = 0
    public var labelDataSize: UInt64 = 0
    /// Version 1: XXH64 of everything after the header. Version 2: XXH64
    /// of the root table, which covers the checksum table, which covers
    /// every data block: the one value that seals the whole content.
    public var contentChecksum: UInt64 = 0
    public var flags: UInt32 = DirectoryFormat.flags(version: DirectoryFormat.version)
    /// Bit L set when a prefix of L digits exists, so a lookup only searches
    /// the prefix lengths that occur.
    public var prefixLengthMask: UInt32 = 0
    /// The journal whose records this file already contains (`lookupd
    /// compact` sets it), 0 for none: a compiled file has merged nothing.
    public var journalID: UInt64 = 0
    /// The last record of that journal merged into this file; readers apply
    /// only the journal's later records on top.
    public var journalSequence: UInt64 = 0
    /// Version 2: log2 of the checksum block size (0 in version 1).
    public var blockShift: UInt32 = 0
    /// Version 2: end of the label data section, where the checksums begin.
    public var contentEnd: UInt64 = 0
    /// Version 2: data blocks (entries of the checksum table).
    public var blockCount: UInt64 = 0
    /// Version 2: where the checksum table and the root table start.
    public var checksumTableOffset: UInt64 = 0
    public var rootTableOffset: UInt64 = 0
    /// Version 2: entries of the root table (blocks of the checksum table).
    public var rootTableCount: UInt64 = 0
    /// The numbering plan the numbers were read under (bytes 152...167); nil in files
    /// written before lookupd recorded it.
    public var plan: RecordedPlan? = nil
    public var headerChecksum: UInt64 = 0

    public init() {}

    /// Block size in bytes (version 2), 0 for version 1.
    public var blockSize: Int { blockShift == 0 ? 0 : 1 << Int(blockShift) }

    /// Serializes to the 256-byte on-disk header, computing the header checksum.
    func encoded() -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: DirectoryFormat.headerSize)
        bytes.withUnsafeMutableBytes { raw in
            for i in 0..<8 { raw[i] = DirectoryFormat.magic[i] }
            func put32(_ offset: Int, _ v: UInt32) { raw.storeBytes(of: v.littleEndian, toByteOffset: offset, as: UInt32.self) }
            func put64(_ offset: Int, _ v: UInt64) { raw.storeBytes(of: v.littleEndian, toByteOffset: offset, as: UInt64.self) }
            put32(8, formatVersion)
            put32(12, UInt32(DirectoryFormat.headerSize))
            put64(16, fileSize)
            put64(24, directoryVersion)
            put64(32, entryCount)
            put64(40, prefixCount)
            put64(48, labelCount)
            put64(56, blockedCount)
            put64(64, identifiedCount)
            put64(72, keysOffset)
            put64(80, valuesOffset)
            put64(88, prefixesOffset)
            put64(96, labelIndexOffset)
            put64(104, labelDataOffset)
            put64(112, labelDataSize)
            put64(120, contentChecksum)
            put32(128, flags)
            put32(132, prefixLengthMask)
            put64(136, journalID)
            put64(144, journalSequence)
            // 152...167: the numbering plan (RecordedPlan), zero when none was recorded.
            if let plan { plan.encode(into: raw) }
            if formatVersion >= 2 {
                put32(168, blockShift)
                put64(176, contentEnd)
                put64(184, blockCount)
                put64(192, checksumTableOffset)
                put64(200, rootTableOffset)
                put64(208, rootTableCount)
            }
            let checksum = XXH64.hash(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(raw)[0..<DirectoryFormat.headerChecksummed]))
            put64(248, checksum)
        }
        return bytes
    }

    /// Reads and validates a header from the first bytes of a file of `actualSize` bytes.
    static func decode(_ raw: UnsafeRawBufferPointer, actualSize: Int, path: String) throws(DirectoryError) -> DirectoryHeader {
        guard raw.count >= 8 else {
            // An empty file, or the start of the magic number and nothing
            // more, is a truncated directory; anything else is not ours.
            if raw.elementsEqual(DirectoryFormat.magic.prefix(raw.count)) {
                throw .truncated(path: path, expected: nil, actual: actualSize)
            }
            throw .notADirectory(path: path)
        }
        guard raw.prefix(8).elementsEqual(DirectoryFormat.magic) else {
            throw .notADirectory(path: path)
        }
        guard raw.count >= 12 else { throw .truncated(path: path, expected: nil, actual: actualSize) }
        func get32(_ offset: Int) -> UInt32 { UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: offset, as: UInt32.self)) }
        func get64(_ offset: Int) -> UInt64 { UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self)) }
        var h = DirectoryHeader()
        h.formatVersion = get32(8)
        guard DirectoryFormat.readableVersions.contains(h.formatVersion) else {
            throw .unsupportedVersion(path: path, version: h.formatVersion)
        }
        guard raw.count >= DirectoryFormat.headerSize else {
            throw .truncated(path: path, expected: nil, actual: actualSize)
        }
        h.headerChecksum = get64(248)
        let computed = XXH64.hash(UnsafeRawBufferPointer(rebasing: raw[0..<DirectoryFormat.headerChecksummed]))
        guard computed == h.headerChecksum else { throw .headerChecksumMismatch(path: path) }
        guard get32(12) == UInt32(DirectoryFormat.headerSize) else {
            throw .corrupt(path: path, reason: "header size \(get32(12)) is not \(DirectoryFormat.headerSize)")
        }
        h.fileSize = get64(16)
        h.directoryVersion = get64(24)
        h.entryCount = get64(32)
        h.prefixCount = get64(40)
        h.labelCount = get64(48)
        h.blockedCount = get64(56)
        h.identifiedCount = get64(64)
        h.keysOffset = get64(72)
        h.valuesOffset = get64(80)
        h.prefixesOffset = get64(88)
        h.labelIndexOffset = get64(96)
        h.labelDataOffset = get64(104)
        h.labelDataSize = get64(112)
        h.contentChecksum = get64(120)
        h.flags = get32(128)
        h.prefixLengthMask = get32(132)
        // Version-1 files written before these fields existed hold zeros
        // here, which reads as "no journal merged".
        h.journalID = get64(136)
        h.journalSequence = get64(144)
        if h.formatVersion >= 2 {
            h.blockShift = get32(168)
            h.contentEnd = get64(176)
            h.blockCount = get64(184)
            h.checksumTableOffset = get64(192)
            h.rootTableOffset = get64(200)
            h.rootTableCount = get64(208)
            var reservedClear = get32(172) == 0
            for offset in stride(from: 216, to: 248, by: 8) where get64(offset) != 0 { reservedClear = false }
            guard reservedClear else { throw .corrupt(path: path, reason: "reserved header bytes are not zero") }
            guard DirectoryFormat.blockShiftRange.contains(h.blockShift) else {
                throw .corrupt(path: path, reason: "block size 2^\(h.blockShift) is outside 2^9...2^20")
            }
        }
        // Zeros (files written before the plan was recorded): no plan.
        h.plan = RecordedPlan(decoding: raw)
        if h.fileSize > UInt64(actualSize) {
            throw .truncated(path: path, expected: h.fileSize, actual: actualSize)
        }
        if h.fileSize < UInt64(actualSize) {
            throw .corrupt(path: path, reason: "file has \(actualSize) bytes but its header says \(h.fileSize)")
        }
        guard h.flags == DirectoryFormat.flags(version: h.formatVersion) else {
            throw .corrupt(path: path, reason: "unknown flags 0x\(String(h.flags, radix: 16))")
        }
        guard h.prefixLengthMask & ~UInt32(0xFFFE) == 0 else {
            throw .corrupt(path: path, reason: "prefix length mask names lengths outside 1...15")
        }
        guard h.labelCount <= UInt64(DirectoryFormat.maxLabels) else {
            throw .corrupt(path: path, reason: "label count \(h.labelCount) exceeds the format's limit")
        }
        guard let layout = h.layout,
              // Compared as UInt64: Int(h.keysOffset) would trap on an offset above Int.max.
              UInt64(layout.keysOffset) == h.keysOffset, UInt64(layout.valuesOffset) == h.valuesOffset,
              UInt64(layout.prefixesOffset) == h.prefixesOffset, UInt64(layout.labelIndexOffset) == h.labelIndexOffset,
              UInt64(layout.labelDataOffset) == h.labelDataOffset, UInt64(layout.fileSize) == h.fileSize,
              h.formatVersion == 1 || (UInt64(layout.contentEnd) == h.contentEnd && UInt64(layout.blockCount) == h.blockCount
                                       && UInt64(layout.tableOffset) == h.checksumTableOffset
                                       && UInt64(layout.rootOffset) == h.rootTableOffset
                                       && UInt64(layout.tableBlockCount) == h.rootTableCount) else {
            throw .corrupt(path: path, reason: "section offsets do not match the counts in the header")
        }
        guard h.blockedCount <= h.entryCount + h.prefixCount, h.identifiedCount <= h.entryCount + h.prefixCount else {
            throw .corrupt(path: path, reason: "blocked/identified counts exceed the entry count")
        }
        return h
    }

    /// The layout the counts describe (version 2: with the block size).
    var layout: DirectoryLayout? {
        DirectoryLayout(entryCount: entryCount, prefixCount: prefixCount, labelCount: labelCount, labelDataSize: labelDataSize,
                        blockShift: formatVersion >= 2 ? blockShift : nil, nodes: formatVersion >= DirectoryFormat.nodesVersion)
    }
}

/// The numbering plan a directory file was compiled under (header bytes 152...167,
/// docs/FORMAT.md): numbers written there without a country code were read under it.
public struct RecordedPlan: Equatable, Sendable, CustomStringConvertible {
    /// Byte 152: 1 for this layout (0: nothing recorded).
    static let version: UInt8 = 1
    /// ISO 3166 region code (`CN`).
    public var region: String
    public var countryCode: UInt16
    /// Nobody named the plan: it was the built-in default.
    public var wasDefault: Bool
    /// `national-prefix`, `international-prefix` or `national-number-length` changed it.
    public var hasOverrides: Bool
    /// `NumberingPlan.settingsFingerprint`: what distinguishes two plans' readings.
    public var settingsFingerprint: UInt32
    /// The low 32 bits of `NumberingData.fingerprint` then: which libphonenumber data.
    public var metadataFingerprint: UInt32

    public init(_ plan: NumberingPlan, metadata: UInt64) {
        region = plan.region
        countryCode = UInt16(plan.countryCode)
        wasDefault = plan.isDefault
        hasOverrides = plan.hasOverrides
        settingsFingerprint = plan.settingsFingerprint
        metadataFingerprint = UInt32(truncatingIfNeeded: metadata)
    }

    init?(decoding raw: UnsafeRawBufferPointer) {
        guard raw.count >= 168, raw[152] == RecordedPlan.version else { return nil }
        let flags = raw[153]
        let letters = [raw[154], raw[155]]
        guard letters.allSatisfy({ $0 >= 0x41 && $0 <= 0x5A }) else { return nil }
        region = String(decoding: letters, as: UTF8.self)
        countryCode = UInt16(littleEndian: raw.loadUnaligned(fromByteOffset: 156, as: UInt16.self))
        wasDefault = flags & 1 != 0
        hasOverrides = flags & 2 != 0
        settingsFingerprint = UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: 160, as: UInt32.self))
        metadataFingerprint = UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: 164, as: UInt32.self))
    }

    func encode(into raw: UnsafeMutableRawBufferPointer) {
        raw[152] = RecordedPlan.version
        raw[153] = (wasDefault ? 1 : 0) | (hasOverrides ? 2 : 0)
        let letters = Array(region.utf8)
        raw[154] = letters.count == 2 ? letters[0] : 0
        raw[155] = letters.count == 2 ? letters[1] : 0
        raw.storeBytes(of: countryCode.littleEndian, toByteOffset: 156, as: UInt16.self)
        raw.storeBytes(of: settingsFingerprint.littleEndian, toByteOffset: 160, as: UInt32.self)
        raw.storeBytes(of: metadataFingerprint.littleEndian, toByteOffset: 164, as: UInt32.self)
    }

    /// Whether `plan` is this plan's region: numbers written without a country code read
    /// as numbers of the same country. (Overrides of prefixes or lengths within a region
    /// are told apart by `settingsFingerprint`, which inspect shows.)
    public func matches(_ plan: NumberingPlan) -> Bool {
        region == plan.region
    }

    /// `CN (+86)`, with "the built-in default" or "with overrides" when so.
    public var description: String {
        var text = "\(region) (+\(countryCode))"
        if wasDefault { text += ", the built-in default (no plan was named)" }
        if hasOverrides { text += ", with explicit prefixes or lengths" }
        return text
    }
}

/// Why a directory file could not be read, written or trusted. The text
/// names the file and says what is wrong in an operator's words.
public enum DirectoryError: Error, Equatable, Sendable, CustomStringConvertible {
    case system(path: String, operation: String, errno: Int32)
    case notADirectory(path: String)
    case truncated(path: String, expected: UInt64?, actual: Int)
    case unsupportedVersion(path: String, version: UInt32)
    case headerChecksumMismatch(path: String)
    case contentChecksumMismatch(path: String)
    /// Version 2: bytes that fail their block checksum (or a block of the
    /// checksum table that fails the root table).
    case damagedBlock(path: String, offset: Int, length: Int, sections: String)
    case corrupt(path: String, reason: String)
    case tooLarge(String)
    /// A file served straight from disk (directory-copy = no) that was
    /// truncated or rewritten in place, or whose pages could not be read.
    case changedWhileServed(path: String)

    public var description: String {
        switch self {
        case .system(let path, let operation, let code):
            return "\(path): cannot \(operation): \(String(cString: strerror(code)))"
        case .notADirectory(let path):
            return "\(path): not a lookupd directory (bad magic number)"
        case .truncated(let path, let expected, let actual):
            if let expected { return "\(path): truncated: \(actual) bytes, the header says \(expected)" }
            return "\(path): truncated: \(actual) bytes is too short for a directory header"
        case .unsupportedVersion(let path, let version):
            return "\(path): unsupported directory format version \(version) (this lookupd reads versions \(DirectoryFormat.readableVersions.lowerBound) to \(DirectoryFormat.readableVersions.upperBound))"
        case .headerChecksumMismatch(let path):
            return "\(path): header checksum mismatch (the file is damaged)"
        case .contentChecksumMismatch(let path):
            return "\(path): content checksum mismatch (the file is damaged)"
        case .damagedBlock(let path, let offset, let length, let sections):
            return "\(path): damaged: bytes \(offset)...\(offset + length - 1) (\(sections)) do not match their checksum (the file is damaged)"
        case .corrupt(let path, let reason):
            return "\(path): corrupt directory: \(reason)"
        case .tooLarge(let reason):
            return reason
        case .changedWhileServed(let path):
            return "\(path): changed on disk while served (truncated or rewritten in place, or unreadable): nothing is answered from it until an intact file is installed"
        }
    }
}

/// The order of the numbers in a version-4 file: a B-tree of 8-key nodes laid out
/// breadth-first, none stored as a pointer. Node k's children are nodes 9k+1 ... 9k+9, those
/// below the node count existing; child c holds the numbers between key c-1 and key c of
/// node k. Slot 8k+i holds key i of node k. The numbers fill the slots in in-order (child 0,
/// key 0, child 1, ..., key 7, child 8), so the padding slots of the last node (key
/// `DirectoryFormat.paddingKey`) come after every number.
///
/// A search reads one 64-byte node per level: nine levels at 10^8 numbers against 27 in
/// binary order, so one DRAM read and one page walk for every three the Eytzinger search
/// needed below the cached top of the tree (docs/BENCHMARKS.md, "Batched lookups").
public enum KeyNodes {
    /// Keys of a node of `keys` (the node's first slot) below `x`: the child to go down to,
    /// and the node's smallest key not below `x` when under 8.
    @inline(__always)
    static func rank(_ node: UnsafePointer<UInt64>, _ x: UInt64) -> Int { lookupd_node_rank(node, x) }

    /// A walk over the slots in in-order: ascending keys, padding last. Used by the writer
    /// to place each number as it comes and by the reader to list them.
    struct InOrder {
        let nodeCount: Int
        private(set) var node = 0
        private(set) var index = 0
        /// Depth of `node` (0 at the root): the writer buffers each level's slots apart.
        private(set) var depth = 0
        private(set) var isDone: Bool

        init(nodeCount: Int) {
            self.nodeCount = nodeCount
            isDone = nodeCount == 0
            descendLeft()
        }

        var slot: Int { 8 &* node &+ index }

        /// Down child 0 as far as there are nodes.
        private mutating func descendLeft() {
            while 9 &* node &+ 1 < nodeCount {
                node = 9 &* node &+ 1
                depth &+= 1
            }
        }

        mutating func advance() {
            let right = 9 &* node &+ index &+ 2
            if right < nodeCount {
                node = right
                depth &+= 1
                index = 0
                descendLeft()
            } else if index < 7 {
                index &+= 1
            } else {
                // Up while this is the last child; then the parent's key after this child.
                while true {
                    if node == 0 { isDone = true; return }
                    let child = (node &- 1) % 9
                    node = (node &- 1) / 9
                    depth &-= 1
                    if child < 8 { index = child; return }
                }
            }
        }
    }

    /// Levels of a tree of `nodeCount` nodes, and the first node of each: level L holds
    /// nodes (9^L - 1) / 8 ..< (9^(L+1) - 1) / 8.
    static func levelStarts(nodeCount: Int) -> [Int] {
        var starts: [Int] = []
        var start = 0, width = 1
        while start < nodeCount {
            starts.append(start)
            start &+= width
            width &*= 9
        }
        return starts
    }
}
