import CPhoneNumbers
import Glibc
import SystemCalls

/// Every value lookupd reads from libphonenumber's numbering-plan metadata, as plain values:
/// what `NumberingData` derives its tables from. It comes from the library itself
/// (`fromLibrary`, which loads it) or from the numbering cache, a copy written the first time
/// and read by every later process while the library's files are unchanged
/// (`NumberingCache`; docs/FORMAT.md "Numbering cache").
struct MetadataSnapshot: Equatable, Sendable {
    /// XXH64 of the serialized metadata (`NumberingData.fingerprint`).
    var fingerprint: UInt64
    /// The libphonenumber file the data came from, resolved.
    var libraryPath: String
    /// Whether the library's bytes parsed as its metadata collection.
    var ok: Bool
    private(set) var storage: Storage

    /// The records as the library gave them, or still encoded in the cache file: a process
    /// reads a few of the 245 territories, and decoding all of them cost some 8.4 million
    /// instructions, a quarter of a warm `lookupd query` (docs/BENCHMARKS.md "Start-up").
    enum Storage: Sendable {
        case records([TerritoryRecord])
        case cached(CachedTerritories)
    }

    init(fingerprint: UInt64, libraryPath: String, ok: Bool, territories: [TerritoryRecord]) {
        self.init(fingerprint: fingerprint, libraryPath: libraryPath, ok: ok, storage: .records(territories))
    }

    init(fingerprint: UInt64, libraryPath: String, ok: Bool, storage: Storage) {
        self.fingerprint = fingerprint
        self.libraryPath = libraryPath
        self.ok = ok
        self.storage = storage
    }

    /// Every record, decoded (the cache's all at once: for comparisons, not for start-up).
    var territories: [TerritoryRecord] {
        get {
            switch storage {
            case .records(let records): records
            case .cached(let cached): (0..<cached.summaries.count).map(cached.record)
            }
        }
        set { storage = .records(newValue) }
    }

    var territoryCount: Int {
        switch storage {
        case .records(let records): records.count
        case .cached(let cached): cached.summaries.count
        }
    }

    /// Territory `t`'s record (from the cache, decoded now).
    func record(_ t: Int) -> TerritoryRecord {
        switch storage {
        case .records(let records): records[t]
        case .cached(let cached): cached.record(t)
        }
    }

    /// What a process needs of every territory before it reads any number of it.
    struct Summary: Equatable, Sendable {
        var id: String
        var countryCode: Int
        var isMainCountry: Bool
    }

    func summary(_ t: Int) -> Summary {
        switch storage {
        case .records(let records): Summary(records[t])
        case .cached(let cached): cached.summaries[t]
        }
    }

    static func == (a: MetadataSnapshot, b: MetadataSnapshot) -> Bool {
        a.fingerprint == b.fingerprint && a.libraryPath == b.libraryPath && a.ok == b.ok && a.territories == b.territories
    }

    /// One territory as the C API gives it, indexed by its `LOOKUPD_PN_*` constants.
    struct TerritoryRecord: Equatable, Sendable {
        /// By `LOOKUPD_PN_ID` ... `LOOKUPD_PN_LEADING_DIGITS`; nil when absent.
        var texts: [String?]
        var countryCode: Int32
        var flags: Int32
        /// By `LOOKUPD_PN_GENERAL` ... `LOOKUPD_PN_MOBILE`.
        var patterns: [String?]
        var examples: [String?]
        var lengths: [[Int32]]
        /// The general description's local-only lengths.
        var localOnlyLengths: [Int32]
    }

    /// One territory's record from `r`. With `keep` false only its id, country code and
    /// flags are kept, the rest skipped with the same checks of every length; `repair` reads
    /// bytes that are not UTF-8 with replacement characters instead of failing.
    static func readRecord(_ r: inout ByteReader, keep: Bool, repair: Bool = false) -> TerritoryRecord? {
        var texts: [String?] = []
        if keep { texts.reserveCapacity(textCount) }
        for i in 0..<textCount {
            guard let t = r.optionalString(keep: keep || i == 0, repair: repair) else { return nil }
            if keep || i == 0 { texts.append(t) }
        }
        guard let cc = r.u32(), let flags = r.u32() else { return nil }
        var patterns: [String?] = [], examples: [String?] = [], lengths: [[Int32]] = []
        for _ in 0..<descriptionCount {
            guard let p = r.optionalString(keep: keep, repair: repair), let e = r.optionalString(keep: keep, repair: repair),
                  let l = r.lengths(keep: keep) else { return nil }
            if keep {
                patterns.append(p)
                examples.append(e)
                lengths.append(l)
            }
        }
        guard let local = r.lengths(keep: keep) else { return nil }
        return TerritoryRecord(texts: texts, countryCode: Int32(bitPattern: cc), flags: Int32(bitPattern: flags),
                               patterns: patterns, examples: examples, lengths: lengths, localOnlyLengths: local)
    }

