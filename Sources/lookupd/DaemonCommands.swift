import Configuration
import Directory
import Daemon
import Glibc
import TextFormats

let serveCommand = Command(
    name: "serve",
    summary: "run the SIP screening daemon in the foreground",
    usage: """
    Usage: lookupd serve [--config FILE]

    Listens on the configured SIP addresses (UDP and TCP, IPv4 and IPv6) and
    answers every request as a stateless redirect server: an initial INVITE
    gets the verdict as a final response (blocked: 603/607/608/603+;
    identified or contact: 302 with the label in P-Asserted-Identity and
    X-Caller-Label; unknown: 302, 404 or 503), OPTIONS gets 200, ACK and
    CANCEL are absorbed. With mode = proxy it is a stateless proxy in front
    of the upstream PBX instead: blocked callers are answered as above, every
    other request is forwarded (initial INVITEs with the label in the From
    display name, per label-format, and in X-Caller-Label), and responses
    go back along the Via path; a dead upstream gets callers a 503. Runs in
    the foreground and logs to standard error with journald priority
    prefixes.

    Changes made with lookupd add and lookupd remove (each directory's
    journal), and files written by lookupd compact, are applied within a
    second without a reload.

    Signals: SIGHUP reloads (config, contacts, directories; fully verified
    before it is swapped in; a failed reload keeps the old set);
    SIGTERM/SIGINT stop cleanly. With systemd (Type=notify) it reports
    READY=1, RELOADING=1, STATUS= and WATCHDOG=1.

    Options:
      --config FILE   configuration (default: $LOOKUPD_CONFIG, else \(ConfigLocation.defaultPath))
      -h, --help      this text

    Exit status: 0 after a clean stop, 1 when it cannot start (the reason is
    printed: every error of the configuration at once, FILE:LINE each, as
    lookupd check-config prints them), 2 usage error.

    """,
    run: runServe
)

private func runServe(_ raw: [String]) throws -> Int32 {
    let args = try Arguments(raw, valued: ["config"], flags: [])
    if args.flag("help") { return printUsage(serveCommand) }
    guard args.positionals.isEmpty else { throw UsageError("unexpected argument '\(args.positionals[0])'") }
    let path = try ConfigLocation.path(explicit: try args.value("config"))
    NumberingData.readAutomataCacheOnly()
    do {
        let service = try Service(options: Service.Options(configPath: path, version: lookupdVersion))
        return try service.run()
    } catch {
        guard !error.diagnostics.isEmpty else { throw CommandFailure("\(error)") }
        // As check-config prints them: each FILE:LINE, then the count.
        var err = OutputBuffer(fd: 2)
        for diagnostic in error.diagnostics { err.append(diagnostic.description + "\n") }
        err.flush()
        throw CommandFailure("\(plural(error.diagnostics.count, "error")) in \(path)")
    }
}

let statsCommand = Command(
    name: "stats",
    summary: "print the running daemon's counters (Prometheus text, --json or --summary)",
    usage: """
    Usage: lookupd stats [--json] [--summary] [--config FILE | --socket PATH]

    Asks the running daemon, over its control socket, for its counters:
    requests by method and transport, verdicts, responses by code, malformed
    and refused requests, TCP events, reloads, directory versions and entry
    counts, per worker. Printed in the Prometheus text exposition format
    (what /metrics serves), or with --json as one JSON object.

    --summary prints a short table instead: calls per verdict in the last
    minute, the last hour and since the daemon started (exact to a second).

    Options:
      --json          one JSON object (lookupd(8) JSON OUTPUT); with --summary, the summary's
      --summary       calls per verdict: last minute, last hour, since start
      --config FILE   take the control socket from this configuration
      --socket PATH   the control socket itself
      -h, --help      this text

    Exit status: 0 printed, 1 no daemon (or it refused), 2 usage error.

    """,
    run: runStats
)

