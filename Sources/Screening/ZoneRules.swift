import Glibc
import TextFormats

/// A time zone's rules: the UTC offset at any instant, worked out from values this type holds,
/// never from the process's local-time state. glibc's zone is process-wide (`TZ`, `tzset`),
/// and changing it during a reload while workers read the time is a data race; so lookupd
/// reads a zone once per reload into one of these and every worker shares it.
///
/// Built from a TZif file (RFC 8536: the files under /usr/share/zoneinfo; transitions, then
/// the footer's POSIX rule for times after the last one) or from a POSIX TZ string (`CST-8`,
/// `EST5EDT,M3.2.0,M11.1.0`). Offsets agree with glibc's `localtime_r` for the same zone
/// (ZoneRulesTests compares them across every transition of several zones, 1900-2100),
/// except that leap-second records (the `right/` zones) are ignored: time windows have
/// minute resolution.
///
/// Threading: an immutable value; `Sendable`, shared by every worker.
public struct ZoneRules: Sendable, Equatable {
    /// The zone as configured (`Asia/Shanghai`, `CST-8`), for messages.
    public let name: String
    /// UTC seconds at which `offsets[i]` starts, ascending.
    let transitions: [Int64]
    /// Seconds east of UTC from `transitions[i]` on.
    let offsets: [Int32]
    /// Before the first transition.
    let initialOffset: Int32
    /// After the last transition (a TZif footer), or always (a POSIX string).
    let rule: PosixZone?

    /// Where zone files are found, as glibc finds them: `TZDIR`, else /usr/share/zoneinfo.
    public static let folder: String = {
        if let env = getenv("TZDIR"), env.pointee != 0 { return String(cString: env) }
        return "/usr/share/zoneinfo"
    }()

    public static let utc = ZoneRules(name: "UTC", transitions: [], offsets: [], initialOffset: 0, rule: nil)

    init(name: String, transitions: [Int64], offsets: [Int32], initialOffset: Int32, rule: PosixZone?) {
        self.name = name
        self.transitions = transitions
        self.offsets = offsets
        self.initialOffset = initialOffset
        self.rule = rule
    }

    /// Seconds east of UTC at `utc` (seconds since the epoch).
    public func offset(atUTC utc: Int64) -> Int64 {
        guard let last = transitions.last else { return rule?.offset(atUTC: utc) ?? Int64(initialOffset) }
        if utc < transitions[0] { return Int64(initialOffset) }
        if utc >= last, let rule { return rule.offset(atUTC: utc) }
        // The last transition at or before `utc`.
        var low = 0, high = transitions.count - 1
        while low < high {
            let middle = (low + high + 1) / 2
            if transitions[middle] <= utc { low = middle } else { high = middle - 1 }
        }
        return Int64(offsets[low])
    }

    /// `utc` as a moment of the week in this zone.
    public func localTime(utc: Int64) -> LocalTime {
        LocalTime(localSeconds: utc + offset(atUTC: utc))
    }
}

/// Why zone data was refused.
public struct ZoneError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    init(_ message: String) { self.message = message }
    public var description: String { message }
}

// MARK: - TZif (RFC 8536)

extension ZoneRules {
    /// The largest TZif file read: real ones are a few kilobytes.
    public static let maxFileSize = 1 << 20

    /// Reads a TZif file's content. Version 1 data is used only when there is nothing newer;
    /// version 2 and later give 64-bit transition times and the footer rule.
    public init(tzif bytes: UnsafeRawBufferPointer, name: String) throws(ZoneError) {
        var reader = TZifReader(bytes: bytes)
        let header = try reader.header()
        var data = try reader.block(header, timeSize: 4)
        var footer: PosixZone? = nil
        if header.version >= 2 {
            let second = try reader.header()
            data = try reader.block(second, timeSize: 8)
            footer = try reader.footer()
        }
        // glibc's choice for times before the first transition: the first standard-time type
        // (RFC 8536 names type 0; in the tz database they are the same).
        let initial = data.types.first { !$0.isDaylight } ?? data.types[0]
        self.init(name: name, transitions: data.times, offsets: data.indices.map { data.types[Int($0)].offset },
                  initialOffset: initial.offset, rule: footer)
    }
}

private struct TZifReader {
    struct Header {
        var version: Int
        var isUTCCount, isStandardCount, leapCount, timeCount, typeCount, characterCount: Int
    }

    struct TimeType {
        var offset: Int32
        var isDaylight: Bool
    }