    static let textCount = Int(LOOKUPD_PN_LEADING_DIGITS) + 1
    static let descriptionCount = Int(LOOKUPD_PN_DESC_COUNT)

    /// Reads the library (loading it: libphonenumber, protobuf, ICU, abseil).
    static func fromLibrary() -> MetadataSnapshot {
        var size = 0
        let bytes = lookupd_pn_metadata_bytes(&size)
        let fingerprint = bytes.map { XXH64.hash(UnsafeRawBufferPointer(start: $0, count: size)) } ?? 0
        let libraryPath = String(cString: lookupd_pn_library_path())
        let ok = lookupd_pn_metadata_ok() != 0
        func string(_ p: UnsafePointer<CChar>?) -> String? { p.map { String(cString: $0) } }
        func lengths(_ t: Int32, _ d: Int32, localOnly: Bool) -> [Int32] {
            var buffer = [Int32](repeating: 0, count: 32)
            let n = Int(lookupd_pn_desc_lengths(t, d, localOnly ? 1 : 0, &buffer, 32))
            return Array(buffer.prefix(min(n, 32)))
        }
        var territories: [TerritoryRecord] = []
        for t in 0..<lookupd_pn_territory_count() {
            territories.append(TerritoryRecord(
                texts: (0..<Int32(textCount)).map { string(lookupd_pn_territory_text(t, $0)) },
                countryCode: lookupd_pn_territory_country_code(t), flags: lookupd_pn_territory_flags(t),
                patterns: (0..<Int32(descriptionCount)).map { string(lookupd_pn_desc_pattern(t, $0)) },
                examples: (0..<Int32(descriptionCount)).map { string(lookupd_pn_desc_example(t, $0)) },
                lengths: (0..<Int32(descriptionCount)).map { lengths(t, $0, localOnly: false) },
                localOnlyLengths: lengths(t, Int32(LOOKUPD_PN_GENERAL), localOnly: true)))
        }
        return MetadataSnapshot(fingerprint: fingerprint, libraryPath: libraryPath, ok: ok, territories: territories)
    }
}

/// The numbering cache: libphonenumber's metadata as `MetadataSnapshot`, in one file keyed by
/// the identity of the library that would be loaded, so that a short command (`lookupd
/// query`) neither loads libphonenumber nor parses its metadata (docs/NUMBERING.md
/// "Start-up", docs/FORMAT.md "Numbering cache").
///
/// Never a different answer from the library's: the file is used only when its checksum
/// holds and its key equals the key computed now — the bridge object and the libphonenumber
/// file (path, device, inode, size, modification time), /etc/ld.so.cache (which decides what
/// `libphonenumber.so.8` resolves to) and LD_LIBRARY_PATH and LD_PRELOAD. Anything else
/// (missing, damaged, truncated, stale, another format version) and the process reads the
/// library and replaces the file atomically (a temporary in the same folder, renamed over it),
/// so concurrent processes each see a whole old file or a whole new one. A cache that cannot
/// be written costs only the time: the data then comes from the library, as without a cache.
public enum NumberingCache {
    public enum Source: Sendable, Equatable {
        /// Read from the cache file.
        case cache(String)
        /// Read from the library; the cache was written (or left as it was) at this path.
        case library(cache: String?, note: String?)
    }

    static let magic: [UInt8] = Array("LKDNUMC\0".utf8)
    static let version: UInt32 = 1
    static let fileName = "numbering-v1.cache"
    /// Far above the ~300 KB of today's metadata; a larger file is not ours.
    static let maxBytes = 64 << 20

