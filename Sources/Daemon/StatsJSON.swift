import Screening
import TextFormats

/// `lookupd stats --json`: the counters /metrics serves, as one JSON object. Made from the
/// exposition text itself, so that the two can never disagree and a new counter appears in
/// both at once (lookupd(8) JSON OUTPUT gives the shape).
public enum StatsJSON {
    /// `{"metrics": {FAMILY: {"type", "help", "samples": [{"name", "labels", "value"}]}}, "notes": [...]}`:
    /// one member per metric family in exposition order; a histogram's `_bucket`, `_sum` and
    /// `_count` samples are its family's. Values are numbers (null for NaN and infinities);
    /// `notes` are the exposition's other comment lines (the last reload failure).
    public static func json(fromExposition text: String) -> [UInt8] {
        struct Family {
            var name: String
            var type: String? = nil
            var help: String? = nil
            var samples: [(name: String, labels: [(String, String)], value: Double)] = []
        }
        var families: [Family] = []
        var notes: [String] = []
        func family(_ name: String) -> Int {
            if let i = families.lastIndex(where: { $0.name == name }) { return i }
            families.append(Family(name: name))
            return families.count - 1
        }
        for raw in text.split(separator: "\n") {
            let line = Substring(raw)
            if line.hasPrefix("# HELP ") || line.hasPrefix("# TYPE ") {
                let rest = line.dropFirst(7)
                let name = String(rest.prefix { $0 != " " })
                let value = String(rest.dropFirst(name.count).drop { $0 == " " })
                if line.hasPrefix("# HELP ") { families[family(name)].help = unescapeHelp(value) } else { families[family(name)].type = value }
                continue
            }
            if line.hasPrefix("#") {
                notes.append(String(line.dropFirst().drop { $0 == " " }))
                continue
            }
            guard let sample = parseSample(line) else { continue }
            var owner = sample.name
            for suffix in ["_bucket", "_sum", "_count"] where sample.name.hasSuffix(suffix) {
                let base = String(sample.name.dropLast(suffix.count))
                if families.contains(where: { $0.name == base && ($0.type == "histogram" || $0.type == "summary") }) { owner = base }
            }
            families[family(owner)].samples.append(sample)
        }
        var w = JSONWriter(capacity: 32 << 10)
        w.beginObject()
        w.key("metrics")
        w.beginObject()
        for f in families {
            w.key(f.name)
            w.beginObject()
            w.field("type", f.type)
            w.field("help", f.help)
            w.key("samples")
            w.beginArray()
            for s in f.samples {
                w.beginObject()
                w.field("name", s.name)
                w.key("labels")
                w.beginObject()
                for (k, v) in s.labels { w.field(k, v) }
                w.endObject()
                w.key("value")
                // Counters and gauges are whole numbers: written as such, not as 3.0.
                if s.value.isFinite, s.value == s.value.rounded(), abs(s.value) < 9e15 { w.number(Int64(s.value)) } else { w.number(s.value) }
                w.endObject()
            }
            w.endArray()
            w.endObject()
        }
        w.endObject()
        w.field("notes", strings: notes)
        w.endObject()
        return w.bytes
    }

    /// `name{label="value",...} value`; label values with the exposition's escapes (\\, \", \n).
    static func parseSample(_ line: Substring) -> (name: String, labels: [(String, String)], value: Double)? {
        let name = String(line.prefix { $0 != "{" && $0 != " " })
        guard !name.isEmpty else { return nil }
        var rest = line.dropFirst(name.count)
        var labels: [(String, String)] = []
        if rest.first == "{" {
            rest = rest.dropFirst()
            while let first = rest.first, first != "}" {
                if first == "," { rest = rest.dropFirst(); continue }
                let key = String(rest.prefix { $0 != "=" })
                rest = rest.dropFirst(key.count)
                guard rest.hasPrefix("=\"") else { return nil }
                rest = rest.dropFirst(2)
                var value = ""
                var closed = false
                while let c = rest.first {
                    rest = rest.dropFirst()
                    if c == "\\", let next = rest.first {
                        rest = rest.dropFirst()
                        value.append(next == "n" ? "\n" : next)
                    } else if c == "\"" {
                        closed = true
                        break
                    } else {
                        value.append(c)
                    }
                }
                guard closed else { return nil }
                labels.append((key, value))
            }
            guard rest.first == "}" else { return nil }
            rest = rest.dropFirst()
        }
        let words = rest.split(separator: " ")
        guard let text = words.first else { return nil }
        let value: Double
        switch text {
        case "+Inf": value = .infinity
        case "-Inf": value = -.infinity
        case "NaN": value = .nan
        default:
            guard let v = Double(text) else { return nil }
            value = v
        }
        return (name, labels, value)
    }

