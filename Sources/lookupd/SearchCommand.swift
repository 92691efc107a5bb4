import Configuration
import Directory
import Glibc
import TextFormats

let searchCommand = Command(
    name: "search",
    summary: "find entries by the start of their number or a word of their label",
    usage: """
    Usage: lookupd search PATTERN [--directory FILE]... [--limit N] [--json] [--config FILE]

    Looks through every configured directory (or the --directory files),
    with the journal changes in force now, for the entries whose number
    starts with PATTERN's digits (+86138, 86138 and "+86 138" are the same
    beginning of an E.164 number) or whose label holds PATTERN
    (case-insensitive: "bank" finds "Fake Bank Hotline"). Each match is
    printed as DIRECTORY, NUMBER (or prefix rule), block or identify, and
    the label, in each directory's key order.

    Options:
      --directory FILE  search this directory file (repeatable) instead of
                        the configured ones
      --limit N         at most N matches per directory (default 1000)
      --json            one JSON object per match (lookupd(8) JSON OUTPUT)
      --config FILE     configuration (default: $LOOKUPD_CONFIG, else \(ConfigLocation.defaultPath))
      -h, --help        this text

    Exit status: 0 (a note on standard error when nothing matches), 1 error
    (a directory that cannot be read), 2 usage error.

    """,
    run: runSearch
)

private func runSearch(_ raw: [String]) throws -> Int32 {
    let args = try Arguments(raw, valued: ["config", "limit", "directory"], flags: ["json"])
    if args.flag("help") { return printUsage(searchCommand) }
    guard args.positionals.count == 1, !args.positionals[0].isEmpty else { throw UsageError("give one PATTERN") }
    var limit = 1000
    if let text = try args.value("limit") {
        guard let n = Int(text), n > 0 else { throw UsageError("--limit expects a positive number") }
        limit = n
    }
    var targets: [(name: String, path: String)] = args.all("directory").map { ($0, $0) }
    if targets.isEmpty {
        let config = try ConfigLocation.load(explicit: try args.value("config"), required: true)
        targets = config.directories.map { ($0.name, $0.path) }
        guard !targets.isEmpty else { throw CommandFailure("\(config.path ?? "the configuration") names no directory; pass --directory FILE") }
    }
    let search = DirectorySearch(args.positionals[0])
    let now = Int64(time(nil))
    var out = OutputBuffer(fd: 1)
    var total = 0
    for target in targets {
        let matches: [DirectorySearch.Match]
        do {
            let file = try DirectoryFile(path: target.path)
            var pending: [JournalRecord] = []
            if let journal = try JournalFollower.read(path: JournalFormat.path(forDirectory: target.path)) {
                pending = journal.state.pending(over: file.header, at: now)
            }
            matches = try search.matches(file, pending: pending, limit: limit)
        } catch {
            // A file named on the command line is its own name; a configured one says which.
            throw CommandFailure(target.name == target.path ? "\(error)" : "\(target.name): \(error)")
        }
        for match in matches {
            if args.flag("json") {
                var w = JSONWriter()
                w.beginObject()
                w.field("directory", target.name)
                w.field("path", target.path)
                w.field("number", match.pattern.description)
                w.field("action", match.action)
                w.field("label", match.label)
                w.endObject()
                out.append(w.bytes)
                out.append("\n")
            } else {
                out.append("\(target.name)\t\(match.pattern)\t\(match.action)\t\(DirectoryCompiler.printable(match.label ?? "", limit: 1000))\n")
            }
            out.flushIfLarge()
        }
        if matches.count == limit { printNote("\(target.name): the first \(limit) matches shown (--limit N for more)") }
        total += matches.count
    }
    out.flush()
    if total == 0 {
        // A national form ("02 1234", "(202) 555") is not the start of an E.164 number: say so,
        // rather than let "nothing matches" pass for "not in the directory".
        let pattern = args.positionals[0]
        let hint = search.digits != nil && !pattern.hasPrefix("+")
            ? " (numbers match by the start of their E.164 digits, country code first: +39 02 1234, not 02 1234)" : ""
        printNote("no entry matches '\(DirectoryCompiler.printable(pattern))'\(hint)")
    }
    return 0
}
