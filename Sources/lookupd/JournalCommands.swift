import Configuration
import Directory
import Glibc
import Loading
import Screening
import TextFormats
import TextRules

let addCommand = Command(
    name: "add",
    summary: "block or label numbers or prefixes now (journal; no recompile, no reload)",
    usage: """
    Usage: lookupd add NUMBER --block [--label TEXT] [--expires WHEN] [--to DIRECTORY] [--json] [--config FILE]
           lookupd add NUMBER --label TEXT [--expires WHEN] [--to DIRECTORY] [--json] [--config FILE]
           lookupd add NUMBER --allow [--label TEXT] [--expires WHEN] [--to DIRECTORY] [--json] [--config FILE]
           lookupd add --from-file FILE [--expires WHEN] [--to DIRECTORY] [--json] [--config FILE]

    Adds NUMBER (any common form, or a prefix rule such as +86170*) to a
    directory, or changes what it says about it: --block blocks it, --label
    shows it with TEXT, both block it with a label. --allow allows it: no
    directory of lower priority than this one blocks it (a customer's list
    allowing one number of a range a carrier feed blocks; docs/POLICIES.md),
    shown with TEXT when --label is given too. The change is appended
    to the directory's journal (DIRECTORY.journal) and synced to disk before
    this command reports success; the running daemon applies it within a
    second, and lookupd query sees it at once. Adding an entry that is
    already exactly so writes nothing.

    With --expires the change holds until then and ends by itself (within a
    second in the daemon): the number is again what it was before, and
    lookupd compact drops the ended record. WHEN is a duration from now
    (3600, 90s, 15m, 24h, 7d, 1h30m) or an RFC 3339 time
    (2026-12-01T18:00:00Z, 2026-12-01T18:00:00+08:00).

    --from-file reads the numbers from FILE (- for standard input) in any
    source format lookupd compile reads (CSV with number,action,label, a
    plain list of numbers to block, JSON, vCard), checks every line, and
    makes all the changes with one append and one fsync: either every one
    is in force or, when a line is bad, none.

    With replicate set in lookupd.conf, the change is committed to etcd
    instead (under the directory's name) and reported once a majority of
    the etcd members has it; every node applies it within a second. Without
    a quorum it fails within 5 seconds and changes nothing anywhere.

    Options:
      --block              block the number
      --allow              allow the number over lower-priority directories' blocks
      --label TEXT         show the number with this label
      --expires WHEN       end the change then (a duration or an RFC 3339 time)
      --from-file FILE     the numbers of FILE instead of NUMBER (all or nothing)
      --to DIRECTORY       path or name= of a configured directory (default:
                           the first configured one)
      --json               print the outcome as one JSON object (lookupd(8))
      --config FILE        configuration file
    \(PlanOptions.help)
      -h, --help           this text

    NUMBER is read under the numbering plan of --country, else the
    configuration's, else the one the directory file records.

    Exit status: 0 added (or already so), 1 error (an invalid number
    included; nothing is written then), 2 usage error.

    """,
    run: runAdd
)

let removeCommand = Command(
    name: "remove",
    summary: "take numbers or prefix rules out of a directory now (journal)",
    usage: """
    Usage: lookupd remove NUMBER [--from DIRECTORY] [--json] [--config FILE]
           lookupd remove --from-file FILE [--from DIRECTORY] [--json] [--config FILE]

    Removes NUMBER (or a prefix rule such as +86170*) from a directory,
    whether it came from the compiled file or from an earlier lookupd add:
    a removal record is appended to the directory's journal and synced to
    disk; the running daemon applies it within a second. The removal stays
    in force over later versions of the directory file (a recompile, a feed
    update) until NUMBER is added again. Removing what the directory does
    not hold is an error. To undo a false positive, use the
    SOURCE and DETAIL that lookupd query (or the daemon's call log) gives:
    lookupd remove MATCH --from SOURCE.

    --from-file removes every number of FILE (- for standard input; one per
    line, or any source format lookupd compile reads) with one append and
    one fsync: all of them, or, when one is bad or not in the directory,
    none.

    With replicate set in lookupd.conf, the removal is committed to etcd
    and every node applies it within a second; without a quorum it fails
    within 5 seconds and changes nothing anywhere.

    Options:
      --from DIRECTORY     path or name= of a configured directory (default:
                           the first configured one)
      --from-file FILE     the numbers of FILE instead of NUMBER (all or nothing)
      --json               print the outcome as one JSON object (lookupd(8))
      --config FILE        configuration file
    \(PlanOptions.help)
      -h, --help           this text

    NUMBER is read under the numbering plan of --country, else the
    configuration's, else the one the directory file records.

    Exit status: 0 removed, 1 error (including: not in the directory; nothing
    is written then), 2 usage error.

    """,
    run: runRemove
)

