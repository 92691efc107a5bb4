import Configuration
import Daemon
import Feeds
import Glibc
import SystemCalls

let updateCommand = Command(
    name: "update",
    summary: "download, check and install the configured directory feeds",
    usage: """
    Usage: lookupd update [OPTIONS] [FEED...]
           lookupd update --rollback FEED [--json]

    For each feed (every `feed =` line of the configuration, or the ones named):
    downloads the list over HTTP(S) with a conditional request (an unchanged
    feed costs one small request and changes nothing), checks the manifest,
    SHA-256 and sizes, unpacks gzip or zip, compiles and verifies every line,
    refuses a list that shrank more than max-shrink, then writes the new
    directory file beside the old one, verifies it, keeps the old one as
    FILE.previous and renames the new one into place. Feeds sharing an into=
    file are merged; for a number in several, the first configured feed wins.
    Finally asks the running daemon to reload (a daemon that is not running
    reads the new files when it starts). Whatever fails, the directory in
    force stays as it was. docs/FEEDS.md describes the feed options.

    Options:
      --config FILE      configuration (default: $LOOKUPD_CONFIG, else \(ConfigLocation.defaultPath))
      --force            download without conditional headers and reinstall even if unchanged
      --allow-shrink     accept a list that shrank more than its max-shrink, this once
      --rollback FEED    put back the directory file FEED's last install replaced
                         (with every feed merged into it); run again to undo
      --no-reload        do not ask the daemon to reload
      -q, --quiet        print only problems
      --json             print the outcome as one JSON object (lookupd(8)); problems
                         are printed on standard error as well
      -h, --help         this text

    Exit status: 0 every feed current, 1 a feed failed or the daemon refused
    the new lists, 2 usage error.

    """,
    run: runUpdate
)

private func runUpdate(_ raw: [String]) throws -> Int32 {
    let args = try Arguments(raw, valued: ["config", "rollback"], flags: ["force", "allow-shrink", "no-reload", "quiet", "json"],
                             aliases: ["q": "quiet"])
    if args.flag("help") { return printUsage(updateCommand) }
    let rollback = try args.value("rollback")
    if rollback != nil, !args.positionals.isEmpty || args.flag("force") || args.flag("allow-shrink") {
        throw UsageError("--rollback takes one FEED and no other feed or --force/--allow-shrink")
    }
    let config = try ConfigLocation.load(explicit: try args.value("config"), required: true)
    let quiet = args.flag("quiet")
    let json = args.flag("json")
    // With --json, every message goes into the object; problems are on standard error too.
    let messages = Locked<[(level: FeedLogLevel, message: String)]>([])
    // Under systemd, journald reads the <N> priority prefixes; on a terminal they are noise.
    let journal = getenv("JOURNAL_STREAM") != nil
    let socket = config.controlSocket
    let updater = FeedUpdater(config: config, log: { level, message in
        if json { messages.withLock { $0.append((level, message)) } }
        if (quiet || json) && level.rawValue > FeedLogLevel.warning.rawValue { return }
        var out = OutputBuffer(fd: level.rawValue <= FeedLogLevel.warning.rawValue ? 2 : 1)
        out.append(journal ? "<\(level.rawValue)>" : "")
        out.append(level == .error ? "lookupd: error: " : level == .warning ? "lookupd: warning: " : "")
        out.append(message + "\n")
        out.flush()
    }, reloader: { askDaemonToReload(socket) })

    let result: FeedUpdateResult
    do {
        if let rollback {
            result = try updater.rollback(feed: rollback, reload: !args.flag("no-reload"))
        } else {
            var options = FeedUpdateOptions()
            options.feeds = args.positionals
            options.force = args.flag("force")
            options.allowShrink = args.flag("allow-shrink")
            options.reload = !args.flag("no-reload")
            options.userAgent = "lookupd/\(lookupdVersion) (feed update)"
            result = try updater.update(options)
        }
    } catch {
        throw CommandFailure(error.message)
    }
    if json {
        var out = OutputBuffer(fd: 1)
        out.append(result.json(messages: messages.withLock { $0 }))
        out.append("\n")
        out.flush()
    }
    return result.succeeded ? 0 : 1
}

/// Reload through the control socket. No socket, or nobody listening on it, means no daemon
/// runs: the new files are in place for when it starts, which is no failure of the update.
private func askDaemonToReload(_ socket: String) -> ReloadOutcome {
    do {
        let answer = try ControlClient.send("reload", to: socket, timeout: 120)
        if answer.hasPrefix("error:") { return .failed(String(answer.dropFirst(6)).trimmingSpaces) }
        if answer.isEmpty { return .failed("no answer on \(socket)") }
        return .reloaded(answer)
    } catch {
        if error.code == ENOENT || error.code == ECONNREFUSED { return .noDaemon("no daemon listens on \(socket)") }
        return .failed("\(error)")
    }
}
