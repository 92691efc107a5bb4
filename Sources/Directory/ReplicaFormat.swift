import Glibc
import TextRules

/// The replicated layer of one directory: the daemon's local copy of what
/// etcd holds under `PREFIX/DIRECTORY/` (docs/CLUSTER.md), kept in
/// `STATE-DIRECTORY/replicated/NAME.lkr` and complete through a known etcd
/// revision. docs/FORMAT.md ("The replicated layer") is the byte-by-byte
/// specification; keep the two in step.
///
/// The file is a cache of etcd's state, never the only copy of a change:
/// what cannot be read of it (a torn batch, damage, another version) is
/// fetched from etcd again.
public enum ReplicaFormat {
    /// "\x89LKR\r\n\x1a\n": the directory's magic with R for replicated.
    public static let magic: [UInt8] = [0x89, 0x4C, 0x4B, 0x52, 0x0D, 0x0A, 0x1A, 0x0A]
    public static let version: UInt32 = 1
    public static let headerSize = 48
    /// A record without its text and origin, checksum included.
    static let recordFixedSize = 44
    /// Longest text: a label, or the raw etcd value of a change this
    /// lookupd could not apply (kept so a later version can).
    public static let maxTextBytes = 4096
    public static let maxOriginBytes = 64
    static let maxRecordSize = recordFixedSize + maxTextBytes + maxOriginBytes

    static let typePut: UInt8 = 1
    static let typeDelete: UInt8 = 2
    static let typeCheckpoint: UInt8 = 3
    static let actionRefused: UInt8 = 0
    static let actionBlock: UInt8 = 1
    static let actionIdentify: UInt8 = 2
    static let actionRemove: UInt8 = 3
    /// An allow entry (a layer written by an older lookupd never holds one).
    static let actionAllow: UInt8 = 4

    /// The folder of the replicated layers in a state directory.
    public static func folder(stateDirectory: String) -> String {
        (stateDirectory.hasSuffix("/") ? stateDirectory : stateDirectory + "/") + "replicated"
    }

    /// Where the replicated layer of the directory named `name` lives.
    public static func path(stateDirectory: String, directory name: String) -> String {
        folder(stateDirectory: stateDirectory) + "/" + name + ".lkr"
    }