let compactCommand = Command(
    name: "compact",
    summary: "merge a directory's journal into a new directory file",
    usage: """
    Usage: lookupd compact [DIRECTORY] [--json] [--config FILE]

    Writes a new directory file holding the directory's entries with its
    journal's changes merged in (atomically: a complete new file is renamed
    over the old one), so lookups find them in the file rather than in
    memory, then drops the superseded records from the journal, and the
    expiring ones that have ended. The journal keeps the latest change of
    every number: a directory file compiled anew over this one (lookupd
    compile -o, lookupd update) gets them all again, so no change is lost.
    A change with an expiry is never merged into the file: it stays in the
    journal until it ends. The new file records which journal records it
    contains, so a crash at any point leaves either the old file or the
    new one in force, and never applies a record twice. A running daemon
    switches to the new file by itself; records added meanwhile are kept.

    DIRECTORY is a path or name= of a configured directory (default: the
    first configured one), or the path of any directory file.

    Options:
      --json               print the outcome as one JSON object (lookupd(8))
      --config FILE        configuration file
      -h, --help           this text

    Exit status: 0 compacted (or nothing to do), 1 error, 2 usage error.

    """,
    run: runCompact
)

private func runAdd(_ raw: [String]) throws -> Int32 {
    let args = try Arguments(raw, valued: Set(["to", "config", "label", "expires", "from-file"]).union(PlanOptions.names), flags: ["block", "allow", "json"])
    if args.flag("help") { return printUsage(addCommand) }
    let allow = args.flag("allow")
    let label = try args.value("label")
    let fromFile = try args.value("from-file")
    if fromFile != nil {
        guard args.positionals.isEmpty else { throw UsageError("give NUMBER or --from-file FILE, not both") }
        guard !args.flag("block"), !allow, label == nil else {
            throw UsageError("--from-file takes each number's action and label from FILE; leave out --block, --allow and --label")
        }
    } else {
        guard args.positionals.count == 1 else { throw UsageError("give one NUMBER, or --from-file FILE") }
        guard args.flag("block") || allow || label != nil else {
            throw UsageError("say what to do: --block, --allow or --label TEXT (a label goes with --block or --allow too)")
        }
        guard !(args.flag("block") && allow) else { throw UsageError("--block and --allow contradict each other; give one") }
        if let label, let problem = LabelRules.problem(label) { throw UsageError("--label: \(problem)") }
    }
    let now = Int64(time(nil))
    var expires: Int64 = 0
    if let text = try args.value("expires") {
        guard let moment = TimeText.expiry(text, now: now) else {
            throw UsageError("--expires expects a duration (3600, 90s, 15m, 24h, 7d) or an RFC 3339 time (2026-12-01T18:00:00Z)")
        }
        guard moment > now else { throw UsageError("--expires \(text) is not in the future") }
        expires = moment
    }
    var (config, directory) = try JournalTarget.resolve(try args.value("to"), option: "to", config: try args.value("config"))
    config.plan = try JournalTarget.plan(config, args, directory)
    if let replication = config.replication {
        // etcd holds one value per number, without expiry or batches (docs/CLUSTER.md).
        guard fromFile == nil, expires == 0 else {
            throw UsageError("--expires and --from-file are not replicated through etcd; with replicate set, add one number at a time")
        }
        let pattern = try JournalTarget.pattern(args.positionals[0], plan: config.plan)
        return try ReplicatedCommands.add(pattern, blocked: args.flag("block"), label: label.map { Array($0.utf8) }, allowed: allow,
                                          directory: directory, config: config, replication: replication)
    }
    let requests: [DirectoryUpdates.Request]
    if let fromFile {
        requests = try JournalTarget.readAdditions(fromFile, plan: config.plan, expires: expires)
    } else {
        let pattern = try JournalTarget.pattern(args.positionals[0], plan: config.plan)
        requests = [.add(pattern, blocked: args.flag("block"), label: label.map { Array($0.utf8) }, expires: expires, allowed: allow)]
    }
    return try JournalTarget.apply(requests, directory: directory, config: config, json: args.flag("json"), now: now)
}