    /// Where the cache lives: systemd's CacheDirectory= ($CACHE_DIRECTORY, the first of its
    /// folders), else $XDG_CACHE_HOME/lookupd, else $HOME/.cache/lookupd; nil without any.
    public static var defaultFolder: String? {
        func env(_ name: String) -> String? {
            guard let v = getenv(name) else { return nil }
            let s = String(cString: v)
            return s.hasPrefix("/") ? s : nil
        }
        if let c = env("CACHE_DIRECTORY") { return String(c.split(separator: ":").first ?? Substring(c)) }
        if let x = env("XDG_CACHE_HOME") { return x + "/lookupd" }
        if let h = env("HOME") { return (h == "/" ? "" : h) + "/.cache/lookupd" }
        return nil
    }

    /// The metadata, from the cache in `folder` when it is valid and current, else from the
    /// library (then written to the cache).
    static func load(folder: String?) -> (MetadataSnapshot, Source) {
        guard let folder else { return (MetadataSnapshot.fromLibrary(), .library(cache: nil, note: "no cache folder")) }
        let path = folder + "/" + fileName
        var note: String
        if let bytes = try? readRegularFile(path, maxBytes: maxBytes) {
            switch decode(bytes) {
            case .success(let (key, snapshot)):
                if key == currentKey(libraryPath: snapshot.libraryPath) { return (snapshot, .cache(path)) }
                note = "stale"
            case .failure(let problem):
                note = problem.description
            }
        } else {
            note = "absent"
        }
        let snapshot = MetadataSnapshot.fromLibrary()
        // Write only what describes the file loaded now: its key taken after loading, and
        // the mapped object's inode the same as the path's (a package upgrade between the
        // load and the stat must not pair old data with the new file).
        guard snapshot.ok, let key = currentKey(libraryPath: snapshot.libraryPath),
              isMapped(snapshot.libraryPath) else {
            return (snapshot, .library(cache: nil, note: note + "; not written (library not identified)"))
        }
        do {
            try makeFolders(folder)
            try writeFileAtomically(path, contents: encode(snapshot, key: key), permissions: 0o644)
        } catch {
            return (snapshot, .library(cache: nil, note: note + "; not written: \(error)"))
        }
        return (snapshot, .library(cache: path, note: note))
    }

    /// What identifies the library a process would load now; nil when the bridge or the
    /// library cannot be found (then no cache is used).
    static func currentKey(libraryPath: String) -> [UInt8]? {
        guard let bridge = lookupd_pn_bridge_path().map({ String(cString: $0) }) else { return nil }
        var w = ByteWriter()
        for path in [bridge, libraryPath] {
            guard let st = FileSystem.statusIfPresent(path) else { return nil }
            w.string(path)
            w.status(st)
        }
        if let st = FileSystem.statusIfPresent("/etc/ld.so.cache") { w.status(st) } else { w.u64(0) }
        for name in ["LD_LIBRARY_PATH", "LD_PRELOAD"] { w.optionalString(getenv(name).map { String(cString: $0) }) }
        return w.bytes
    }

