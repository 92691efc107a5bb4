import Configuration
import Feeds

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

func appendFeedsJSON(_ out: inout OutputBuffer, _ feeds: [FeedSummary]) {
    guard !feeds.isEmpty else { return }
    out.append(",\"feeds\":[")
    for (i, feed) in feeds.enumerated() {
        if i > 0 { out.append(",") }
        out.append("{\"feed\":")
        out.appendJSONString(feed.feed)
        out.append(",\"url\":")
        out.appendJSONString(feed.url)
        out.append(",\"version\":")
        out.appendJSONString(feed.version)
        out.append(",\"entries\":\(feed.entries),\"updated\":\(feed.updated),\"checked\":\(feed.checked),\"error\":")
        out.appendJSONString(feed.error)
        out.append("}")
    }
    out.append("]")
}
