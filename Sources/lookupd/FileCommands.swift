import Directory
import Glibc
import Loading
import SystemCalls
import TextFormats

let checkCommand = Command(
    name: "check",
    summary: "verify directory files completely (checksums and structure)",
    usage: """
    Usage: lookupd check [--json] FILE...

    Verifies each directory file completely: magic number, format version,
    header checksum, every block checksum (format 2) or the content
    checksum (format 1), entries in ascending order without duplicates,
    valid labels and prefix rules, and the counts in the header. Prints one
    line per file; problems go to standard error.

    Options:
      --json       one JSON object per file (lookupd(8)), problems included
      -h, --help   this text

    Exit status: 0 when every file is sound, 1 when any is not, 2 usage error.

    """,
    run: runCheck
)

private func runCheck(_ raw: [String]) throws -> Int32 {
    let args = try Arguments(raw, valued: [], flags: ["json"])
    if args.flag("help") { return printUsage(checkCommand) }
    guard !args.positionals.isEmpty else { throw UsageError("give at least one FILE") }
    var status: Int32 = 0
    for path in args.positionals {
        var file: DirectoryFile? = nil
        var problem: String? = nil
        do {
            let opened = try DirectoryFile(path: path)
            file = opened
            try opened.verify()
        } catch {
            problem = "\(error)"
            status = 1
        }
        if args.flag("json") {
            var w = JSONWriter()
            w.beginObject()
            w.field("file", path)
            w.field("ok", problem == nil)
            w.field("problem", problem)
            if let file {
                w.field("format_version", file.header.formatVersion)
                w.field("numbers", file.count)
                w.field("prefix_rules", file.prefixRuleCount)
                w.field("labels", file.labelTableCount)
                w.field("checksum", hex(file.header.contentChecksum))
                w.field("blocks", file.verifier?.blockCount ?? 0)
                w.field("block_size", file.header.blockSize)
            } else {
                for key in ["format_version", "numbers", "prefix_rules", "labels", "checksum", "blocks", "block_size"] { w.key(key); w.null() }
            }
            w.endObject()
            printJSON(w)
            continue
        }
        if let problem {
            printError(problem)
            continue
        }
        guard let file else { continue }
        var out = OutputBuffer(fd: 1)
        let blocks = file.verifier.map { "\(plural($0.blockCount, "block")) of \(file.header.blockSize) bytes" } ?? "one content checksum"
        out.append("\(path): ok (\(plural(file.count, "number")), \(plural(file.prefixRuleCount, "prefix rule")), \(plural(file.labelTableCount, "label")), checksum \(hex(file.header.contentChecksum)); format \(file.header.formatVersion), \(blocks))\n")
        out.flush()
    }
    return status
}

let inspectCommand = Command(
    name: "inspect",
    summary: "show a directory file's header, checksums and pending journal changes",
    usage: """
    Usage: lookupd inspect [--json] [--config FILE] FILE

    Prints the header of a directory file (format version, directory version,
    counts, section offsets), checks the checksum of every block (format 2;
    the content checksum for format 1) and names the damaged ones, and shows
    its journal (FILE.journal): the changes made with lookupd add and remove,
    how many of them are merged into the file and which are pending (not yet
    compacted into it), with their age. For a file that feeds install into
    (or its .previous), also each feed's version, entry count and install
    time from its state file.

    Options:
      --json         print one JSON object
      --config FILE  the configuration naming the feeds (default: $LOOKUPD_CONFIG,
                     else \(ConfigLocation.defaultPath) if it exists)
      -h, --help     this text

    Exit status: 0 when the file is sound, 1 when it cannot be read, a block
    is damaged or its journal is damaged, 2 usage error.

    """,
    run: runInspect
)

/// Pending records listed by `inspect` before "... and N more".
private let inspectListedRecords = 20

