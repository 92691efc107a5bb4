import Directory
import Glibc
import SystemCalls

let checkCommand = Command(
    name: "check",
    summary: "verify directory files completely (checksums and structure)",
    usage: """
    Usage: lookupd check FILE...

    Verifies each directory file: magic number, format version, header and
    content checksums, entries in ascending order without duplicates, valid
    labels and prefix rules, and the counts in the header. Prints one line per
    file; problems go to standard error.

    Exit status: 0 when every file is sound, 1 when any is not, 2 usage error.

    """,
    run: runCheck
)

private func runCheck(_ raw: [String]) throws -> Int32 {
    let args = try Arguments(raw, valued: [], flags: [])
    if args.flag("help") { return printUsage(checkCommand) }
    guard !args.positionals.isEmpty else { throw UsageError("give at least one FILE") }
    var status: Int32 = 0
    for path in args.positionals {
        do {
            let file = try DirectoryFile(path: path)
            try file.verify()
            var out = OutputBuffer(fd: 1)
            out.append("\(path): ok (\(file.count) numbers, \(file.prefixRuleCount) prefix rules, \(file.labelTableCount) labels, checksum \(hex(file.header.contentChecksum)))\n")
            out.flush()
        } catch {
            printError("\(error)")
            status = 1
        }
    }
    return status
}

let inspectCommand = Command(
    name: "inspect",
    summary: "show a directory file's header, counts and checksum state",
    usage: """
    Usage: lookupd inspect [--json] [--config FILE] FILE

    Prints the header of a directory file (format version, directory version,
    counts, section offsets) and whether its content checksum matches. For a
    file that feeds install into (or its .previous), also each feed's
    version, entry count and install time from its state file.

    Options:
      --json         print one JSON object
      --config FILE  the configuration naming the feeds (default: $LOOKUPD_CONFIG,
                     else \(ConfigLocation.defaultPath) if it exists)
      -h, --help     this text

    Exit status: 0 when the file is sound, 1 when it cannot be read or its
    content is damaged, 2 usage error.

    """,
    run: runInspect
)

private func runInspect(_ raw: [String]) throws -> Int32 {
    let args = try Arguments(raw, valued: ["config"], flags: ["json"])
    if args.flag("help") { return printUsage(inspectCommand) }
    guard args.positionals.count == 1 else { throw UsageError("give one FILE") }
    let path = args.positionals[0]
    let file: DirectoryFile
    do { file = try DirectoryFile(path: path) } catch { throw CommandFailure("\(error)") }
    let h = file.header
    var problem: String? = nil
    do { try file.verify() } catch { problem = "\(error)" }
    let feeds = try feedSummaries(installedInto: path, explicitConfig: try args.value("config"))
    var lengths: [Int] = []
    for l in 1...15 where h.prefixLengthMask & (1 << UInt32(l)) != 0 { lengths.append(l) }
    var out = OutputBuffer(fd: 1)
    if args.flag("json") {
        out.append("{\"file\":")
        out.appendJSONString(path)
        out.append(",\"format_version\":\(h.formatVersion),\"directory_version\":\(h.directoryVersion),\"file_size\":\(h.fileSize)")
        out.append(",\"numbers\":\(h.entryCount),\"prefix_rules\":\(h.prefixCount),\"labels\":\(h.labelCount)")
        out.append(",\"blocking\":\(h.blockedCount),\"identifying\":\(h.identifiedCount)")
        out.append(",\"prefix_lengths\":[\(lengths.map(String.init).joined(separator: ","))]")
        out.append(",\"content_checksum\":\"\(hex(h.contentChecksum))\",\"header_checksum\":\"\(hex(h.headerChecksum))\"")
        out.append(",\"journal_id\":\"\(hex(h.journalID))\",\"journal_sequence\":\(h.journalSequence)")
        out.append(",\"content\":")
        out.appendJSONString(problem == nil ? "ok" : "damaged")
        if let problem { out.append(",\"problem\":"); out.appendJSONString(problem) }
        appendFeedsJSON(&out, feeds)
        out.append("}\n")
    } else {
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
        sections:           keys @\(h.keysOffset), values @\(h.valuesOffset), prefixes @\(h.prefixesOffset), label index @\(h.labelIndexOffset), label data @\(h.labelDataOffset) (\(h.labelDataSize) bytes)
        header checksum:    \(hex(h.headerChecksum)) (ok)
        content checksum:   \(hex(h.contentChecksum)) (\(problem == nil ? "ok" : "DAMAGED"))

        """)
        if let problem { out.append("problem:            \(problem)\n") }
        appendFeedsText(&out, feeds)
    }
    out.flush()
    return problem == nil ? 0 : 1
}

let exportCommand = Command(
    name: "export",
    summary: "write a directory file back out as CSV",
    usage: """
    Usage: lookupd export [-o OUT.csv] FILE

    Writes the entries of a directory file as CSV (number,action,label), in
    ascending number order, then the prefix rules. Compiling the output again
    gives a byte-identical directory file (with the same --directory-version).

    Options:
      -o, --output OUT.csv   write there instead of standard output
      -h, --help             this text

    """,
    run: runExport
)

private func runExport(_ raw: [String]) throws -> Int32 {
    let args = try Arguments(raw, valued: ["output"], flags: [], aliases: ["o": "output"])
    if args.flag("help") { return printUsage(exportCommand) }
    guard args.positionals.count == 1 else { throw UsageError("give one FILE") }
    let file: DirectoryFile
    do { file = try DirectoryFile(path: args.positionals[0]) } catch { throw CommandFailure("\(error)") }
    func writeCSV(_ out: inout OutputBuffer) {
        out.append("number,action,label\n")
        file.forEachEntry { entry in
            out.append(entry.match.description)
            out.append(entry.blocked ? ",block," : ",identify,")
            if let label = entry.label { appendCSVField(&out, file.labelBytes(label)) }
            out.append(byte: 0x0A)
            out.flushIfLarge()
        }
        out.flush()
    }
    guard let output = try args.value("output") else {
        var out = OutputBuffer(fd: 1)
        writeCSV(&out)
        return 0
    }
    do {
        try writeFileAtomically(output) { (fd, temporary) throws(SystemCallError) in
            var out = OutputBuffer(fd: fd.rawValue, exitOnError: false)
            writeCSV(&out)
            if let failure = out.failure { throw SystemCallError(path: temporary, operation: "write", errno: failure) }
        }
    } catch {
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
