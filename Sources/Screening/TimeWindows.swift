/// A moment of the week in the configured time zone: all a time window
/// needs. The daemon computes it from the clock once per call; tests and
/// `lookupd query --at` give it directly.
public struct LocalTime: Equatable, Sendable, CustomStringConvertible {
    /// Minutes since Sunday 00:00 (0 ..< 10080).
    public let minuteOfWeek: Int

    public static let minutesPerDay = 1440
    public static let minutesPerWeek = 7 * 1440

    /// `weekday` 0 is Sunday, as in `struct tm`.
    public init?(weekday: Int, hour: Int, minute: Int) {
        guard (0..<7).contains(weekday), (0..<24).contains(hour), (0..<60).contains(minute) else { return nil }
        minuteOfWeek = weekday * LocalTime.minutesPerDay + hour * 60 + minute
    }

    public init(minuteOfWeek: Int) {
        let m = minuteOfWeek % LocalTime.minutesPerWeek
        self.minuteOfWeek = m < 0 ? m + LocalTime.minutesPerWeek : m
    }

    /// From seconds since the epoch already shifted by the zone's UTC
    /// offset. 1970-01-01 was a Thursday (weekday 4).
    public init(localSeconds: Int64) {
        let minutes = localSeconds >= 0 ? localSeconds / 60 : (localSeconds - 59) / 60
        self.init(minuteOfWeek: Int((minutes + 4 * Int64(LocalTime.minutesPerDay)) % Int64(LocalTime.minutesPerWeek)))
    }

    public var weekday: Int { minuteOfWeek / LocalTime.minutesPerDay }
    public var minuteOfDay: Int { minuteOfWeek % LocalTime.minutesPerDay }

    public var description: String {
        "\(TimeWindowSyntax.dayNames[weekday]) \(TimeWindowSyntax.clock(minuteOfDay))"
    }

    /// `Mon 19:30` (or `19:30`, which means Monday).
    public static func parse(_ text: String) -> LocalTime? {
        let words = text.split(separator: " ", omittingEmptySubsequences: true)
        var weekday = 1
        var clock = Substring(text)
        if words.count == 2 {
            guard let day = TimeWindowSyntax.day(words[0]) else { return nil }
            weekday = day
            clock = words[1]
        } else if words.count != 1 {
            return nil
        }
        guard let minute = TimeWindowSyntax.minute(clock), minute < LocalTime.minutesPerDay else { return nil }
        return LocalTime(minuteOfWeek: weekday * LocalTime.minutesPerDay + minute)
    }
}

/// One window: the days it starts on and the time of day it runs.
public struct TimeWindow: Equatable, Sendable {
    /// Bit d set: the window starts on weekday d (0 = Sunday).
    public var days: UInt8
    /// Minute of the day it starts.
    public var start: Int
    /// Minute of the day it ends (exclusive), 1...1440. Not after `start`:
    /// the window runs past midnight into the next day.
    public var end: Int

    @inlinable
    public func contains(_ t: LocalTime) -> Bool {
        let day = t.minuteOfWeek / LocalTime.minutesPerDay
        let minute = t.minuteOfWeek - day * LocalTime.minutesPerDay
        if start < end {
            return days & (1 << UInt8(day)) != 0 && minute >= start && minute < end
        }
        // Overnight: the evening part on a listed day, the morning part on
        // the day after one.
        let previous = day == 0 ? 6 : day - 1
        return (days & (1 << UInt8(day)) != 0 && minute >= start) || (days & (1 << UInt8(previous)) != 0 && minute < end)
    }
}

/// When a directory or a policy applies: `active=18:00-08:00`,
/// `active=Mon-Fri 09:00-17:00`, several windows separated by commas.
/// Outside every window the directory is skipped / the policy allows.
public struct ActiveWindows: Equatable, Sendable, CustomStringConvertible {
    public let windows: [TimeWindow]
    /// As configured, for messages.
    public let text: String

