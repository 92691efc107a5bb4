import Configuration
import Directory
import Glibc
import Identity
import Loading
import Screening
import SIP
import SystemCalls
import TextFormats

let queryCommand = Command(
    name: "query",
    summary: "screen numbers as the daemon would (contacts, then directories)",
    usage: """
    Usage: lookupd query [OPTIONS] NUMBER|URI...
           lookupd query [OPTIONS] -          (numbers from standard input, one per line)

    Screens each number as the daemon does: bypass list and caller policies,
    contacts (the callee's, then the global ones), then the configured
    directories in priority order, each with its journal (lookupd add and
    remove) on top. One answer per number, in input order:

      INPUT <tab> NUMBER <tab> VERDICT <tab> LABEL <tab> SOURCE <tab> DETAIL

    NUMBER is E.164 with '+'; VERDICT is blocked, identified, contact, unknown,
    anonymous, invalid (not a number, or one its country's plan cannot hold)
    or bypassed; SOURCE is the directory (its name), the contacts file or
    policy:KEY that decided; DETAIL names the entry that decided (exact or the
    prefix rule, and the journal record when it came from lookupd add), the
    policy, or why a number is invalid; '-' marks an empty field. With
    attribution on, a seventh field ATTRIBUTION gives the number's region and
    carrier. A false positive is undone with lookupd remove MATCH --from SOURCE.
    NUMBER may be written in any common form of the numbering plan in force
    (+8613800138000, 008613800138000, 013800138000, 13800138000,
    "+86 138-0013-8000"); a URI (sip:, sips:, tel:, or a From value such as
    "Alice" <sip:+8613800138000@pbx>) is read exactly as the daemon reads the
    caller of an INVITE: user part %-decoded once, phone-context and verstat
    from its parameters.

    Options:
      --config FILE        configuration file
      --directory PATH     directory file to use instead of the configured ones
                           (repeatable, in priority order)
      --contacts PATH      contacts list to use instead of the configured ones
                           (repeatable)
      --callee USER        the callee (Request-URI user) for per-callee contacts
      --verstat VALUE      the caller's STIR/SHAKEN verstat (TN-Validation-Passed,
                           TN-Validation-Failed, No-TN-Validation)
      --at "DAY HH:MM"     the time for active= windows (default: now, in the
                           configured time-zone)
      --json               one JSON object per number (fields input, number,
                           verdict, label, source, match, reason, record,
                           policy, inactive, attribution)
      --attribution LANG   the attribution of each number in LANG (zh, en, ...),
                           from libphonenumber's offline data; off to turn the
                           configured one off (default: the config's attribution)
    \(PlanOptions.help)
      -h, --help           this text

    Every directory is verified where a lookup reads it (block checksums);
    a number whose lookup meets a damaged block gets no answer: the error,
    naming the file, goes to standard error.

    Exit status: 0 when every number was screened, 1 on an error (a directory
    that cannot be opened, or is damaged where a number's lookup read it),
    2 on a usage error.

    """,
    run: runQuery
)

private func runQuery(_ raw: [String]) throws -> Int32 {
    let args = try Arguments(raw, valued: Set(["config", "directory", "contacts", "callee", "verstat", "at", "attribution"]).union(PlanOptions.names), flags: ["json"])
    if args.flag("help") {
        var out = OutputBuffer(fd: 1)
        out.append(queryCommand.usage)
        out.flush()
        return 0
    }
    guard !args.positionals.isEmpty else { throw UsageError("give at least one NUMBER, or - to read numbers from standard input") }
    let overridesLists = !args.all("directory").isEmpty || !args.all("contacts").isEmpty
    var config = try ConfigLocation.load(explicit: try args.value("config"),
                                         required: !overridesLists)
    if !args.all("directory").isEmpty { config.directories = args.all("directory").map { DirectoryConfig(path: $0) } }
    config.plan = try PlanOptions.resolve(config, args, directories: config.directories.map(\.path))
    if let language = try args.value("attribution") {
        guard language == "off" || Attribution.isLanguageTag(language) else { throw UsageError("--attribution expects a language code such as zh or en, or off") }
        config.attribution = language == "off" ? nil : language
    }
    if !args.all("contacts").isEmpty { config.contacts = args.all("contacts") }
    if config.directories.isEmpty && config.contacts.isEmpty {
        throw CommandFailure("\(config.path ?? "the configuration") names no directory and no contacts; every number would be unknown")
    }

    let loaded: ScreeningLoader.Loaded
    do {
        loaded = try ScreeningLoader.load(config, verify: false)
    } catch {
        throw CommandFailure("\(error)")
    }
    for warning in loaded.warnings { printWarning("\(warning)") }

    var at: LocalTime? = nil
    if let text = try args.value("at") {
        guard let parsed = LocalTime.parse(text) else { throw UsageError("--at expects a day and a time, e.g. \"Mon 19:30\"") }
        at = parsed
    }
    var verstat = Verstat.absent
    if let text = try args.value("verstat") {
        verstat = Verstat(text)
        guard verstat != .other else { throw UsageError("--verstat expects TN-Validation-Passed, TN-Validation-Failed or No-TN-Validation") }
    }
    if loaded.set.usesTime && at == nil {
        at = loaded.zone.localTime(utc: wallClockSeconds())
    }
    var printer = AnswerPrinter(set: loaded.set, json: args.flag("json"), callee: try args.value("callee") ?? "",
                                verstat: verstat, time: at)
    if args.positionals == ["-"] {
        printer.screenStandardInput()
    } else {
        for input in args.positionals where input != "-" {
            var input = input
            input.withUTF8 { printer.screen(UnsafeRawBufferPointer($0)) }
        }
    }
    printer.out.flush()
    return printer.refused == 0 ? 0 : 1
}

