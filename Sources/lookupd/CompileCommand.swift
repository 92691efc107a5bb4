import Configuration
import Directory
import Glibc
import SystemCalls
import TextFormats
import TextRules

let compileCommand = Command(
    name: "compile",
    summary: "compile CSV, JSON, text or vCard sources into a directory file",
    usage: """
    Usage: lookupd compile [OPTIONS] SOURCE... -o OUT.lkd
           lookupd compile [OPTIONS] - -o OUT.lkd      (a source on standard input)

    Reads the sources, validates every line, and writes one directory file.
    Nothing is written unless every line of every source is valid (or
    --skip-invalid leaves the bad ones out); each bad line is reported as
    FILE:LINE: REASON. The output appears atomically (temporary file, fsync,
    rename), so a crash never leaves a partial file. Changes made with
    lookupd add and remove stay in force over the new file: they live in
    its journal (OUT.lkd.journal), which the new file does not replace.

    Source formats, by file name (or --format):
      .csv   a header line naming the columns number, action, label
             (',' ';' or tab separated; RFC 4180 quoting; UTF-8, or UTF-16
             with its byte order mark). action is block, identify or allow
             (no lower-priority directory blocks the number: docs/POLICIES.md);
             a label on a block or allow line is shown too; no action means identify when
             there is a label, block when there is none. Exports recognised
             by their header, no options needed (docs/FORMATS.md): FreePBX
             Blacklist (every row blocks), FTC Do Not Call complaints (every
             row blocks, the subject is the label), Google Contacts and
             Outlook contacts (every phone identified with the name).
      .json  an array of {"number", "action", "label"} objects, the iOS-app
             style [{"phoneNum": "+86...", "typeName": "..."}], or JSON Lines.
      .txt   one number per line, each blocked (allowed with --action allow);
             # starts a comment.
      .vcf   vCards: every TEL identified with the card's name.
    A number ending in * is a prefix rule (+86170* covers every number under
    it); an exact entry beats a prefix, a longer prefix beats a shorter one.
    Numbers without a country code are read under the numbering plan of
    --country (or the configuration's country = XX); without one, under the
    built-in default (CN), which lookupd then says. The file records the
    plan (lookupd inspect shows it), and a daemon reading numbers under
    another plan warns about it. Numbers that cannot exist in their country's
    plan (no such range) are kept and counted: blocking them is often the
    point. A source named - is read from standard input (CSV unless --format
    says otherwise), so a generator can pipe billions of lines without a file.

    Memory stays within --memory whatever the size of the sources: entries
    beyond it are sorted in runs written to a temporary folder beside
    OUT.lkd (about 10 bytes an entry; removed when done) and merged into
    the file. Labels are kept in memory, once each.

    Options:
      -o, --output OUT.lkd     the directory file to write (required)
      --format FORMAT          csv, json, text or vcard for every source
      --number-column COLUMN   CSV: the column holding numbers, by header name
                               or by position (1 is the first); once a column
                               is named, the columns not named are ignored
      --label-column COLUMN    CSV: the column holding labels
      --action-column COLUMN   CSV: the column holding block, identify or allow
      --action ACTION          the action of rows without one: block, identify or allow
      --no-header              CSV: the first line is data (columns by
                               position; without names: number, action, label)
      --skip-invalid           leave bad lines out, reporting each, instead of
                               writing nothing
      --vanity                 read letters in numbers as keypad digits
                               (1-800-FLOWERS is +18003569377)
      --discard-changes        write OUT.lkd even though it holds lookupd add
                               and remove changes that exist nowhere else (merged
                               by an older lookupd compact)
      --on-duplicate POLICY    two lines giving one number different data:
                               error (default: refuse, naming both lines),
                               first or last (keep that one)
      --directory-version N    version number stored in the file (default 0)
      --file-format N          directory format written: 4 (default; numbers in
                               nodes of eight) or 2 (binary order, the format a
                               lookupd before version 4 of the format reads)
      --max-errors N           errors printed before stopping (default 50)
      --memory SIZE            memory the compile may use, e.g. 2G or 512M
                               (default: an eighth of this machine's, \(formatBytes(DirectoryCompiler.defaultMemoryBudget)) here)
      --config FILE            take the numbering plan from this configuration
    \(PlanOptions.help)
      --json                   print the summary as one JSON object (lookupd(8));
                               warnings are in it, not on standard error
      -q, --quiet              no summary line
      -h, --help               this text

    Exit status: 0 written, 1 invalid input or an I/O error, 2 usage error.

    """,
    run: runCompile
)

