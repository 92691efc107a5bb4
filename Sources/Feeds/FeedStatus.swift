import Configuration
import FeedRecords
import Glibc

/// What `lookupd inspect` shows about the feeds behind a directory file.
public struct FeedSummary: Sendable, Equatable {
    public var feed: String
    public var url: String
    public var version: String
    public var entries: Int
    public var updated: Int64
    public var checked: Int64
    public var error: String
}

public enum FeedStatus {
    /// The configured feeds installed into `path`, in priority order, from their state
    /// files. For `TARGET.previous` the facts of the install before the last one.
    public static func feeds(installedInto path: String, config: LookupdConfig) -> [FeedSummary] {
        let store = FeedRecordStore(stateDirectory: config.stateDirectory)
        var summaries: [FeedSummary] = []
        for feed in config.feeds {
            let target = config.target(of: feed)
            let previous = sameFile(path, DirectoryInstaller.previousPath(target))
            guard previous || sameFile(path, target) else { continue }
            let record = store.read(feed.name) ?? FeedRecord(feed: feed.name)
            summaries.append(FeedSummary(feed: feed.name, url: feed.url,
                                         version: previous ? record.previousVersion : record.version,
                                         entries: previous ? record.previousEntries : record.entries,
                                         updated: previous ? record.previousUpdated : record.updated,
                                         checked: record.checked, error: record.error))
        }
        return summaries
    }

    /// Two spellings of one file (relative, through a symlink), or the same spelling of a
    /// file that does not exist.
    private static func sameFile(_ a: String, _ b: String) -> Bool {
        var sa = stat(), sb = stat()
        guard stat(a, &sa) == 0, stat(b, &sb) == 0 else { return a == b }
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino
    }
}
