import Glibc
import TextRules

/// Constants and encoding of the journal beside a directory file
/// (`spam.lkd.journal`): the single-entry additions and removals made with
/// `lookupd add` / `lookupd remove`, the operator's own layer over the
/// compiled directory, kept through recompiles and compactions (the latest
/// record of each number). docs/FORMAT.md ("The journal") is the
/// byte-by-byte specification; keep the two in step.
public enum JournalFormat {
    /// "\x89LKJ\r\n\x1a\n": the directory's magic with J for journal.
    public static let magic: [UInt8] = [0x89, 0x4C, 0x4B, 0x4A, 0x0D, 0x0A, 0x1A, 0x0A]
    /// The version written. 2 adds the time of each change and lets
    /// compaction drop superseded records (sequence numbers then ascend
    /// with gaps); 3 adds the moment an addition expires.
    public static let version: UInt32 = 3
    /// Versions read: a version-1 or -2 journal is rewritten as version 3 by
    /// the next command that changes it.
    public static let readableVersions: ClosedRange<UInt32> = 1...3
    public static let headerSize = 40
    /// A record without its label: 32 bytes in version 1, 40 in version 2
    /// (the time), 48 in version 3 (the expiry).
    static func recordFixedSize(_ version: UInt32) -> Int { version >= 3 ? 48 : version == 2 ? 40 : 32 }
    /// Where the label starts in a record: right after the fixed fields, the checksum after it.
    static func labelOffset(_ version: UInt32) -> Int { recordFixedSize(version) - 8 }
    /// The longest record: a torn append never leaves more than this after
    /// the last good record, so a longer tail is damage, not a torn write.
    public static let maxRecordSize = 48 + DirectoryFormat.maxLabelBytes
    /// The largest journal lookupd reads (8 million records at least): it is read into memory
    /// whole, so anything larger, or anything growing without end, is refused rather than
    /// read; `lookupd compact` drops its superseded records.
    public static let maxFileSize = 256 << 20
    static let operationAdd: UInt8 = 1
    static let operationRemove: UInt8 = 2
    static let flagBlocks: UInt8 = 1
    /// Version 3: the record is part of a batch and more of it follow; a
    /// batch applies whole, at its last record, or not at all.
    static let flagContinued: UInt8 = 2
    /// The entry allows (add only, never with flagBlocks). A lookupd that predates allow
    /// entries stops reading the journal at such a record (not a valid addition to it)
    /// rather than take the allow for an identify.
    static let flagAllows: UInt8 = 4

    /// Where the journal of the directory file at `path` lives.
    public static func path(forDirectory path: String) -> String { path + ".journal" }

