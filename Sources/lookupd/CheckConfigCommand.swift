import Configuration
import Directory
import Glibc
import Loading

let checkConfigCommand = Command(
    name: "check-config",
    summary: "check a configuration and every file it names, all errors at once",
    usage: """
    Usage: lookupd check-config [--config FILE]

    Reads the configuration as lookupd serve would and reports every error
    of the file at once (FILE:LINE each), then opens and verifies every
    file it names: each directory completely (checksums and structure)
    with its journal, the contacts files and contacts-dir, and the folders
    feeds install into. When all is well it prints what is in force: the
    numbering plan, the listeners, the directories and the contacts.

    Options:
      --config FILE    the configuration (default: $LOOKUPD_CONFIG, else
                       /etc/lookupd/lookupd.conf)
      -h, --help       this text

    Exit status: 0 when the configuration and every file are sound, 1 when
    anything is wrong, 2 usage error.

    """,
    run: runCheckConfig
)

private func runCheckConfig(_ raw: [String]) throws -> Int32 {
    let args = try Arguments(raw, valued: ["config"], flags: [])
    if args.flag("help") { return printUsage(checkConfigCommand) }
    guard args.positionals.isEmpty else { throw UsageError("unexpected argument '\(args.positionals[0])'") }
    let path = try ConfigLocation.path(explicit: try args.value("config"))
    let checked = ConfigParser.check(path: path)
    var err = OutputBuffer(fd: 2)
    guard let config = checked.config else {
        for diagnostic in checked.errors { err.append(diagnostic.description + "\n") }
        err.append("lookupd: error: \(plural(checked.errors.count, "error")) in \(path)\n")
        err.flush()
        return 1
    }
    var problems: [String] = []
    var lines: [String] = []
    for directory in config.directories {
        do {
            let file = try DirectoryFile(path: directory.path)
            try file.verify()
            var line = "directory \(directory.name): \(directory.path): \(plural(file.count, "number")), \(plural(file.prefixRuleCount, "prefix rule"))"
            let journalPath = JournalFormat.path(forDirectory: directory.path)
            do {
                if let journal = try JournalFollower.read(path: journalPath) {
                    line += "; journal: \(plural(journal.state.changeCount, "change"))"
                    if let tail = journal.tail { problems.append("\(journalPath): torn last record (the next change cuts it off): \(tail)") }
                }
            } catch {
                problems.append("\(error)")
            }
            lines.append(line)
        } catch {
            problems.append("directory \(directory.name): \(error)")
        }
    }
    // Contacts, contacts-dir and the rest of what serving loads, read as the daemon reads them.
    do {
        let loaded = try ScreeningLoader.load(config, verify: false)
        for warning in loaded.warnings { printWarning("\(warning)") }
        let contacts = config.contacts.count + (config.contactsDirectory == nil ? 0 : 1)
        if contacts > 0 { lines.append("contacts: \(config.contacts.joined(separator: ", "))\(config.contactsDirectory.map { " and \($0)/" } ?? "")") }
    } catch {
        let text = "\(error)"
        if !problems.contains(where: { text.contains($0) || $0.contains(text) }) { problems.append(text) }
    }
    for feed in config.feeds {
        let target = feed.into ?? config.directories.first?.path ?? ""
        let folder = target.contains("/") ? String(target[..<target.lastIndex(of: "/")!]) : "."
        if access(folder.isEmpty ? "/" : folder, W_OK) != 0 {
            problems.append("feed \(feed.name): cannot write into \(folder) (where it installs \(target)): \(String(cString: strerror(errno)))")
        }
    }
    if !problems.isEmpty {
        for problem in problems { err.append("lookupd: error: \(problem)\n") }
        err.append("lookupd: error: \(plural(problems.count, "problem")) with the files \(path) names\n")
        err.flush()
        return 1
    }
    var out = OutputBuffer(fd: 1)
    out.append("\(path): ok\n")
    let plan = config.plan
    out.append("numbering plan: \(plan)\n")
    for address in config.listen { out.append("listen: \(address)\n") }
    if config.listen.isEmpty { out.append("listen: none (lookupd serve needs a listen line)\n") }
    out.append("mode: \(config.mode.rawValue)\n")
    if let http = config.operations.httpListen {
        out.append("http-listen: \(String(http.description.dropFirst("tcp:".count)))\(config.operations.httpWriteTokenFile == nil ? "" : " (with the write API)")\n")
    }
    for line in lines { out.append(line + "\n") }
    out.flush()
    return 0
}
