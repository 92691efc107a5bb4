import Configuration
import Loading

let checkConfigCommand = Command(
    name: "check-config",
    summary: "check a configuration and every file it names, all errors at once",
    usage: """
    Usage: lookupd check-config [--json] [--config FILE]

    Reads the configuration as lookupd serve would and reports every error
    of the file at once (FILE:LINE each), then opens and verifies every
    file it names: each directory completely (checksums and structure)
    with its journal, the contacts files and contacts-dir, and the folders
    feeds install into. When all is well it prints what is in force: the
    numbering plan, the listeners, the directories and the contacts.

    Options:
      --json           one JSON object, sound or not (lookupd(8) JSON OUTPUT)
      --config FILE    the configuration (default: $LOOKUPD_CONFIG, else
                       /etc/lookupd/lookupd.conf)
      -h, --help       this text

    Exit status: 0 when the configuration and every file are sound, 1 when
    anything is wrong, 2 usage error.

    """,
    run: runCheckConfig
)

private func runCheckConfig(_ raw: [String]) throws -> Int32 {
    let args = try Arguments(raw, valued: ["config"], flags: ["json"])
    if args.flag("help") { return printUsage(checkConfigCommand) }
    guard args.positionals.isEmpty else { throw UsageError("unexpected argument '\(args.positionals[0])'") }
    let path = try ConfigLocation.path(explicit: try args.value("config"))
    let check = ConfigCheck(path: path)
    if args.flag("json") {
        var out = OutputBuffer(fd: 1)
        out.append(check.json())
        out.append("\n")
        out.flush()
        return check.sound ? 0 : 1
    }
    for warning in check.warnings { printWarning("\(warning)") }
    var err = OutputBuffer(fd: 2)
    err.append(check.errorText)
    err.flush()
    var out = OutputBuffer(fd: 1)
    out.append(check.summaryText)
    out.flush()
    return check.sound ? 0 : 1
}
