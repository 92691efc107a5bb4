import Configuration
import Daemon
import Directory
import Glibc
import Screening
import TextRules

let logCommand = Command(
    name: "log",
    summary: "show the decision log: blocked and identified calls",
    usage: """
    Usage: lookupd log [--blocked] [--verdict V] [--since TIME] [--until TIME] [--caller NUMBER] [--callee USER]
                       [--call-id CALL-ID] [--follow] [--json] [--config FILE | --file PATH | -]
           lookupd log --id ID [--json] [--config FILE | --file PATH | -]

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
    the SIP message shown escaped (\\xHH), so no display name can start a
    line of its own.

    --caller takes the number in any written form (8005550199, +1 800
    555-0199, ...) and is read with the configuration's numbering plan, as
    lookupd query reads it; the log holds it normalised. --follow prints
    the calls as the daemon logs them, until interrupted, and follows the
    log file across rotations.

    --id ID finds one decision by its id: the id a 603+ rejection carries
    in its Reason header (id=...), which a blocked caller quotes asking
    for redress, or the "id" of a /lookup.json answer. The decision is
    printed whole, one field a line (time, verdict, caller, callee,
    label, source, rule, Call-ID, then every other logged field), so the
    operator sees why the call was blocked and can lookupd remove the
    entry, or lookupd add the number as an allow entry. Exit status 1 and a message
    when no decision in the log has that id. (Before decision ids, --id
    filtered by Call-ID; that filter is --call-id now.)

    Options:
      --blocked        only blocked calls (--verdict blocked)
      --verdict V      only calls with this verdict (blocked, identified, contact, ...)
      --since TIME     only calls at or after TIME: 2026-11-29, 2026-11-29T18:00,
                       2026-11-29T18:00:05 (UTC), or an age: 30s, 15m, 2h, 7d
      --until TIME     only calls before TIME (the same forms)
      --caller NUMBER  only calls from this caller, in any written form
      --callee USER    only calls to this callee (as logged)
      --call-id CALL-ID  only the calls with this Call-ID
      --id ID          the one decision with this id, printed whole
      --follow         go on printing calls as they are logged
      --json           one JSON object per call (the logged fields) instead
      --config FILE    take log-file from this configuration
      --file PATH      read this log file (and its rotated predecessors)
      -h, --help       this text

    Exit status: 0 (also when nothing matched, except with --id), 1 when
    the log cannot be read, no log-file is configured or no decision has
    the --id given, 2 usage error.

    """,
    run: runLog
)

private func runLog(_ raw: [String]) throws -> Int32 {
    let args = try Arguments(raw, valued: ["config", "file", "since", "until", "caller", "callee", "verdict", "id", "call-id"],
                             flags: ["blocked", "json", "follow"])
    if args.flag("help") { return printUsage(logCommand) }
    var filter = LogFilter(blockedOnly: args.flag("blocked"), callee: try args.value("callee"), callID: try args.value("call-id"))
    filter.verdict = try args.value("verdict")
    if let id = try args.value("id") {
        // --id used to filter by Call-ID (now --call-id): a Call-ID (often with '@' or '.')
        // is no decision id, and the message says where that filter went.
        guard RedressRules.isDecisionID(id.utf8) else {
            throw UsageError("--id expects a decision id: up to 64 letters, digits, '-' or '_' (32 hex digits as lookupd gives them); "
                             + "'\(LogPrinter.visible(String(id.prefix(256))))' is not one. To filter by Call-ID use --call-id")
        }
        guard !args.flag("follow") else { throw UsageError("--id finds a decision already logged; leave out --follow") }
        filter.decisionID = id
    }
    let now = Double(time(nil))
    for (option, text) in [("since", try args.value("since")), ("until", try args.value("until"))] {
        guard let text else { continue }
        guard let moment = LogTime.since(text, now: now) else {
            throw UsageError("--\(option) expects 2026-11-29, 2026-11-29T18:00[:05] or an age such as 30s, 15m, 2h, 7d")
        }
        if option == "since" { filter.since = moment } else { filter.until = moment }
    }
    let explicitConfig = try args.value("config")
    if let caller = try args.value("caller") {
        // Read as query reads it; without a configuration, as written.
        filter.caller = caller
        if let config = try? ConfigLocation.load(explicit: explicitConfig), case .number(let number) = NumberNormalizer(plan: config.plan).normalize(caller) {
            filter.caller = number.description
        }
    }
    let follow = args.flag("follow")
    guard args.positionals.count <= 1, args.positionals.first.map({ $0 == "-" }) ?? true else {
        throw UsageError("unexpected argument '\(args.positionals[0])' (only - for standard input)")
    }
    var printer = LogPrinter(filter: filter, json: args.flag("json"))
    if args.positionals == ["-"] {
        guard try args.value("file") == nil else { throw UsageError("give --file or -, not both") }
        try printer.read(fd: 0, name: "standard input", follow: follow)
    } else {
        let path: String
        if let file = try args.value("file") {
            path = file
        } else {
            let config = try ConfigLocation.load(explicit: explicitConfig, required: true)
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
                if file == path && errno == ENOENT && follow { continue }  // not written yet: follow waits for it
                throw CommandFailure("cannot read \(file): \(String(cString: strerror(errno)))")
            }
            defer { close(fd) }
            try printer.read(fd: fd, name: file)
        }
        if follow { try printer.follow(path) }
    }
    printer.out.flush()
    if let id = filter.decisionID, printer.printed == 0 {
        let callIDs = printer.callIDMatches == 0 ? "to filter by Call-ID use --call-id"
            : "\(printer.callIDMatches) call\(printer.callIDMatches == 1 ? " has" : "s have") Call-ID \(id): lookupd log --call-id \(id)"
        throw CommandFailure("no decision has id \(id) in \(printer.sources.joined(separator: ", ")) (the log may have been rotated away, "
                             + "or the id mistyped; ids are case-sensitive); \(callIDs)")
    }
    return 0
}