private func runRemove(_ raw: [String]) throws -> Int32 {
    let args = try Arguments(raw, valued: Set(["from", "config", "from-file"]).union(PlanOptions.names), flags: ["json"])
    if args.flag("help") { return printUsage(removeCommand) }
    let fromFile = try args.value("from-file")
    if fromFile != nil {
        guard args.positionals.isEmpty else { throw UsageError("give NUMBER or --from-file FILE, not both") }
    } else {
        guard args.positionals.count == 1 else { throw UsageError("give one NUMBER, or --from-file FILE") }
    }
    var (config, directory) = try JournalTarget.resolve(try args.value("from"), option: "from", config: try args.value("config"))
    config.plan = try JournalTarget.plan(config, args, directory)
    if let replication = config.replication {
        guard fromFile == nil else {
            throw UsageError("--from-file is not replicated through etcd; with replicate set, remove one number at a time")
        }
        return try ReplicatedCommands.remove(try JournalTarget.pattern(args.positionals[0], plan: config.plan),
                                             directory: directory, config: config, replication: replication)
    }
    let requests: [DirectoryUpdates.Request]
    if let fromFile {
        requests = try JournalTarget.readAdditions(fromFile, plan: config.plan, expires: 0).map { .remove($0.pattern) }
    } else {
        requests = [.remove(try JournalTarget.pattern(args.positionals[0], plan: config.plan))]
    }
    return try JournalTarget.apply(requests, directory: directory, config: config, json: args.flag("json"), now: Int64(time(nil)))
}

