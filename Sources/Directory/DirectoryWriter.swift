import Glibc
import SystemCalls
import TextRules

/// The content of a directory, ready to be written: exact entries strictly
/// ascending by number, prefix rules strictly ascending by (length, digits),
/// labels strictly ascending bytewise, every value word referring to a label
/// that exists. `DirectoryCompiler` produces it from source files; the bench
/// builds it directly.
public struct DirectoryContent: Sendable {
    public var directoryVersion: UInt64 = 0
    public var exactKeys: [UInt64] = []
    public var exactValues: [UInt32] = []
    public var prefixKeys: [UInt64] = []
    public var prefixValues: [UInt32] = []
    public var labels: [[UInt8]] = []
    /// Written by compaction: the journal and its last record merged here.
    public var journalID: UInt64 = 0
    public var journalSequence: UInt64 = 0

    public init() {}

    /// Checks the invariants the file format requires; nil when they hold.
    public func invariantViolation() -> String? {
        guard exactKeys.count == exactValues.count, prefixKeys.count == prefixValues.count else {
            return "keys and values differ in count"
        }
        for i in exactKeys.indices {
            if PhoneNumber(value: exactKeys[i]) == nil { return "+\(exactKeys[i]) is not an E.164 number" }
            if i > 0, exactKeys[i] <= exactKeys[i - 1] { return "exact keys not strictly ascending at index \(i)" }
        }
        for i in prefixKeys.indices {
            if NumberPrefix(digits: prefixKeys[i] & ((1 << 56) - 1), length: Int(prefixKeys[i] >> 56)) == nil {
                return "prefix key \(i) is not a valid prefix"
            }
            if i > 0, prefixKeys[i] <= prefixKeys[i - 1] { return "prefix keys not strictly ascending at index \(i)" }
        }
        for values in [exactValues, prefixValues] {
            for value in values {
                if value == 0 { return "an entry neither blocks nor identifies" }
                if Int(value >> 1) > labels.count { return "an entry refers to a missing label" }
            }
        }
        for i in labels.indices {
            if let problem = labels[i].withUnsafeBytes({ LabelRules.problem($0) }) { return "label \(i): \(problem)" }
            if i > 0, !labels[i - 1].lexicographicallyPrecedes(labels[i]) { return "labels not strictly ascending at index \(i)" }
        }
        return nil
    }
}

/// Writes directory files atomically: a temporary file in the destination
/// folder, filled through a shared mapping, fsync'd, renamed over the final
/// name, and the folder fsync'd, so a crash leaves either the old file or the
/// complete new one under the final name, never a partial file.
public enum DirectoryWriter {
    /// Called with the fraction done (0...1) while the file is laid out.
    public typealias Progress = (Double) -> Void