    static func encodeHeader(journalID: UInt64, baseSequence: UInt64, version: UInt32 = JournalFormat.version) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: headerSize)
        bytes.withUnsafeMutableBytes { raw in
            for i in 0..<8 { raw[i] = magic[i] }
            raw.storeBytes(of: version.littleEndian, toByteOffset: 8, as: UInt32.self)
            raw.storeBytes(of: UInt32(headerSize).littleEndian, toByteOffset: 12, as: UInt32.self)
            raw.storeBytes(of: journalID.littleEndian, toByteOffset: 16, as: UInt64.self)
            raw.storeBytes(of: baseSequence.littleEndian, toByteOffset: 24, as: UInt64.self)
            let checksum = XXH64.hash(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(raw)[0..<32]))
            raw.storeBytes(of: checksum.littleEndian, toByteOffset: 32, as: UInt64.self)
        }
        return bytes
    }

    struct Header {
        var journalID: UInt64
        var baseSequence: UInt64
        var version: UInt32
    }

    /// The journal id, base sequence and version from the first bytes of a journal.
    static func decodeHeader(_ raw: UnsafeRawBufferPointer, path: String) throws(JournalError) -> Header {
        guard raw.count >= 8, raw.prefix(8).elementsEqual(magic) else { throw .notAJournal(path: path) }
        guard raw.count >= headerSize else { throw .damaged(path: path, offset: 0, bytes: raw.count, reason: "truncated header") }
        let version = UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: 8, as: UInt32.self))
        guard readableVersions.contains(version) else { throw .unsupportedVersion(path: path, version: version) }
        let checksum = UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: 32, as: UInt64.self))
        guard XXH64.hash(UnsafeRawBufferPointer(rebasing: raw[0..<32])) == checksum else {
            throw .damaged(path: path, offset: 0, bytes: headerSize, reason: "header checksum mismatch")
        }
        guard UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: 12, as: UInt32.self)) == UInt32(headerSize) else {
            throw .damaged(path: path, offset: 0, bytes: headerSize, reason: "header size is not \(headerSize)")
        }
        let id = UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: 16, as: UInt64.self))
        guard id != 0 else { throw .damaged(path: path, offset: 0, bytes: headerSize, reason: "journal id is 0") }
        return Header(journalID: id, baseSequence: UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: 24, as: UInt64.self)),
                      version: version)
    }

    static func decodeHeader(_ bytes: ArraySlice<UInt8>, path: String) throws(JournalError) -> Header {
        let result = bytes.withUnsafeBytes { raw in
            Result { () throws(JournalError) in try decodeHeader(raw, path: path) }
        }
        return try result.get()
    }

    /// The bytes of one record (version 3). The checksum is seeded with the
    /// journal id, so a record copied from another journal never validates.
    /// `continued`: more records of the same batch follow this one.
    static func encode(_ record: JournalRecord, journalID: UInt64, continued: Bool = false) -> [UInt8] {
        var operation = operationRemove
        var flags: UInt8 = continued ? flagContinued : 0
        var label: [UInt8] = []
        if case .add(let blocked, let l, let allowed) = record.operation {
            operation = operationAdd
            flags |= blocked ? flagBlocks : 0
            flags |= allowed ? flagAllows : 0
            label = l ?? []
        }
        let fixed = recordFixedSize(version)
        let size = fixed + label.count
        var bytes = [UInt8](repeating: 0, count: size)
        bytes.withUnsafeMutableBytes { raw in
            raw.storeBytes(of: UInt32(size).littleEndian, toByteOffset: 0, as: UInt32.self)
            raw[4] = operation
            raw[5] = flags
            raw.storeBytes(of: UInt16(label.count).littleEndian, toByteOffset: 6, as: UInt16.self)
            raw.storeBytes(of: record.sequence.littleEndian, toByteOffset: 8, as: UInt64.self)
            raw.storeBytes(of: record.key.littleEndian, toByteOffset: 16, as: UInt64.self)
            raw.storeBytes(of: record.time.littleEndian, toByteOffset: 24, as: Int64.self)
            raw.storeBytes(of: record.expires.littleEndian, toByteOffset: 32, as: Int64.self)
            let start = labelOffset(version)
            for (i, b) in label.enumerated() { raw[start + i] = b }
            let covered = fixed - 8 + label.count
            let checksum = XXH64.hash(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(raw)[0..<covered]), seed: journalID)
            raw.storeBytes(of: checksum.littleEndian, toByteOffset: covered, as: UInt64.self)
        }
        return bytes
    }

    /// The tail `bytes` (from the end of the last good record to the end of
    /// the file), classified. `batchPrefix`: how many of its first bytes are
    /// sound records of a batch whose last record is missing; the tail is
    /// torn when what follows them is.
    static func tail(_ bytes: UnsafeRawBufferPointer, offset: Int, reason: String, version: UInt32, batchPrefix: Int = 0) -> JournalTail {
        let rest = UnsafeRawBufferPointer(rebasing: bytes[min(batchPrefix, bytes.count)...])
        var torn: Bool
        let fixed = recordFixedSize(version)
        if rest.count < fixed {
            torn = true
        } else {
            let size = Int(UInt32(littleEndian: rest.loadUnaligned(fromByteOffset: 0, as: UInt32.self)))
            let labelLength = Int(UInt16(littleEndian: rest.loadUnaligned(fromByteOffset: 6, as: UInt16.self)))
            let plausible = labelLength <= DirectoryFormat.maxLabelBytes && size == fixed + labelLength
            torn = plausible && rest.count <= size
        }
        // Some file systems show a crashed append as zeros.
        if !torn, rest.count <= fixed + DirectoryFormat.maxLabelBytes, rest.allSatisfy({ $0 == 0 }) { torn = true }
        return JournalTail(offset: offset, length: bytes.count, reason: reason, isTorn: torn)
    }

    /// Where a scan of records stopped.
    struct ScanEnd {
        /// Offset just past the last good record (of the last whole batch).
        var end: Int
        var lastSequence: UInt64
        /// Why the bytes from `end` on were not read as a record; nil when
        /// the scan reached the end of the bytes.
        var problem: String?
        /// Bytes from `end` on that are sound records of a batch whose last
        /// record is missing (not applied).
        var batchPrefix = 0
    }

    /// Reads the records in `raw` (which starts at file offset `base`) from
    /// `offset` on, calling `body` for each good one, and stops at the first
    /// that is incomplete, damaged or out of sequence (version 1: not the
    /// previous + 1; version 2 and 3: not above the previous). The records of
    /// a batch (version 3) reach `body` only once its last record is read.
    static func scan(_ raw: UnsafeRawBufferPointer, base: Int, journalID: UInt64, after sequence: UInt64, version: UInt32,
                     _ body: (JournalRecord) -> Void) -> ScanEnd {
        var offset = 0
        var last = sequence
        let fixed = recordFixedSize(version)
        let labelStart = labelOffset(version)
        var batch: [JournalRecord] = []
        var batchStart = 0
        var lastBeforeBatch = sequence
        func stop(_ problem: String?) -> ScanEnd {
            if batch.isEmpty { return ScanEnd(end: base + offset, lastSequence: last, problem: problem) }
            return ScanEnd(end: base + batchStart, lastSequence: lastBeforeBatch, problem: problem ?? "batch without its last record",
                           batchPrefix: offset - batchStart)
        }
        while offset < raw.count {
            let left = raw.count - offset
            guard left >= fixed else { return stop("incomplete record") }
            let size = Int(UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: offset, as: UInt32.self)))
            let labelLength = Int(UInt16(littleEndian: raw.loadUnaligned(fromByteOffset: offset + 6, as: UInt16.self)))
            guard labelLength <= DirectoryFormat.maxLabelBytes, size == fixed + labelLength else { return stop("bad record size") }
            guard left >= size else { return stop("incomplete record") }
            let stored = UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: offset + labelStart + labelLength, as: UInt64.self))
            let covered = UnsafeRawBufferPointer(rebasing: raw[offset..<(offset + labelStart + labelLength)])
            guard XXH64.hash(covered, seed: journalID) == stored else { return stop("record checksum mismatch") }
            let operation = raw[offset + 4]
            var flags = raw[offset + 5]
            let continued = version >= 3 && flags & flagContinued != 0
            if continued { flags &= ~flagContinued }
            let recordSequence = UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self))
            let key = UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: offset + 16, as: UInt64.self))
            let inSequence = version >= 2 ? recordSequence > last : recordSequence == last &+ 1
            guard inSequence else {
                let due = version >= 2 ? "one above \(last)" : "\(last &+ 1)"
                return stop("sequence \(recordSequence) where \(due) was due")
            }
            let time = version >= 2 ? Int64(littleEndian: raw.loadUnaligned(fromByteOffset: offset + 24, as: Int64.self)) : 0
            let expires = version >= 3 ? Int64(littleEndian: raw.loadUnaligned(fromByteOffset: offset + 32, as: Int64.self)) : 0
            guard JournalRecord.pattern(key: key) != nil else { return stop("record \(recordSequence) names no valid number or prefix") }
            let record: JournalRecord
            switch operation {
            case operationAdd:
                let label: [UInt8]? = labelLength == 0 ? nil : Array(raw[(offset + labelStart)..<(offset + labelStart + labelLength)])
                let allows = flags & flagAllows != 0
                let valid = flags & ~(flagBlocks | flagAllows) == 0 && flags != flagBlocks | flagAllows
                    && (flags != 0 || label != nil) && expires >= 0
                    && (label.map { $0.withUnsafeBytes { LabelRules.problem($0) } == nil } ?? true)
                guard valid else { return stop("record \(recordSequence) is not a valid addition") }
                record = JournalRecord(sequence: recordSequence, key: key, operation: .add(blocked: flags & flagBlocks != 0, label: label, allowed: allows),
                                       time: time, expires: expires)
            case operationRemove:
                guard flags == 0, labelLength == 0, expires == 0 else { return stop("record \(recordSequence) is not a valid removal") }
                record = JournalRecord(sequence: recordSequence, key: key, operation: .remove, time: time)
            default:
                return stop("unknown operation \(operation)")
            }
            if batch.isEmpty {
                batchStart = offset
                lastBeforeBatch = last
            }
            batch.append(record)
            last = recordSequence
            offset += size
            if !continued {
                for r in batch { body(r) }
                batch.removeAll(keepingCapacity: true)
            }
        }
        return stop(nil)
    }
}