    private static func unescapeHelp(_ text: String) -> String {
        var out = ""
        var escaped = false
        for c in text {
            if escaped { out.append(c == "n" ? "\n" : c); escaped = false } else if c == "\\" { escaped = true } else { out.append(c) }
        }
        return out
    }
}

/// Calls per verdict over the last minute and hour, exact to a second, for `lookupd stats
/// --summary`: a ring of the cumulative verdict totals, one snapshot a second, so a window
/// is a subtraction. Fed by the control loop whether or not http-listen is set.
///
/// Threading: the control loop's only.
final class VerdictWindows {
    static let span = 3600
    private var ring: [[UInt64]]
    private var seconds: [Int]
    private var next = 0
    private var count = 0

    init() {
        ring = Array(repeating: [], count: VerdictWindows.span + 1)
        seconds = Array(repeating: 0, count: VerdictWindows.span + 1)
    }

    /// Records `totals` (cumulative, `Verdict.allCases` order) at `second` (monotonic);
    /// a second already recorded keeps its first snapshot.
    func sample(_ totals: [UInt64], at second: Int) {
        if count > 0, seconds[(next + ring.count - 1) % ring.count] >= second { return }
        ring[next] = totals
        seconds[next] = second
        next = (next + 1) % ring.count
        count = min(count + 1, ring.count)
    }

    /// The calls since `window` seconds before `now`: the newest snapshot at or before then
    /// is subtracted (with none, the daemon is younger than the window: all its calls count).
    func calls(_ totals: [UInt64], window: Int, now: Int) -> [UInt64] {
        var base: [UInt64]? = nil
        for back in 1...max(count, 1) where count > 0 {
            let i = (next + ring.count - back) % ring.count
            if seconds[i] <= now - window { base = ring[i]; break }
        }
        guard let base else { return totals }
        return totals.indices.map { i in i < base.count && totals[i] >= base[i] ? totals[i] - base[i] : totals[i] }
    }
}

/// `lookupd stats --summary`: the daemon's answer to `stats summary` and the short table
/// printed from it.
public enum StatsSummary {
    static func json(totals: [UInt64], windows: VerdictWindows, now: Int, uptime: Int, generation: UInt64) -> [UInt8] {
        var w = JSONWriter()
        w.beginObject()
        w.field("uptime_seconds", uptime)
        w.field("generation", generation)
        w.field("verdicts", strings: Verdict.allCases.map(\.rawValue))
        for (name, counts) in [("last_minute", windows.calls(totals, window: 60, now: now)),
                               ("last_hour", windows.calls(totals, window: 3600, now: now)), ("since_start", totals)] {
            w.key(name)
            w.beginObject()
            for (i, verdict) in Verdict.allCases.enumerated() { w.field(verdict.rawValue, i < counts.count ? counts[i] : 0) }
            w.field("total", counts.reduce(0, +))
            w.endObject()
        }
        w.endObject()
        return w.bytes
    }

    /// The table, one row per verdict and a total row; nil when `json` is not a summary.
    public static func table(_ json: JSONValue) -> String? {
        guard let verdicts = json["verdicts"]?.strings, let uptime = json["uptime_seconds"]?.uint64 else { return nil }
        let columns = ["last_minute", "last_hour", "since_start"]
        let headers = ["last minute", "last hour", "since start"]
        var rows: [[String]] = []
        for name in verdicts + ["total"] {
            var row = [name]
            for column in columns {
                guard let n = json[column]?[name]?.uint64 else { return nil }
                row.append(String(n))
            }
            rows.append(row)
        }
        let width0 = max(8, rows.map { $0[0].count }.max() ?? 0)
        let widths = headers.enumerated().map { i, h in max(h.count, rows.map { $0[i + 1].count }.max() ?? 0) }
        func pad(_ s: String, _ n: Int, left: Bool) -> String {
            let fill = String(repeating: " ", count: max(0, n - s.count))
            return left ? s + fill : fill + s
        }
        var out = "calls by verdict (up \(StatsSummary.duration(Int(uptime)))):\n"
        out += pad("verdict", width0, left: true) + headers.enumerated().map { "  " + pad($1, widths[$0], left: false) }.joined() + "\n"
        for row in rows {
            out += pad(row[0], width0, left: true) + row.dropFirst().enumerated().map { "  " + pad($1, widths[$0], left: false) }.joined() + "\n"
        }
        return out
    }

    static func duration(_ seconds: Int) -> String {
        let d = seconds / 86400, h = seconds / 3600 % 24, m = seconds / 60 % 60, s = seconds % 60
        if d > 0 { return "\(d)d \(h)h" }
        if h > 0 { return "\(h)h \(m)m" }
        if m > 0 { return "\(m)m \(s)s" }
        return "\(s)s"
    }
}