private func runCompile(_ raw: [String]) throws -> Int32 {
    let args = try Arguments(raw, valued: Set(["output", "format", "on-duplicate", "directory-version", "file-format", "max-errors", "config", "memory",
                                               "number-column", "label-column", "action-column", "action"]).union(PlanOptions.names),
                             flags: ["quiet", "no-header", "skip-invalid", "vanity", "discard-changes", "json"], aliases: ["o": "output", "q": "quiet"])
    if args.flag("help") {
        var out = OutputBuffer(fd: 1)
        out.append(compileCommand.usage)
        out.flush()
        return 0
    }
    guard let output = try args.value("output") else { throw UsageError("missing -o OUT.lkd") }
    guard !args.positionals.isEmpty else { throw UsageError("give at least one SOURCE file") }
    var options = DirectoryCompiler.Options()
    let config = try ConfigLocation.load(explicit: try args.value("config"))
    options.plan = try PlanOptions.resolve(config, args)
    if let format = try args.value("format") {
        guard let f = SourceFormat(rawValue: format) else { throw UsageError("--format must be csv, json, text or vcard") }
        options.format = f
    }
    if let policy = try args.value("on-duplicate") {
        guard let p = DuplicatePolicy(rawValue: policy) else { throw UsageError("--on-duplicate must be error, first or last") }
        options.onDuplicate = p
    }
    if let version = try args.value("directory-version") {
        guard let v = UInt64(version) else { throw UsageError("--directory-version expects a whole number") }
        options.directoryVersion = v
    }
    if let format = try args.value("file-format") {
        guard format == "2" || format == "4" else { throw UsageError("--file-format must be 4 or 2") }
        options.fileFormat = UInt32(format)!
    }
    var maxErrors = 50
    if let text = try args.value("max-errors") {
        guard let n = Int(text), n >= 1 else { throw UsageError("--max-errors expects a positive number") }
        maxErrors = n
    }
    options.maxDiagnostics = maxErrors
    options.columns = try CompileColumns.mapping(args)
    if let action = try args.value("action") {
        guard let a = CSVRowAction(rawValue: action) else { throw UsageError("--action must be block, identify or allow") }
        options.defaultAction = a
    }
    options.skipInvalid = args.flag("skip-invalid")
    options.vanity = args.flag("vanity")
    if let text = try args.value("memory") {
        guard let bytes = DirectoryCompiler.parseMemory(text), bytes >= 64 << 20 else {
            throw UsageError("--memory expects a size of at least 64M, such as 2G or 512M")
        }
        options.memoryBudget = bytes
    }
    // Runs go beside the output: the same file system, which has to hold the file anyway.
    options.temporaryFolder = FileSystem.folder(of: output)
    guard args.positionals.filter({ $0 == "-" }).count <= 1 else { throw UsageError("standard input (-) can be read once") }
    let outputIdentity = fileIdentity(output)
    for source in args.positionals where source == output || (outputIdentity != nil && fileIdentity(source) == outputIdentity) {
        throw UsageError("the output \(output) is also a source")
    }

    // Changes a compaction by an older lookupd merged into the file and
    // dropped from its journal exist only in that file.
    if !args.flag("discard-changes") {
        do {
            if let only = try DirectoryUpdates.changesOnlyInFile(output) {
                throw CommandFailure("\(only); \(output) not written. Keep them: lookupd export \(output) > kept.csv and compile that file along with the sources (or add them again with lookupd add); or pass --discard-changes to drop them")
            }
        } catch let error as JournalError {
            throw CommandFailure("\(error)")
        }
    }

    let started = monotonicNow()
    let bar = ProgressBar(enabled: isTerminal(2) && !args.flag("quiet"))
    let compiler = DirectoryCompiler(options: options) { phase, fraction in bar.show(phase, fraction) }
    for (index, source) in args.positionals.enumerated() {
        bar.file = args.positionals.count > 1 ? "\(index + 1)/\(args.positionals.count)" : ""
        do {
            if source == "-" {
                try compiler.add(descriptor: FileDescriptor(rawValue: 0), name: "stdin", format: options.format ?? .csv)
            } else {
                try compiler.add(path: source)
            }
        } catch {
            bar.clear()
            throw CommandFailure("\(error)")
        }
    }
    let written: DirectoryCompiler.Written
    let outcome: Result<DirectoryCompiler.Written, CompileFailure>
    do {
        outcome = try compiler.write(to: output) { fraction in bar.show("writing", fraction) }
    } catch {
        bar.clear()
        throw CommandFailure("\(error)")
    }
    switch outcome {
    case .failure(let failure):
        bar.clear()
        var err = OutputBuffer(fd: 2)
        for diagnostic in failure.diagnostics.prefix(maxErrors) { err.append(diagnostic.description + "\n") }
        if failure.total > maxErrors { err.append("... and \(failure.total - maxErrors) more errors\n") }
        err.append("lookupd: error: \(plural(failure.total, "error")); \(output) not written\(compiler.rejectedLines > 0 ? " (--skip-invalid leaves bad lines out)" : "")\n")
        err.flush()
        if args.flag("json") {
            var w = JSONWriter()
            w.beginObject()
            w.field("output", output)
            w.field("written", false)
            w.field("error_count", failure.total)
            w.key("errors")
            diagnosticsJSON(&w, failure.diagnostics.prefix(maxErrors))
            w.endObject()
            printJSON(w)
        }
        return 1
    case .success(let w):
        written = w
    }
    bar.clear()
    if (!args.flag("quiet") || options.skipInvalid) && !args.flag("json") {
        var err = OutputBuffer(fd: 2)
        for warning in compiler.warnings.prefix(maxErrors) { err.append("lookupd: warning: " + warning.description + "\n") }
        if compiler.warningCount > maxErrors { err.append("... and \(compiler.warningCount - maxErrors) more warnings\n") }
        err.flush()
    }
    if let warning = written.backslashWarning {
        var err = OutputBuffer(fd: 2)
        err.append("lookupd: warning: \(output): \(warning)\n")
        err.flush()
    }
    let journalChanges = (try? JournalFollower.read(path: JournalFormat.path(forDirectory: output)))??.state.changeCount ?? 0
    if args.flag("json") {
        let s = compiler.summary
        var w = JSONWriter()
        w.beginObject()
        w.field("output", output)
        w.field("written", true)
        w.field("numbers", written.exactEntries)
        w.field("prefix_rules", written.prefixRules)
        w.field("lines", compiler.linesRead)
        w.field("blocking", written.blocking)
        w.field("identified", written.identified)
        w.field("labels", written.labels)
        w.field("seconds", monotonicNow() - started)
        w.field("sort_runs", written.runs)
        w.field("temporary_bytes", written.temporaryBytes)
        w.key("shapes")
        w.beginArray()
        for (file, shape) in s.shapes {
            w.beginObject()
            w.field("file", file)
            w.field("shape", shape.name)
            w.endObject()
        }
        w.endArray()
        w.field("skipped_lines", s.skippedLines)
        w.field("rows_without_number", s.rowsWithoutNumber)
        w.field("duplicates_merged", s.duplicatesMerged)
        w.field("extensions_dropped", s.extensionsDropped)
        w.field("vanity_numbers", s.vanityNumbers)
        w.field("warning_count", compiler.warningCount)
        w.key("warnings")
        diagnosticsJSON(&w, compiler.warnings.prefix(maxErrors))
        w.field("journal_changes", journalChanges)
        w.field("numbering_plan", "\(options.plan)")
        w.field("not_in_plan", compiler.notInPlanCount)
        w.endObject()
        printJSON(w)
    } else if !args.flag("quiet") {
        var out = OutputBuffer(fd: 1)
        for (file, shape) in compiler.summary.shapes {
            out.append("\(file): read as \(shape.name): \(shape.meaning)\n")
        }
        let sorted = written.runs == 0 ? "" : ", sorted in \(plural(written.runs, "run")) (\(formatBytes(written.temporaryBytes)) of temporary files)"
        out.append("wrote \(output): \(plural(written.exactEntries, "number")) and \(plural(written.prefixRules, "prefix rule")) from \(plural(compiler.linesRead, "line")) (\(written.blocking) blocking, \(written.identified) with a label, \(plural(written.labels, "distinct label")))\(CompileColumns.describe(compiler.summary))\(sorted) in \(formatSeconds(monotonicNow() - started)); numbering plan \(options.plan)")
        if compiler.notInPlanCount > 0 {
            out.append("; \(plural(compiler.notInPlanCount, "number")) in no range of \(compiler.notInPlanCount == 1 ? "its" : "their") country's plan (they cannot exist)")
        }
        out.append("\n")
        if journalChanges > 0 {
            out.append("\(JournalFormat.path(forDirectory: output)): its \(plural(journalChanges, "change")) made with lookupd add and remove stay in force over the new file\n")
        }
        out.flush()
    }
    return 0
}

