import CPhoneNumbers
import Glibc
import Synchronization

/// The numbering plans of every country, derived once per process from the installed
/// libphonenumber (docs/NUMBERING.md).
///
/// libphonenumber evaluates regular expressions on every call (about 30 µs per number
/// here); lookupd reads the same metadata once and keeps, per territory, its calling code,
/// prefixes and lengths, the national-prefix rules as small programs, and per calling code
/// one automaton that answers "valid? in which region? what type?" in one table step per
/// digit. Nothing is copied into the source tree: an upgrade of the library brings new
/// plans at the next start of lookupd.
///
/// Threading: immutable after `installed` is first read (Swift initialises it once, under
/// a lock); safe to share between threads.
// @unchecked: the raw tables are written in init, and each calling code's once, under its
// builder's lock, before its ready flag is released; they are only read otherwise.
public final class NumberingData: @unchecked Sendable {
    /// The data of the installed libphonenumber: from the numbering cache when it holds the
    /// current library's (no libphonenumber loaded), else from the library itself.
    public static let installed: NumberingData = {
        let folder = NumberingCache.defaultFolder
        let (snapshot, source) = NumberingCache.load(folder: folder)
        return NumberingData(snapshot, source: source, automataFolder: folder)
    }()

    /// Makes this process read the automata cache without writing it (`lookupd serve`:
    /// see `AutomataCache.writes`). Call before any number is read.
    public static func readAutomataCacheOnly() { AutomataCache.writes.store(false, ordering: .relaxed) }

    /// Where the metadata came from in this process (`lookupd --version` says).
    public let source: NumberingCache.Source

    /// The territories by index, each made from its record the first time it is read: a
    /// process reads a few of the 245, and making all of them (with decoding all their
    /// records from the numbering cache) cost some 11 million instructions, a third of a
    /// warm `lookupd query` once its automata came from their cache (docs/BENCHMARKS.md
    /// "Start-up"). `territoryState` 0 not yet, 1 being made, 2 made, published as
    /// `codeState` is.
    var territories: TerritoryList { TerritoryList(data: self) }
    let territoryCount: Int
    private let snapshot: MetadataSnapshot
    /// The numbering cache's records when `snapshot` reads from them: the same object its
    /// `.cached` payload holds, also held as a plain reference. An enum payload's reference
    /// carries the case in its spare bits, which LeakSanitizer does not read as a pointer,
    /// so without this it reported the cache as leaked at every exit.
    private let cachedRecords: CachedTerritories?
    private let territoryState: UnsafeMutablePointer<Atomic<UInt8>>
    private let territoryObjects: UnsafeMutablePointer<Unmanaged<Territory>?>
    /// Region code (`CN`) to territory index; non-geographic entities are not listed.
    let regionIndex: [String: Int]
    /// Calling code (1...999) to its regions (territory indexes, main country first); nil
    /// where no country has that code.
    private let members: [[Int]?]
    // The hot path's tables: plain values in memory allocated once for the process, read
    // without reference counting or locks.
    /// Per territory, what reading a number needs. Its prefix programs (the exit prefix and
    /// the national prefix for parsing, compiled from patterns) are compiled the first time
    /// the territory's facts are asked for: a process reads the numbers of a few regions, and
    /// compiling all 245 territories' costed some 7.6 million instructions per process, an
    /// eighth of a warm `lookupd query` (docs/BENCHMARKS.md "Start-up"). `factsState` 0 not
    /// yet, 1 being compiled, 2 compiled, published as `codeState` is; `factsProblems` holds
    /// what did not compile, written before the state turns 2.
    private let factsTable: UnsafeMutablePointer<TerritoryFacts>
    private let factsState: UnsafeMutablePointer<Atomic<UInt8>>
    private let factsProblems: UnsafeMutablePointer<[String]>
    /// Per calling code, its main territory (-1: no country has the code).
    private let mainOf: UnsafeMutablePointer<Int32>
    /// Per calling code, its automata once built: `codeState` 0 not yet, 1 being built, 2
    /// built; `codeTables` and `codeObjects` are written before the state turns 2
    /// (release) and read after it is seen 2 (acquire).
    private let codeState: UnsafeMutablePointer<Atomic<UInt8>>
    private let codeTables: UnsafeMutablePointer<CallingCodeTables>
    private let codeObjects: UnsafeMutablePointer<Unmanaged<CallingCode>?>
    /// Per calling code, where its automata came from ("cache", "compiled (...)"), written
    /// with `codeTables`.
    private let codeOrigins: UnsafeMutablePointer<String?>
    /// Where the automata cache is (AutomataCache); nil: every calling code is compiled.
    let automataFolder: String?
    /// XXH64 of the metadata bytes: changes whenever the library's data does.
    public let fingerprint: UInt64
    /// Where the library was loaded from.
    public let libraryPath: String
    /// Problems found reading the metadata itself; the patterns that did not compile are in
    /// `buildProblems`, as "REGION: problem" (numbers of those regions are read with what
    /// remains).
    public let problems: [String]