    static func encodeHeader(layerID: UInt64, clusterID: UInt64, revision: UInt64) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: headerSize)
        bytes.withUnsafeMutableBytes { raw in
            for i in 0..<8 { raw[i] = magic[i] }
            raw.storeBytes(of: version.littleEndian, toByteOffset: 8, as: UInt32.self)
            raw.storeBytes(of: UInt32(headerSize).littleEndian, toByteOffset: 12, as: UInt32.self)
            raw.storeBytes(of: layerID.littleEndian, toByteOffset: 16, as: UInt64.self)
            raw.storeBytes(of: clusterID.littleEndian, toByteOffset: 24, as: UInt64.self)
            raw.storeBytes(of: revision.littleEndian, toByteOffset: 32, as: UInt64.self)
            let checksum = XXH64.hash(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(raw)[0..<40]))
            raw.storeBytes(of: checksum.littleEndian, toByteOffset: 40, as: UInt64.self)
        }
        return bytes
    }

    struct Header {
        var layerID: UInt64
        var clusterID: UInt64
        var revision: UInt64
    }

    static func decodeHeader(_ raw: UnsafeRawBufferPointer, path: String) throws(ReplicaError) -> Header {
        guard raw.count >= 8, raw.prefix(8).elementsEqual(magic) else { throw .notAReplica(path: path) }
        guard raw.count >= headerSize else { throw .unreadable(path: path, reason: "truncated header") }
        let version = UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: 8, as: UInt32.self))
        guard version == self.version else { throw .unreadable(path: path, reason: "format version \(version), this lookupd reads version \(self.version)") }
        let checksum = UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: 40, as: UInt64.self))
        guard XXH64.hash(UnsafeRawBufferPointer(rebasing: raw[0..<40])) == checksum,
              UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: 12, as: UInt32.self)) == UInt32(headerSize) else {
            throw .unreadable(path: path, reason: "header checksum mismatch")
        }
        return Header(layerID: UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: 16, as: UInt64.self)),
                      clusterID: UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: 24, as: UInt64.self)),
                      revision: UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: 32, as: UInt64.self)))
    }

    /// The bytes of a change (nil entry: the key was deleted in etcd).
    static func encode(key: UInt64, revision: UInt64, entry: ReplicaEntry?, layerID: UInt64) -> [UInt8] {
        var type = typeDelete, action: UInt8 = 0
        var text: [UInt8] = [], origin: [UInt8] = [], time: Int64 = 0
        if let entry {
            type = typePut
            time = entry.time
            origin = Array(entry.origin.prefix(maxOriginBytes))
            switch entry.action {
            case .add(let blocked, let label, let allowed):
                action = allowed ? actionAllow : blocked ? actionBlock : actionIdentify
                text = label ?? []
            case .remove:
                action = actionRemove
            case .refused(let value):
                action = actionRefused
                text = Array(value.prefix(maxTextBytes))
            }
        }
        return record(type: type, action: action, revision: revision, key: key, time: time, text: text, origin: origin, layerID: layerID)
    }

    /// A checkpoint: every change through `revision` is in the records before it.
    static func encodeCheckpoint(_ revision: UInt64, layerID: UInt64) -> [UInt8] {
        record(type: typeCheckpoint, action: 0, revision: revision, key: 0, time: 0, text: [], origin: [], layerID: layerID)
    }

    private static func record(type: UInt8, action: UInt8, revision: UInt64, key: UInt64, time: Int64,
                               text: [UInt8], origin: [UInt8], layerID: UInt64) -> [UInt8] {
        let size = recordFixedSize + text.count + origin.count
        var bytes = [UInt8](repeating: 0, count: size)
        bytes.withUnsafeMutableBytes { raw in
            raw.storeBytes(of: UInt32(size).littleEndian, toByteOffset: 0, as: UInt32.self)
            raw[4] = type
            raw[5] = action
            raw.storeBytes(of: UInt16(text.count).littleEndian, toByteOffset: 6, as: UInt16.self)
            raw.storeBytes(of: revision.littleEndian, toByteOffset: 8, as: UInt64.self)
            raw.storeBytes(of: key.littleEndian, toByteOffset: 16, as: UInt64.self)
            raw.storeBytes(of: time.littleEndian, toByteOffset: 24, as: Int64.self)
            raw[32] = UInt8(origin.count)
            for (i, b) in text.enumerated() { raw[36 + i] = b }
            for (i, b) in origin.enumerated() { raw[36 + text.count + i] = b }
            let covered = UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(raw)[0..<(size - 8)])
            raw.storeBytes(of: XXH64.hash(covered, seed: layerID).littleEndian, toByteOffset: size - 8, as: UInt64.self)
        }
        return bytes
    }

    /// Where a scan stopped.
    struct ScanEnd {
        /// Offset just past the last checkpoint.
        var end: Int
        /// Bytes after it that were not taken, and why (nil: none).
        var problem: String?
    }

    /// Reads the records of `raw` (the whole file) into `state`, batch by
    /// batch: a batch counts only once its checkpoint is read, so `state` is
    /// always etcd's range as of one revision.
    static func scan(_ raw: UnsafeRawBufferPointer, header: Header, into state: inout ReplicaState, records: inout Int) -> ScanEnd {
        var offset = headerSize, committedEnd = headerSize
        var batch: [ReplicaChange] = []
        var first = true
        // Equal labels and origins share one array (most entries repeat a few).
        var interned: [[UInt8]: [UInt8]] = [:]
        func shared(_ bytes: [UInt8]) -> [UInt8] {
            if let known = interned[bytes] { return known }
            if interned.count < 100_000 { interned[bytes] = bytes }
            return bytes
        }
        func stop(_ reason: String) -> ScanEnd { ScanEnd(end: committedEnd, problem: reason) }
        while offset < raw.count {
            let left = raw.count - offset
            guard left >= recordFixedSize else { return stop("incomplete record") }
            let size = Int(UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: offset, as: UInt32.self)))
            let textLength = Int(UInt16(littleEndian: raw.loadUnaligned(fromByteOffset: offset + 6, as: UInt16.self)))
            let originLength = Int(raw[offset + 32])
            guard textLength <= maxTextBytes, originLength <= maxOriginBytes, size == recordFixedSize + textLength + originLength else {
                return stop("bad record size")
            }
            guard left >= size else { return stop("incomplete record") }
            let stored = UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: offset + size - 8, as: UInt64.self))
            guard XXH64.hash(UnsafeRawBufferPointer(rebasing: raw[offset..<(offset + size - 8)]), seed: header.layerID) == stored else {
                return stop("record checksum mismatch")
            }
            let type = raw[offset + 4], action = raw[offset + 5]
            let revision = UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self))
            let key = UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: offset + 16, as: UInt64.self))
            let time = Int64(littleEndian: raw.loadUnaligned(fromByteOffset: offset + 24, as: Int64.self))
            let text = shared(Array(raw[(offset + 36)..<(offset + 36 + textLength)]))
            let origin = shared(Array(raw[(offset + 36 + textLength)..<(offset + 36 + textLength + originLength)]))
            switch type {
            case typeCheckpoint:
                // The first batch is the snapshot the file was written from.
                let valid = first ? revision == header.revision : revision > state.revision
                guard valid, batch.allSatisfy({ $0.revision <= revision }) else { return stop("checkpoint \(revision) out of order") }
                for change in batch { state.apply(change) }
                records += batch.count
                state.revision = revision
                batch = []
                first = false
                committedEnd = offset + size
            case typePut, typeDelete:
                guard JournalRecord.pattern(key: key) != nil else { return stop("record names no valid number or prefix") }
                // The snapshot batch is in key order; later ones in revision order.
                guard first || (revision > state.revision && batch.last.map({ $0.revision <= revision }) ?? true) else {
                    return stop("revision \(revision) out of order")
                }
                var entry: ReplicaEntry? = nil
                if type == typePut {
                    let label: [UInt8]? = text.isEmpty ? nil : text
                    let labelOK = label.map { $0.withUnsafeBytes { LabelRules.problem($0) } == nil } ?? true
                    switch action {
                    case actionBlock where labelOK:
                        entry = ReplicaEntry(revision: revision, action: .add(blocked: true, label: label), time: time, origin: origin)
                    case actionIdentify where labelOK && label != nil:
                        entry = ReplicaEntry(revision: revision, action: .add(blocked: false, label: label), time: time, origin: origin)
                    case actionAllow where labelOK:
                        entry = ReplicaEntry(revision: revision, action: .add(blocked: false, label: label, allowed: true), time: time, origin: origin)
                    case actionRemove where text.isEmpty:
                        entry = ReplicaEntry(revision: revision, action: .remove, time: time, origin: origin)
                    case actionRefused:
                        entry = ReplicaEntry(revision: revision, action: .refused(value: text), time: time, origin: origin)
                    default:
                        return stop("record at revision \(revision) is not a valid change")
                    }
                } else if action != 0 || textLength != 0 {
                    return stop("record at revision \(revision) is not a valid deletion")
                }
                batch.append(ReplicaChange(key: key, revision: revision, entry: entry))
            default:
                return stop("unknown record type \(type)")
            }
            offset += size
        }
        return ScanEnd(end: committedEnd, problem: batch.isEmpty ? nil : "a batch without its checkpoint")
    }
}