    struct Block {
        var times: [Int64]
        var indices: [UInt8]
        var types: [TimeType]
    }

    let bytes: UnsafeRawBufferPointer
    var position = 0

    init(bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    mutating func take(_ count: Int) throws(ZoneError) -> UnsafeRawBufferPointer {
        guard count >= 0, count <= bytes.count - position else { throw ZoneError("not a TZif file: it ends early") }
        defer { position += count }
        return UnsafeRawBufferPointer(rebasing: bytes[position..<(position + count)])
    }

    static func bigEndian(_ b: UnsafeRawBufferPointer, at i: Int, size: Int) -> Int64 {
        var value: UInt64 = 0
        for k in 0..<size { value = value << 8 | UInt64(b[i + k]) }
        // Sign-extend from `size` bytes.
        let shift = UInt64(64 - 8 * size)
        return Int64(bitPattern: value << shift) >> Int64(shift)
    }

    mutating func header() throws(ZoneError) -> Header {
        let h = try take(44)
        guard h[0] == 0x54, h[1] == 0x5A, h[2] == 0x69, h[3] == 0x66 else { throw ZoneError("not a TZif file (no TZif magic)") }
        let version: Int
        switch h[4] {
        case 0: version = 1
        case UInt8(ascii: "2")...UInt8(ascii: "9"): version = Int(h[4] - UInt8(ascii: "0"))
        default: throw ZoneError("not a TZif file (unknown version byte)")
        }
        func count(_ k: Int) -> Int { Int(TZifReader.bigEndian(h, at: 20 + 4 * k, size: 4) & 0xFFFF_FFFF) }
        let header = Header(version: version, isUTCCount: count(0), isStandardCount: count(1), leapCount: count(2),
                            timeCount: count(3), typeCount: count(4), characterCount: count(5))
        guard header.typeCount >= 1, header.typeCount <= 256 else { throw ZoneError("TZif file with \(header.typeCount) time types") }
        guard (header.isUTCCount == 0 || header.isUTCCount == header.typeCount),
              (header.isStandardCount == 0 || header.isStandardCount == header.typeCount) else {
            throw ZoneError("TZif file with inconsistent counts")
        }
        return header
    }

    mutating func block(_ header: Header, timeSize: Int) throws(ZoneError) -> Block {
        let times = try take(header.timeCount * timeSize)
        let indices = try take(header.timeCount)
        let types = try take(header.typeCount * 6)
        _ = try take(header.characterCount)
        _ = try take(header.leapCount * (timeSize + 4))
        _ = try take(header.isStandardCount)
        _ = try take(header.isUTCCount)
        var block = Block(times: [], indices: [], types: [])
        block.times.reserveCapacity(header.timeCount)
        for i in 0..<header.timeCount {
            let t = TZifReader.bigEndian(times, at: i * timeSize, size: timeSize)
            if let previous = block.times.last, t <= previous { throw ZoneError("TZif transitions out of order") }
            guard Int(indices[i]) < header.typeCount else { throw ZoneError("TZif transition names a missing time type") }
            block.times.append(t)
        }
        block.indices = Array(indices)
        for i in 0..<header.typeCount {
            let offset = TZifReader.bigEndian(types, at: 6 * i, size: 4)
            // RFC 8536 §3.2: -2^31 is not allowed; real offsets are within a day.
            guard abs(offset) < 26 * 3600 else { throw ZoneError("TZif time type with a UTC offset of \(offset) seconds") }
            block.types.append(TimeType(offset: Int32(offset), isDaylight: types[6 * i + 4] != 0))
        }
        return block
    }

    /// The POSIX rule between two newlines after the version 2+ data; nil when empty.
    mutating func footer() throws(ZoneError) -> PosixZone? {
        guard position < bytes.count, bytes[position] == 0x0A else { throw ZoneError("TZif file without its footer") }
        var end = position + 1
        while end < bytes.count, bytes[end] != 0x0A { end += 1 }
        guard end < bytes.count else { throw ZoneError("TZif footer without its final newline") }
        let text = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[(position + 1)..<end]), as: UTF8.self)
        position = end + 1
        if text.isEmpty { return nil }
        guard let rule = PosixZone(text) else { throw ZoneError("TZif footer '\(text)' is not a POSIX TZ rule") }
        return rule
    }
}

// MARK: - POSIX TZ strings