    /// Region codes of every geographic region, sorted.
    public var regions: [String] { regionIndex.keys.sorted() }

    init(_ snapshot: MetadataSnapshot, source: NumberingCache.Source, automataFolder: String? = nil) {
        self.source = source
        self.automataFolder = automataFolder
        fingerprint = snapshot.fingerprint
        libraryPath = snapshot.libraryPath
        var problems: [String] = []
        if !snapshot.ok { problems.append("libphonenumber's metadata could not be read") }
        self.snapshot = snapshot
        if case .cached(let records) = snapshot.storage { cachedRecords = records } else { cachedRecords = nil }
        let count = snapshot.territoryCount
        territoryCount = count
        var regionIndex: [String: Int] = [:]
        var summaries: [MetadataSnapshot.Summary] = []
        summaries.reserveCapacity(count)
        for t in 0..<count {
            let summary = snapshot.summary(t)
            if summary.id != "001" { regionIndex[summary.id] = t }
            summaries.append(summary)
        }
        let members = Self.regionsByCallingCode(summaries)
        territoryState = .allocate(capacity: max(count, 1))
        territoryObjects = .allocate(capacity: max(count, 1))
        for t in 0..<count {
            (territoryState + t).initialize(to: Atomic(0))
            (territoryObjects + t).initialize(to: nil)
        }
        mainOf = .allocate(capacity: 1000)
        codeState = .allocate(capacity: 1000)
        codeTables = .allocate(capacity: 1000)
        codeObjects = .allocate(capacity: 1000)
        codeOrigins = .allocate(capacity: 1000)
        for cc in 0..<1000 {
            mainOf[cc] = Int32(members[cc]?[0] ?? -1)
            (codeState + cc).initialize(to: Atomic(0))
            (codeObjects + cc).initialize(to: nil)
            (codeOrigins + cc).initialize(to: nil)
        }
        // Territory i's position in its calling code's region list.
        var slots = [Int](repeating: 0, count: count)
        for list in members.compactMap({ $0 }) {
            for (slot, t) in list.enumerated() { slots[t] = slot }
        }
        self.slots = slots
        // factsTable's entries are initialised when compiled (compileFacts).
        factsTable = .allocate(capacity: max(count, 1))
        factsState = .allocate(capacity: max(count, 1))
        factsProblems = .allocate(capacity: max(count, 1))
        for t in 0..<count {
            (factsState + t).initialize(to: Atomic(0))
            (factsProblems + t).initialize(to: [])
        }
        self.regionIndex = regionIndex
        self.members = members
        self.problems = problems
    }

    /// Per calling code (1...999) its territories in GetRegionCodesForCountryCallingCode's
    /// order, derived as PhoneNumberUtil derives it when it loads the same metadata (asking
    /// the library would build PhoneNumberUtil, some 10 ms of CPU per process): in the
    /// metadata's order, a territory marked main_country_for_code goes to the front of its
    /// code's list, any other to the back; the first one seen starts the list. "ZZ" (the
    /// unknown region) belongs to no code. LibraryComparisonTests checks every code against
    /// the library.
    static func regionsByCallingCode(_ territories: [MetadataSnapshot.Summary]) -> [[Int]?] {
        var members = [[Int]?](repeating: nil, count: 1000)
        for (index, t) in territories.enumerated() where t.id != "ZZ" {
            let cc = t.countryCode
            guard cc > 0, cc < 1000 else { continue }
            if members[cc] == nil {
                members[cc] = [index]
            } else if t.isMainCountry {
                members[cc]!.insert(index, at: 0)
            } else {
                members[cc]!.append(index)
            }
        }
        return members
    }

    /// Territory `t`, made from its record the first time any thread asks (as `callingCode`
    /// builds).
    func territory(at t: Int) -> Territory {
        if territoryState[t].load(ordering: .acquiring) == 2 { return territoryObjects[t]!.takeUnretainedValue() }
        if territoryState[t].compareExchange(expected: 0, desired: 1, ordering: .acquiring).exchanged {
            territoryObjects[t] = Unmanaged.passRetained(Territory(index: t, record: snapshot.record(t)))
            territoryState[t].store(2, ordering: .releasing)
        } else {
            while territoryState[t].load(ordering: .acquiring) != 2 { sched_yield() }
        }
        return territoryObjects[t]!.takeUnretainedValue()
    }

    /// The territories by index, as a collection.
    struct TerritoryList: RandomAccessCollection {
        let data: NumberingData
        var startIndex: Int { 0 }
        var endIndex: Int { data.territoryCount }
        subscript(t: Int) -> Territory { data.territory(at: t) }
    }

    /// The territory of a region code (`IT`), nil when libphonenumber does not know it.
    func territory(region: String) -> Territory? {
        regionIndex[region].map { territory(at: $0) }
    }