let reloadCommand = Command(
    name: "reload",
    summary: "make the running daemon reload its configuration and lists",
    usage: """
    Usage: lookupd reload [--json] [--config FILE | --socket PATH]

    Asks the running daemon to re-read its configuration, contacts and
    directories (like SIGHUP) and waits for the outcome. The new set is
    verified completely before it replaces the old one; if anything is
    wrong, the daemon keeps serving the old set and this command prints why.

    Prints what the reload did: the changed configuration keys now in force
    (applied), those that take effect only on restart (listen, workers, udp-steering,
    control-socket, state-directory, max-message-size, http-listen, log-file,
    log-file-max-size, log-file-keep, mode, upstream: the old values stay in
    force meanwhile), every line or file of a contacts list and every
    callee's block list (blocks-dir) it left out (skipped), what it noted that left nothing out (note: a torn journal
    record, a directory compiled under another plan), and the directories
    served.

    Options:
      --json          one JSON object (lookupd(8) JSON OUTPUT)
      --config FILE   take the control socket from this configuration
      --socket PATH   the control socket itself
      -h, --help      this text

    Exit status: 0 reloaded and everything applied, 1 refused (the old set
    stays) or no daemon, 2 usage error, 3 reloaded but a changed key waits
    for a restart, 4 reloaded but contacts or callees' block lists were left
    out (and nothing waits).

    """,
    run: runReload
)

/// The control socket a command talks to: `--socket`, else the configuration's.
private func controlSocket(_ args: Arguments) throws -> String {
    if let socket = try args.value("socket") { return socket }
    return try ConfigLocation.load(explicit: try args.value("config")).controlSocket
}

/// One command over the control socket; an `error:` answer is the daemon's refusal.
private func ask(_ command: String, _ socket: String) throws -> String {
    let answer: String
    do {
        answer = try ControlClient.send(command, to: socket)
    } catch {
        throw CommandFailure("\(error)")
    }
    if answer.hasPrefix("error:") { throw CommandFailure(String(answer.dropFirst(6)).trimmingSpaces) }
    return answer
}

private func runStats(_ raw: [String]) throws -> Int32 {
    let args = try Arguments(raw, valued: ["config", "socket"], flags: ["json", "summary"])
    if args.flag("help") { return printUsage(statsCommand) }
    guard args.positionals.isEmpty else { throw UsageError("unexpected argument '\(args.positionals[0])'") }
    let socket = try controlSocket(args)
    let json = args.flag("json"), summary = args.flag("summary")
    let answer = try ask(summary ? "stats summary" : json ? "stats json" : "stats", socket)
    var out = OutputBuffer(fd: 1)
    if summary && !json {
        guard let table = (try? JSONValue.parse(answer)).flatMap(StatsSummary.table) else {
            throw CommandFailure("the daemon's summary is not one this lookupd reads: \(answer.prefix(80))")
        }
        out.append(table)
    } else {
        out.append(answer)
    }
    out.flush()
    return 0
}

private func runReload(_ raw: [String]) throws -> Int32 {
    let args = try Arguments(raw, valued: ["config", "socket"], flags: ["json"])
    if args.flag("help") { return printUsage(reloadCommand) }
    guard args.positionals.isEmpty else { throw UsageError("unexpected argument '\(args.positionals[0])'") }
    let socket = try controlSocket(args)
    let answer: String
    do {
        answer = try ControlClient.send("reload json", to: socket)
    } catch {
        throw CommandFailure("\(error)")
    }
    guard let report = (try? JSONValue.parse(answer)).flatMap(ReloadReport.init(json:)) else {
        // A refusal before any reload ran (no reload thread), or a daemon of another version.
        var err = OutputBuffer(fd: 2)
        err.append(answer.hasPrefix("error:") ? answer : "error: the daemon's answer is not a reload report: \(answer.prefix(200))\n")
        err.flush()
        return 1
    }
    var out = OutputBuffer(fd: args.flag("json") || report.outcome != .failed ? 1 : 2)
    out.append(args.flag("json") ? answer : report.text)
    out.flush()
    return report.exitStatus
}

extension String {
    var trimmingSpaces: String {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\n" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\n" { s.removeLast() }
        return String(s)
    }
}
