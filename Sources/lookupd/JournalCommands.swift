import Configuration
import Directory
import Glibc
import Loading
import Screening
import TextRules

let addCommand = Command(
    name: "add",
    summary: "block or label one number or prefix now (journal; no recompile, no reload)",
    usage: """
    Usage: lookupd add NUMBER --block [--label TEXT] [--to DIRECTORY] [--config FILE]
           lookupd add NUMBER --label TEXT [--to DIRECTORY] [--config FILE]

    Adds NUMBER (any common form, or a prefix rule such as +86170*) to a
    directory, or changes what it says about it: --block blocks it, --label
    shows it with TEXT, both block it with a label. The change is appended
    to the directory's journal (DIRECTORY.journal) and synced to disk before
    this command reports success; the running daemon applies it within a
    second, and lookupd query sees it at once. Adding an entry that is
    already exactly so writes nothing.

    Options:
      --block              block the number
      --label TEXT         show the number with this label
      --to DIRECTORY       path or name= of a configured directory (default:
                           the first configured one)
      --config FILE        configuration file
      -h, --help           this text

    Exit status: 0 added (or already so), 1 error, 2 usage error.

    """,
    run: runAdd
)

let removeCommand = Command(
    name: "remove",
    summary: "take one number or prefix rule out of a directory now (journal)",
    usage: """
    Usage: lookupd remove NUMBER [--from DIRECTORY] [--config FILE]

    Removes NUMBER (or a prefix rule such as +86170*) from a directory,
    whether it came from the compiled file or from an earlier lookupd add:
    a removal record is appended to the directory's journal and synced to
    disk; the running daemon applies it within a second. The removal stays
    in force over later versions of the directory file (a recompile, a feed
    update) until NUMBER is added again. Removing what the directory does
    not hold is an error. To undo a false positive, use the
    SOURCE and DETAIL that lookupd query (or the daemon's call log) gives:
    lookupd remove MATCH --from SOURCE.

    Options:
      --from DIRECTORY     path or name= of a configured directory (default:
                           the first configured one)
      --config FILE        configuration file
      -h, --help           this text

    Exit status: 0 removed, 1 error (including: not in the directory), 2
    usage error.

    """,
    run: runRemove
)

let compactCommand = Command(
    name: "compact",
    summary: "merge a directory's journal into a new directory file",
    usage: """
    Usage: lookupd compact [DIRECTORY] [--config FILE]

    Writes a new directory file holding the directory's entries with its
    journal's changes merged in (atomically: a complete new file is renamed
    over the old one), so lookups find them in the file rather than in
    memory, then drops the superseded records from the journal. The journal
    keeps the latest change of every number: a directory file compiled
    anew over this one (lookupd compile -o, lookupd update) gets them all
    again, so no change is lost. The new file records which journal records
    it contains, so a crash at any point leaves either the old file or the
    new one in force, and never applies a record twice. A running daemon
    switches to the new file by itself; records added meanwhile are kept.

    DIRECTORY is a path or name= of a configured directory (default: the
    first configured one), or the path of any directory file.

    Options:
      --config FILE        configuration file
      -h, --help           this text

    Exit status: 0 compacted (or nothing to do), 1 error, 2 usage error.

    """,
    run: runCompact
)

private func runAdd(_ raw: [String]) throws -> Int32 {
    let args = try Arguments(raw, valued: ["to", "config", "label"], flags: ["block"])
    if args.flag("help") { return printUsage(addCommand) }
    guard args.positionals.count == 1 else { throw UsageError("give one NUMBER") }
    let label = try args.value("label")
    guard args.flag("block") || label != nil else { throw UsageError("say what to do: --block, --label TEXT, or both") }
    if let label, let problem = LabelRules.problem(label) { throw UsageError("--label: \(problem)") }
    let (config, directory) = try JournalTarget.resolve(try args.value("to"), option: "to", config: try args.value("config"))
    let pattern = try JournalTarget.pattern(args.positionals[0], plan: config.plan)
    let change: DirectoryUpdates.Change
    do {
        change = try DirectoryUpdates.add(pattern, blocked: args.flag("block"), label: label.map { Array($0.utf8) }, directory: directory.path)
    } catch {
        throw CommandFailure("\(error)")
    }
    JournalTarget.reportTail(change.discardedTail, directory.path)
    var out = OutputBuffer(fd: 1)
    let what = JournalTarget.describe(blocked: args.flag("block"), label: label.map { Array($0.utf8) })
    if let record = change.record {
        if let previous = change.previous, previous.blocked == args.flag("block"), previous.label == label.map({ Array($0.utf8) }) {
            out.append("added \(pattern) to \(directory.name) (\(what)): journal record \(record.sequence); the directory file already says so, the journal keeps it through rebuilds\n")
        } else if let previous = change.previous {
            out.append("changed \(pattern) in \(directory.name) from \(JournalTarget.describe(previous)) to \(what): journal record \(record.sequence)\n")
        } else {
            out.append("added \(pattern) to \(directory.name) (\(what)): journal record \(record.sequence)\n")
        }
    } else {
        out.append("\(pattern) is already in \(directory.name) (\(what), \(JournalTarget.origin(change.previous))); nothing written\n")
    }
    out.flush()
    return 0
}