    /// Territory index to its position in its calling code's region list.
    let slots: [Int]

    /// Whether some country has calling code `cc`.
    @inline(__always)
    func isCountryCode(_ cc: Int) -> Bool {
        cc > 0 && cc < 1000 && mainOf[cc] >= 0
    }

    /// What reading a number of territory `t` needs, its prefix programs compiled the first
    /// time any thread asks (as `callingCode` builds).
    @inline(__always)
    func facts(_ t: Int) -> TerritoryFacts {
        if factsState[t].load(ordering: .acquiring) == 2 { return factsTable[t] }
        return compileFacts(t)
    }

    private func compileFacts(_ t: Int) -> TerritoryFacts {
        if factsState[t].compareExchange(expected: 0, desired: 1, ordering: .acquiring).exchanged {
            let territory = territory(at: t)
            var problems: [String] = []
            var facts = territory.facts
            facts.slot = slots[t]
            facts.internationalPrefix = territory.program(territory.internationalPrefixPattern, problems: &problems)
            facts.nationalPrefixForParsing = territory.program(territory.nationalPrefixForParsingPattern, problems: &problems)
            (factsTable + t).initialize(to: facts)
            factsProblems[t] = problems
            factsState[t].store(2, ordering: .releasing)
        } else {
            while factsState[t].load(ordering: .acquiring) != 2 { sched_yield() }
        }
        return factsTable[t]
    }

    /// The main territory's index of calling code `cc` (US for 1), nil for an unknown code.
    @inline(__always)
    func mainIndex(_ cc: Int) -> Int? {
        guard cc > 0, cc < 1000 else { return nil }
        let t = mainOf[cc]
        return t >= 0 ? Int(t) : nil
    }

    /// The automata of a calling code, built the first time any thread asks.
    @inline(__always)
    func callingCode(_ cc: Int) -> CallingCodeTables? {
        guard cc > 0, cc < 1000, mainOf[cc] >= 0 else { return nil }
        if codeState[cc].load(ordering: .acquiring) == 2 { return codeTables[cc] }
        return build(cc)
    }

    /// The first thread to ask builds (at most ~10 ms, once); any other waits for it,
    /// yielding. Publication through the state's release/acquire, which ThreadSanitizer
    /// follows (no lock to hide it).
    private func build(_ cc: Int) -> CallingCodeTables? {
        guard let list = members[cc] else { return nil }
        if codeState[cc].compareExchange(expected: 0, desired: 1, ordering: .acquiring).exchanged {
            let (code, origin) = AutomataCache.load(folder: automataFolder, countryCode: cc, members: list,
                                                    all: territories, fingerprint: fingerprint)
            codeTables[cc] = code.tables
            codeOrigins[cc] = origin
            codeObjects[cc] = Unmanaged.passRetained(code)
            codeState[cc].store(2, ordering: .releasing)
        } else {
            while codeState[cc].load(ordering: .acquiring) != 2 { sched_yield() }
        }
        return codeTables[cc]
    }

    /// Where calling code `cc`'s automata came from, nil while they are not built.
    func automataOrigin(_ cc: Int) -> String? {
        guard cc > 0, cc < 1000, codeState[cc].load(ordering: .acquiring) == 2 else { return nil }
        return codeOrigins[cc]
    }

    /// The regions of a calling code, main country first (without building anything).
    func territories(ofCountryCode cc: Int) -> [Int] {
        cc > 0 && cc < 1000 ? members[cc] ?? [] : []
    }

    /// Whether libphonenumber counts a mobile number of calling code `cc` as geographic
    /// (IsNumberGeographical). The library keeps that list in its code, not in the metadata,
    /// so the first call builds its PhoneNumberUtil (some 10 ms of CPU, once per
    /// process); only attribution asks, and only for mobile numbers, so a process that
    /// attributes nothing never pays it.
    func mobileIsGeographical(_ cc: Int) -> Bool {
        cc > 0 && cc < 1000 && Self.geographicMobileCodes[cc]
    }

    // A global, so Swift initialises it once, under its lock, on first use.
    private static let geographicMobileCodes: [Bool] = (0..<1000).map { lookupd_pn_mobile_is_geographical(Int32($0)) != 0 }

    /// The main territory of a calling code (US for +1).
    func mainTerritory(_ cc: Int) -> Territory? {
        mainIndex(cc).map { territory(at: $0) }
    }

    /// What the plans say of an E.164 number: how many digits its calling code has and the
    /// validity answer (region, type); nil when it starts with no known calling code.
    func judge(_ number: PhoneNumber) -> (ccDigits: Int, answer: ValidityAnswer)? {
        let count = number.digitCount
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { buffer in
            var v = number.value
            for i in stride(from: count - 1, through: 0, by: -1) {
                buffer[i] = UInt8(v % 10)
                v /= 10
            }
            for len in 1...3 where len < count {
                var cc = 0
                for i in 0..<len { cc = cc * 10 + Int(buffer[i]) }
                guard isCountryCode(cc), let code = callingCode(cc) else { continue }
                return (len, code.judge(UnsafeBufferPointer(rebasing: buffer[len..<count])))
            }
            return nil
        }
    }

