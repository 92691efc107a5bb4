import FeedRecords

extension StatsReport {
    /// The configured feeds as `lookupd update` last left them, read from their state files
    /// (the daemon itself never downloads anything). A feed never updated shows an empty
    /// version and zero timestamps, so an alert on age catches it too.
    func feedGauges() -> [(name: String, help: String, lines: [String])] {
        let feeds = set.config.feeds
        guard !feeds.isEmpty else { return [] }
        let store = FeedRecordStore(stateDirectory: set.config.stateDirectory)
        let records = feeds.map { store.read($0.name) ?? FeedRecord(feed: $0.name) }
        func series(_ name: String, _ value: (FeedRecord) -> String) -> [String] {
            records.map { "\(name){feed=\"\(escapeLabel($0.feed))\"} \(value($0))\n" }
        }
        return [
            ("lookupd_feed_info", "Feeds lookupd update installs: the version in force and the directory file it went into.",
             records.map { "lookupd_feed_info{feed=\"\(escapeLabel($0.feed))\",version=\"\(escapeLabel($0.version))\",into=\"\(escapeLabel($0.into))\"} 1\n" }),
            ("lookupd_feed_entries", "Entries in each feed's list in force.",
             series("lookupd_feed_entries") { String($0.entries) }),
            ("lookupd_feed_updated_timestamp_seconds", "When each feed's list in force was installed (Unix time).",
             series("lookupd_feed_updated_timestamp_seconds") { String($0.updated) }),
            ("lookupd_feed_checked_timestamp_seconds", "When each feed was last checked, changed or not (Unix time).",
             series("lookupd_feed_checked_timestamp_seconds") { String($0.checked) }),
            ("lookupd_feed_last_update_failed", "1 when the last update of the feed failed (its old list stayed in force).",
             series("lookupd_feed_last_update_failed") { $0.error.isEmpty ? "0" : "1" }),
        ]
    }
}
