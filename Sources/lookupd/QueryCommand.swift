import Configuration
import Directory
import Glibc
import Screening

let queryCommand = Command(
    name: "query",
    summary: "screen numbers as the daemon would (contacts, then directories)",
    usage: """
    Usage: lookupd query [OPTIONS] NUMBER...
           lookupd query [OPTIONS] -          (numbers from standard input, one per line)

    Screens each number as the daemon does: contacts first, then the configured
    directories in priority order. One answer per number, in input order:

      INPUT <tab> NUMBER <tab> VERDICT <tab> LABEL <tab> SOURCE <tab> DETAIL

    NUMBER is E.164 with '+'; VERDICT is blocked, identified, contact, unknown,
    anonymous or invalid; DETAIL names the entry that decided (exact or the
    prefix rule) or why a number is invalid; '-' marks an empty field.
    NUMBER may be written in any common form: +8613800138000, 008613800138000,
    013800138000, 13800138000, "+86 138-0013-8000", tel: or sip: URIs.

    Options:
      --config FILE        configuration file
      --directory PATH     directory file to use instead of the configured ones
                           (repeatable, in priority order)
      --contacts PATH      contacts list to use instead of the configured ones
                           (repeatable)
      --json               one JSON object per number (fields input, number,
                           verdict, label, source, match, reason)
    \(PlanOptions.help)
      -h, --help           this text

    Exit status: 0 when every number was screened, 1 on an error (a directory
    that cannot be opened), 2 on a usage error.

    """,
    run: runQuery
)

private func runQuery(_ raw: [String]) throws -> Int32 {
    let args = try Arguments(raw, valued: Set(["config", "directory", "contacts"]).union(PlanOptions.names), flags: ["json"])
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
    config.plan = try PlanOptions.plan(config.plan, args)
    if !args.all("directory").isEmpty { config.directories = args.all("directory").map { DirectoryConfig(path: $0) } }
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
    for warning in loaded.warnings { printError("warning: \(warning)") }

    var printer = AnswerPrinter(set: loaded.set, json: args.flag("json"))
    if args.positionals == ["-"] {
        printer.screenStandardInput()
    } else {
        for input in args.positionals where input != "-" {
            var input = input
            input.withUTF8 { printer.screen(UnsafeRawBufferPointer($0)) }
        }
    }
    printer.out.flush()
    return 0
}

/// Formats answers straight into an output buffer: bulk checks run through
/// here at several hundred thousand numbers a second.
struct AnswerPrinter {
    let set: ScreeningSet
    let json: Bool
    var out = OutputBuffer(fd: 1)
    private let sourceNames: [DecisionSource: [UInt8]]

    init(set: ScreeningSet, json: Bool) {
        self.set = set
        self.json = json
        var names: [DecisionSource: [UInt8]] = [:]
        for i in set.contacts.indices { names[.contacts(i)] = Array(set.contacts[i].name.utf8) }
        for i in set.directories.indices { names[.directory(i)] = Array(set.directories[i].name.utf8) }
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
                while let newline = raw[start...].firstIndex(of: 0x0A) {
                    screenLine(UnsafeRawBufferPointer(rebasing: raw[start..<newline]))
                    start = newline + 1
                }
            }
            pending.removeFirst(start)
        }
        if !pending.isEmpty { pending.withUnsafeBytes { screenLine($0) } }
    }

    private mutating func screenLine(_ line: UnsafeRawBufferPointer) {
        var line = line
        if line.last == 0x0D { line = UnsafeRawBufferPointer(rebasing: line.dropLast()) }
        screen(line)
        out.flushIfLarge()
    }

    mutating func screen(_ input: UnsafeRawBufferPointer) {
        let decision = set.decide(identity: input)
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
        out.append(byte: 0x0A)
    }

    private mutating func printJSON(_ input: UnsafeRawBufferPointer, _ d: Decision) {
        out.append("{\"input\":\"")
        out.appendJSONEscaped(input)
        out.append("\",\"number\":")
        if let number = d.number { out.append("\"\(number)\"") } else { out.append("null") }
        out.append(",\"verdict\":\"")
        out.append(d.verdict.rawValue)
        out.append("\",\"label\":")
        if let label = d.label {
            out.append(byte: UInt8(ascii: "\""))
            set.withLabel(label) { out.appendJSONEscaped($0) }
            out.append(byte: UInt8(ascii: "\""))
        } else {
            out.append("null")
        }
        out.append(",\"source\":")
        if let source = d.source, let name = sourceNames[source] {
            out.append(byte: UInt8(ascii: "\""))
            name.withUnsafeBytes { out.appendJSONEscaped($0) }
            out.append(byte: UInt8(ascii: "\""))
        } else {
            out.append("null")
        }
        out.append(",\"match\":")
        if let match = d.match { out.append("\"\(match)\"") } else { out.append("null") }
        out.append(",\"reason\":")
        if let reason = d.invalidReason { out.appendJSONString(reason.description) } else { out.append("null") }
        out.append("}\n")
    }

    private func detail(_ d: Decision) -> String? {
        if let reason = d.invalidReason { return reason.description }
        switch d.match {
        case .exact?: return d.verdict == .contact ? "contact" : "exact"
        case .prefix(let p)?: return "prefix \(p)"
        case nil: return nil
        }
    }
}