    /// Builds every calling code's automata and every territory's prefix programs now (about
    /// 100 ms; `lookupd --version` does, to report `buildProblems`).
    public func prepareAll() {
        for t in 0..<territoryCount { _ = facts(t) }
        for cc in 1..<1000 { _ = callingCode(cc) }
    }

    /// Compilation problems found so far, in the territories and calling codes built (all
    /// after `prepareAll`).
    public var buildProblems: [String] {
        problems + (0..<territoryCount).flatMap { t -> [String] in
            factsState[t].load(ordering: .acquiring) == 2 ? factsProblems[t] : []
        } + (1..<1000).flatMap { cc -> [String] in
            guard codeState[cc].load(ordering: .acquiring) == 2, let code = codeObjects[cc] else { return [] }
            return code.takeUnretainedValue().problems
        }
    }

    /// The region code of the main country of a calling code (`US` for 1), nil if unknown.
    public func region(forCountryCode cc: Int) -> String? {
        mainTerritory(cc).map(\.id)
    }

    /// How lookupd names its data: the library file, its region count and the fingerprint.
    public var versionDescription: String {
        let file = libraryPath.split(separator: "/").last.map(String.init) ?? "libphonenumber"
        return "\(file), \(regionIndex.count) regions, metadata \(NumberingData.hex32(fingerprint))"
    }

    static func hex32(_ v: UInt64) -> String {
        let s = String(UInt32(truncatingIfNeeded: v), radix: 16)
        return String(repeating: "0", count: 8 - s.count) + s
    }
}

/// libphonenumber's PhoneNumberType, with its numbering.
public enum NumberType: UInt8, Sendable, CaseIterable, CustomStringConvertible {
    case fixedLine = 0, mobile, fixedLineOrMobile, tollFree, premiumRate, sharedCost, voip, personalNumber, pager, uan,
         voicemail, unknown

    public var description: String {
        switch self {
        case .fixedLine: "fixed line"
        case .mobile: "mobile"
        case .fixedLineOrMobile: "fixed line or mobile"
        case .tollFree: "toll free"
        case .premiumRate: "premium rate"
        case .sharedCost: "shared cost"
        case .voip: "VoIP"
        case .personalNumber: "personal number"
        case .pager: "pager"
        case .uan: "UAN"
        case .voicemail: "voicemail"
        case .unknown: "unknown"
        }
    }

    /// Types that carriers are named for (libphonenumber's carrier mapper).
    var isMobile: Bool { self == .mobile || self == .fixedLineOrMobile || self == .pager }
}

/// A set of national number lengths (bit n for n digits, 0...31).
struct LengthSet: Equatable, Sendable {
    var bits: UInt32 = 0

    init(_ lengths: [Int32]) {
        for l in lengths where l >= 0 && l < 32 { bits |= 1 << UInt32(l) }
    }

    init(bits: UInt32) { self.bits = bits }

    @inline(__always) func contains(_ n: Int) -> Bool { n >= 0 && n < 32 && bits & (1 << UInt32(n)) != 0 }
    var isEmpty: Bool { bits == 0 }
    var min: Int? { bits == 0 ? nil : bits.trailingZeroBitCount }
    var max: Int? { bits == 0 ? nil : 31 - bits.leadingZeroBitCount }
    var values: [Int] { (0..<32).filter { contains($0) } }

    /// `7 to 12`, `10`, `7, 9 or 10`: for operators' messages.
    var text: String {
        let v = values
        guard let first = v.first, let last = v.last else { return "no" }
        if v.count == 1 { return "\(first)" }
        if last - first + 1 == v.count { return "\(first) to \(last)" }
        return v.dropLast().map(String.init).joined(separator: ", ") + " or \(last)"
    }
}

/// One territory of the metadata (a region such as `CN`, or a non-geographic entity "001").
/// A class: the hot path passes territories around, and a reference costs one retain where
/// this many fields would cost a dozen.
final class Territory: Sendable {
    /// What reading a number needs of it (a plain value; `slot` is set by NumberingData).
    let facts: TerritoryFacts
    let id: String
    let sameMobileAndFixedLinePattern: Bool
    /// The exit prefix as the metadata writes it (`00`, `011`, `001[14-689]|...`).
    let internationalPrefixPattern: String?
    /// The exit prefix to show (`00`, `011`, `8~10`): preferred, else the pattern when plain.
    let internationalPrefixForDisplay: String?
    let nationalPrefix: String?
    let nationalPrefixForParsingPattern: String?
    /// The leading digits that pick this region among its calling code's (a pattern).
    let leadingDigits: String?
    /// Descriptions by `LOOKUPD_PN_*` index: pattern (nil when absent), lengths, examples.
    let descriptions: [Description]