/// Formats answers straight into an output buffer: bulk checks run through
/// here at several hundred thousand numbers a second.
struct AnswerPrinter {
    let set: ScreeningSet
    let json: Bool
    var out = OutputBuffer(fd: 1)
    private var writer = JSONWriter()
    /// Numbers not answered because a directory was damaged where they were looked up.
    private(set) var refused = 0
    private let sourceNames: [DecisionSource: [UInt8]]
    private let callee: [UInt8]
    private let verstat: Verstat
    private let time: LocalTime?

    init(set: ScreeningSet, json: Bool, callee: String = "", verstat: Verstat = .absent, time: LocalTime? = nil) {
        self.set = set
        self.json = json
        self.callee = Array(callee.utf8)
        self.verstat = verstat
        self.time = time
        var names: [DecisionSource: [UInt8]] = [:]
        for i in set.contacts.indices { names[.contacts(i)] = Array(set.contacts[i].name.utf8) }
        for i in set.directories.indices { names[.directory(i)] = Array(set.directories[i].name.utf8) }
        for i in set.calleeContacts.lists.indices { names[.calleeContacts(i)] = Array(set.calleeContacts.lists[i].name.utf8) }
        for i in set.calleeBlocks.lists.indices { names[.calleeBlocks(i)] = Array(set.calleeBlocks.lists[i].name.utf8) }
        for rule in PolicyRule.allCases { names[.policy(rule)] = Array(set.sourceName(.policy(rule)).utf8) }
        self.sourceNames = names
    }

