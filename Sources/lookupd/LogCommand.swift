import Configuration
import Daemon
import Glibc
import TextRules

let logCommand = Command(
    name: "log",
    summary: "show the decision log: blocked and identified calls",
    usage: """
    Usage: lookupd log [--blocked] [--since TIME] [--caller NUMBER] [--json] [--config FILE | --file PATH | -]

    Reads the decision log back: one line per call the daemon blocked,
    identified, recognised as a contact, or that a caller policy or time
    window took part in, oldest first. By default it reads the configured
    log-file and its rotated predecessors (PATH.N ... PATH.1, then PATH);
    '-' reads lines from standard input instead, e.g. from journald:

      journalctl -u lookupd -o cat | lookupd log --blocked -

    Lines in either log-format (text or json) are understood; other lines
    are skipped. Each call is printed as

      TIME  VERDICT  CALLER -> CALLEE  "LABEL"  source=SOURCE rule=RULE call-id=CALL-ID

    with TIME in UTC as the daemon logged it and control characters from
    the SIP message shown escaped.

    Options:
      --blocked        only blocked calls
      --since TIME     only calls at or after TIME: 2026-11-29, 2026-11-29T18:00,
                       2026-11-29T18:00:05 (UTC), or an age: 30s, 15m, 2h, 7d
      --caller NUMBER  only calls from this caller (as logged, e.g. +8613800138000)
      --json           one JSON object per call (the logged fields) instead
      --config FILE    take log-file from this configuration
      --file PATH      read this log file (and its rotated predecessors)
      -h, --help       this text

    Exit status: 0 (also when nothing matched), 1 when the log cannot be
    read or no log-file is configured, 2 usage error.

    """,
    run: runLog
)