    @inlinable
    public func contains(_ t: LocalTime) -> Bool {
        for window in windows where window.contains(t) { return true }
        return false
    }

    public var description: String { text }

    /// Parses `[DAYS ]HH:MM-HH:MM` or `DAYS`, comma-separated. DAYS is a
    /// day (`Mon`) or a range (`Mon-Fri`, `Fri-Mon` wraps); times are 00:00
    /// to 24:00, and an end not after the start runs past midnight.
    public static func parse(_ text: String) -> Result<ActiveWindows, TimeWindowError> {
        var windows: [TimeWindow] = []
        for part in text.split(separator: ",", omittingEmptySubsequences: false) {
            let words = part.split(separator: " ", omittingEmptySubsequences: true)
            var days: UInt8 = 0x7F
            var times: Substring? = nil
            switch words.count {
            case 1:
                if words[0].contains(":") { times = words[0] } else {
                    guard let d = TimeWindowSyntax.days(words[0]) else { return .failure(TimeWindowError(text: String(part))) }
                    days = d
                }
            case 2:
                guard let d = TimeWindowSyntax.days(words[0]) else { return .failure(TimeWindowError(text: String(part))) }
                days = d
                times = words[1]
            default:
                return .failure(TimeWindowError(text: String(part)))
            }
            var start = 0, end = LocalTime.minutesPerDay
            if let times {
                let bounds = times.split(separator: "-", omittingEmptySubsequences: false)
                guard bounds.count == 2, let s = TimeWindowSyntax.minute(bounds[0]), let e = TimeWindowSyntax.minute(bounds[1]),
                      s < LocalTime.minutesPerDay, e > 0, s != e else {
                    return .failure(TimeWindowError(text: String(part)))
                }
                start = s
                end = e
            }
            windows.append(TimeWindow(days: days, start: start, end: end))
        }
        return .success(ActiveWindows(windows: windows, text: text))
    }

    init(windows: [TimeWindow], text: String) {
        self.windows = windows
        self.text = text
    }
}

public struct TimeWindowError: Error, Equatable, Sendable, CustomStringConvertible {
    public var text: String
    public var description: String {
        "'\(text)' is not a time window (expected HH:MM-HH:MM, Mon-Fri HH:MM-HH:MM or Sat-Sun; times 00:00 to 24:00)"
    }
}

enum TimeWindowSyntax {
    static let dayNames = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]

    static func day(_ text: Substring) -> Int? {
        let lower = text.lowercased()
        for (i, name) in dayNames.enumerated() {
            let short = name.lowercased()
            if lower == short { return i }
        }
        let full = ["sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"]
        return full.firstIndex(of: lower)
    }

    /// `Mon`, `Mon-Fri`, `Fri-Mon`.
    static func days(_ text: Substring) -> UInt8? {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 1 || parts.count == 2, let first = day(parts[0]) else { return nil }
        let last = parts.count == 2 ? day(parts[1]) : first
        guard let last else { return nil }
        var mask: UInt8 = 0
        var d = first
        while true {
            mask |= 1 << UInt8(d)
            if d == last { break }
            d = (d + 1) % 7
        }
        return mask
    }

    /// `HH:MM` (or `H:MM`) as minutes, 0...1440.
    static func minute(_ text: Substring) -> Int? {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, (1...2).contains(parts[0].count), parts[1].count == 2,
              parts[0].allSatisfy(\.isASCII), parts[1].allSatisfy(\.isASCII),
              let h = Int(parts[0]), let m = Int(parts[1]), m < 60 else { return nil }
        let total = h * 60 + m
        return total <= LocalTime.minutesPerDay ? total : nil
    }

    static func clock(_ minute: Int) -> String {
        let h = minute / 60, m = minute % 60
        return (h < 10 ? "0" : "") + String(h) + ":" + (m < 10 ? "0" : "") + String(m)
    }
}