    mutating func screenStandardInput() {
        var pending = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(0, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                printError("cannot read standard input: \(String(cString: strerror(errno)))")
                exit(1)
            }
            if n == 0 { break }
            pending.append(contentsOf: chunk[0..<n])
            var start = 0
            pending.withUnsafeBytes { raw in
                var lines: [UnsafeRawBufferPointer] = []
                lines.reserveCapacity(Self.linesTogether)
                while let newline = raw[start...].firstIndex(of: 0x0A) {
                    lines.append(UnsafeRawBufferPointer(rebasing: raw[start..<newline]))
                    start = newline + 1
                    if lines.count == Self.linesTogether {
                        screenLines(lines)
                        lines.removeAll(keepingCapacity: true)
                    }
                }
                screenLines(lines)
            }
            pending.removeFirst(start)
        }
        if !pending.isEmpty { pending.withUnsafeBytes { screenLines([$0]) } }
    }

    /// Lines screened together: their numbers' search paths are first walked in every
    /// directory at once (`ScreeningSet.prefetch`, 32 searches interleaved), then each line
    /// is decided alone as before and finds its slots in the cache. The decision itself
    /// stays one number at a time: contacts, policies, journals and several directories
    /// come between a number and its lookups, and the output must not change. Measured:
    /// 10-15 % less CPU for a million "+" numbers at 10^6 and at 10^8 entries.
    static let linesTogether = 256
    private var warming: [PhoneNumber] = []

    private mutating func screenLines(_ lines: [UnsafeRawBufferPointer]) {
        if !set.directories.isEmpty, lines.count > 1 {
            warming.removeAll(keepingCapacity: true)
            for line in lines {
                if let number = plainE164(withoutCR(line)) { warming.append(number) }
            }
            warming.withUnsafeBufferPointer { set.prefetch($0, atLeast: 0) }
        }
        for line in lines {
            screen(withoutCR(line))
            out.flushIfLarge()
        }
    }

    /// The number of a line that is "+" and digits, the form bulk checks mostly come in; nil
    /// for any other (national forms, URIs), which is then decided without warming. Reading
    /// every line through the normalizer first, to warm those too, cost as much as the warm
    /// paths saved (docs/BENCHMARKS.md, "Batched lookups").
    private func plainE164(_ line: UnsafeRawBufferPointer) -> PhoneNumber? {
        guard line.count >= 2, line.count <= 16, line[0] == 0x2B else { return nil }
        var value: UInt64 = 0
        for byte in line[1...] {
            guard byte >= 0x30, byte <= 0x39 else { return nil }
            value = value &* 10 &+ UInt64(byte &- 0x30)
        }
        return PhoneNumber(value: value)
    }

    private func withoutCR(_ line: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        line.last == 0x0D ? UnsafeRawBufferPointer(rebasing: line.dropLast()) : line
    }

    /// The same reader the daemon's SIP parser uses for From and P-Asserted-Identity.
    private let identities = SIPIdentityReader()

    mutating func screen(_ input: UnsafeRawBufferPointer) {
        let decision = callee.withUnsafeBytes { callee in
            identities.withIdentity(input) { identity in
                // A verstat in the URI counts as the daemon counts it; --verstat wins.
                let verstat = self.verstat != .absent ? self.verstat : Verstat(identity.verstat)
                return set.decide(caller: identity, context: CallContext(callee: callee, verstat: verstat, time: time))
            }
        }
        if let damaged = decision.damagedDirectory {
            // Never an answer built without a directory that should have had its say.
            refused += 1
            let directory = set.directories[damaged]
            out.flush()
            var shown = OutputBuffer(fd: -1)
            shown.appendField(UnsafeRawBufferPointer(rebasing: input.prefix(64)))
            printError("\(directory.file.damage.map { "\($0)" } ?? "\(directory.file.path): damaged"); '\(String(decoding: shown.bytes, as: UTF8.self))' not screened")
            return
        }
        if json { printJSON(input, decision) } else { printText(input, decision) }
    }

    private mutating func printText(_ input: UnsafeRawBufferPointer, _ d: Decision) {
        if input.isEmpty { out.append("-") } else { out.appendField(input) }
        out.append(byte: 0x09)
        if let number = d.number { out.append(number.description) } else { out.append("-") }
        out.append(byte: 0x09)
        out.append(d.verdict.rawValue)
        out.append(byte: 0x09)
        if let label = d.label {
            set.withLabel(label) { out.appendField($0) }
        } else {
            out.append("-")
        }
        out.append(byte: 0x09)
        if let source = d.source, let name = sourceNames[source] {
            name.withUnsafeBytes { out.appendField($0) }
        } else {
            out.append("-")
        }
        out.append(byte: 0x09)
        out.append(detail(d) ?? "-")
        if let attribution = set.attribution {
            out.append(byte: 0x09)
            if let number = d.number {
                attribution.withDescription(number) { text in
                    if text.isEmpty { out.append("-") } else { out.appendField(text) }
                }
            } else {
                out.append("-")
            }
        }
        out.append(byte: 0x0A)
    }

    private mutating func printJSON(_ input: UnsafeRawBufferPointer, _ d: Decision) {
        writer.reset()
        set.writeJSON(d, input: input, context: CallContext(time: time), to: &writer)
        out.append(writer.bytes)
        out.append(byte: 0x0A)
    }

    private func detail(_ d: Decision) -> String? {
        var parts: [String] = []
        if let reason = d.invalidReason { parts.append(reason.description) }
        switch d.match {
        case .exact?: parts.append(d.verdict == .contact ? "contact" : "exact")
        case .prefix(let p)?: parts.append("prefix \(p)")
        case nil: break
        }
        if let record = d.journalRecord { parts.append("journal record \(record)") }
        if let revision = d.replicatedRevision { parts.append("replicated revision \(revision)") }
        if let policy = d.policy, d.source != .policy(policy) { parts.append("policy \(policy)") }
        if d.verdict == .bypassed { parts.append("bypass list") }
        if let inactive = d.inactiveDirectory { parts.append("\(set.directories[inactive].name) outside its active window") }
        if d.allowed {
            let overridden = set.overriddenBlocks(d, context: CallContext(time: time))
            parts.append(overridden.isEmpty ? "allow"
                         : "allow over " + overridden.map { "\(set.directories[$0.directory].name) \($0.match)" }.joined(separator: ", "))
        }
        return parts.isEmpty ? nil : parts.joined(separator: ", ")
    }
}
