/// Moments and durations as operators write them: `lookupd add --expires`,
/// the write API's `expires`, `lookupd log --since/--until`. Seconds since
/// 1970 (UTC) throughout; no time zone database is involved: an RFC 3339
/// time carries its offset, a time without one is UTC.
public enum TimeText {
    /// A duration: `90` or `90s`, `15m`, `24h`, `7d`, `1w`, or a sum such as
    /// `1h30m`. Nil for anything else, zero, or more than 100 years.
    public static func duration(_ text: String) -> Int64? {
        var total: Int64 = 0
        var digits = ""
        var sawUnit = false
        for c in text {
            if c.isASCII, c.isNumber {
                digits.append(c)
                guard digits.count <= 10 else { return nil }
                continue
            }
            let scale: Int64
            switch c {
            case "s": scale = 1
            case "m": scale = 60
            case "h": scale = 3600
            case "d": scale = 86400
            case "w": scale = 7 * 86400
            default: return nil
            }
            guard let n = Int64(digits) else { return nil }
            total += n * scale
            digits = ""
            sawUnit = true
        }
        if !digits.isEmpty {
            // A bare number is seconds, but not after a unit ("1h30" is a typo).
            guard !sawUnit, let n = Int64(digits) else { return nil }
            total += n
        }
        guard total > 0, total <= 100 * 366 * 86400 else { return nil }
        return total
    }

    /// An RFC 3339 date-time: `2026-12-01T18:00:00Z`, `2026-12-01T18:00:00+08:00`,
    /// fractions of a second allowed (and dropped); a space for the `T`;
    /// without an offset, UTC. Also a date alone (`2026-12-01`, its start in
    /// UTC) and a time without seconds (`2026-12-01T18:00`).
    public static func moment(_ text: String) -> Int64? {
        var s = Substring(text)
        var offset: Int64 = 0
        if s.hasSuffix("Z") || s.hasSuffix("z") {
            s = s.dropLast()
        } else if s.count > 6, let sign = s[s.index(s.endIndex, offsetBy: -6)...].first, sign == "+" || sign == "-",
                  s.contains("T") || s.contains("t") || s.contains(" ") {
            let zone = s.suffix(5)
            let parts = zone.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count == 2, parts[0].count == 2, parts[1].count == 2, let h = Int64(parts[0]), let m = Int64(parts[1]),
                  h < 24, m < 60 else { return nil }
            offset = (h * 3600 + m * 60) * (sign == "+" ? 1 : -1)
            s = s.dropLast(6)
        }
        let halves = s.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "T" || $0 == "t" || $0 == " " })
        guard halves.count == 1 || halves.count == 2 else { return nil }
        let date = halves[0].split(separator: "-", omittingEmptySubsequences: false)
        guard date.count == 3, date[0].count == 4, date[1].count == 2, date[2].count == 2,
              let year = Int64(date[0]), let month = Int64(date[1]), let day = Int64(date[2]),
              (1...12).contains(month), (1...Int64(CivilDate.daysIn(month: Int(month), year: year))).contains(day) else { return nil }
        var seconds: Int64 = 0
        if halves.count == 2 {
            let clock = halves[1].split(separator: ":", omittingEmptySubsequences: false)
            guard clock.count == 2 || clock.count == 3, clock[0].count == 2, clock[1].count == 2,
                  let h = Int64(clock[0]), let m = Int64(clock[1]), h < 24, m < 60 else { return nil }
            var sec: Int64 = 0
            if clock.count == 3 {
                let whole = clock[2].prefix { $0 != "." }
                let fraction = clock[2].dropFirst(whole.count)
                guard whole.count == 2, let v = Int64(whole), v < 61,
                      fraction.isEmpty || (fraction.count > 1 && fraction.dropFirst().allSatisfy { $0.isASCII && $0.isNumber }) else { return nil }
                sec = min(v, 59)
            }
            seconds = h * 3600 + m * 60 + sec
        }
        return CivilDate.days(year: year, month: month, day: day) * 86400 + seconds - offset
    }

    /// `--expires` and the API's `expires`: a duration from `now`, or a moment.
    public static func expiry(_ text: String, now: Int64) -> Int64? {
        if let d = duration(text) { return now + d }
        return moment(text)
    }

    /// `2026-12-01T18:00:00Z`.
    public static func rfc3339(_ seconds: Int64) -> String {
        let days = seconds >= 0 ? seconds / 86400 : (seconds - 86399) / 86400
        let rest = seconds - days * 86400
        let (y, month, day) = CivilDate.date(ofDay: days)
        let m = Int64(month), d = Int64(day)
        func two(_ v: Int64) -> String { v < 10 ? "0\(v)" : "\(v)" }
        let year = String(y)
        return "\(String(repeating: "0", count: max(0, 4 - year.count)))\(year)-\(two(m))-\(two(d))T\(two(rest / 3600)):\(two(rest % 3600 / 60)):\(two(rest % 60))Z"
    }
}
