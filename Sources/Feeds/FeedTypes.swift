import TextFormats

/// How much a message matters; the CLI maps it to journald priorities.
public enum FeedLogLevel: Int, Sendable {
    case error = 3, warning = 4, notice = 5, info = 6
}

/// What asking the running daemon to reload came to.
public enum ReloadOutcome: Equatable, Sendable {
    /// The daemon verified and swapped in the new set; its answer.
    case reloaded(String)
    /// No daemon listens on the control socket: it will read the files when it starts.
    case noDaemon(String)
    /// The daemon refused the new set (it keeps serving the old one), or did not answer.
    case failed(String)
}

public struct FeedUpdateOptions: Sendable {
    /// Feed names to update; empty: every configured feed.
    public var feeds: [String] = []
    /// Download without conditional headers and rebuild even when nothing changed.
    public var force = false
    /// Accept a list that shrank more than its max-shrink, this once.
    public var allowShrink = false
    /// Ask the daemon to reload after installing.
    public var reload = true
    public var userAgent = "lookupd"

    public init() {}
}

public struct FeedUpdateResult: Sendable {
    /// Directory files replaced.
    public var installed: [String] = []
    /// Feeds checked and found unchanged.
    public var unchanged: [String] = []
    /// Feeds whose update failed (their directory kept its list).
    public var failed: [String] = []
    public var reload: ReloadOutcome? = nil

    public init() {}

    public var succeeded: Bool {
        if case .failed = reload { return false }
        return failed.isEmpty
    }
}

extension FeedUpdateResult {
    /// `lookupd update --json` (lookupd(8) JSON OUTPUT): the feeds by outcome, the reload,
    /// and every message the update logged (`messages`, oldest first), which the text
    /// output prints as it goes.
    public func json(messages: [(level: FeedLogLevel, message: String)]) -> [UInt8] {
        var w = JSONWriter()
        w.beginObject()
        w.field("succeeded", succeeded)
        w.field("installed", strings: installed)
        w.field("unchanged", strings: unchanged)
        w.field("failed", strings: failed)
        w.key("reload")
        if let reload {
            w.beginObject()
            switch reload {
            case .reloaded(let answer):
                w.field("outcome", "reloaded")
                w.field("message", String(answer.split(separator: "\n").first ?? ""))
            case .noDaemon(let why):
                w.field("outcome", "no_daemon")
                w.field("message", why)
            case .failed(let why):
                w.field("outcome", "failed")
                w.field("message", why)
            }
            w.endObject()
        } else {
            w.null()
        }
        w.key("messages")
        w.beginArray()
        for m in messages {
            w.beginObject()
            w.field("level", m.level == .error ? "error" : m.level == .warning ? "warning" : m.level == .notice ? "notice" : "info")
            w.field("message", m.message)
            w.endObject()
        }
        w.endArray()
        w.endObject()
        return w.bytes
    }
}
