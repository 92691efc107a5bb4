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
    /// The numbering plan the numbers were read under (recorded in the header).
    public var plan: RecordedPlan? = nil

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
                if Int(DirectoryFormat.labelPlusOne(value)) > labels.count { return "an entry refers to a missing label" }
                if DirectoryFormat.allows(value), value & 1 != 0 { return "an entry both blocks and allows" }
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
/// folder, its blocks reserved, filled with pwrite as the entries come
/// (`DirectoryEntrySink`), fsync'd, renamed over the final name, and the
/// folder fsync'd, so a crash leaves either the old file or the complete
/// new one under the final name, never a partial file.
public enum DirectoryWriter {
    /// Called with the fraction done (0...1) while the file is laid out.
    public typealias Progress = (Double) -> Void

    /// Writes `content`, which is all in memory.
    /// - Parameters:
    ///   - formatVersion: 4 (the default); 2 for a fleet that still runs a lookupd that
    ///     reads only versions 1 to 3 (binary order); 1 only to test that old files are read.
    ///   - blockShift: log2 of the checksum block size (version 2); the
    ///     default was chosen by measurement, the bench varies it.
    public static func write(_ content: DirectoryContent, to path: String, progress: Progress? = nil,
                             formatVersion: UInt32 = DirectoryFormat.version,
                             blockShift: UInt32 = DirectoryFormat.defaultBlockShift) throws(DirectoryError) {
        if let violation = content.invariantViolation() {
            throw .corrupt(path: path, reason: "refusing to write: \(violation)")
        }
        var plan = DirectoryPlan(entryCount: content.exactKeys.count, prefixCount: content.prefixKeys.count,
                                 labels: LabelTable(content.labels))
        plan.directoryVersion = content.directoryVersion
        plan.journalID = content.journalID
        plan.journalSequence = content.journalSequence
        plan.recordedPlan = content.plan
        try write(plan, to: path, progress: progress, formatVersion: formatVersion, blockShift: blockShift) { (sink) throws(DirectoryError) in
            for i in content.exactKeys.indices { try sink.exact(content.exactKeys[i], content.exactValues[i]) }
            for i in content.prefixKeys.indices { try sink.prefix(content.prefixKeys[i], content.prefixValues[i]) }
        }
    }

