import Configuration
import Feeds
import TextFormats

/// The feeds behind a directory file, for `lookupd inspect`. With no --config, a missing or
/// broken configuration just means no feed lines: inspect is about the file.
func feedSummaries(installedInto path: String, explicitConfig: String?) throws -> [FeedSummary] {
    let config: LookupdConfig
    if explicitConfig != nil {
        config = try ConfigLocation.load(explicit: explicitConfig)
    } else {
        guard let loaded = try? ConfigLocation.load(explicit: nil) else { return [] }
        config = loaded
    }
    return FeedStatus.feeds(installedInto: path, config: config)
}

func appendFeedsText(_ out: inout OutputBuffer, _ feeds: [FeedSummary]) {
    for feed in feeds {
        let state = feed.updated == 0 ? "not installed yet"
            : "version \(feed.version.isEmpty ? "-" : feed.version), \(feed.entries) entries, installed \(FeedClock.iso(feed.updated))"
        out.append("feed:               \(feed.feed): \(state), checked \(FeedClock.iso(feed.checked)) (\(feed.url))\n")
        if !feed.error.isEmpty { out.append("                    last update failed: \(feed.error)\n") }
    }
}

func feedsJSON(_ w: inout JSONWriter, _ feeds: [FeedSummary]) {
    w.key("feeds")
    w.beginArray()
    for feed in feeds {
        w.beginObject()
        w.field("feed", feed.feed)
        w.field("url", feed.url)
        w.field("version", feed.version)
        w.field("entries", feed.entries)
        w.field("updated", feed.updated)
        w.field("checked", feed.checked)
        w.field("error", feed.error)
        w.endObject()
    }
    w.endArray()
}