private func runInspect(_ raw: [String]) throws -> Int32 {
    let args = try Arguments(raw, valued: ["config"], flags: ["json"])
    if args.flag("help") { return printUsage(inspectCommand) }
    guard args.positionals.count == 1 else { throw UsageError("give one FILE") }
    let path = args.positionals[0]
    let file: DirectoryFile
    do { file = try DirectoryFile(path: path) } catch { throw CommandFailure("\(error)") }
    let h = file.header
    let blocks = file.verifyBlocks()
    let journalPath = JournalFormat.path(forDirectory: path)
    var journal: (state: JournalState, tail: JournalTail?)? = nil
    var journalProblem: String? = nil
    do { journal = try JournalFollower.read(path: journalPath) } catch { journalProblem = "\(error)" }
    let now = Int64(time(nil))
    // What applies over the file now, and what does not (merged into it, or ended).
    let pending = journal.map { $0.state.pending(over: h, at: now) } ?? []
    let expiring = journal.map { s in s.state.latest.values.filter { $0.isTemporary && $0.isLive(at: now) }.count } ?? 0
    let expired = journal?.state.expired(at: now).count ?? 0
    let merged = journal.map { s in s.state.latest.keys.filter { key in
        s.state.applying(key, over: h, at: now) == nil && s.state.lasting(key).map { $0.sequence <= s.state.mergedThrough(h) } == true
    }.count } ?? 0
    let feeds = try feedSummaries(installedInto: path, explicitConfig: try args.value("config"))
    var lengths: [Int] = []
    for l in 1...15 where h.prefixLengthMask & (1 << UInt32(l)) != 0 { lengths.append(l) }
    let damaged = blocks.total > 0
    if args.flag("json") {
        var w = JSONWriter()
        w.beginObject()
        w.field("file", path)
        w.field("format_version", h.formatVersion)
        w.field("directory_version", h.directoryVersion)
        w.field("file_size", h.fileSize)
        w.field("numbers", h.entryCount)
        w.field("prefix_rules", h.prefixCount)
        w.field("labels", h.labelCount)
        w.field("blocking", h.blockedCount)
        w.field("identifying", h.identifiedCount)
        w.key("prefix_lengths")
        w.beginArray()
        for l in lengths { w.number(l) }
        w.endArray()
        w.field("content_checksum", hex(h.contentChecksum))
        w.field("header_checksum", hex(h.headerChecksum))
        w.field("block_size", h.blockSize)
        w.field("blocks", h.blockCount)
        w.field("damaged_blocks", blocks.total)
        w.field("journal_id", hex(h.journalID))
        w.field("journal_sequence", h.journalSequence)
        w.key("numbering_plan")
        if let plan = h.plan {
            w.beginObject()
            w.field("region", "\(plan.region)")
            w.field("country_code", Int(plan.countryCode))
            w.field("default", plan.wasDefault)
            w.field("overrides", plan.hasOverrides)
            w.field("settings", hex32(plan.settingsFingerprint))
            w.field("metadata", hex32(plan.metadataFingerprint))
            w.endObject()
        } else {
            w.null()
        }
        w.field("content", damaged ? "damaged" : "ok")
        w.field("problem", blocks.damaged.first.map { "\($0)" })
        w.field("problems", strings: blocks.damaged.map { "\($0)" })
        w.key("journal")
        if let journalProblem {
            w.beginObject()
            w.field("path", journalPath)
            w.field("problem", journalProblem)
            w.endObject()
        } else if let journal {
            let state = journal.state
            w.beginObject()
            w.field("path", journalPath)
            w.field("format_version", state.version)
            w.field("changes", state.changeCount)
            w.field("merged", merged)
            w.field("pending", pending.count)
            w.field("expiring", expiring)
            w.field("expired", expired)
            w.field("last_record", state.lastSequence)
            w.key("pending_records")
            w.beginArray()
            for record in pending.sorted(by: { $0.sequence < $1.sequence }) {
                w.beginObject()
                w.field("record", record.sequence)
                w.field("match", record.pattern.description)
                switch record.operation {
                case .add(let blocked, let label, let allowed):
                    w.field("action", allowed ? "allow" : blocked ? "block" : "identify")
                    w.field("label", bytes: label)
                case .remove:
                    w.field("action", "remove")
                    w.field("label", nil as String?)
                }
                w.field("time", record.time)
                w.field("age_seconds", record.time == 0 ? nil : max(0, now - record.time))
                ChangeJSON.expiry(&w, record.expires)
                w.endObject()
            }
            w.endArray()
            w.field("torn_tail", journal.tail.map { "\($0)" })
            w.endObject()
        } else {
            w.null()
        }
        feedsJSON(&w, feeds)
        w.endObject()
        printJSON(w)
        return damaged || journalProblem != nil ? 1 : 0
    }
    var out = OutputBuffer(fd: 1)
    let state = damaged ? "DAMAGED" : "ok"
    let checksumLine = h.formatVersion >= 2
        ? "block checksums:    \(plural(Int(h.blockCount), "block")) of \(h.blockSize) bytes, \(damaged ? "\(blocks.total) DAMAGED" : "all ok"), root \(hex(h.contentChecksum))"
        : "content checksum:   \(hex(h.contentChecksum)) (\(state))"
    out.append("""
    file:               \(path)
    format version:     \(h.formatVersion)
    directory version:  \(h.directoryVersion)
    file size:          \(h.fileSize) bytes
    numbers:            \(h.entryCount)
    prefix rules:       \(h.prefixCount)\(lengths.isEmpty ? "" : " (lengths \(lengths.map(String.init).joined(separator: ", ")))")
    labels:             \(h.labelCount)
    blocking entries:   \(h.blockedCount)
    identifying:        \(h.identifiedCount)
    journal merged:     \(h.journalID == 0 ? "none" : "records through \(h.journalSequence) of journal \(hex(h.journalID))")
    numbering plan:     \(planText(h.plan))
    sections:           keys @\(h.keysOffset), values @\(h.valuesOffset), prefixes @\(h.prefixesOffset), label index @\(h.labelIndexOffset), label data @\(h.labelDataOffset) (\(h.labelDataSize) bytes)
    header checksum:    \(hex(h.headerChecksum)) (ok)
    \(checksumLine)

    """)
    for problem in blocks.damaged { out.append("problem:            \(problem)\n") }
    if blocks.total > blocks.damaged.count { out.append("                    ... and \(blocks.total - blocks.damaged.count) more damaged blocks\n") }
    if let journalProblem {
        out.append("journal:            \(journalProblem)\n")
    } else if let journal {
        let s = journal.state
        var counts = "\(plural(s.changeCount, "change")), \(merged) merged into the file, \(pending.count) pending"
        if expiring > 0 { counts += ", \(expiring) expiring" }
        if expired > 0 { counts += ", \(expired) ended (lookupd compact drops \(expired == 1 ? "it" : "them"))" }
        out.append("journal:            \(journalPath) (format \(s.version)): \(counts)\n")
        let listed = pending.sorted { $0.sequence < $1.sequence }
        for record in listed.prefix(inspectListedRecords) {
            let until = record.expires == 0 ? "" : ", until \(TimeText.rfc3339(record.expires))"
            out.append("  pending record \(record.sequence): \(record.pattern) \(describeOperation(record.operation))\(until), \(record.time == 0 ? "age unknown" : "\(formatAge(now - record.time)) ago")\n")
        }
        if listed.count > inspectListedRecords { out.append("  ... and \(listed.count - inspectListedRecords) more pending records\n") }
        if let tail = journal.tail { out.append("  torn last record (ignored): \(tail)\n") }
    } else {
        out.append("journal:            none\n")
    }
    appendFeedsText(&out, feeds)
    out.flush()
    return damaged || journalProblem != nil ? 1 : 0
}