/// A one-line progress display on a terminal's standard error; silent
/// otherwise, so logs and pipes never see it.
final class ProgressBar {
    let enabled: Bool
    var file = ""
    private var lastShown = -1.0
    private var lastPhase = ""

    init(enabled: Bool) { self.enabled = enabled }

    func show(_ phase: String, _ fraction: Double) {
        guard enabled else { return }
        let now = monotonicNow()
        guard phase != lastPhase || now - lastShown >= 0.1 else { return }
        lastShown = now
        lastPhase = phase
        let width = 30
        let filled = max(0, min(width, Int(fraction * Double(width))))
        let percent = max(0, min(100, Int(fraction * 100)))
        var out = OutputBuffer(fd: 2)
        out.append("\r\(phase) \(file) [" + String(repeating: "#", count: filled) + String(repeating: " ", count: width - filled) + "] \(percent)%  ")
        out.flush()
    }

    func clear() {
        guard enabled, lastShown >= 0 else { return }
        var out = OutputBuffer(fd: 2)
        out.append("\r" + String(repeating: " ", count: 60) + "\r")
        out.flush()
    }
}

/// 2.0 GiB, 512 MiB: a size for a person.
func formatBytes(_ n: Int) -> String {
    let units = ["bytes", "KiB", "MiB", "GiB", "TiB"]
    var value = Double(n)
    var unit = 0
    while value >= 1024, unit < units.count - 1 {
        value /= 1024
        unit += 1
    }
    if unit == 0 { return "\(n) bytes" }
    return "\(Double(Int(value * 10)) / 10) \(units[unit])"
}