extension ZoneRules {
    /// A POSIX TZ string (`CST-8`, `<+0330>-3:30`, `EST5EDT,M3.2.0,M11.1.0`); nil when it is
    /// not one. A daylight name without a rule gets the US rule (`M3.2.0,M11.1.0`), which is
    /// what glibc's posixrules file says.
    public init?(posix text: String) {
        guard let rule = PosixZone(text) else { return nil }
        self.init(name: text, transitions: [], offsets: [], initialOffset: rule.standardOffset, rule: rule)
    }
}

/// `std offset [dst [offset] [,start[/time],end[/time]]]` (POSIX.1-2017 §8.3, with RFC 8536's
/// extensions: hours of a rule time from -167 to 167).
struct PosixZone: Sendable, Equatable {
    /// Seconds east of UTC (POSIX writes them west: `CST-8` is UTC+8).
    let standardOffset: Int32
    let daylight: Daylight?

    struct Daylight: Sendable, Equatable {
        let offset: Int32
        let start: RuleDate
        /// Seconds after local (standard time) midnight of `start`.
        let startTime: Int32
        let end: RuleDate
        /// Seconds after local (daylight time) midnight of `end`.
        let endTime: Int32
    }

    enum RuleDate: Sendable, Equatable {
        /// `Jn`: day 1...365, February 29 never counted.
        case julian(Int)
        /// `n`: day 0...365, February 29 counted in leap years.
        case zeroBased(Int)
        /// `Mm.w.d`: day `d` (0 Sunday) of week `w` (5: the last) of month `m`.
        case monthWeekDay(month: Int, week: Int, day: Int)
    }

    init?(_ text: String) {
        var scanner = PosixScanner(Array(text.utf8))
        guard scanner.name(), let std = scanner.offset(maxHours: 24) else { return nil }
        standardOffset = Int32(-std)
        if scanner.atEnd {
            daylight = nil
            return
        }
        guard scanner.name() else { return nil }
        var dst = -std + 3600
        if let c = scanner.peek, c != UInt8(ascii: ",") {
            guard let o = scanner.offset(maxHours: 24) else { return nil }
            dst = -o
        }
        var start = RuleDate.monthWeekDay(month: 3, week: 2, day: 0), startTime = 7200
        var end = RuleDate.monthWeekDay(month: 11, week: 1, day: 0), endTime = 7200
        if !scanner.atEnd {
            guard scanner.skip(UInt8(ascii: ",")), let s = scanner.date() else { return nil }
            start = s
            if scanner.skip(UInt8(ascii: "/")) {
                guard let t = scanner.offset(maxHours: 167) else { return nil }
                startTime = t
            }
            guard scanner.skip(UInt8(ascii: ",")), let e = scanner.date() else { return nil }
            end = e
            if scanner.skip(UInt8(ascii: "/")) {
                guard let t = scanner.offset(maxHours: 167) else { return nil }
                endTime = t
            }
            guard scanner.atEnd else { return nil }
        }
        daylight = Daylight(offset: Int32(dst), start: start, startTime: Int32(startTime), end: end, endTime: Int32(endTime))
    }

    /// As glibc reckons it: the changes of the UTC year of `utc`, daylight time between the
    /// start and the end (or outside end...start when the end comes first, south of the equator).
    func offset(atUTC utc: Int64) -> Int64 {
        let std = Int64(standardOffset)
        guard let d = daylight else { return std }
        let dst = Int64(d.offset)
        let year = CivilDate.year(ofDay: CivilDate.floorDivide(utc, 86400))
        let start = d.start.day(in: year) * 86400 + Int64(d.startTime) - std
        let end = d.end.day(in: year) * 86400 + Int64(d.endTime) - dst
        let inDaylight = start < end ? (utc >= start && utc < end) : (utc < end || utc >= start)
        return inDaylight ? dst : std
    }
}

extension PosixZone.RuleDate {
    /// Days since the epoch of this date in `year`.
    func day(in year: Int64) -> Int64 {
        let january1 = CivilDate.days(year: year, month: 1, day: 1)
        switch self {
        case .julian(let n):
            return january1 + Int64(n - 1) + (CivilDate.isLeap(year) && n >= 60 ? 1 : 0)
        case .zeroBased(let n):
            return january1 + Int64(n)
        case .monthWeekDay(let month, let week, let day):
            let first = CivilDate.days(year: year, month: Int64(month), day: 1)
            // 1970-01-01 was a Thursday (4).
            let weekday = Int((first % 7 + 11) % 7)
            var offset = (day - weekday + 7) % 7
            let length = CivilDate.daysIn(month: month, year: year)
            for _ in 1..<week where offset + 7 < length { offset += 7 }
            return first + Int64(offset)
        }
    }
}