    /// Writes a file of `plan.entryCount` numbers and `plan.prefixCount`
    /// prefix rules that `entries` hands to the sink in ascending order
    /// (numbers first). Memory stays a few MiB whatever the size. Entries
    /// out of order, invalid, or not as many as announced are refused, and
    /// nothing is written.
    public static func write(_ plan: DirectoryPlan, to path: String, progress: Progress? = nil,
                             formatVersion: UInt32 = DirectoryFormat.version,
                             blockShift: UInt32 = DirectoryFormat.defaultBlockShift,
                             entries: (DirectoryEntrySink) throws(DirectoryError) -> Void) throws(DirectoryError) {
        guard DirectoryFormat.readableVersions.contains(formatVersion) else {
            throw .unsupportedVersion(path: path, version: formatVersion)
        }
        if let violation = plan.labels.violation() {
            throw violation.hasPrefix("label data") ? .tooLarge("\(path): \(violation)") : .corrupt(path: path, reason: "refusing to write: \(violation)")
        }
        guard let layout = DirectoryLayout(entryCount: UInt64(plan.entryCount), prefixCount: UInt64(plan.prefixCount),
                                           labelCount: UInt64(plan.labels.count), labelDataSize: UInt64(plan.labels.data.count),
                                           blockShift: formatVersion >= 2 ? blockShift : nil,
                                           nodes: formatVersion >= DirectoryFormat.nodesVersion) else {
            throw .tooLarge("\(path): too many entries for one directory file")
        }
        // A failure inside the closure is a DirectoryError; writeFileAtomically
        // only carries SystemCallErrors, so it waits here.
        var refusal: DirectoryError? = nil
        do throws(SystemCallError) {
            try writeFileAtomically(path) { (fd, temporary) throws(SystemCallError) in
                // Reserve the blocks first: a full disk must be an error here, not later.
                do throws(Errno) { try fd.allocate(layout.fileSize) } catch {
                    throw SystemCallError(path: temporary, operation: "allocate \(layout.fileSize) bytes", errno: error)
                }
                let sealer = BlockSealer(fd: fd, layout: layout)
                let sink = DirectoryEntrySink(layout: layout, plan: plan, sealer: sealer, path: path, progress: progress)
                do throws(DirectoryError) {
                    try sink.writeFixedParts()
                    try entries(sink)
                    try sink.finish()
                } catch {
                    refusal = error
                    throw SystemCallError(path: temporary, operation: "write", errno: .invalidArgument)
                }
                var header = DirectoryHeader()
                // Allow entries need version 3; files without them stay readable by older lookupd.
                header.formatVersion = sink.allowing > 0 && formatVersion >= 2 ? max(formatVersion, DirectoryFormat.allowVersion) : formatVersion
                header.flags = DirectoryFormat.flags(version: header.formatVersion)
                header.fileSize = UInt64(layout.fileSize)
                header.directoryVersion = plan.directoryVersion
                header.entryCount = UInt64(plan.entryCount)
                header.prefixCount = UInt64(plan.prefixCount)
                header.labelCount = UInt64(plan.labels.count)
                header.blockedCount = sink.blocked
                header.identifiedCount = sink.identified
                header.keysOffset = UInt64(layout.keysOffset)
                header.valuesOffset = UInt64(layout.valuesOffset)
                header.prefixesOffset = UInt64(layout.prefixesOffset)
                header.labelIndexOffset = UInt64(layout.labelIndexOffset)
                header.labelDataOffset = UInt64(layout.labelDataOffset)
                header.labelDataSize = UInt64(plan.labels.data.count)
                header.prefixLengthMask = sink.prefixMask
                header.journalID = plan.journalID
                header.journalSequence = plan.journalSequence
                header.plan = plan.recordedPlan
                do throws(Errno) {
                    if formatVersion >= 2 {
                        header.contentChecksum = try sealer.finish()
                        header.blockShift = UInt32(layout.blockShift)
                        header.contentEnd = UInt64(layout.contentEnd)
                        header.blockCount = UInt64(layout.blockCount)
                        header.checksumTableOffset = UInt64(layout.tableOffset)
                        header.rootTableOffset = UInt64(layout.rootOffset)
                        header.rootTableCount = UInt64(layout.tableBlockCount)
                    } else {
                        header.contentChecksum = try contentChecksum(fd, from: DirectoryFormat.headerSize, to: layout.fileSize)
                    }
                    try fd.writeAll(header.encoded(), at: 0)
                } catch {
                    throw SystemCallError(path: temporary, operation: "write", errno: error)
                }
            }
        } catch {
            if let refusal { throw refusal }
            throw DirectoryError(error)
        }
    }

    /// Version 1: XXH64 of the bytes written, read back in order.
    private static func contentChecksum(_ fd: FileDescriptor, from start: Int, to end: Int) throws(Errno) -> UInt64 {
        var hasher = XXH64()
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var offset = start
        while offset < end {
            let n = try buffer.withMutableBytes { (raw) throws(Errno) in
                try fd.readFully(into: UnsafeMutableRawBufferPointer(rebasing: raw[0..<min(raw.count, end - offset)]), at: offset)
            }
            guard n > 0 else { throw .ioError }
            buffer.withUnsafeBytes { hasher.update(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            offset += n
        }
        return hasher.finalize()
    }

    /// Fills the checksum table and the root table of a laid-out version-2
    /// file in memory; returns the root checksum for the header.
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
                                        labelDataSize: get64(112), blockShift: get32(168),
                                        nodes: get32(8) >= DirectoryFormat.nodesVersion),
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
