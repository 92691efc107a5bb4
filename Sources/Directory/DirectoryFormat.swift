import Glibc

/// Constants and layout of the directory file, format version 1.
/// docs/FORMAT.md is the byte-by-byte specification; keep the two in step.
public enum DirectoryFormat {
    /// "\x89LKD\r\n\x1a\n": a non-ASCII first byte so text tools do not take
    /// the file for text, and CR LF / ^Z / LF to catch newline translation
    /// (the PNG trick).
    public static let magic: [UInt8] = [0x89, 0x4C, 0x4B, 0x44, 0x0D, 0x0A, 0x1A, 0x0A]
    public static let version: UInt32 = 1
    public static let headerSize = 256
    /// Bytes of the header covered by the header checksum (all but the checksum itself).
    static let headerChecksummed = 248
    /// Longest label, in UTF-8 bytes. SIP display names travel in every
    /// answer; 255 keeps them within one UDP datagram with room to spare.
    public static let maxLabelBytes = 255
    /// Flag bit 0: exact keys are stored in Eytzinger (breadth-first) order.
    static let flagEytzinger: UInt32 = 1
    /// Most labels a file can hold: the value word keeps the label number in 31 bits.
    public static let maxLabels = Int(Int32.max) - 1

    /// Value word of an entry: bit 0 = blocks; bits 1...31 = label number + 1 (0 = no label).
    @inlinable
    public static func encodeValue(blocked: Bool, label: UInt32?) -> UInt32 {
        (blocked ? 1 : 0) | ((label.map { $0 + 1 } ?? 0) << 1)
    }

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
    var fileSize: Int

    static func align8(_ x: Int) -> Int { (x + 7) & ~7 }

    /// nil when the counts cannot describe a file on this machine (overflow).
    init?(entryCount n: UInt64, prefixCount p: UInt64, labelCount m: UInt64, labelDataSize d: UInt64) {
        let limit: UInt64 = 1 << 52
        guard n < limit / 8, p < limit / 16, m < limit / 4, d < limit else { return nil }
        let n = Int(n), p = Int(p), m = Int(m), d = Int(d)
        keysOffset = DirectoryFormat.headerSize
        valuesOffset = keysOffset + (n + 1) * 8
        prefixesOffset = DirectoryLayout.align8(valuesOffset + (n + 1) * 4)
        labelIndexOffset = prefixesOffset + p * 16
        labelDataOffset = labelIndexOffset + (m + 1) * 4
        fileSize = DirectoryLayout.align8(labelDataOffset + d)
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
    public var contentChecksum: UInt64 = 0
    public var flags: UInt32 = DirectoryFormat.flagEytzinger
    /// Bit L set when a prefix of L digits exists, so a lookup only searches
    /// the prefix lengths that occur.
    public var prefixLengthMask: UInt32 = 0
    /// The journal whose records this file already contains (`lookupd
    /// compact` sets it), 0 for none: a compiled file has merged nothing.
    public var journalID: UInt64 = 0
    /// The last record of that journal merged into this file; readers apply
    /// only the journal's later records on top.
    public var journalSequence: UInt64 = 0
    public var headerChecksum: UInt64 = 0

    public init() {}

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
        guard h.formatVersion == DirectoryFormat.version else {
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
        if h.fileSize > UInt64(actualSize) {
            throw .truncated(path: path, expected: h.fileSize, actual: actualSize)
        }
        if h.fileSize < UInt64(actualSize) {
            throw .corrupt(path: path, reason: "file has \(actualSize) bytes but its header says \(h.fileSize)")
        }
        guard h.flags == DirectoryFormat.flagEytzinger else {
            throw .corrupt(path: path, reason: "unknown flags 0x\(String(h.flags, radix: 16))")
        }
        guard h.prefixLengthMask & ~UInt32(0xFFFE) == 0 else {
            throw .corrupt(path: path, reason: "prefix length mask names lengths outside 1...15")
        }
        guard h.labelCount <= UInt64(DirectoryFormat.maxLabels) else {
            throw .corrupt(path: path, reason: "label count \(h.labelCount) exceeds the format's limit")
        }
        guard let layout = DirectoryLayout(entryCount: h.entryCount, prefixCount: h.prefixCount,
                                           labelCount: h.labelCount, labelDataSize: h.labelDataSize),
              // Compared as UInt64: Int(h.keysOffset) would trap on an offset above Int.max.
              UInt64(layout.keysOffset) == h.keysOffset, UInt64(layout.valuesOffset) == h.valuesOffset,
              UInt64(layout.prefixesOffset) == h.prefixesOffset, UInt64(layout.labelIndexOffset) == h.labelIndexOffset,
              UInt64(layout.labelDataOffset) == h.labelDataOffset, UInt64(layout.fileSize) == h.fileSize else {
            throw .corrupt(path: path, reason: "section offsets do not match the counts in the header")
        }
        guard h.blockedCount <= h.entryCount + h.prefixCount, h.identifiedCount <= h.entryCount + h.prefixCount else {
            throw .corrupt(path: path, reason: "blocked/identified counts exceed the entry count")
        }
        return h
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
    case corrupt(path: String, reason: String)
    case tooLarge(String)

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
            return "\(path): unsupported directory format version \(version) (this lookupd reads version \(DirectoryFormat.version))"
        case .headerChecksumMismatch(let path):
            return "\(path): header checksum mismatch (the file is damaged)"
        case .contentChecksumMismatch(let path):
            return "\(path): content checksum mismatch (the file is damaged)"
        case .corrupt(let path, let reason):
            return "\(path): corrupt directory: \(reason)"
        case .tooLarge(let reason):
            return reason
        }
    }
}