    var index: Int { facts.index }
    var countryCode: Int { facts.countryCode }
    var isMainCountry: Bool { facts.isMainCountry }
    var possibleLengths: LengthSet { facts.possibleLengths }
    var localOnlyLengths: LengthSet { facts.localOnlyLengths }
    var transformRule: TransformRule? { facts.transformRule }

    struct Description: Sendable {
        let pattern: String?
        /// nil: the metadata gives none (the general description's apply).
        let lengths: LengthSet?
        let example: String?
    }


    init(index t: Int, record: MetadataSnapshot.TerritoryRecord) {
        func text(_ field: Int32) -> String? { record.texts[Int(field)] }
        id = text(Int32(LOOKUPD_PN_ID)) ?? "?"
        let countryCode = Int(record.countryCode)
        let flags = record.flags
        sameMobileAndFixedLinePattern = flags & 2 != 0
        internationalPrefixPattern = text(Int32(LOOKUPD_PN_INTERNATIONAL_PREFIX))
        let preferred = text(Int32(LOOKUPD_PN_PREFERRED_INTERNATIONAL_PREFIX))
        if let preferred {
            internationalPrefixForDisplay = preferred
        } else if let p = internationalPrefixPattern, p.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) {
            internationalPrefixForDisplay = p
        } else {
            internationalPrefixForDisplay = internationalPrefixPattern
        }
        nationalPrefix = text(Int32(LOOKUPD_PN_NATIONAL_PREFIX))
        nationalPrefixForParsingPattern = text(Int32(LOOKUPD_PN_NATIONAL_PREFIX_FOR_PARSING))
        var descriptions: [Description] = []
        leadingDigits = text(Int32(LOOKUPD_PN_LEADING_DIGITS))
        for d in 0..<Int(LOOKUPD_PN_DESC_COUNT) {
            let lengths: LengthSet? = record.lengths[d].isEmpty ? nil : LengthSet(record.lengths[d])
            descriptions.append(Description(pattern: record.patterns[d], lengths: lengths, example: record.examples[d]))
        }
        self.descriptions = descriptions
        // The prefix programs are compiled on first use (NumberingData.facts).
        facts = TerritoryFacts(index: t, countryCode: countryCode, slot: -1, isMainCountry: flags & 1 != 0,
                               possibleLengths: descriptions[Int(LOOKUPD_PN_GENERAL)].lengths ?? LengthSet(bits: 0),
                               localOnlyLengths: LengthSet(record.localOnlyLengths),
                               internationalPrefix: nil, nationalPrefixForParsing: nil,
                               transformRule: text(Int32(LOOKUPD_PN_NATIONAL_PREFIX_TRANSFORM_RULE)).flatMap(Territory.parseTransform))
    }

    /// A prefix pattern compiled (NumberingData.facts does, on first use); nil when absent or
    /// beyond this reader, with the problem noted.
    func program(_ pattern: String?, problems: inout [String]) -> DigitProgram? {
        guard let pattern, !pattern.isEmpty else { return nil }
        do { return DigitProgram(try ParsedPattern(pattern)) } catch {
            problems.append("\(id == "001" ? "+\(countryCode)" : id): \(error)")
            return nil
        }
    }

    /// `9$1` or `9\1`: digits and group references.
    static func parseTransform(_ rule: String) -> TransformRule? {
        var parts: [UInt8] = []
        var bytes = Array(rule.utf8)[...]
        while let c = bytes.first {
            bytes = bytes.dropFirst()
            if c == UInt8(ascii: "$") || c == UInt8(ascii: "\\") {
                guard let g = bytes.first, g >= 0x31, g <= 0x39 else { return nil }
                bytes = bytes.dropFirst()
                parts.append(TransformRule.groupFlag | (g - 0x30))
            } else if c >= 0x30, c <= 0x39 {
                parts.append(c - 0x30)
            } else {
                return nil
            }
        }
        return TransformRule(parts)
    }

}

/// A national prefix transform rule (`441$1`): up to 8 parts, each a digit or a group
/// reference, packed into a plain value.
struct TransformRule: Equatable, Sendable {
    static let groupFlag: UInt8 = 0x10
    private let packed: UInt64
    let count: Int

    init?(_ parts: [UInt8]) {
        guard !parts.isEmpty, parts.count <= 8 else { return nil }
        var p: UInt64 = 0
        for (i, part) in parts.enumerated() { p |= UInt64(part) << (8 * UInt64(i)) }
        packed = p
        count = parts.count
    }

    /// Part `i`: a digit (0-9), or `groupFlag | k` for group k.
    @inline(__always) subscript(i: Int) -> UInt8 { UInt8(truncatingIfNeeded: packed >> (8 * UInt64(i))) }
}