func describeOperation(_ operation: JournalOperation) -> String {
    switch operation {
    case .add(let blocked, let label, let allowed):
        return JournalTarget.describe(blocked: blocked, label: label, allowed: allowed)
    case .remove:
        return "removed"
    }
}

/// "42 s", "5 min", "3 h 20 min", "4 days".
func formatAge(_ seconds: Int64) -> String {
    let s = max(0, seconds)
    if s < 60 { return "\(s) s" }
    if s < 3600 { return "\(s / 60) min" }
    if s < 86400 { return "\(s / 3600) h \(s % 3600 / 60) min" }
    return "\(s / 86400) day\(s / 86400 == 1 ? "" : "s")"
}

/// What inspect says of the plan a file records, against the libphonenumber data in use.
func planText(_ plan: RecordedPlan?) -> String {
    guard let plan else { return "not recorded (compiled before lookupd recorded it)" }
    let current = NumberingData.installed.fingerprint
    let data = UInt32(truncatingIfNeeded: current) == plan.metadataFingerprint
        ? "libphonenumber metadata \(hex32(plan.metadataFingerprint)), the same as now"
        : "libphonenumber metadata \(hex32(plan.metadataFingerprint)) (now \(hex32(UInt32(truncatingIfNeeded: current))))"
    return "\(plan); \(data)"
}

func hex32(_ v: UInt32) -> String {
    let s = String(v, radix: 16)
    return String(repeating: "0", count: 8 - s.count) + s
}

let exportCommand = Command(
    name: "export",
    summary: "write a directory (with its journal changes) back out as CSV",
    usage: """
    Usage: lookupd export [--base-only] [-o OUT.csv] FILE

    Writes what a directory answers as CSV (number,action,label): the
    entries of the directory file with the changes of its journal
    (FILE.journal, lookupd add and remove) that are not compacted into it
    yet, in ascending number order, then the prefix rules. The file is
    verified completely first; a damaged file is refused and nothing is
    written. Compiling the output again gives a byte-identical directory
    file (with the same --directory-version) when no change is pending.

    Options:
      --base-only            the directory file alone, without pending journal changes
      -o, --output OUT.csv   write there instead of standard output
      -h, --help             this text

    Exit status: 0 written, 1 the file is damaged or cannot be read, 2 usage error.

    """,
    run: runExport
)

