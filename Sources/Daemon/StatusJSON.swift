import Answering
import Directory
import FeedRecords
import Screening
import SystemCalls
import TextFormats

/// `/status.json`: what the status page shows, in one document
/// (docs/OPERATIONS.md describes every field).
struct StatusDocument {
    let version: String
    let set: ServingSet
    let workers: [Worker]
    let status: ServiceStatus
    let minutes: [VerdictHistory.Minute]
    let recent: [[UInt8]]
    let now: Int

    func json() -> [UInt8] {
        var w = JSONWriter(capacity: 16 << 10)
        w.beginObject()
        w.field("version", version)
        w.field("mode", set.config.mode.rawValue)
        w.field("generation", set.generation)
        w.field("now", now)
        w.field("uptime_seconds", Int(monotonicNow() - status.startedAt))
        w.field("workers", workers.count)
        w.key("reloads")
        w.beginObject()
        w.field("succeeded", status.reloads.load(ordering: .relaxed))
        w.field("failed", status.failedReloads.load(ordering: .relaxed))
        w.field("last_error", status.lastReloadError)
        w.endObject()

        w.key("verdicts")
        w.beginArray()
        for verdict in Verdict.allCases { w.string(verdict.rawValue) }
        w.endArray()
        w.key("totals")
        w.beginArray()
        for total in Worker.verdictTotals(workers) { w.number(total) }
        w.endArray()
        w.key("minutes")
        w.beginArray()
        for minute in minutes {
            w.beginObject()
            w.field("start", minute.start)
            w.key("counts")
            w.beginArray()
            for count in minute.counts { w.number(count) }
            w.endArray()
            w.endObject()
        }
        w.endArray()

        directories(&w)
        w.key("contacts")
        w.beginArray()
        for list in set.screening.contacts {
            w.beginObject()
            w.field("name", list.name)
            w.field("numbers", list.count)
            w.endObject()
        }
        w.endArray()
        recentCalls(&w)
        w.endObject()
        return w.bytes + [0x0A]
    }

    private func directories(_ w: inout JSONWriter) {
        let config = set.config
        let store = FeedRecordStore(stateDirectory: config.stateDirectory)
        let feeds = config.feeds.map { (feed: $0, target: config.target(of: $0)) }
        w.key("directories")
        w.beginArray()
        for (i, d) in set.screening.directories.enumerated() {
            let path = i < config.directories.count ? config.directories[i].path : ""
            let header = d.file.header
            w.beginObject()
            w.field("name", d.name)
            w.field("path", path)
            w.field("entries", d.file.count)
            w.field("blocking", header.blockedCount)
            w.field("labelled", header.identifiedCount)
            w.field("prefix_rules", d.file.prefixRuleCount)
            w.field("version", header.directoryVersion)
            w.field("checksum", hex16(header.contentChecksum))
            w.field("active_now", d.active.map { $0.contains(set.policy.zone.localTime(utc: wallClockSeconds())) } ?? true)
            w.key("journal")
            w.beginObject()
            w.field("entries", d.overlay.count)
            w.field("sequence", d.overlay.lastSequence)
            w.field("merged_sequence", header.journalSequence)
            w.field("bytes", path.isEmpty ? 0 : FileSystem.statusIfPresent(JournalFormat.path(forDirectory: path))?.size ?? 0)
            w.endObject()
            w.key("feeds")
            w.beginArray()
            for (feed, target) in feeds where target == path {
                let record = store.read(feed.name) ?? FeedRecord(feed: feed.name)
                w.beginObject()
                w.field("name", feed.name)
                w.field("version", record.version)
                w.field("entries", record.entries)
                w.field("updated", record.updated)
                w.field("checked", record.checked)
                w.field("error", record.error.isEmpty ? nil : record.error)
                w.endObject()
            }
            w.endArray()
            w.endObject()
        }
        w.endArray()
    }

    /// The decision log's last blocked and identified calls, newest first,
    /// as objects of the logged fields (in either log format).
    private func recentCalls(_ w: inout JSONWriter) {
        let config = set.config
        w.key("recent")
        w.beginObject()
        // What the decision log holds decides what the page can list.
        w.key("logged")
        w.beginArray()
        if config.logLevel >= .notice || config.operations.logFile != nil { w.string(Verdict.blocked.rawValue) }
        if config.logLevel >= .info || config.operations.logFile != nil { w.string(Verdict.identified.rawValue) }
        w.endArray()
        w.key("calls")
        w.beginArray()
        for line in recent {
            guard let record = LogRecord.parse(Substring(String(decoding: line, as: UTF8.self))) else { continue }
            w.beginObject()
            for (key, value) in record.fields {
                w.key(key)
                if key == "response" || key == "record", let value, let n = Int(value) { w.number(n) } else { w.string(value) }
            }
            w.endObject()
        }
        w.endArray()
        w.endObject()
    }
}