func formatSeconds(_ s: Double) -> String {
    s < 1 ? "\(Int(s * 1000)) ms" : "\(Double(Int(s * 100)) / 100) s"
}

/// Device and inode of an existing file, to tell two spellings of one path apart.
func fileIdentity(_ path: String) -> [UInt64]? {
    var st = stat()
    guard stat(path, &st) == 0 else { return nil }
    return [UInt64(st.st_dev), UInt64(st.st_ino)]
}

/// The CSV column options of `compile` (and their `feed =` spellings).
enum CompileColumns {
    static func mapping(_ args: Arguments) throws -> CSVColumnMapping {
        var mapping = CSVColumnMapping()
        func column(_ option: String) throws -> CSVColumn? {
            guard let text = try args.value(option) else { return nil }
            guard let column = CSVColumn(text) else { throw UsageError("--\(option) expects a header name or a column number (1 is the first)") }
            return column
        }
        mapping.number = try column("number-column")
        mapping.label = try column("label-column")
        mapping.action = try column("action-column")
        mapping.noHeader = args.flag("no-header")
        if mapping.namesColumns, mapping.number == nil {
            throw UsageError("name the number column too (--number-column NAME or NUMBER)")
        }
        return mapping
    }

    /// ", 3 lines skipped, 2 duplicates merged" and the like.
    static func describe(_ s: DirectoryCompiler.Summary) -> String {
        var parts: [String] = []
        func add(_ n: Int, _ one: String, _ many: String) { if n > 0 { parts.append("\(n) \(n == 1 ? one : many)") } }
        add(s.skippedLines, "bad line skipped", "bad lines skipped")
        add(s.rowsWithoutNumber, "row without a number", "rows without a number")
        add(s.duplicatesMerged, "duplicate line merged", "duplicate lines merged")
        add(s.conflictsKeptFirst, "repeated number kept its first row", "repeated numbers kept their first row")
        add(s.conflictsKeptLast, "repeated number kept its last row", "repeated numbers kept their last row")
        add(s.extensionsDropped, "extension dropped", "extensions dropped")
        add(s.vanityNumbers, "vanity number read as digits", "vanity numbers read as digits")
        return parts.isEmpty ? "" : "; " + parts.joined(separator: ", ")
    }
}