private func runExport(_ raw: [String]) throws -> Int32 {
    let args = try Arguments(raw, valued: ["output"], flags: ["base-only"], aliases: ["o": "output"])
    if args.flag("help") { return printUsage(exportCommand) }
    guard args.positionals.count == 1 else { throw UsageError("give one FILE") }
    let path = args.positionals[0]
    let file: DirectoryFile
    do {
        file = try DirectoryFile(path: path)
        // All of it before the first line: a damaged file must not come out
        // as a CSV that compiles into a sound-looking one.
        try file.verify()
    } catch {
        throw CommandFailure("\(error)")
    }
    var pending: [JournalRecord] = []
    var leftOut = 0
    if !args.flag("base-only") {
        do {
            if let journal = try JournalFollower.read(path: JournalFormat.path(forDirectory: path)) {
                // The lasting changes: an expiring one ends in the journal, and
                // a list compiled from this output would make it last for good.
                pending = journal.state.lastingPending(over: file.header)
                let now = Int64(time(nil))
                leftOut = journal.state.latest.values.filter { $0.isTemporary && $0.isLive(at: now) }.count
            }
        } catch {
            throw CommandFailure("\(error) (lookupd export --base-only writes the directory file alone)")
        }
    }
    /// Nil when written; the file was verified, so a damaged block here
    /// would mean it changed under us.
    func writeCSV(_ out: inout OutputBuffer) -> DirectoryError? {
        out.append("number,action,label\n")
        do {
            try DirectoryUpdates.forEachEffectiveEntry(file, pending: pending) { pattern, blocked, allowed, label in
                out.append(pattern.description)
                out.append(allowed ? ",allow," : blocked ? ",block," : ",identify,")
                if let label { appendCSVField(&out, label) }
                out.append(byte: 0x0A)
                out.flushIfLarge()
            }
        } catch {
            return error
        }
        out.flush()
        return nil
    }
    defer {
        if !pending.isEmpty {
            printNote("\(plural(pending.count, "journal change")) not yet compacted into \(path) included (--base-only leaves them out)")
        }
        if leftOut > 0 {
            printNote("\(plural(leftOut, "expiring journal change")) left out: \(leftOut == 1 ? "it ends" : "they end") in the journal")
        }
    }
    guard let output = try args.value("output") else {
        var out = OutputBuffer(fd: 1)
        if let error = writeCSV(&out) { throw CommandFailure("\(error)") }
        return 0
    }
    var damage: DirectoryError? = nil
    do {
        try writeFileAtomically(output) { (fd, temporary) throws(SystemCallError) in
            var out = OutputBuffer(fd: fd.rawValue, exitOnError: false)
            damage = writeCSV(&out)
            if damage != nil { throw SystemCallError(path: temporary, operation: "write", errno: .ioError) }
            if let failure = out.failure { throw SystemCallError(path: temporary, operation: "write", errno: failure) }
        }
    } catch {
        if let damage { throw CommandFailure("\(damage); \(output) not written") }
        throw CommandFailure("\(output): not written, the file there is unchanged: \(error)")
    }
    return 0
}

/// RFC 4180 quoting, only when the field needs it.
private func appendCSVField(_ out: inout OutputBuffer, _ bytes: UnsafeRawBufferPointer) {
    let needsQuotes = bytes.contains { $0 == UInt8(ascii: ",") || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: ";") || $0 == 0x09 }
        || bytes.first == 0x20 || bytes.last == 0x20 || bytes.first == UInt8(ascii: "#")
    guard needsQuotes else { out.append(bytes); return }
    out.append(byte: UInt8(ascii: "\""))
    for c in bytes {
        if c == UInt8(ascii: "\"") { out.append(byte: c) }
        out.append(byte: c)
    }
    out.append(byte: UInt8(ascii: "\""))
}

func printUsage(_ command: Command) -> Int32 {
    var out = OutputBuffer(fd: 1)
    out.append(command.usage)
    out.flush()
    return 0
}

func hex(_ v: UInt64) -> String {
    let s = String(v, radix: 16)
    return String(repeating: "0", count: 16 - s.count) + s
}