private func runCompact(_ raw: [String]) throws -> Int32 {
    let args = try Arguments(raw, valued: ["config"], flags: ["json"])
    if args.flag("help") { return printUsage(compactCommand) }
    guard args.positionals.count <= 1 else { throw UsageError("give at most one DIRECTORY") }
    let (_, directory) = try JournalTarget.resolve(args.positionals.first, option: nil, config: try args.value("config"))
    // A test aid: LOOKUPD_CRASH_AT=<phase> kills the command at that point
    // of the compaction, the way a power cut would, to prove it is safe.
    var crashAt: String? = nil
    if let env = getenv("LOOKUPD_CRASH_AT"), env.pointee != 0 { crashAt = String(cString: env) }
    let summary: DirectoryUpdates.CompactionSummary
    do {
        summary = try DirectoryUpdates.compact(directory: directory.path) { phase in
            if phase.rawValue == crashAt { kill(getpid(), SIGKILL) }
        }
    } catch {
        throw CommandFailure("\(error)")
    }
    JournalTarget.reportTail(summary.discardedTail, directory.path)
    if args.flag("json") {
        var w = JSONWriter()
        w.beginObject()
        w.field("directory", directory.name)
        w.field("path", directory.path)
        w.field("rewrote_directory", summary.rewroteDirectory)
        w.field("merged", summary.mergedEntries)
        w.field("through_record", summary.throughSequence)
        w.field("numbers", summary.exactEntries)
        w.field("prefix_rules", summary.prefixRules)
        w.field("changes", summary.changes)
        w.field("expiring", summary.expiring)
        w.field("rewrote_journal", summary.rewroteJournal)
        w.field("dropped_records", summary.droppedRecords)
        w.field("expired_records", summary.expiredRecords)
        w.endObject()
        printJSON(w)
        return 0
    }
    var out = OutputBuffer(fd: 1)
    var notes: [String] = []
    if summary.changes > 0 { notes.append("the journal keeps its \(plural(summary.changes, "change")) for the next rebuild") }
    if summary.expiring > 0 { notes.append("\(plural(summary.expiring, "expiring change")) stay\(summary.expiring == 1 ? "s" : "") in the journal until \(summary.expiring == 1 ? "it ends" : "they end")") }
    var dropped: [String] = []
    let superseded = Int(summary.droppedRecords) - summary.expiredRecords
    if superseded > 0 { dropped.append(plural(superseded, "superseded record")) }
    if summary.expiredRecords > 0 { dropped.append(plural(summary.expiredRecords, "ended record")) }
    let kept = notes.isEmpty ? "" : "; " + notes.joined(separator: "; ")
    let droppedText = dropped.isEmpty ? "" : " (\(dropped.joined(separator: " and ")) dropped)"
    if summary.rewroteDirectory {
        out.append("compacted \(directory.path): \(summary.mergedEntries) numbers and prefix rules merged (through journal record \(summary.throughSequence)); \(plural(summary.exactEntries, "number")), \(plural(summary.prefixRules, "prefix rule"))\(kept)\(droppedText)\n")
    } else if summary.changes > 0 {
        out.append("\(directory.path) already holds every lasting journal change (through record \(summary.throughSequence))\(kept)\(droppedText)\n")
    } else {
        out.append("nothing to compact: \(directory.path) has no journal changes (\(plural(summary.exactEntries, "number")), \(plural(summary.prefixRules, "prefix rule")))\(droppedText)\n")
    }
    out.flush()
    return 0
}

/// Which directory a journal command works on, and how its results read.
enum JournalTarget {
    /// `--to` / `--from` / the compact argument: a configured directory's
    /// path or name, else the path of a directory file; without one, the
    /// first configured directory.
    static func resolve(_ given: String?, option: String?, config explicit: String?) throws -> (LookupdConfig, DirectoryConfig) {
        let config = try ConfigLocation.load(explicit: explicit, required: given == nil)
        guard let given else {
            guard let first = config.directories.first else {
                throw CommandFailure("\(config.path ?? "the configuration") names no directory; pass \(option.map { "--\($0) " } ?? "")DIRECTORY")
            }
            return (config, first)
        }
        if let byName = config.directories.first(where: { $0.name == given }) { return (config, byName) }
        let wanted = canonical(given)
        if let byPath = config.directories.first(where: { canonical($0.path) == wanted }) { return (config, byPath) }
        guard access(given, F_OK) == 0 else {
            let names = config.directories.map(\.name)
            var message = "\(given): no such directory file"
            if !names.isEmpty {
                message += " or configured directory name (configured: \(names.joined(separator: ", ")))"
                if let close = closest(given, among: names) { message += "; did you mean '\(close)'?" }
            }
            throw CommandFailure(message)
        }
        return (config, DirectoryConfig(path: given))
    }