private struct PosixScanner {
    let bytes: [UInt8]
    var i = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var atEnd: Bool { i == bytes.count }
    var peek: UInt8? { i < bytes.count ? bytes[i] : nil }

    mutating func skip(_ c: UInt8) -> Bool {
        guard peek == c else { return false }
        i += 1
        return true
    }

    /// `ABC` (three or more letters) or `<+0330>` (three or more of letters, digits, + and -).
    mutating func name() -> Bool {
        func isLetter(_ c: UInt8) -> Bool { (c | 0x20) >= UInt8(ascii: "a") && (c | 0x20) <= UInt8(ascii: "z") }
        let start = i
        if skip(UInt8(ascii: "<")) {
            while let c = peek, isLetter(c) || (c >= 0x30 && c <= 0x39) || c == UInt8(ascii: "+") || c == UInt8(ascii: "-") { i += 1 }
            guard i - start - 1 >= 3, skip(UInt8(ascii: ">")) else { return false }
            return true
        }
        while let c = peek, isLetter(c) { i += 1 }
        return i - start >= 3
    }

    mutating func number(max: Int) -> Int? {
        let start = i
        var value = 0
        while let c = peek, c >= 0x30, c <= 0x39, i - start < 3 {
            value = value * 10 + Int(c - 0x30)
            i += 1
        }
        guard i > start, value <= max else { return nil }
        return value
    }

    /// `[+|-]hh[:mm[:ss]]` in seconds, as written (POSIX offsets count west as positive).
    mutating func offset(maxHours: Int) -> Int? {
        var sign = 1
        if skip(UInt8(ascii: "-")) { sign = -1 } else { _ = skip(UInt8(ascii: "+")) }
        guard let hours = number(max: maxHours) else { return nil }
        var seconds = hours * 3600
        if skip(UInt8(ascii: ":")) {
            guard let minutes = number(max: 59) else { return nil }
            seconds += minutes * 60
            if skip(UInt8(ascii: ":")) {
                guard let s = number(max: 59) else { return nil }
                seconds += s
            }
        }
        return sign * seconds
    }

    mutating func date() -> PosixZone.RuleDate? {
        if skip(UInt8(ascii: "J")) {
            guard let n = number(max: 365), n >= 1 else { return nil }
            return .julian(n)
        }
        if skip(UInt8(ascii: "M")) {
            guard let m = number(max: 12), m >= 1, skip(UInt8(ascii: ".")), let w = number(max: 5), w >= 1,
                  skip(UInt8(ascii: ".")), let d = number(max: 6) else { return nil }
            return .monthWeekDay(month: m, week: w, day: d)
        }
        guard let n = number(max: 365) else { return nil }
        return .zeroBased(n)
    }
}


/// A moment as a UTC calendar date and time of day (proleptic Gregorian), worked out without
/// the C library: for timestamps such as the decision log's.
///
/// Threading: a plain value; `Sendable`.
public struct UTCTime: Sendable, Equatable {
    public let year: Int64
    public let month, day, hour, minute, second: Int

    public init(seconds utc: Int64) {
        let days = CivilDate.floorDivide(utc, 86400)
        (year, month, day) = CivilDate.date(ofDay: days)
        let rest = Int(utc - days * 86400)
        hour = rest / 3600
        minute = rest / 60 % 60
        second = rest % 60
    }

    /// `YYYY-MM-DDTHH:MM:SS` (RFC 3339 without fraction or zone), for years 0 to 9999.
    public var text: String {
        func two(_ v: Int) -> String { v < 10 ? "0\(v)" : "\(v)" }
        let y = String(year)
        return String(repeating: "0", count: max(0, 4 - y.count)) + y + "-\(two(month))-\(two(day))T\(two(hour)):\(two(minute)):\(two(second))"
    }

    /// Unix time of a UTC date and time; the caller has checked the ranges
    /// (month 1...12, day 1...31, hour 0...23, minute 0...59, second 0...60).
    public static func seconds(year: Int64, month: Int, day: Int, hour: Int, minute: Int, second: Int) -> Int64 {
        CivilDate.days(year: year, month: Int64(month), day: Int64(day)) * 86400 + Int64(hour * 3600 + minute * 60 + second)
    }
}