/// What one journal record does.
public enum JournalOperation: Equatable, Sendable {
    /// Adds the number or prefix rule, or replaces what the directory says about it.
    /// `allowed`: an allow entry (never with `blocked`): lower-priority directories do not
    /// block the number.
    case add(blocked: Bool, label: [UInt8]?, allowed: Bool = false)
    /// Removes the number or prefix rule.
    case remove
}

/// One record of a journal.
public struct JournalRecord: Equatable, Sendable {
    /// 1, 2, 3, ... within a journal, never reused: what `lookupd query` and
    /// the call log name, and what a compacted directory says it merged.
    public var sequence: UInt64
    /// An exact number's value, or a prefix rule's key (digit count in the
    /// top byte, as in the directory file): one key space for both.
    public var key: UInt64
    public var operation: JournalOperation
    /// When the change was made, in seconds since 1970 (UTC); 0 when not
    /// known (version-1 journals did not record it).
    public var time: Int64
    /// An addition in force only until this moment (seconds since 1970,
    /// UTC), from then on as if it had never been made; 0: no end.
    /// Removals never expire.
    public var expires: Int64

    public init(sequence: UInt64, key: UInt64, operation: JournalOperation, time: Int64 = 0, expires: Int64 = 0) {
        self.sequence = sequence
        self.key = key
        self.operation = operation
        self.time = time
        self.expires = expires
    }

