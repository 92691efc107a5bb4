import Replication

extension StatsReport {
    /// Replication through etcd (docs/CLUSTER.md): families for the report,
    /// lines complete with their newline; none without `replicate`.
    func replicationFamilies() -> [(name: String, type: String, help: String, lines: [String])] {
        guard let report = replication else { return [] }
        let replication = report.stats
        let directories = replication.directories
        func series(_ name: String, _ value: (ReplicationStats.Directory) -> UInt64) -> [String] {
            directories.map { "\(name){directory=\"\(escapeLabel($0.name))\"} \(value($0))\n" }
        }
        return [
            ("lookupd_replication_applied_revision", "gauge", "etcd revision each directory's replicated layer is complete through.",
             series("lookupd_replication_applied_revision") { $0.appliedRevision }),
            ("lookupd_replication_latest_revision", "gauge", "Newest etcd revision of a change to each directory, as last asked (every second).",
             series("lookupd_replication_latest_revision") { $0.latestRevision }),
            ("lookupd_replication_lag_revisions", "gauge", "Revisions of each directory's changes committed in etcd and not applied here yet.",
             series("lookupd_replication_lag_revisions") { $0.lag }),
            ("lookupd_replication_entries", "gauge", "Numbers and prefix rules in each directory's replicated layer.",
             series("lookupd_replication_entries") { UInt64($0.entries) }),
            ("lookupd_replication_watching", "gauge", "1 while the watch on each directory's etcd range is open and confirmed.",
             series("lookupd_replication_watching") { $0.watching ? 1 : 0 }),
            ("lookupd_replication_caught_up", "gauge", "1 once each directory's layer has caught up with etcd since start.",
             series("lookupd_replication_caught_up") { $0.caughtUp ? 1 : 0 }),
            ("lookupd_replication_changes_applied_total", "counter", "Changes from etcd applied to each directory's layer.",
             series("lookupd_replication_changes_applied_total") { $0.changesApplied }),
            ("lookupd_replication_apply_errors_total", "counter", "Changes not applied: values or keys this lookupd cannot use, layer writes that failed.",
             series("lookupd_replication_apply_errors_total") { $0.applyErrors }),
            ("lookupd_replication_snapshots_total", "counter", "Whole-range reads that replaced a directory's layer (first start, history compacted).",
             series("lookupd_replication_snapshots_total") { $0.snapshots }),
            ("lookupd_replication_watch_reconnects_total", "counter", "Watches opened again after one ended (member stopped, stalled, error).",
             ["lookupd_replication_watch_reconnects_total \(replication.reconnects)\n"]),
            ("lookupd_replication_etcd_revision", "gauge", "etcd's revision when last asked.",
             ["lookupd_replication_etcd_revision \(directories.map(\.etcdRevision).max() ?? 0)\n"]),
            ("lookupd_replication_delay_seconds", "histogram",
             "From when a node made a change (the time in its value) to when it was in force here; needs the nodes' clocks in step (NTP).",
             delayLines(report.delays)),
        ]
    }

    private func delayLines(_ histogram: DelayHistogram) -> [String] {
        var lines: [String] = []
        var cumulative: UInt64 = 0
        for (i, bound) in DelayHistogram.bounds.enumerated() {
            cumulative += histogram.counts[i]
            lines.append("lookupd_replication_delay_seconds_bucket{le=\"\(bound)\"} \(cumulative)\n")
        }
        lines.append("lookupd_replication_delay_seconds_bucket{le=\"+Inf\"} \(histogram.count)\n")
        lines.append("lookupd_replication_delay_seconds_sum \(histogram.sum)\n")
        lines.append("lookupd_replication_delay_seconds_count \(histogram.count)\n")
        return lines
    }
}