/// What the replicated layer holds for one number or prefix rule: the
/// value of its etcd key at `revision` (its mod_revision).
public struct ReplicaEntry: Equatable, Sendable {
    public var revision: UInt64
    public var action: ReplicaAction
    /// When the writing node made the change (milliseconds since 1970, UTC;
    /// 0 when it did not say). Shown to operators; never used for ordering.
    public var time: Int64
    /// The node that made the change (its `node=` name).
    public var origin: [UInt8]

    public init(revision: UInt64, action: ReplicaAction, time: Int64 = 0, origin: [UInt8] = []) {
        self.revision = revision
        self.action = action
        self.time = time
        self.origin = origin
    }
}

public enum ReplicaAction: Equatable, Sendable {
    /// Adds the number or prefix rule, or replaces what lower layers say about it.
    /// `allowed`: an allow entry (never with `blocked`).
    case add(blocked: Bool, label: [UInt8]?, allowed: Bool = false)
    /// Hides the number or prefix rule of the lower layers.
    case remove
    /// A value this lookupd cannot apply (an action or critical field it
    /// does not know): screening treats the key as absent. The raw value is
    /// kept so that an upgraded lookupd applies it.
    case refused(value: [UInt8])
}

/// One change to a replicated layer: etcd's new value of a key, or its
/// deletion (nil entry).
public struct ReplicaChange: Equatable, Sendable {
    public var key: UInt64
    public var revision: UInt64
    public var entry: ReplicaEntry?

    public init(key: UInt64, revision: UInt64, entry: ReplicaEntry?) {
        self.key = key
        self.revision = revision
        self.entry = entry
    }
}

