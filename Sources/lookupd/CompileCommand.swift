import Configuration
import Directory
import Glibc
import SystemCalls

let compileCommand = Command(
    name: "compile",
    summary: "compile CSV, JSON, text or vCard sources into a directory file",
    usage: """
    Usage: lookupd compile [OPTIONS] SOURCE... -o OUT.lkd

    Reads the sources, validates every line, and writes one directory file.
    Nothing is written unless every line of every source is valid; each bad
    line is reported as FILE:LINE: REASON. The output appears atomically
    (temporary file, fsync, rename), so a crash never leaves a partial file.

    Source formats, by file name (or --format):
      .csv   a header line naming the columns number, action, label
             (',' ';' or tab separated; RFC 4180 quoting). action is block or
             identify; a label on a block line is shown too; no action means
             identify when there is a label, block when there is none.
      .json  an array of {"number", "action", "label"} objects, the iOS-app
             style [{"phoneNum": "+86...", "typeName": "..."}], or JSON Lines.
      .txt   one number per line, each blocked; # starts a comment.
      .vcf   vCards: every TEL identified with the card's name.
    A number ending in * is a prefix rule (+86170* covers every number under
    it); an exact entry beats a prefix, a longer prefix beats a shorter one.
    Numbers without a country code are read with the numbering plan of the
    configuration (or the options below).

    Options:
      -o, --output OUT.lkd     the directory file to write (required)
      --format FORMAT          csv, json, text or vcard for every source
      --on-duplicate POLICY    two lines giving one number different data:
                               error (default: refuse, naming both lines),
                               first or last (keep that one)
      --directory-version N    version number stored in the file (default 0)
      --max-errors N           errors printed before stopping (default 50)
      --config FILE            take the numbering plan from this configuration
    \(PlanOptions.help)
      -q, --quiet              no summary line
      -h, --help               this text

    Exit status: 0 written, 1 invalid input or an I/O error, 2 usage error.

    """,
    run: runCompile
)

private func runCompile(_ raw: [String]) throws -> Int32 {
    let args = try Arguments(raw, valued: Set(["output", "format", "on-duplicate", "directory-version", "max-errors", "config"]).union(PlanOptions.names),
                             flags: ["quiet"], aliases: ["o": "output", "q": "quiet"])
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
    options.plan = try PlanOptions.plan(config.plan, args)
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
    var maxErrors = 50
    if let text = try args.value("max-errors") {
        guard let n = Int(text), n >= 1 else { throw UsageError("--max-errors expects a positive number") }
        maxErrors = n
    }
    options.maxDiagnostics = maxErrors
    let outputIdentity = fileIdentity(output)
    for source in args.positionals where source == output || (outputIdentity != nil && fileIdentity(source) == outputIdentity) {
        throw UsageError("the output \(output) is also a source")
    }

    let started = monotonicNow()
    let bar = ProgressBar(enabled: isTerminal(2) && !args.flag("quiet"))
    let compiler = DirectoryCompiler(options: options) { phase, fraction in bar.show(phase, fraction) }
    for (index, source) in args.positionals.enumerated() {
        bar.file = args.positionals.count > 1 ? "\(index + 1)/\(args.positionals.count)" : ""
        do {
            try compiler.add(path: source == "-" ? "/dev/stdin" : source)
        } catch {
            bar.clear()
            throw CommandFailure("\(error)")
        }
    }
    let content: DirectoryContent
    switch compiler.finish() {
    case .failure(let failure):
        bar.clear()
        var err = OutputBuffer(fd: 2)
        for diagnostic in failure.diagnostics.prefix(maxErrors) { err.append(diagnostic.description + "\n") }
        if failure.total > maxErrors { err.append("... and \(failure.total - maxErrors) more errors\n") }
        err.append("lookupd: \(failure.total) error\(failure.total == 1 ? "" : "s"); \(output) not written\n")
        err.flush()
        return 1
    case .success(let c):
        content = c
    }
    do {
        try DirectoryWriter.write(content, to: output) { fraction in bar.show("writing", fraction) }
    } catch {
        bar.clear()
        throw CommandFailure("\(error)")
    }
    bar.clear()
    if !args.flag("quiet") {
        let blocked = content.exactValues.reduce(0) { $0 + Int($1 & 1) } + content.prefixValues.reduce(0) { $0 + Int($1 & 1) }
        let identified = content.exactValues.reduce(0) { $0 + ($1 >> 1 != 0 ? 1 : 0) } + content.prefixValues.reduce(0) { $0 + ($1 >> 1 != 0 ? 1 : 0) }
        var out = OutputBuffer(fd: 1)
        out.append("wrote \(output): \(content.exactKeys.count) numbers and \(content.prefixKeys.count) prefix rules from \(compiler.linesRead) lines (\(blocked) blocking, \(identified) with a label, \(content.labels.count) distinct labels) in \(formatSeconds(monotonicNow() - started))\n")
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

func formatSeconds(_ s: Double) -> String {
    s < 1 ? "\(Int(s * 1000)) ms" : "\(Double(Int(s * 100)) / 100) s"
}

/// Device and inode of an existing file, to tell two spellings of one path apart.
func fileIdentity(_ path: String) -> [UInt64]? {
    var st = stat()
    guard stat(path, &st) == 0 else { return nil }
    return [UInt64(st.st_dev), UInt64(st.st_ino)]
}