    /// Whether this process maps `path` with the inode the path has now (/proc/self/maps).
    static func isMapped(_ path: String) -> Bool {
        guard let st = FileSystem.statusIfPresent(path),
              let maps = try? readRegularFile("/proc/self/maps", maxBytes: 16 << 20) else { return false }
        // "start-end perms offset dev inode path"
        for line in maps.split(separator: UInt8(ascii: "\n")) {
            let fields = line.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: true)
            guard fields.count >= 6, String(decoding: Array(fields[5...].joined(separator: [UInt8(ascii: " ")])), as: UTF8.self) == path
            else { continue }
            if UInt64(String(decoding: fields[4], as: UTF8.self)) == st.inode { return true }
        }
        return false
    }

    static func makeFolders(_ folder: String) throws(Errno) {
        var path = ""
        for part in folder.split(separator: "/") {
            path += "/" + part
            if FileSystem.statusIfPresent(path) == nil {
                do { try FileSystem.makeFolder(path, permissions: 0o755) } catch where error == .fileExists {}
            }
        }
    }

    // MARK: the file

    static func encode(_ s: MetadataSnapshot, key: [UInt8]) -> [UInt8] {
        var p = ByteWriter()
        p.bytes(key)
        p.u64(s.fingerprint)
        p.u8(s.ok ? 1 : 0)
        p.string(s.libraryPath)
        p.u32(UInt32(s.territories.count))
        for t in s.territories {
            for text in t.texts { p.optionalString(text) }
            p.u32(UInt32(bitPattern: t.countryCode))
            p.u32(UInt32(bitPattern: t.flags))
            for d in 0..<MetadataSnapshot.descriptionCount {
                p.optionalString(t.patterns[d])
                p.optionalString(t.examples[d])
                p.lengths(t.lengths[d])
            }
            p.lengths(t.localOnlyLengths)
        }
        return ByteWriter.sealed(magic: magic, version: version, payload: p.bytes)
    }

    static func decode(_ bytes: [UInt8]) -> Result<([UInt8], MetadataSnapshot), DecodeProblem> {
        let header = 24
        guard bytes.count >= header + 8, Array(bytes[0..<8]) == magic else { return .failure("not a numbering cache") }
        var h = ByteReader(bytes[8..<header])
        guard let v = h.u32(), v == version else { return .failure("another format version") }
        guard h.u32() == 0, let length = h.u64(), length == UInt64(bytes.count - header - 8) else {
            return .failure("truncated or extended")
        }
        var sum = ByteReader(bytes[(bytes.count - 8)...])
        guard sum.u64() == bytes.withUnsafeBytes({ XXH64.hash(UnsafeRawBufferPointer(rebasing: $0[..<(bytes.count - 8)])) }) else {
            return .failure("checksum mismatch")
        }
        var r = ByteReader(bytes[header..<(bytes.count - 8)])
        guard let key = r.bytes(), let fingerprint = r.u64(), let ok = r.u8(), ok <= 1, let path = r.string(),
              let count = r.u32(), count < 10_000 else { return .failure("malformed") }
        // Every record's structure checked now, its strings decoded when it is first read.
        var offsets: [Int] = [], summaries: [MetadataSnapshot.Summary] = []
        offsets.reserveCapacity(Int(count))
        summaries.reserveCapacity(Int(count))
        for _ in 0..<count {
            offsets.append(r.position)
            guard let record = MetadataSnapshot.readRecord(&r, keep: false) else { return .failure("malformed") }
            summaries.append(MetadataSnapshot.Summary(record))
        }
        guard r.isAtEnd else { return .failure("malformed") }
        let cached = CachedTerritories(bytes: bytes, end: bytes.count - 8, offsets: offsets, summaries: summaries)
        return .success((key, MetadataSnapshot(fingerprint: fingerprint, libraryPath: path, ok: ok == 1, storage: .cached(cached))))
    }

    struct DecodeProblem: Error, Equatable, ExpressibleByStringLiteral, CustomStringConvertible {
        let description: String
        init(stringLiteral value: String) { description = value }
    }
}

/// The territories of a numbering cache file, each decoded when first read: the file's
/// checksum and every record's structure were checked when it was opened, so a record
/// always decodes (bytes that are not UTF-8, which no writer of a checksummed file made,
/// come out as replacement characters, which no pattern or prefix matches).
final class CachedTerritories: Sendable {
    let bytes: [UInt8]
    let end: Int
    let offsets: [Int]
    let summaries: [MetadataSnapshot.Summary]

    init(bytes: [UInt8], end: Int, offsets: [Int], summaries: [MetadataSnapshot.Summary]) {
        self.bytes = bytes
        self.end = end
        self.offsets = offsets
        self.summaries = summaries
    }

    func record(_ t: Int) -> MetadataSnapshot.TerritoryRecord {
        var r = ByteReader(bytes[offsets[t]..<end])
        guard let record = MetadataSnapshot.readRecord(&r, keep: true, repair: true) else {
            preconditionFailure("numbering cache record \(t) changed after its structure was checked")
        }
        return record
    }
}

extension MetadataSnapshot.Summary {
    init(_ record: MetadataSnapshot.TerritoryRecord) {
        id = record.texts[Int(LOOKUPD_PN_ID)] ?? "?"
        countryCode = Int(record.countryCode)
        isMainCountry = record.flags & 1 != 0
    }
}

