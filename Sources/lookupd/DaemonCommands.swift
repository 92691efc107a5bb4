import Configuration
import Daemon
import Glibc

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
    printed), 2 usage error.

    """,
    run: runServe
)

private func runServe(_ raw: [String]) throws -> Int32 {
    let args = try Arguments(raw, valued: ["config"], flags: [])
    if args.flag("help") { return printUsage(serveCommand) }
    guard args.positionals.isEmpty else { throw UsageError("unexpected argument '\(args.positionals[0])'") }
    let path = try ConfigLocation.path(explicit: try args.value("config"))
    do {
        let service = try Service(options: Service.Options(configPath: path, version: lookupdVersion))
        return try service.run()
    } catch {
        throw CommandFailure("\(error)")
    }
}

let statsCommand = Command(
    name: "stats",
    summary: "print the running daemon's counters (Prometheus text format)",
    usage: """
    Usage: lookupd stats [--config FILE | --socket PATH]

    Asks the running daemon, over its control socket, for its counters:
    requests by method and transport, verdicts, responses by code, malformed
    and refused requests, TCP events, reloads, directory versions and entry
    counts, per worker. Printed in the Prometheus text exposition format.

    Options:
      --config FILE   take the control socket from this configuration
      --socket PATH   the control socket itself
      -h, --help      this text

    """,
    run: { raw in try runControl(raw, command: "stats", usage: statsCommand) }
)

let reloadCommand = Command(
    name: "reload",
    summary: "make the running daemon reload its configuration and lists",
    usage: """
    Usage: lookupd reload [--config FILE | --socket PATH]

    Asks the running daemon to re-read its configuration, contacts and
    directories (like SIGHUP) and waits for the outcome. The new set is
    verified completely before it replaces the old one; if anything is
    wrong, the daemon keeps serving the old set and this command prints why.

    Exit status: 0 reloaded, 1 refused or no daemon, 2 usage error.

    """,
    run: { raw in try runControl(raw, command: "reload", usage: reloadCommand) }
)

private func runControl(_ raw: [String], command: String, usage: Command) throws -> Int32 {
    let args = try Arguments(raw, valued: ["config", "socket"], flags: [])
    if args.flag("help") { return printUsage(usage) }
    guard args.positionals.isEmpty else { throw UsageError("unexpected argument '\(args.positionals[0])'") }
    var socket = try args.value("socket")
    if socket == nil {
        socket = try ConfigLocation.load(explicit: try args.value("config")).controlSocket
    }
    let answer: String
    do {
        answer = try ControlClient.send(command, to: socket!)
    } catch {
        throw CommandFailure("\(error)")
    }
    var out = OutputBuffer(fd: answer.hasPrefix("error:") ? 2 : 1)
    out.append(answer)
    out.flush()
    return answer.hasPrefix("error:") ? 1 : 0
}