/// What reading a number needs of a territory, as a plain value (no references to count).
struct TerritoryFacts: Sendable {
    let index: Int
    let countryCode: Int
    /// Position in its calling code's region list.
    var slot: Int
    let isMainCountry: Bool
    let possibleLengths: LengthSet
    let localOnlyLengths: LengthSet
    /// Compiled on first use (NumberingData.facts); nil in `Territory.facts`.
    var internationalPrefix: DigitProgram?
    var nationalPrefixForParsing: DigitProgram?
    let transformRule: TransformRule?

    /// libphonenumber's TestNumberLength for numbers of any type.
    @inline(__always)
    func testLength(_ n: Int, lengths override: LengthSet? = nil) -> LengthCheck {
        let lengths = override ?? possibleLengths
        guard let lo = lengths.min, let hi = lengths.max else { return .invalidLength }
        if override == nil, localOnlyLengths.contains(n) { return .localOnly }
        if n == lo { return .possible }
        if n < lo { return .tooShort }
        if n > hi { return .tooLong }
        return lengths.contains(n) ? .possible : .invalidLength
    }
}

enum LengthCheck: Equatable {
    case possible, localOnly, tooShort, tooLong, invalidLength
}

/// What the validity automaton answers for a national significant number of one length.
struct ValidityAnswer: Equatable {
    /// Position in the calling code's region list of the region libphonenumber assigns
    /// (GetRegionCodeForNumber), `none` when it assigns none.
    var region: UInt8
    var type: NumberType

    static let none: UInt8 = 0xFF
    static let invalid = ValidityAnswer(region: none, type: .unknown)

    var isValid: Bool { region != ValidityAnswer.none && type != .unknown }

    var packed: UInt32 { UInt32(region) | UInt32(type.rawValue) << 8 }

    init(region: UInt8, type: NumberType) {
        self.region = region
        self.type = type
    }

    init(packed: UInt32) {
        region = UInt8(truncatingIfNeeded: packed)
        type = NumberType(rawValue: UInt8(truncatingIfNeeded: packed >> 8)) ?? .unknown
    }
}

/// One calling code: its regions in libphonenumber's order, and the automaton that judges
/// its national significant numbers the way IsValidNumber, GetRegionCodeForNumber and
/// GetNumberType do, for all its regions at once.
// @unchecked: the tables are written once in init and only read afterwards.
final class CallingCode: Sendable {
    let countryCode: Int
    /// Territory indexes, main country first.
    let territories: [Int]
    let tables: CallingCodeTables
    let stateCount: Int
    let rowCount: Int
    /// States of the general descriptions' automata, all regions together.
    let generalStateCount: Int
    let problems: [String]

    /// libphonenumber's longest national significant number.
    static let maxLength = 17

    /// A copy in memory that is never freed: the tables live as long as the process.
    private static func copy<T>(_ array: [T]) -> UnsafePointer<T> {
        let p = UnsafeMutablePointer<T>.allocate(capacity: max(array.count, 1))
        _ = UnsafeMutableBufferPointer(start: p, count: array.count).initialize(from: array)
        return UnsafePointer(p)
    }

    /// Tables read from the automata cache (AutomataCache.load checked every index in them).
    init(countryCode: Int, territories: [Int], tables: CallingCodeTables, stateCount: Int, rowCount: Int,
         generalStateCount: Int, problems: [String]) {
        self.countryCode = countryCode
        self.territories = territories
        self.tables = tables
        self.stateCount = stateCount
        self.rowCount = rowCount
        self.generalStateCount = generalStateCount
        self.problems = problems
    }