    static func canonical(_ path: String) -> String {
        guard let resolved = realpath(path, nil) else { return path }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// The plan NUMBER is read under; a warning when the directory records another.
    static func plan(_ config: LookupdConfig, _ args: Arguments, _ directory: DirectoryConfig) throws -> NumberingPlan {
        let plan = try PlanOptions.resolve(config, args, directories: [directory.path])
        if let recorded = try? DirectoryFile(path: directory.path).header.plan,
           let warning = ScreeningLoader.planMismatch(recorded, path: directory.path, plan: plan) {
            printWarning("\(warning)")
        }
        return plan
    }

    /// An invalid number is a failed command (exit 1), as in `lookupd compile`.
    static func pattern(_ text: String, plan: NumberingPlan) throws -> NumberPattern {
        switch NumberNormalizer(plan: plan).pattern(text) {
        case .success(let pattern): return pattern
        case .failure(let reason): throw CommandFailure("invalid number '\(text)': \(reason); nothing written")
        }
    }

    /// The entries of a source file, read as `lookupd compile` reads it
    /// (every line checked; the first bad one fails the whole file).
    static func readAdditions(_ path: String, plan: NumberingPlan, expires: Int64) throws -> [DirectoryUpdates.Request] {
        var options = DirectoryCompiler.Options()
        options.plan = plan
        // A list in a file with no telling name is one number per line.
        if path == "-" || SourceFormat.guess(path: path) == nil { options.format = .text }
        let compiler = DirectoryCompiler(options: options)
        do { try compiler.add(path: path == "-" ? "/dev/stdin" : path) } catch { throw CommandFailure("\(error)") }
        let content: DirectoryContent
        switch compiler.finish() {
        case .failure(let failure):
            var err = OutputBuffer(fd: 2)
            for diagnostic in failure.diagnostics.prefix(50) { err.append(diagnostic.description + "\n") }
            if failure.total > 50 { err.append("... and \(failure.total - 50) more errors\n") }
            err.flush()
            throw CommandFailure("\(plural(failure.total, "error")) in \(path); nothing written")
        case .success(let c):
            content = c
        }
        for warning in compiler.warnings { printWarning(warning.description) }
        var requests: [DirectoryUpdates.Request] = []
        requests.reserveCapacity(content.exactKeys.count + content.prefixKeys.count)
        for (keys, values) in [(content.exactKeys, content.exactValues), (content.prefixKeys, content.prefixValues)] {
            for (key, value) in zip(keys, values) {
                guard let pattern = JournalRecord.pattern(key: key) else { continue }
                let labelPlusOne = Int(DirectoryFormat.labelPlusOne(value))
                requests.append(.add(pattern, blocked: value & 1 != 0, label: labelPlusOne == 0 ? nil : content.labels[labelPlusOne - 1],
                                     expires: expires, allowed: DirectoryFormat.allows(value)))
            }
        }
        guard !requests.isEmpty else { throw CommandFailure("\(path) holds no numbers; nothing written") }
        return requests
    }

    /// Makes the changes as one batch, then reports them (text or JSON).
    static func apply(_ requests: [DirectoryUpdates.Request], directory: DirectoryConfig, config: LookupdConfig, json: Bool,
                      now: Int64) throws -> Int32 {
        let changes: [DirectoryUpdates.Change]
        do {
            changes = try DirectoryUpdates.apply(requests, directory: directory.path, now: now)
        } catch {
            let request = requests[min(error.index, requests.count - 1)]
            if case .notPresent = error.error {
                var message = notPresent(request.pattern, directory: directory, config: config, where: "or its journal")
                if requests.count > 1 { message += "; nothing removed" }
                throw CommandFailure(message)
            }
            throw CommandFailure(requests.count > 1 ? "\(request.pattern): \(error.error); nothing written" : "\(error.error)")
        }
        if let tail = changes.first?.discardedTail { reportTail(tail, directory.path) }
        if json {
            printJSON(report(requests, changes, directory: directory))
            return 0
        }
        var out = OutputBuffer(fd: 1)
        if requests.count == 1 {
            out.append(describe(requests[0], changes[0], directory: directory) + "\n")
        } else {
            let written = changes.compactMap(\.record)
            let adding = requests.first?.addition != nil
            let verb = adding ? "added or changed" : "removed"
            var line = "\(verb) \(plural(written.count, "number")) in \(directory.name)"
            if let first = written.first, let last = written.last {
                line += " (journal records \(first.sequence)–\(last.sequence), one write)"
            }
            let unchanged = changes.count - written.count
            if unchanged > 0 { line += "; \(plural(unchanged, "number")) already so, nothing written for \(unchanged == 1 ? "it" : "them")" }
            out.append(line + "\n")
        }
        out.flush()
        return 0
    }

    /// One line for one change, as `lookupd add` and `remove` print it.
    static func describe(_ request: DirectoryUpdates.Request, _ change: DirectoryUpdates.Change, directory: DirectoryConfig) -> String {
        let pattern = request.pattern
        let until = request.expires == 0 ? "" : " until \(TimeText.rfc3339(request.expires))"
        guard let addition = request.addition else {
            let was = change.previous.map { " (was \(describe($0)), \(origin($0)))" } ?? ""
            return "removed \(pattern) from \(directory.name)\(was): journal record \(change.record?.sequence ?? 0)"
        }
        let what = describe(blocked: addition.blocked, label: addition.label, allowed: request.allowed) + until
        guard let record = change.record else {
            return "\(pattern) is already in \(directory.name) (\(what), \(origin(change.previous))); nothing written"
        }
        if let previous = change.previous, previous.blocked == addition.blocked, previous.label == addition.label, previous.record == nil,
           request.expires == 0 {
            return "added \(pattern) to \(directory.name) (\(what)): journal record \(record.sequence); the directory file already says so, the journal keeps it through rebuilds"
        } else if let previous = change.previous {
            return "changed \(pattern) in \(directory.name) from \(describe(previous)) to \(what): journal record \(record.sequence)"
        }
        return "added \(pattern) to \(directory.name) (\(what)): journal record \(record.sequence)"
    }

    /// The JSON object of `lookupd add` and `remove` (lookupd(8), JSON OUTPUT).
    static func report(_ requests: [DirectoryUpdates.Request], _ changes: [DirectoryUpdates.Change], directory: DirectoryConfig) -> JSONWriter {
        var w = JSONWriter()
        ChangeJSON.write(requests, changes, directory: directory.name, path: directory.path, to: &w)
        return w
    }

    static func describe(blocked: Bool, label: [UInt8]?, allowed: Bool) -> String {
        let text = label.map { "label '\(String(decoding: $0, as: UTF8.self))'" }
        if blocked { return text.map { "block, \($0)" } ?? "block" }
        if allowed { return text.map { "allow, \($0)" } ?? "allow" }
        return text ?? "-"
    }

    static func describe(_ entry: DirectoryUpdates.StoredEntry) -> String {
        describe(blocked: entry.blocked, label: entry.label, allowed: entry.allowed) + (entry.expires == 0 ? "" : " until \(TimeText.rfc3339(entry.expires))")
    }

    static func origin(_ entry: DirectoryUpdates.StoredEntry?) -> String {
        guard let entry else { return "nowhere" }
        return entry.record.map { "journal record \($0)" } ?? "directory file"
    }

    static func reportTail(_ tail: JournalTail?, _ path: String) {
        guard let tail else { return }
        printWarning("\(JournalFormat.path(forDirectory: path)): cut off a torn record an interrupted command left: \(tail)")
    }

    /// Why removing `pattern` failed, with the prefix rule covering it, if any.
    static func notPresent(_ pattern: NumberPattern, directory: DirectoryConfig, config: LookupdConfig, where place: String) -> String {
        var message = "\(pattern) is not in \(directory.name) (\(directory.path)) \(place)"
        if case .exact(let number) = pattern, let covering = JournalTarget.covering(number, directory: directory, config: config) {
            message += "; it is covered by the prefix rule \(covering) (lookupd remove '\(covering)' --from \(directory.name) removes the whole rule)"
        }
        return message
    }

    /// The prefix rule (file or journal) that covers `number` in this one
    /// directory, for the hint when removing a number that only a rule covers.
    static func covering(_ number: PhoneNumber, directory: DirectoryConfig, config: LookupdConfig) -> NumberPattern? {
        var only = LookupdConfig()
        only.plan = config.plan
        only.directories = [DirectoryConfig(path: directory.path, name: directory.name)]
        guard let loaded = try? ScreeningLoader.load(only, verify: false) else { return nil }
        let decision = loaded.set.decide(number)
        if case .prefix? = decision.match { return decision.match }
        return nil
    }
}