/// Little-endian fields; a string is its UTF-8 length (u32; 0xFFFF_FFFF: absent) and bytes.
struct ByteWriter {
    var bytes: [UInt8] = []
    mutating func raw(_ b: [UInt8]) { bytes += b }
    mutating func u8(_ v: UInt8) { bytes.append(v) }
    mutating func u32(_ v: UInt32) { for i in 0..<4 { bytes.append(UInt8(truncatingIfNeeded: v >> (8 * UInt32(i)))) } }
    mutating func u64(_ v: UInt64) { for i in 0..<8 { bytes.append(UInt8(truncatingIfNeeded: v >> (8 * UInt64(i)))) } }
    mutating func bytes(_ b: [UInt8]) { u32(UInt32(b.count)); raw(b) }
    /// A cache file as both caches write one: magic, version, a reserved zero, the payload's
    /// length, the payload, and XXH64 of all that (docs/FORMAT.md "Numbering cache").
    static func sealed(magic: [UInt8], version: UInt32, payload: [UInt8]) -> [UInt8] {
        var file = ByteWriter()
        file.raw(magic)
        file.u32(version)
        file.u32(0)
        file.u64(UInt64(payload.count))
        file.raw(payload)
        file.u64(XXH64.hash(file.bytes))
        return file.bytes
    }
    mutating func string(_ s: String) { bytes(Array(s.utf8)) }
    mutating func optionalString(_ s: String?) { if let s { string(s) } else { u32(0xFFFF_FFFF) } }
    mutating func lengths(_ l: [Int32]) { u32(UInt32(l.count)); for v in l { u32(UInt32(bitPattern: v)) } }
    mutating func status(_ st: FileStatus) {
        u64(st.device); u64(st.inode); u64(UInt64(bitPattern: st.size))
        u64(UInt64(bitPattern: Int64(st.modified.tv_sec))); u64(UInt64(bitPattern: Int64(st.modified.tv_nsec)))
    }
}

// Reads by index, never by re-slicing: a cache of 245 territories is some 11,000 fields, read
// by every process that reads a number, and dropFirst or reduce per field cost a third of a
// warm `lookupd query`'s own work (docs/BENCHMARKS.md "Start-up").
struct ByteReader {
    let data: ArraySlice<UInt8>
    var position: Int
    init(_ bytes: ArraySlice<UInt8>) {
        data = bytes
        position = bytes.startIndex
    }
    var isAtEnd: Bool { position == data.endIndex }
    mutating func take(_ n: Int) -> ArraySlice<UInt8>? {
        guard n >= 0, data.endIndex - position >= n else { return nil }
        defer { position += n }
        return data[position..<(position + n)]
    }
    /// Steps over `n` bytes without making a slice (which retains the buffer): the check of
    /// every record's structure at open does this some 10,000 times.
    mutating func skip(_ n: Int) -> Bool {
        guard n >= 0, data.endIndex - position >= n else { return false }
        position += n
        return true
    }
    mutating func u8() -> UInt8? { take(1)?.first }
    /// Little-endian, `size` bytes.
    private mutating func little(_ size: Int) -> UInt64? {
        guard data.endIndex - position >= size else { return nil }
        var v: UInt64 = 0
        for i in stride(from: size - 1, through: 0, by: -1) { v = v << 8 | UInt64(data[position + i]) }
        position += size
        return v
    }
    mutating func u32() -> UInt32? { little(4).map { UInt32(truncatingIfNeeded: $0) } }
    mutating func u64() -> UInt64? { little(8) }
    mutating func bytes() -> [UInt8]? {
        guard let n = u32() else { return nil }
        return take(Int(n)).map(Array.init)
    }
    mutating func string() -> String? { bytes().flatMap { String(validating: $0, as: UTF8.self) } }
    /// nil: malformed; .some(nil): absent, or skipped (`keep` false).
    mutating func optionalString(keep: Bool = true, repair: Bool = false) -> String?? {
        guard let n = u32() else { return nil }
        if n == 0xFFFF_FFFF { return .some(nil) }
        guard keep else { return skip(Int(n)) ? .some(nil) : nil }
        guard let b = take(Int(n)) else { return nil }
        // ASCII (every id, prefix and pattern) is UTF-8 already; the general check costs
        // some 900 instructions a string.
        if repair || b.allSatisfy({ $0 < 0x80 }) { return .some(String(decoding: b, as: UTF8.self)) }
        guard let s = String(validating: b, as: UTF8.self) else { return nil }
        return .some(s)
    }
    /// Empty when skipped (`keep` false).
    mutating func lengths(keep: Bool = true) -> [Int32]? {
        guard let n = u32(), n <= 32 else { return nil }
        guard keep else { return skip(4 * Int(n)) ? [] : nil }
        var out: [Int32] = []
        out.reserveCapacity(Int(n))
        for _ in 0..<n {
            guard let v = u32() else { return nil }
            out.append(Int32(bitPattern: v))
        }
        return out
    }
}