    init(countryCode: Int, territories members: [Int], all: NumberingData.TerritoryList) {
        var problems: [String] = []
        var cache: [String: DigitDFA] = [:]
        func compile(_ pattern: String, prefixMatch: Bool = false) throws(DigitPatternError) -> DigitDFA {
            let key = prefixMatch ? "^" + pattern : pattern
            if let dfa = cache[key] { return dfa }
            let dfa = try DigitDFA(try ParsedPattern(pattern).regex, prefixMatch: prefixMatch)
            cache[key] = dfa
            return dfa
        }
        self.countryCode = countryCode
        territories = members
        // Components: per region its general description, the type descriptions in
        // GetNumberTypeHelper's order, and the leading digits (a prefix match).
        struct Component {
            let dfa: DigitDFA
            let lengths: LengthSet?
        }
        struct RegionParts {
            var general: Int?
            var types: [(NumberType, Int)] = []
            var fixedLine: Int?
            var mobile: Int?
            var leading: Int?
            var sameMobileAndFixed = false
        }
        var components: [Component] = []
        var regions: [RegionParts] = []
        let typeOrder: [(Int32, NumberType)] = [
            (Int32(LOOKUPD_PN_PREMIUM_RATE), .premiumRate), (Int32(LOOKUPD_PN_TOLL_FREE), .tollFree),
            (Int32(LOOKUPD_PN_SHARED_COST), .sharedCost), (Int32(LOOKUPD_PN_VOIP), .voip),
            (Int32(LOOKUPD_PN_PERSONAL_NUMBER), .personalNumber), (Int32(LOOKUPD_PN_PAGER), .pager),
            (Int32(LOOKUPD_PN_UAN), .uan), (Int32(LOOKUPD_PN_VOICEMAIL), .voicemail),
        ]
        for t in members {
            let territory = all[t]
            let name = territory.id == "001" ? "+\(countryCode)" : territory.id
            var parts = RegionParts()
            parts.sameMobileAndFixed = territory.sameMobileAndFixedLinePattern
            func add(_ desc: Int32) -> Int? {
                let d = territory.descriptions[Int(desc)]
                guard let pattern = d.pattern, !pattern.isEmpty else { return nil }
                do {
                    components.append(Component(dfa: try compile(pattern), lengths: d.lengths))
                    return components.count - 1
                } catch {
                    problems.append("\(name): \(error)")
                    return nil
                }
            }
            parts.general = add(Int32(LOOKUPD_PN_GENERAL))
            for (desc, type) in typeOrder {
                if let c = add(desc) { parts.types.append((type, c)) }
            }
            parts.fixedLine = add(Int32(LOOKUPD_PN_FIXED_LINE))
            parts.mobile = add(Int32(LOOKUPD_PN_MOBILE))
            if let leading = territory.leadingDigits, !leading.isEmpty {
                do {
                    components.append(Component(dfa: try compile(leading, prefixMatch: true), lengths: nil))
                    parts.leading = components.count - 1
                } catch {
                    problems.append("\(name): leading digits: \(error)")
                }
            }
            regions.append(parts)
        }

        // The answer row for the components in an accepting state, per length.
        let rowLength = CallingCode.maxLength + 1
        func answers(_ accepting: Set<Int>) -> [UInt32] {
            func member(_ c: Int?, _ n: Int) -> Bool {
                guard let c, accepting.contains(c) else { return false }
                if let lengths = components[c].lengths, !lengths.contains(n) { return false }
                return true
            }
            func type(_ r: RegionParts, _ n: Int) -> NumberType {
                guard member(r.general, n) else { return .unknown }
                for (type, c) in r.types where member(c, n) { return type }
                if member(r.fixedLine, n) {
                    return r.sameMobileAndFixed || member(r.mobile, n) ? .fixedLineOrMobile : .fixedLine
                }
                if !r.sameMobileAndFixed, member(r.mobile, n) { return .mobile }
                return .unknown
            }
            var row: [UInt32] = []
            row.reserveCapacity(rowLength)
            for n in 0..<rowLength {
                var chosen = ValidityAnswer.none
                var chosenType = NumberType.unknown
                for (slot, r) in regions.enumerated() {
                    let t = type(r, n)
                    // GetRegionCodeForNumberFromRegionList: a region with leading digits
                    // takes the number when they match, valid or not; one without, when
                    // the number is valid there.
                    if regions.count == 1 || (r.leading.map { accepting.contains($0) } ?? (t != .unknown)) {
                        chosen = UInt8(slot)
                        chosenType = t
                        break
                    }
                }
                row.append(ValidityAnswer(region: chosen, type: chosenType).packed)
            }
            return row
        }

        // The product of the component automata, state by reachable state. A product
        // state lists the (component, state) pairs still alive.
        var ids: [StateKey: Int32] = [:]
        var tuples: [[Int32]] = []
        var next: [Int32] = []
        var rowOf: [Int32] = []
        var rows: [[UInt32]: Int32] = [:]
        var rowsByAccepting: [StateKey: Int32] = [:]
        var flatRows: [UInt32] = []
        var start: [Int32] = []
        for c in components.indices { start.append(Int32(c)); start.append(0) }
        ids[StateKey(start)] = 0
        tuples.append(start)
        var targets: [[Int32]] = Array(repeating: [], count: 10)
        var i = 0
        while i < tuples.count {
            let tuple = tuples[i]
            var acceptingList: [Int32] = []
            var k = 0
            while k < tuple.count {
                let c = Int(tuple[k]), st = Int(tuple[k + 1])
                if components[c].dfa.accepting[st] { acceptingList.append(Int32(c)) }
                k += 2
            }
            let acceptingKey = StateKey(acceptingList)
            if let r = rowsByAccepting[acceptingKey] { rowOf.append(r) } else {
                let row = answers(Set(acceptingList.map(Int.init)))
                let r: Int32
                if let existing = rows[row] { r = existing } else {
                    r = Int32(rows.count)
                    rows[row] = r
                    flatRows += row
                }
                rowsByAccepting[acceptingKey] = r
                rowOf.append(r)
            }
            for d in 0..<10 { targets[d].removeAll(keepingCapacity: true) }
            k = 0
            while k < tuple.count {
                let c = Int(tuple[k]), st = Int(tuple[k + 1])
                let dfa = components[c].dfa
                for d in 0..<10 {
                    let t = dfa.next[st * 10 + d]
                    if t >= 0 { targets[d].append(Int32(c)); targets[d].append(t) }
                }
                k += 2
            }
            for d in 0..<10 {
                if targets[d].isEmpty { next.append(-1); continue }
                let key = StateKey(targets[d])
                if let id = ids[key] { next.append(id) } else {
                    let id = Int32(tuples.count)
                    ids[key] = id
                    tuples.append(targets[d])
                    next.append(id)
                }
            }
            i += 1
        }
        // Merge states with the same future (same answers now and after every digit).
        let product = DigitDFA(next: next, accepting: [Bool](repeating: false, count: tuples.count))
        let (minimal, representative) = product.minimizedWithClasses(initial: rowOf.map(Int.init))
        var next2 = minimal.next
        let rowOf2 = representative.map { rowOf[$0] }
        // A state whose answers are all "invalid" and that leads nowhere else is the dead state.
        let invalidRow = [UInt32](repeating: ValidityAnswer.invalid.packed, count: rowLength)
        let deadRow = rows[invalidRow]
        if let deadRow { DigitDFA.cutDeadStates(&next2, alive: rowOf2.map { $0 != deadRow }) }
        stateCount = rowOf2.count
        rowCount = flatRows.count / rowLength
        var starts: [Int32] = []
        var flatNext: [Int32] = []
        var flatAccepting: [Bool] = []
        for r in regions {
            guard let c = r.general else { starts.append(-1); continue }
            let dfa = components[c].dfa
            let offset = Int32(flatAccepting.count)
            starts.append(offset)
            flatNext += dfa.next.map { $0 < 0 ? -1 : $0 + offset }
            flatAccepting += dfa.accepting
        }
        generalStateCount = flatAccepting.count
        tables = CallingCodeTables(
            next: CallingCode.copy(next2), answerRow: CallingCode.copy(rowOf2), answers: CallingCode.copy(flatRows),
            generalStart: CallingCode.copy(starts), generalNext: CallingCode.copy(flatNext),
            generalAccepting: CallingCode.copy(flatAccepting), territories: CallingCode.copy(members.map(Int32.init)),
            territoryCount: members.count)
        self.problems = problems
    }
}