private func runRemove(_ raw: [String]) throws -> Int32 {
    let args = try Arguments(raw, valued: ["from", "config"], flags: [])
    if args.flag("help") { return printUsage(removeCommand) }
    guard args.positionals.count == 1 else { throw UsageError("give one NUMBER") }
    let (config, directory) = try JournalTarget.resolve(try args.value("from"), option: "from", config: try args.value("config"))
    let pattern = try JournalTarget.pattern(args.positionals[0], plan: config.plan)
    let change: DirectoryUpdates.Change
    do {
        change = try DirectoryUpdates.remove(pattern, directory: directory.path)
    } catch JournalError.notPresent {
        var message = "\(pattern) is not in \(directory.name) (\(directory.path)) or its journal"
        if case .exact(let number) = pattern, let covering = JournalTarget.covering(number, directory: directory, config: config) {
            message += "; it is covered by the prefix rule \(covering) (lookupd remove '\(covering)' --from \(directory.name) removes the whole rule)"
        }
        throw CommandFailure(message)
    } catch {
        throw CommandFailure("\(error)")
    }
    JournalTarget.reportTail(change.discardedTail, directory.path)
    var out = OutputBuffer(fd: 1)
    let was = change.previous.map { " (was \(JournalTarget.describe($0)), \(JournalTarget.origin($0)))" } ?? ""
    out.append("removed \(pattern) from \(directory.name)\(was): journal record \(change.record?.sequence ?? 0)\n")
    out.flush()
    return 0
}

private func runCompact(_ raw: [String]) throws -> Int32 {
    let args = try Arguments(raw, valued: ["config"], flags: [])
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
    var out = OutputBuffer(fd: 1)
    let kept = summary.changes == 0 ? "" : "; the journal keeps its \(summary.changes) change\(summary.changes == 1 ? "" : "s") for the next rebuild"
    let dropped = summary.droppedRecords == 0 ? "" : " (\(summary.droppedRecords) superseded record\(summary.droppedRecords == 1 ? "" : "s") dropped)"
    if summary.rewroteDirectory {
        out.append("compacted \(directory.path): \(summary.mergedEntries) numbers and prefix rules merged (through journal record \(summary.throughSequence)); \(summary.exactEntries) numbers, \(summary.prefixRules) prefix rules\(kept)\(dropped)\n")
    } else if summary.changes > 0 {
        out.append("\(directory.path) already holds every journal change (through record \(summary.throughSequence))\(kept)\(dropped)\n")
    } else {
        out.append("nothing to compact: \(directory.path) has no journal changes (\(summary.exactEntries) numbers, \(summary.prefixRules) prefix rules)\n")
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
            throw CommandFailure("\(given): no such directory file\(names.isEmpty ? "" : " or configured directory name (configured: \(names.joined(separator: ", ")))")")
        }
        return (config, DirectoryConfig(path: given))
    }

    static func canonical(_ path: String) -> String {
        guard let resolved = realpath(path, nil) else { return path }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    static func pattern(_ text: String, plan: NumberingPlan) throws -> NumberPattern {
        switch NumberNormalizer(plan: plan).pattern(text) {
        case .success(let pattern): return pattern
        case .failure(let reason): throw UsageError("invalid number '\(text)': \(reason)")
        }
    }

    static func describe(blocked: Bool, label: [UInt8]?) -> String {
        let text = label.map { "label '\(String(decoding: $0, as: UTF8.self))'" }
        if blocked { return text.map { "block, \($0)" } ?? "block" }
        return text ?? "-"
    }

    static func describe(_ entry: DirectoryUpdates.StoredEntry) -> String { describe(blocked: entry.blocked, label: entry.label) }

    static func origin(_ entry: DirectoryUpdates.StoredEntry?) -> String {
        guard let entry else { return "nowhere" }
        return entry.record.map { "journal record \($0)" } ?? "directory file"
    }

    static func reportTail(_ tail: JournalTail?, _ path: String) {
        guard let tail else { return }
        printError("warning: \(JournalFormat.path(forDirectory: path)): cut off a torn record an interrupted command left: \(tail)")
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