private func runLog(_ raw: [String]) throws -> Int32 {
    let args = try Arguments(raw, valued: ["config", "file", "since", "caller"], flags: ["blocked", "json"])
    if args.flag("help") { return printUsage(logCommand) }
    var filter = LogFilter(blockedOnly: args.flag("blocked"), caller: try args.value("caller"))
    if let since = try args.value("since") {
        guard let time = LogTime.since(since, now: Double(time(nil))) else {
            throw UsageError("--since expects 2026-11-29, 2026-11-29T18:00[:05] or an age such as 30s, 15m, 2h, 7d")
        }
        filter.since = time
    }
    guard args.positionals.count <= 1, args.positionals.first.map({ $0 == "-" }) ?? true else {
        throw UsageError("unexpected argument '\(args.positionals[0])' (only - for standard input)")
    }
    var printer = LogPrinter(filter: filter, json: args.flag("json"))
    if args.positionals == ["-"] {
        guard try args.value("file") == nil else { throw UsageError("give --file or -, not both") }
        try printer.read(fd: 0, name: "standard input")
    } else {
        let path: String
        if let file = try args.value("file") {
            path = file
        } else {
            let config = try ConfigLocation.load(explicit: try args.value("config"), required: true)
            guard let file = config.operations.logFile else {
                throw CommandFailure("\(config.path ?? "the configuration") sets no log-file; pass --file PATH, or - to read "
                                     + "standard input (journalctl -u lookupd -o cat | lookupd log -)")
            }
            path = file
        }
        // Rotated files first, oldest (highest number) first.
        var rotated: [String] = []
        var n = 1
        while access("\(path).\(n)", F_OK) == 0 {
            rotated.append("\(path).\(n)")
            n += 1
        }
        for file in rotated.reversed() + [path] {
            let fd = open(file, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else {
                if file != path && errno == ENOENT { continue }  // rotated away meanwhile
                throw CommandFailure("cannot read \(file): \(String(cString: strerror(errno)))")
            }
            defer { close(fd) }
            try printer.read(fd: fd, name: file)
        }
    }
    printer.out.flush()
    return 0
}

/// Which calls to show.
struct LogFilter {
    var blockedOnly = false
    var caller: String? = nil
    /// Unix time in seconds.
    var since: Double? = nil

    func accepts(_ record: LogRecord) -> Bool {
        if blockedOnly && record["verdict"] != "blocked" { return false }
        if let caller, record["caller"] != caller { return false }
        if let since {
            guard let time = record["time"].flatMap(LogTime.parse), time >= since else { return false }
        }
        return true
    }
}

/// Times in the log: `2026-11-29T23:16:55.851Z` (UTC).
enum LogTime {
    /// Unix time of a logged time or a --since date (`2026-11-29`, `2026-11-29T18:00`,
    /// `2026-11-29 18:00:05`, optionally with fractions and a trailing Z).
    static func parse(_ text: String) -> Double? {
        var s = Substring(text)
        if s.hasSuffix("Z") { s = s.dropLast() }
        let dateAndTime = s.split(whereSeparator: { $0 == "T" || $0 == " " })
        guard dateAndTime.count == 1 || dateAndTime.count == 2 else { return nil }
        let date = dateAndTime[0].split(separator: "-", omittingEmptySubsequences: false)
        guard date.count == 3, date[0].count == 4, date[1].count == 2, date[2].count == 2,
              let year = Int32(date[0]), let month = Int32(date[1]), let day = Int32(date[2]),
              (1...12).contains(month), (1...31).contains(day) else { return nil }
        var hour: Int32 = 0, minute: Int32 = 0, second = 0.0
        if dateAndTime.count == 2 {
            let clock = dateAndTime[1].split(separator: ":", omittingEmptySubsequences: false)
            guard clock.count == 2 || clock.count == 3, clock[0].count == 2, clock[1].count == 2,
                  let h = Int32(clock[0]), let m = Int32(clock[1]), (0...23).contains(h), (0...59).contains(m) else { return nil }
            hour = h
            minute = m
            if clock.count == 3 {
                guard clock[2].count >= 2, clock[2].first!.isNumber, let sec = Double(clock[2]), sec >= 0, sec < 61 else { return nil }
                second = sec
            }
        }
        var parts = tm()
        parts.tm_year = year - 1900
        parts.tm_mon = month - 1
        parts.tm_mday = day
        parts.tm_hour = hour
        parts.tm_min = minute
        parts.tm_sec = 0
        return Double(timegm(&parts)) + second
    }

    /// `--since`: an absolute time, or an age (`30s`, `15m`, `2h`, `7d`) before `now`.
    static func since(_ text: String, now: Double) -> Double? {
        if let unit = text.last, "smhd".contains(unit), let n = Int(text.dropLast()), n >= 0 {
            let scale: Double = unit == "s" ? 1 : unit == "m" ? 60 : unit == "h" ? 3600 : 86400
            return now - Double(n) * scale
        }
        return parse(text)
    }
}

/// Reads log text a chunk at a time and prints the calls the filter accepts.
struct LogPrinter {
    let filter: LogFilter
    let json: Bool
    var out = OutputBuffer(fd: 1)

    mutating func read(fd: Int32, name: String) throws {
        var pending: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw CommandFailure("cannot read \(name): \(String(cString: strerror(errno)))")
            }
            if n == 0 { break }
            pending.append(contentsOf: chunk[0..<n])
            var start = 0
            while let newline = pending[start...].firstIndex(of: 0x0A) {
                line(pending[start..<newline])
                start = newline + 1
            }
            pending.removeFirst(start)
        }
        if !pending.isEmpty { line(pending[...]) }
    }

    private mutating func line(_ bytes: ArraySlice<UInt8>) {
        let text = String(decoding: bytes, as: UTF8.self)
        guard let record = LogRecord.parse(Substring(text)), filter.accepts(record) else { return }
        if json { printJSON(record) } else { printText(record) }
        out.flushIfLarge()
    }

    private mutating func printText(_ r: LogRecord) {
        func shown(_ key: String) -> String { r[key].map(LogPrinter.visible) ?? "-" }
        var verdict = shown("verdict")
        if verdict.count < 10 { verdict += String(repeating: " ", count: 10 - verdict.count) }
        out.append("\(shown("time"))  \(verdict) \(shown("caller")) -> \(shown("callee"))")
        if let label = r["label"] { out.append("  \"\(LogPrinter.visible(label))\"") }
        for key in ["source", "rule", "policy", "inactive", "response", "call-id"] {
            if let value = r[key] { out.append("  \(key)=\(LogPrinter.visible(value))") }
        }
        out.append(byte: 0x0A)
    }

    private mutating func printJSON(_ r: LogRecord) {
        out.append("{")
        for (i, field) in r.fields.enumerated() {
            if i > 0 { out.append(",") }
            out.appendJSONString(field.key)
            out.append(":")
            if let value = field.value {
                let numeric = (field.key == "response" || field.key == "record") && !value.isEmpty && value.allSatisfy(\.isASCII) && value.allSatisfy(\.isNumber)
                if numeric { out.append(value) } else { out.appendJSONString(value) }
            } else {
                out.append("null")
            }
        }
        out.append("}\n")
    }

    /// Control characters (a display name's escape sequences would otherwise
    /// reach the operator's terminal) as \xHH; line separators and bidirectional
    /// controls and marks (which reorder what the terminal shows) as \u{XXXX}.
    static func visible(_ s: String) -> String {
        var out = ""
        for scalar in s.unicodeScalars {
            let v = scalar.value
            if v < 0x20 || v == 0x7F || (0x80..<0xA0).contains(v) {
                let hex = String(v, radix: 16)
                out += "\\x" + (hex.count < 2 ? "0" : "") + hex
            } else if UnsafeCharacters.isSeparator(v) || UnsafeCharacters.isBidiControl(v) || UnsafeCharacters.isBidiMark(v) {
                out += "\\u{" + String(v, radix: 16, uppercase: true) + "}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}