/// A calling code's tables as plain values: pointers into memory allocated once for the
/// process, read without bounds checks (every index in them was checked when they were
/// built) or reference counting.
struct CallingCodeTables: @unchecked Sendable {
    /// `next[state * 10 + digit]`, -1: no number of this code starts so.
    let next: UnsafePointer<Int32>
    /// Per state, the row of `answers` for the number ending there.
    let answerRow: UnsafePointer<Int32>
    /// Rows of `CallingCode.maxLength + 1` packed answers, one per number length.
    let answers: UnsafePointer<UInt32>
    /// The general descriptions' automata, one after the other: per region slot its start
    /// state (-1: no pattern), shared transitions and accepting flags.
    let generalStart: UnsafePointer<Int32>
    let generalNext: UnsafePointer<Int32>
    let generalAccepting: UnsafePointer<Bool>
    /// Territory indexes, main country first.
    let territories: UnsafePointer<Int32>
    let territoryCount: Int

    /// A number no region's pattern admits: invalid, assigned to the code's only region
    /// when it has one (GetRegionCodeForNumber's rule).
    @inline(__always)
    var noMatch: ValidityAnswer {
        ValidityAnswer(region: territoryCount == 1 ? 0 : ValidityAnswer.none, type: .unknown)
    }

    /// The judgement for a national significant number (digits 0-9).
    @inline(__always)
    func judge(_ digits: UnsafeBufferPointer<UInt8>) -> ValidityAnswer {
        guard digits.count <= CallingCode.maxLength else { return noMatch }
        var s: Int32 = 0
        for d in digits {
            s = next[Int(s) &* 10 &+ Int(d)]
            if s < 0 { return noMatch }
        }
        let row = Int(answerRow[Int(s)])
        return ValidityAnswer(packed: answers[row &* (CallingCode.maxLength + 1) &+ digits.count])
    }

    /// Whether a national significant number fits region `slot`'s general description
    /// (libphonenumber's "viable" test when it strips a national prefix).
    @inline(__always)
    func isViable(_ digits: UnsafeBufferPointer<UInt8>, slot: Int) -> Bool {
        var s = generalStart[slot]
        guard s >= 0 else { return false }
        for d in digits {
            s = generalNext[Int(s) &* 10 &+ Int(d)]
            if s < 0 { return false }
        }
        return generalAccepting[Int(s)]
    }

    /// The territory index of region slot `slot`.
    @inline(__always) func territory(_ slot: Int) -> Int { Int(territories[slot]) }
}