    /// Whether the record expires at some point.
    public var isTemporary: Bool { expires != 0 }

    /// Whether it is in force at `now` (seconds since 1970, UTC): the
    /// expiry itself is the first second it is not.
    public func isLive(at now: Int64) -> Bool { expires == 0 || now < expires }

    public var pattern: NumberPattern { JournalRecord.pattern(key: key)! }

    public static func key(_ pattern: NumberPattern) -> UInt64 {
        switch pattern {
        case .exact(let number): return number.value
        case .prefix(let prefix): return DirectoryFormat.prefixKey(prefix)
        }
    }

    public static func pattern(key: UInt64) -> NumberPattern? {
        let length = Int(key >> 56)
        if length == 0 { return PhoneNumber(value: key).map { .exact($0) } }
        return NumberPrefix(digits: key & ((1 << 56) - 1), length: length).map { .prefix($0) }
    }
}

/// Bytes after the last good record of a journal.
public struct JournalTail: Equatable, Sendable, CustomStringConvertible {
    public var offset: Int
    public var length: Int
    public var reason: String

    /// What an append cut short by a crash leaves: part of one record, or
    /// one record that did not reach the disk whole. Anything else (bytes
    /// beyond the record the tail starts with) means the file was damaged.
    public var isTorn: Bool

    public var description: String {
        "\(length) byte\(length == 1 ? "" : "s") at offset \(offset) after the last good record (\(reason))"
    }
}

/// What a journal says on top of its directory: for every number and
/// prefix rule it mentions, the latest record (later records replace
/// earlier ones, so only the latest matters), and, under a latest record
/// that expires, the latest one that does not: what holds again once the
/// expiring one ends. A change without an expiry replaces everything before
/// it; one with an expiry replaces only an earlier expiring one.
public struct JournalState: Sendable {
    /// 0 while there is no journal.
    public internal(set) var journalID: UInt64 = 0
    /// The journal's format version (1 to 3).
    public internal(set) var version: UInt32 = JournalFormat.version
    /// The sequence number before the journal's first record.
    public internal(set) var baseSequence: UInt64 = 0
    public internal(set) var lastSequence: UInt64 = 0
    public internal(set) var latest: [UInt64: JournalRecord] = [:]
    /// For a key whose latest record expires: the latest record before it
    /// that does not.
    public internal(set) var beneath: [UInt64: JournalRecord] = [:]

    public init() {}

    /// Records in the journal (superseded ones included); counted as read,
    /// since compaction leaves gaps in the numbering.
    public internal(set) var recordCount: UInt64 = 0

    /// Numbers and prefix rules the journal changes (the latest record of each).
    public var changeCount: Int { latest.count }

    /// Records that still decide something: the latest of each key and the
    /// ones beneath expiring records. The rest are superseded.
    public var liveRecordCount: Int { latest.count + beneath.count }

    mutating func apply(_ record: JournalRecord) {
        if record.isTemporary {
            if let previous = latest[record.key], !previous.isTemporary { beneath[record.key] = previous }
        } else {
            beneath[record.key] = nil
        }
        latest[record.key] = record
        lastSequence = record.sequence
        recordCount += 1
    }