/// A replicated layer in memory: etcd's range as of `revision`.
///
/// Two tiers so that the daemon can publish a new state for every batch of
/// changes without copying it: a large `base` that changes rarely and a
/// small `recent` tier of the changes since. Dictionaries are copy-on-write,
/// so a published copy shares both; the next change copies only `recent`,
/// and folding it into `base` costs one copy of the whole, amortized over
/// the changes since. With a batch of b changes published at a time and n
/// entries, a `recent` of r costs about r / b + n / r copies per change:
/// least near r = sqrt(n b); b is taken as 16.
public struct ReplicaState: Sendable {
    /// The etcd cluster the layer comes from (0: none yet).
    public internal(set) var clusterID: UInt64 = 0
    /// Every change through this revision is in the layer.
    public internal(set) var revision: UInt64 = 0
    private var base: [UInt64: ReplicaEntry] = [:]
    /// nil value: deleted since `base`.
    private var recent: [UInt64: ReplicaEntry?] = [:]
    /// Bit L set when the layer may mention a prefix of L digits.
    public private(set) var prefixMask: UInt32 = 0
    /// Numbers and prefix rules the layer holds (removals and refused values included).
    public private(set) var count = 0

    public init() {}

    public init(clusterID: UInt64, revision: UInt64, entries: [UInt64: ReplicaEntry]) {
        self.clusterID = clusterID
        self.revision = revision
        base = entries
        count = entries.count
        prefixMask = ReplicaState.mask(entries.keys)
    }

    public var isEmpty: Bool { count == 0 }

    public subscript(key: UInt64) -> ReplicaEntry? { entry(key) }

    func entry(_ key: UInt64) -> ReplicaEntry? {
        if !recent.isEmpty, let changed = recent[key] { return changed }
        return base[key]
    }

    /// Every entry, in no particular order.
    public func forEach(_ body: (UInt64, ReplicaEntry) -> Void) {
        for (key, entry) in base where recent[key] == nil { body(key, entry) }
        for (key, entry) in recent { if let entry { body(key, entry) } }
    }

    /// The entries as one dictionary.
    public var entries: [UInt64: ReplicaEntry] {
        var all = base
        for (key, entry) in recent { all[key] = entry }
        return all
    }

    /// Applies a change. Changes come in revision order, after `revision`;
    /// one the layer already has (a replay after a reconnect) changes nothing.
    public mutating func apply(_ change: ReplicaChange) {
        guard change.revision > revision else { return }
        let old = entry(change.key)
        if let old, old.revision > change.revision { return }
        if let entry = change.entry {
            if old == nil { count += 1 }
            recent[change.key] = .some(entry)
            if change.key >> 56 != 0 { prefixMask |= 1 << UInt32(change.key >> 56) }
        } else {
            guard old != nil else { return }
            count -= 1
            if base[change.key] != nil { recent[change.key] = .some(nil) } else { recent.removeValue(forKey: change.key) }
        }
        if recent.count > recentLimit { settle() }
    }

    private var recentLimit = 256

    /// Folds `recent` into `base`.
    mutating func settle() {
        var merged = base
        for (key, entry) in recent { merged[key] = entry }
        base = merged
        recent = [:]
        prefixMask = ReplicaState.mask(base.keys)
        recentLimit = max(256, Int(Double(base.count * 16).squareRoot()))
    }

    static func mask<S: Sequence>(_ keys: S) -> UInt32 where S.Element == UInt64 {
        var mask: UInt32 = 0
        for key in keys where key >> 56 != 0 { mask |= 1 << UInt32(key >> 56) }
        return mask
    }
}

/// Why a replicated layer could not be read or written.
public enum ReplicaError: Error, Equatable, Sendable, CustomStringConvertible {
    case system(path: String, operation: String, errno: Int32)
    case notAReplica(path: String)
    /// A header this lookupd cannot use (version, checksum): the layer is
    /// fetched from etcd again.
    case unreadable(path: String, reason: String)
    case busy(path: String)

    public var description: String {
        switch self {
        case .system(let path, let operation, let code):
            return "\(path): cannot \(operation): \(String(cString: strerror(code)))"
        case .notAReplica(let path):
            return "\(path): not a lookupd replicated layer (bad magic number)"
        case .unreadable(let path, let reason):
            return "\(path): unreadable replicated layer: \(reason)"
        case .busy(let path):
            return "\(path): another lookupd serve is using this state directory's replicated layers"
        }
    }
}
