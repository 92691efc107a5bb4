/// What `lookupd update` knows about one feed, kept in `STATE-DIRECTORY/feeds/NAME.state`.
///
/// Three groups of facts, because they change at different moments:
/// - what is installed (version, entries, time, the download it came from), and the same for
///   the install before it, so `--rollback` can swap the two;
/// - what the publisher last served (validators for conditional requests, the hash and
///   version of the last download accepted), which a rollback leaves alone so that the
///   rolled-back download is not fetched and installed again an hour later;
/// - how the last attempt went.
///
/// The daemon reads these files for `lookupd stats`, so this module stays free of Foundation.
public struct FeedRecord: Equatable, Sendable {
    public var feed: String
    public var url = ""
    public var into = ""

    public var version = ""
    public var entries = 0
    public var updated: Int64 = 0
    public var sha256 = ""
    public var size: Int64 = 0

    public var previousVersion = ""
    public var previousEntries = 0
    public var previousUpdated: Int64 = 0
    public var previousSHA256 = ""
    public var previousSize: Int64 = 0

    public var etag = ""
    public var lastModified = ""
    /// The URL `etag` and `lastModified` came from: validators are only
    /// ever sent back to it (a feed pointed elsewhere starts fresh).
    public var validatorsURL = ""
    public var manifestETag = ""
    public var manifestLastModified = ""
    public var manifestValidatorsURL = ""
    public var fetchedSHA256 = ""
    public var fetchedVersion = ""

    public var checked: Int64 = 0
    public var failed: Int64 = 0
    public var error = ""
    public var rolledBack: Int64 = 0
    /// When a list installed for this feed has waited for the daemon to load it: the daemon
    /// refused (or did not answer) the reload asked for then. 0: nothing waits. The next run
    /// asks again even if nothing changed, so a refused reload is not forgotten.
    public var reloadPending: Int64 = 0

    public init(feed: String) { self.feed = feed }

    /// Installed at least once.
    public var isInstalled: Bool { updated > 0 }

    /// Moves the installed facts to the "previous" slot (before a new install).
    public mutating func shiftToPrevious() {
        previousVersion = version
        previousEntries = entries
        previousUpdated = updated
        previousSHA256 = sha256
        previousSize = size
    }

    /// Exchanges the installed and previous facts (a rollback, or undoing one).
    public mutating func swapWithPrevious() {
        swap(&version, &previousVersion)
        swap(&entries, &previousEntries)
        swap(&updated, &previousUpdated)
        swap(&sha256, &previousSHA256)
        swap(&size, &previousSize)
    }

    // MARK: - Text form

    /// Keys in the order they are written; the file is meant to be read by people too.
    private static let fields: [(key: String, get: @Sendable (FeedRecord) -> String, set: @Sendable (inout FeedRecord, String) -> Void)] = [
        ("feed", { $0.feed }, { $0.feed = $1 }),
        ("url", { $0.url }, { $0.url = $1 }),
        ("into", { $0.into }, { $0.into = $1 }),
        ("version", { $0.version }, { $0.version = $1 }),
        ("entries", { String($0.entries) }, { $0.entries = Int($1) ?? 0 }),
        ("updated", { String($0.updated) }, { $0.updated = Int64($1) ?? 0 }),
        ("sha256", { $0.sha256 }, { $0.sha256 = $1 }),
        ("size", { String($0.size) }, { $0.size = Int64($1) ?? 0 }),
        ("previous-version", { $0.previousVersion }, { $0.previousVersion = $1 }),
        ("previous-entries", { String($0.previousEntries) }, { $0.previousEntries = Int($1) ?? 0 }),
        ("previous-updated", { String($0.previousUpdated) }, { $0.previousUpdated = Int64($1) ?? 0 }),
        ("previous-sha256", { $0.previousSHA256 }, { $0.previousSHA256 = $1 }),
        ("previous-size", { String($0.previousSize) }, { $0.previousSize = Int64($1) ?? 0 }),
        ("etag", { $0.etag }, { $0.etag = $1 }),
        ("last-modified", { $0.lastModified }, { $0.lastModified = $1 }),
        ("validators-url", { $0.validatorsURL }, { $0.validatorsURL = $1 }),
        ("manifest-etag", { $0.manifestETag }, { $0.manifestETag = $1 }),
        ("manifest-last-modified", { $0.manifestLastModified }, { $0.manifestLastModified = $1 }),
        ("manifest-validators-url", { $0.manifestValidatorsURL }, { $0.manifestValidatorsURL = $1 }),
        ("fetched-sha256", { $0.fetchedSHA256 }, { $0.fetchedSHA256 = $1 }),
        ("fetched-version", { $0.fetchedVersion }, { $0.fetchedVersion = $1 }),
        ("checked", { String($0.checked) }, { $0.checked = Int64($1) ?? 0 }),
        ("failed", { String($0.failed) }, { $0.failed = Int64($1) ?? 0 }),
        ("error", { $0.error }, { $0.error = $1 }),
        ("rolled-back", { String($0.rolledBack) }, { $0.rolledBack = Int64($1) ?? 0 }),
        ("reload-pending", { String($0.reloadPending) }, { $0.reloadPending = Int64($1) ?? 0 }),
    ]

    /// `key = value` lines. Values are single-line: line breaks and other control characters
    /// (only ever in an error message quoting a server) become spaces. Judged per Unicode
    /// scalar, not per Character: "\r\n" is one Character, equal to neither "\r" nor "\n".
    public func encoded() -> String {
        var out = "# lookupd feed state: written by lookupd update, read by lookupd stats and inspect.\n"
        for field in Self.fields {
            var value = String.UnicodeScalarView()
            for scalar in field.get(self).unicodeScalars {
                let v = scalar.value
                let breaks = v < 0x20 || v == 0x7F || (v >= 0x80 && v < 0xA0) || v == 0x2028 || v == 0x2029
                value.append(breaks ? " " : scalar)
            }
            out += field.key + " = " + String(value) + "\n"
        }
        return out
    }

    /// Reads the text form. Unknown keys are skipped so that an older lookupd can read a
    /// newer file; nil when the text names no feed.
    public static func decode(_ text: String) -> FeedRecord? {
        var record = FeedRecord(feed: "")
        for line in text.split(whereSeparator: { $0 == "\n" || $0 == "\r\n" }) {
            if line.hasPrefix("#") { continue }
            guard let eq = line.firstIndex(of: "=") else { continue }
            let key = line[..<eq].trimmingSpaces()
            let value = line[line.index(after: eq)...].trimmingSpaces()
            fields.first { $0.key == key }?.set(&record, value)
        }
        return record.feed.isEmpty ? nil : record
    }
}

extension Substring {
    func trimmingSpaces() -> String {
        var s = self
        while let f = s.first, f == " " || f == "\t" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\t" { s.removeLast() }
        return String(s)
    }
}