    /// The record without an expiry that holds for `key` (the latest one, or
    /// the one beneath an expiring latest), if any.
    public func lasting(_ key: UInt64) -> JournalRecord? {
        guard let record = latest[key] else { return nil }
        return record.isTemporary ? beneath[key] : record
    }

    /// The latest records that have expired at `now`.
    public func expired(at now: Int64) -> [JournalRecord] {
        latest.values.filter { !$0.isLive(at: now) }
    }

    /// The last record the directory with this header already contains:
    /// its merged sequence when it was compacted from this journal, else 0.
    public func mergedThrough(_ header: DirectoryHeader) -> UInt64 {
        header.journalID == journalID && journalID != 0 ? header.journalSequence : 0
    }

    /// The record that decides `key` over the directory with this header at
    /// `now`, nil when the file decides: an expiring record while it is in
    /// force (compaction never merges one into a file), else the lasting
    /// record when the file has not merged it.
    public func applying(_ key: UInt64, over header: DirectoryHeader, at now: Int64) -> JournalRecord? {
        guard let record = latest[key] else { return nil }
        if record.isTemporary && record.isLive(at: now) { return record }
        guard let lasting = record.isTemporary ? beneath[key] : record else { return nil }
        return lasting.sequence > mergedThrough(header) ? lasting : nil
    }

    /// The records that decide over the directory with this header at `now`
    /// (see `applying(_:over:at:)`), in ascending key order.
    public func pending(over header: DirectoryHeader, at now: Int64) -> [JournalRecord] {
        latest.keys.compactMap { applying($0, over: header, at: now) }.sorted { $0.key < $1.key }
    }

    /// The lasting records the directory with this header has not merged, in
    /// ascending key order: what a compaction folds into the file (an
    /// expiring record stays in the journal alone).
    public func lastingPending(over header: DirectoryHeader) -> [JournalRecord] {
        let merged = mergedThrough(header)
        return latest.keys.compactMap { key in lasting(key).flatMap { $0.sequence > merged ? $0 : nil } }.sorted { $0.key < $1.key }
    }

    /// The records a rewrite keeps at `now`, in sequence order: every one
    /// that still decides something, without the expiring records that
    /// have ended (the record beneath one then holds again). The journal's
    /// newest record stays even when it has ended: the next append numbers
    /// on from it, and a number at or below what a compacted file merged
    /// would be taken as merged.
    public func kept(at now: Int64) -> [JournalRecord] {
        (latest.values.filter { $0.isLive(at: now) || $0.sequence == lastSequence } + beneath.values).sorted { $0.sequence < $1.sequence }
    }

    /// Records a rewrite at `now` leaves out: superseded ones and ended expiring ones.
    public func droppable(at now: Int64) -> UInt64 { recordCount - UInt64(kept(at: now).count) }
}

/// Why a journal could not be read, written or used.
public enum JournalError: Error, Equatable, Sendable, CustomStringConvertible {
    case system(path: String, operation: String, errno: Int32)
    case notAJournal(path: String)
    case unsupportedVersion(path: String, version: UInt32)
    /// Damage past what a torn append leaves: not repaired automatically.
    case damaged(path: String, offset: Int, bytes: Int, reason: String)
    case directory(DirectoryError)
    /// `lookupd remove` of something neither the directory nor its journal holds.
    case notPresent(directory: String, pattern: NumberPattern)
    case invalid(String)

    public var description: String {
        switch self {
        case .system(let path, let operation, let code):
            return "\(path): cannot \(operation): \(String(cString: strerror(code)))"
        case .notAJournal(let path):
            return "\(path): not a lookupd journal (bad magic number)"
        case .unsupportedVersion(let path, let version):
            return "\(path): unsupported journal format version \(version) (this lookupd reads versions \(JournalFormat.readableVersions.lowerBound) to \(JournalFormat.readableVersions.upperBound))"
        case .damaged(let path, let offset, let bytes, let reason):
            return "\(path): damaged journal: \(reason) (\(bytes) bytes at offset \(offset)); the records before it are intact — move the file aside to discard the rest"
        case .directory(let error):
            return error.description
        case .notPresent(let directory, let pattern):
            return "\(pattern) is not in \(directory) or its journal"
        case .invalid(let message):
            return message
        }
    }
}