    /// - Parameters:
    ///   - formatVersion: 2 (the default); 1 only to test that old files are still read.
    ///   - blockShift: log2 of the checksum block size (version 2); the
    ///     default was chosen by measurement, the bench varies it.
    public static func write(_ content: DirectoryContent, to path: String, progress: Progress? = nil,
                             formatVersion: UInt32 = DirectoryFormat.version,
                             blockShift: UInt32 = DirectoryFormat.defaultBlockShift) throws(DirectoryError) {
        guard DirectoryFormat.readableVersions.contains(formatVersion) else {
            throw .unsupportedVersion(path: path, version: formatVersion)
        }
        if let violation = content.invariantViolation() {
            throw .corrupt(path: path, reason: "refusing to write: \(violation)")
        }
        var labelDataSize = 0
        for label in content.labels { labelDataSize += label.count }
        guard labelDataSize <= Int(UInt32.max) else { throw .tooLarge("\(path): label data exceeds 4 GiB") }
        guard let layout = DirectoryLayout(entryCount: UInt64(content.exactKeys.count), prefixCount: UInt64(content.prefixKeys.count),
                                           labelCount: UInt64(content.labels.count), labelDataSize: UInt64(labelDataSize),
                                           blockShift: formatVersion >= 2 ? blockShift : nil) else {
            throw .tooLarge("\(path): too many entries for one directory file")
        }

        do throws(SystemCallError) {
            try writeFileAtomically(path) { (fd, temporary) throws(SystemCallError) in
                // Reserve the blocks first: a full disk must be an error here, not a
                // SIGBUS while writing through the mapping.
                do throws(Errno) { try fd.allocate(layout.fileSize) } catch {
                    throw SystemCallError(path: temporary, operation: "allocate \(layout.fileSize) bytes", errno: error)
                }
                let mapped: UnsafeMutableRawPointer
                do throws(Errno) { mapped = try fd.map(size: layout.fileSize, writable: true) } catch {
                    throw SystemCallError(path: temporary, operation: "map", errno: error)
                }
                defer { munmap(mapped, layout.fileSize) }
                memset(mapped, 0, layout.fileSize)

                var header = fill(mapped, layout: layout, content: content, labelDataSize: labelDataSize, progress: progress)
                header.formatVersion = formatVersion
                if formatVersion >= 2 {
                    header.contentChecksum = sealBlocks(mapped, layout: layout)
                    header.blockShift = UInt32(layout.blockShift)
                    header.contentEnd = UInt64(layout.contentEnd)
                    header.blockCount = UInt64(layout.blockCount)
                    header.checksumTableOffset = UInt64(layout.tableOffset)
                    header.rootTableOffset = UInt64(layout.rootOffset)
                    header.rootTableCount = UInt64(layout.tableBlockCount)
                } else {
                    header.contentChecksum = XXH64.hash(UnsafeRawBufferPointer(start: mapped + DirectoryFormat.headerSize,
                                                                               count: layout.fileSize - DirectoryFormat.headerSize))
                }
                let headerBytes = header.encoded()
                headerBytes.withUnsafeBytes { mapped.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
                do throws(Errno) { try syncMapping(mapped, size: layout.fileSize) } catch {
                    throw SystemCallError(path: temporary, operation: "sync", errno: error)
                }
            }
        } catch {
            throw DirectoryError(error)
        }
    }

    /// Fills the checksum table and the root table of a laid-out version-2
    /// file; returns the root checksum for the header.
    static func sealBlocks(_ mapped: UnsafeMutableRawPointer, layout: DirectoryLayout) -> UInt64 {
        for i in 0..<layout.blockCount {
            let range = layout.block(i)
            let sum = XXH64.hash(UnsafeRawBufferPointer(start: mapped + range.lowerBound, count: range.count), seed: UInt64(i))
            mapped.storeBytes(of: sum.littleEndian, toByteOffset: layout.tableOffset + 8 * i, as: UInt64.self)
        }
        for j in 0..<layout.tableBlockCount {
            let range = layout.tableBlock(j)
            let sum = XXH64.hash(UnsafeRawBufferPointer(start: mapped + range.lowerBound, count: range.count),
                                 seed: DirectoryFormat.tableSeedBase &+ UInt64(j))
            mapped.storeBytes(of: sum.littleEndian, toByteOffset: layout.rootOffset + 8 * j, as: UInt64.self)
        }
        return XXH64.hash(UnsafeRawBufferPointer(start: mapped + layout.rootOffset, count: layout.tableBlockCount * 8))
    }

    private static func fill(_ mapped: UnsafeMutableRawPointer, layout: DirectoryLayout, content: DirectoryContent,
                             labelDataSize: Int, progress: Progress?) -> DirectoryHeader {
        let n = content.exactKeys.count
        let keys = (mapped + layout.keysOffset).assumingMemoryBound(to: UInt64.self)
        let values = (mapped + layout.valuesOffset).assumingMemoryBound(to: UInt32.self)
        var blocked: UInt64 = 0
        var identified: UInt64 = 0
        content.exactKeys.withUnsafeBufferPointer { sortedKeys in
            content.exactValues.withUnsafeBufferPointer { sortedValues in
                // In-order traversal of the implicit tree visits slots in
                // ascending key order: hand out the sorted entries in that order.
                var next = 0
                let step = max(1, n / 100)
                func place(_ k: Int) {
                    guard k <= n else { return }
                    place(2 * k)
                    keys[k] = sortedKeys[next].littleEndian
                    values[k] = sortedValues[next].littleEndian
                    next += 1
                    if let progress, next % step == 0 { progress(Double(next) / Double(max(n, 1))) }
                    place(2 * k + 1)
                }
                place(1)
                for v in sortedValues {
                    if v & 1 != 0 { blocked += 1 }
                    if v >> 1 != 0 { identified += 1 }
                }
            }
        }
        var mask: UInt32 = 0
        let prefixes = mapped + layout.prefixesOffset
        for i in content.prefixKeys.indices {
            let key = content.prefixKeys[i], value = content.prefixValues[i]
            prefixes.storeBytes(of: key.littleEndian, toByteOffset: i * 16, as: UInt64.self)
            prefixes.storeBytes(of: value.littleEndian, toByteOffset: i * 16 + 8, as: UInt32.self)
            mask |= 1 << UInt32(key >> 56)
            if value & 1 != 0 { blocked += 1 }
            if value >> 1 != 0 { identified += 1 }
        }
        let index = (mapped + layout.labelIndexOffset).assumingMemoryBound(to: UInt32.self)
        let data = mapped + layout.labelDataOffset
        var offset = 0
        for (i, label) in content.labels.enumerated() {
            index[i] = UInt32(offset).littleEndian
            label.withUnsafeBytes { (data + offset).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
            offset += label.count
        }
        index[content.labels.count] = UInt32(offset).littleEndian

        var header = DirectoryHeader()
        header.fileSize = UInt64(layout.fileSize)
        header.directoryVersion = content.directoryVersion
        header.entryCount = UInt64(n)
        header.prefixCount = UInt64(content.prefixKeys.count)
        header.labelCount = UInt64(content.labels.count)
        header.blockedCount = blocked
        header.identifiedCount = identified
        header.keysOffset = UInt64(layout.keysOffset)
        header.valuesOffset = UInt64(layout.valuesOffset)
        header.prefixesOffset = UInt64(layout.prefixesOffset)
        header.labelIndexOffset = UInt64(layout.labelIndexOffset)
        header.labelDataOffset = UInt64(layout.labelDataOffset)
        header.labelDataSize = UInt64(labelDataSize)
        header.prefixLengthMask = mask
        header.journalID = content.journalID
        header.journalSequence = content.journalSequence
        return header
    }

    static func splitPath(_ path: String) -> (folder: String, name: String) {
        guard let slash = path.lastIndex(of: "/") else { return (".", path) }
        let folder = String(path[..<slash])
        return (folder.isEmpty ? "/" : folder, String(path[path.index(after: slash)...]))
    }
}

extension DirectoryWriter {
    /// Makes `bytes` consistent again after a test or a fuzzer changed them:
    /// the block checksums (version 2, when the counts in the header
    /// describe exactly these bytes), the content checksum and the header
    /// checksum. What a tool forging a structurally bad but
    /// checksum-clean file would do; it exists so that tests and the fuzzer
    /// reach the structural checks.
    public static func resealForTesting(_ bytes: inout [UInt8]) {
        guard bytes.count >= DirectoryFormat.headerSize else { return }
        func get32(_ offset: Int) -> UInt32 { bytes[offset..<(offset + 4)].reversed().reduce(0) { $0 << 8 | UInt32($1) } }
        func get64(_ offset: Int) -> UInt64 { bytes[offset..<(offset + 8)].reversed().reduce(0) { $0 << 8 | UInt64($1) } }
        func put64(_ offset: Int, _ value: UInt64) {
            for i in 0..<8 { bytes[offset + i] = UInt8(truncatingIfNeeded: value >> UInt64(8 * i)) }
        }
        var sealed = false
        if get32(8) >= 2,
           let layout = DirectoryLayout(entryCount: get64(32), prefixCount: get64(40), labelCount: get64(48),
                                        labelDataSize: get64(112), blockShift: get32(168)),
           layout.fileSize == bytes.count {
            let root = bytes.withUnsafeMutableBytes { sealBlocks($0.baseAddress!, layout: layout) }
            put64(120, root)
            sealed = true
        }
        if !sealed {
            put64(120, bytes.withUnsafeBytes { XXH64.hash(UnsafeRawBufferPointer(rebasing: $0[DirectoryFormat.headerSize...])) })
        }
        put64(248, bytes.withUnsafeBytes { XXH64.hash(UnsafeRawBufferPointer(rebasing: $0[0..<DirectoryFormat.headerChecksummed])) })
    }
}
