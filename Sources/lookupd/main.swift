import Directory
import Glibc

// The `lookupd` command: a thin layer that parses arguments and calls into
// Directory, Screening, Configuration and Daemon. Exit status: 0 success,
// 1 error, 2 usage.

signal(SIGPIPE, SIG_IGN)

let arguments = Array(CommandLine.arguments.dropFirst())
let commands: [Command] = Command.all

func usageOverview() -> String {
    var text = """
    lookupd \(lookupdVersion): caller-ID lookup daemon for SIP telephony

    Usage: lookupd COMMAND [OPTIONS]

    Commands:

    """
    for command in commands {
        let padded = command.name + String(repeating: " ", count: max(1, 10 - command.name.count))
        text += "  \(padded)\(command.summary)\n"
    }
    text += """

    Run 'lookupd COMMAND --help' for a command's options.
    Configuration: --config FILE, else $LOOKUPD_CONFIG, else \(ConfigLocation.defaultPath).

    """
    return text
}

guard let first = arguments.first else {
    var out = OutputBuffer(fd: 2)
    out.append(usageOverview())
    out.flush()
    exit(2)
}

switch first {
case "--help", "-h", "help":
    if arguments.count > 1, let command = commands.first(where: { $0.name == arguments[1] }) {
        var out = OutputBuffer(fd: 1)
        out.append(command.usage)
        out.flush()
    } else {
        var out = OutputBuffer(fd: 1)
        out.append(usageOverview())
        out.flush()
    }
    exit(0)
case "--version", "-V":
    var out = OutputBuffer(fd: 1)
    out.append("lookupd \(lookupdVersion)\n")
    // Where the numbering plans come from (docs/NUMBERING.md "Data freshness").
    let numbering = NumberingData.installed
    out.append("numbering plans: \(numbering.versionDescription) (\(numbering.libraryPath))\n")
    switch numbering.source {
    case .cache(let path): out.append("numbering cache: read \(path)\n")
    case .library(let path?, let note): out.append("numbering cache: written \(path) (\(note ?? "absent"))\n")
    case .library(nil, let note): out.append("numbering cache: none (\(note ?? "no folder"))\n")
    }
    // Every calling code's rules, read now: a newer library whose rules lookupd cannot read
    // shows here (and the numbers under such a rule may be judged wrongly).
    numbering.prepareAll()
    for problem in numbering.buildProblems { out.append("numbering plans: rule not read: \(problem)\n") }
    out.append("carrier names: \(Attribution.describeCarrierData(Attribution.defaultCarrierFolder))\n")
    out.flush()
    exit(0)
default:
    break
}

guard let command = commands.first(where: { $0.name == first }) else {
    let suggestion = closest(first, among: commands.map(\.name)).map { " (did you mean '\($0)'?)" } ?? ""
    printError("unknown command '\(first)'\(suggestion); run 'lookupd --help' for the list")
    exit(2)
}

do {
    let status = try command.run(Array(arguments.dropFirst()))
    exit(status)
} catch let error as UsageError {
    var out = OutputBuffer(fd: 2)
    out.append("lookupd: error: \(command.name): \(error.message)\n")
    let synopsis = command.usage.split(separator: "\n", omittingEmptySubsequences: false).prefix { !$0.isEmpty }
    out.append(synopsis.joined(separator: "\n") + "\n")
    out.append("Run 'lookupd \(command.name) --help' for the options.\n")
    out.flush()
    exit(2)
} catch let error as CommandFailure {
    printError(error.message)
    exit(1)
} catch {
    printError("\(error)")
    exit(1)
}