/// Which calls to show.
struct LogFilter {
    var blockedOnly = false
    var caller: String? = nil
    var callee: String? = nil
    var callID: String? = nil
    /// `--id`: the decision's id (`id=` of its line).
    var decisionID: String? = nil
    var verdict: String? = nil
    /// Unix time in seconds.
    var since: Double? = nil
    var until: Double? = nil

    init(blockedOnly: Bool = false, caller: String? = nil, callee: String? = nil, callID: String? = nil) {
        self.blockedOnly = blockedOnly
        self.caller = caller
        self.callee = callee
        self.callID = callID
    }

    func accepts(_ record: LogRecord) -> Bool {
        if blockedOnly && record["verdict"] != "blocked" { return false }
        if let verdict, record["verdict"] != verdict { return false }
        if let caller, record["caller"] != caller { return false }
        if let callee, record["callee"] != callee { return false }
        if let callID, record["call-id"] != callID { return false }
        if let decisionID, record["id"] != decisionID { return false }
        if since != nil || until != nil {
            guard let time = record["time"].flatMap(LogTime.parse) else { return false }
            if let since, time < since { return false }
            if let until, time >= until { return false }
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
        return Double(UTCTime.seconds(year: Int64(year), month: Int(month), day: Int(day), hour: Int(hour), minute: Int(minute), second: 0)) + second
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
    /// Calls printed, and what was read (for --id's "not found").
    private(set) var printed = 0
    private(set) var sources: [String] = []
    /// With --id: the calls whose Call-ID is that id (what --id matched before --call-id).
    private(set) var callIDMatches = 0

    /// Reads `fd` to its end. `follow` (standard input): then waits for
    /// more, printing each call as it comes.
    mutating func read(fd: Int32, name: String, follow: Bool = false) throws {
        sources.append(name)
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
            printCompleteLines(&pending)
            if follow { out.flush() }
        }
        if !pending.isEmpty { line(pending[...]) }
    }

    /// Prints every complete line of `pending` and keeps the incomplete rest.
    private mutating func printCompleteLines(_ pending: inout [UInt8]) {
        var start = 0
        while let newline = pending[start...].firstIndex(of: 0x0A) {
            line(pending[start..<newline])
            start = newline + 1
        }
        pending.removeFirst(start)
    }

    /// `--follow` on a log file: what is appended after the end already
    /// read, polled every 200 ms, line by line as it is complete; when the
    /// daemon rotates the file (another inode at `path`, or a shorter
    /// file), the new one is read from its start. Runs until interrupted.
    mutating func follow(_ path: String) throws {
        out.flush()
        var inode: ino_t = 0
        var offset: off_t = 0
        var st = stat()
        if stat(path, &st) == 0 {
            inode = st.st_ino
            offset = st.st_size
        }
        var pending: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            if stat(path, &st) == 0 {
                if st.st_ino != inode || st.st_size < offset {
                    inode = st.st_ino
                    offset = 0
                    pending.removeAll()
                }
                if st.st_size > offset {
                    let fd = open(path, O_RDONLY | O_CLOEXEC)
                    if fd >= 0 {
                        defer { close(fd) }
                        while true {
                            let n = chunk.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, offset) }
                            if n < 0 && errno == EINTR { continue }
                            guard n > 0 else { break }
                            offset += off_t(n)
                            pending.append(contentsOf: chunk[0..<n])
                        }
                        printCompleteLines(&pending)
                        out.flush()
                    }
                }
            }
            usleep(200_000)
        }
    }

    private mutating func line(_ bytes: ArraySlice<UInt8>) {
        let text = String(decoding: bytes, as: UTF8.self)
        guard let record = LogRecord.parse(Substring(text)) else { return }
        if let id = filter.decisionID, record["call-id"] == id { callIDMatches += 1 }
        guard filter.accepts(record) else { return }
        printed += 1
        if json { printJSON(record) } else if filter.decisionID != nil { printWhole(record) } else { printText(record) }
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

    /// `--id`: every field of the decision, one a line, the redress questions first.
    private mutating func printWhole(_ r: LogRecord) {
        let first = ["id", "time", "verdict", "caller", "callee", "label", "source", "rule", "call-id", "response"]
        let width = 13
        func put(_ key: String, _ value: String?) {
            out.append(key + String(repeating: " ", count: max(1, width - key.count)) + (value.map(LogPrinter.visible) ?? "-") + "\n")
        }
        if printed > 1 { out.append("\n") }
        for key in first { put(key, r[key]) }
        for field in r.fields where !first.contains(field.key) { put(field.key, field.value) }
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
